import Glibc

/// Work spread over this machine's processors, for the few places where many independent items
/// are each worth a few microseconds (a sync's received files: reading, opening, preparing rows).
/// Plain pthreads: the module links no Foundation or Dispatch.
public enum Parallel {
    /// The processors this process may run on (at least one).
    public static var processors: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    /// `items.map(transform)`, with the items shared among up to `maximumThreads` threads (the
    /// caller's among them) when there are enough of them to be worth a thread; the results in
    /// the items' order. `transform` must be safe to call from several threads at once. When a
    /// thread cannot be started, the others (the caller at least) do its share.
    public static func map<T, R>(_ items: [T], maximumThreads: Int = 4, minimumPerThread: Int = 32, _ transform: (T) -> R) -> [R] {
        let threads = min(maximumThreads, processors, items.count / max(minimumPerThread, 1))
        guard threads > 1 else { return items.map(transform) }
        let results = UnsafeMutableBufferPointer<R>.allocate(capacity: items.count)
        defer { results.deallocate() }
        withoutActuallyEscaping(transform) { transform in
            items.withUnsafeBufferPointer { input in
                // Each index is taken by one thread and its result slot written by that thread only.
                let work = SharedWork(count: input.count) { index in
                    (results.baseAddress.map { $0 + index })?.initialize(to: transform(input[index]))
                }
                let helpers = (1..<threads).map { _ in ThreadTask { work.run() } }
                for helper in helpers { helper.start() }
                work.run()
                for helper in helpers { helper.join() }
            }
        }
        let output = Array(results)
        _ = results.deinitialize()
        return output
    }
}

/// Indexes 0..<count handed out in small runs to whichever thread asks next.
private final class SharedWork: @unchecked Sendable {
    private let count: Int
    private let body: (Int) -> Void
    private let lock = PThreadMutex(.plain)
    private var next = 0
    private static let run = 8

    init(count: Int, body: @escaping (Int) -> Void) {
        self.count = count
        self.body = body
    }

    func run() {
        while true {
            let range = lock.withLock { () -> Range<Int> in
                let start = next
                next = min(count, next + Self.run)
                return start..<next
            }
            guard !range.isEmpty else { return }
            for index in range { body(index) }
        }
    }
}

extension Parallel {
    /// Runs `body` on a thread of its own while the caller goes on; `join` waits for its result.
    /// When no thread can be started, `join` runs it on the caller's.
    public static func start<R>(_ body: @escaping () -> R) -> Background<R> {
        let task = Background(body)
        task.start()
        return task
    }
}

/// Work started by `Parallel.start`. `join` must be called (once) before what `body` reads goes away.
public final class Background<R>: @unchecked Sendable {
    private let task: ThreadTask
    private let output = ResultBox<R>()

    fileprivate init(_ body: @escaping () -> R) {
        let output = output
        task = ThreadTask { output.value = body() }
    }

    fileprivate func start() { task.start() }

    /// The result, once the thread has ended (the body run here if it never started).
    public func join() -> R? {
        task.join()
        defer { output.value = nil }
        return output.value
    }
}

private final class ResultBox<R>: @unchecked Sendable {
    var value: R?
}

/// A closure run once on a thread of its own (or by `join` when none could be started).
private final class ThreadTask: @unchecked Sendable {
    private var body: (() -> Void)?
    private var thread: pthread_t?

    init(_ body: @escaping () -> Void) { self.body = body }

    func start() {
        let context = Unmanaged.passRetained(self)
        var handle = pthread_t()
        let status = pthread_create(&handle, nil, { context in
            guard let context else { return nil }
            Unmanaged<ThreadTask>.fromOpaque(context).takeRetainedValue().run()
            return nil
        }, context.toOpaque())
        if status == 0 { thread = handle } else { context.release() }
    }

    private func run() {
        guard let body else { return }
        self.body = nil
        body()
    }

    func join() {
        if let thread {
            pthread_join(thread, nil)
            self.thread = nil
        } else {
            run()
        }
    }
}
