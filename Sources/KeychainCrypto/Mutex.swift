import Glibc

/// Memory on cache lines of its own, for what threads write often: two sessions' locks allocated
/// side by side shared a line, and threads working on different sessions then took turns holding
/// it (two threads signing P-256 ran at 1.5–1.65× one thread or at 1.95×, depending on where the
/// allocator put the sessions).
public enum CacheLine {
    public static func allocate<T>(_ type: T.Type) -> UnsafeMutablePointer<T> {
        let size = (MemoryLayout<T>.size + 63) / 64 * 64
        return UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 64).bindMemory(to: T.self, capacity: 1)
    }
}

/// A pthread mutex on a cache line of its own, adaptive: a thread finding it held spins a little
/// before it sleeps. For locks held a few lookups long, where a sleeping waiter would cost two
/// context switches per hold (and two threads then fall into taking turns). Measured faster than
/// Synchronization.Mutex under contention on this project's 2-core machines (Docs/architecture.md).
public final class PThreadMutex: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init() {
        mutex = CacheLine.allocate(pthread_mutex_t.self)
        mutex.initialize(to: pthread_mutex_t())
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    public func lock() { pthread_mutex_lock(mutex) }
    public func unlock() { pthread_mutex_unlock(mutex) }

    public func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        lock()
        defer { unlock() }
        return try body()
    }
}
