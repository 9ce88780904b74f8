import Glibc

/// A detached thread running a closure (pthreads; Foundation is not linked here): the prompt
/// workers here, and keychaind's socket workers and logind watcher.
public final class DetachedThread {
    private let body: () -> Void

    public init(_ body: @escaping () -> Void) { self.body = body }

    public func start() {
        let box = Unmanaged.passRetained(self)
        var thread = pthread_t()
        let started = pthread_create(&thread, nil, { context in
            guard let context else { return nil }
            let me = Unmanaged<DetachedThread>.fromOpaque(context).takeRetainedValue()
            me.body()
            return nil
        }, box.toOpaque())
        if started == 0 { pthread_detach(thread) } else { box.release() }
    }
}

/// The server's bus thread: started once, and joined by `stop` so that the connection is freed
/// only when nothing uses it any more.
final class JoinableThread {
    /// Dropped when it has run, so that what it holds (the server) is not kept by the thread object.
    private var body: (() -> Void)?
    private var thread: pthread_t?

    init(_ body: @escaping () -> Void) { self.body = body }

    /// Starts the thread; false when the system refuses one.
    func start() -> Bool {
        let box = Unmanaged.passRetained(self)
        var handle = pthread_t()
        let started = pthread_create(&handle, nil, { context in
            guard let context else { return nil }
            let me = Unmanaged<JoinableThread>.fromOpaque(context).takeRetainedValue()
            me.body?()
            me.body = nil
            return nil
        }, box.toOpaque())
        guard started == 0 else {
            box.release()
            return false
        }
        thread = handle
        return true
    }

    /// Waits for the thread to end (at once when it never started or was joined already).
    func join() {
        guard let thread else { return }
        pthread_join(thread, nil)
        self.thread = nil
    }
}
