import Glibc
import KeychainCrypto

/// A recursive pthread mutex: each session's, held by the thread running a call on that session
/// (a call may look its session up again inside).
final class RecursiveMutex: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = CacheLine.allocate(pthread_mutex_t.self)
        mutex.initialize(to: pthread_mutex_t())
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_RECURSIVE))
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

/// A pthread read/write lock: the module's tables (slots, sessions, object handles), read by
/// every call and changed by few.
final class PThreadRWLock: @unchecked Sendable {
    private let rwlock: UnsafeMutablePointer<pthread_rwlock_t>

    /// `preferWriters`: a waiting writer stops new readers from entering (glibc's
    /// PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP), so that a writer is not starved by readers
    /// that overlap without end. Such a lock must never be read-locked twice by one thread.
    init(preferWriters: Bool = false) {
        self.preferWriters = preferWriters
        rwlock = CacheLine.allocate(pthread_rwlock_t.self)
        rwlock.initialize(to: pthread_rwlock_t())
        setUp()
    }

    private let preferWriters: Bool

    private func setUp() {
        var attributes = pthread_rwlockattr_t()
        pthread_rwlockattr_init(&attributes)
        if preferWriters { pthread_rwlockattr_setkind_np(&attributes, Int32(PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP)) }
        pthread_rwlock_init(rwlock, &attributes)
        pthread_rwlockattr_destroy(&attributes)
    }

    /// In a forked child, for a lock the parent held for writing across fork: glibc records the
    /// writer by thread ID, which the child's thread no longer has, so unlocking would not work.
    /// The child is alone, nobody else holds the lock: it starts afresh.
    func resetInForkedChild() { setUp() }

    func lockForReading() { pthread_rwlock_rdlock(rwlock) }
    func lockForWriting() { pthread_rwlock_wrlock(rwlock) }
    func unlock() { pthread_rwlock_unlock(rwlock) }

    deinit {
        pthread_rwlock_destroy(rwlock)
        rwlock.deallocate()
    }

    func reading<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_rwlock_rdlock(rwlock)
        defer { pthread_rwlock_unlock(rwlock) }
        return try body()
    }

    func writing<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_rwlock_wrlock(rwlock)
        defer { pthread_rwlock_unlock(rwlock) }
        return try body()
    }
}
