import Glibc

/// A detached thread running a closure (pthreads; Foundation is not linked here).
final class DetachedThread {
    private let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }

    func start() {
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
