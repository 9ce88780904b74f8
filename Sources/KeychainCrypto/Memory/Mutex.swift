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

/// The project's one mutex: a pthread mutex on a cache line of its own, of the kind its use needs.
/// Every lock in every target is one of these or a `PThreadRWLock` below; this file is the only
/// one that makes pthread locks.
public final class PThreadMutex: @unchecked Sendable {
    public enum Kind: Sendable {
        /// A thread finding it held spins a little before it sleeps: for locks held a few lookups
        /// long, where a sleeping waiter would cost two context switches per hold (and two threads
        /// then fall into taking turns; Docs/performance.md, "Threads").
        case adaptive
        /// The thread holding it may take it again: a keychain's public methods call each other, a
        /// call on a session may look its session up again.
        case recursive
        /// glibc's default: for the memory allocators, held a few instructions long.
        case plain
    }

    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>

    public init(_ kind: Kind = .adaptive) {
        mutex = CacheLine.allocate(pthread_mutex_t.self)
        mutex.initialize(to: pthread_mutex_t())
        var attributes = pthread_mutexattr_t()
        pthread_mutexattr_init(&attributes)
        switch kind {
        case .adaptive: pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_ADAPTIVE_NP))
        case .recursive: pthread_mutexattr_settype(&attributes, Int32(PTHREAD_MUTEX_RECURSIVE))
        case .plain: break
        }
        pthread_mutex_init(mutex, &attributes)
        pthread_mutexattr_destroy(&attributes)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    @inlinable public func lock() { pthread_mutex_lock(mutex) }
    @inlinable public func unlock() { pthread_mutex_unlock(mutex) }

    // Inlinable: the locks of a call's hot path (a session's, the tables') are taken from other
    // modules, where an unspecialised generic call cost about 500 instructions per C_EncryptInit
    // + C_Encrypt pair (callgrind, issue 31).
    @inlinable public func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        lock()
        defer { unlock() }
        return try body()
    }

    /// Inside `withLock`: runs slow work that touches no shared state with the lock let go (once:
    /// for a recursive mutex, a caller that holds it more deeply keeps it, which is correct, only
    /// slower). A keychain's scrypt runs so, and other threads use the keychain meanwhile.
    @inlinable public func released<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        unlock()
        defer { lock() }
        return try body()
    }
}

/// A pthread read/write lock on a cache line of its own: the module's tables (slots, sessions,
/// object handles), read by every call and changed by few, and its fork gate.
public final class PThreadRWLock: @unchecked Sendable {
    @usableFromInline let rwlock: UnsafeMutablePointer<pthread_rwlock_t>
    private let preferWriters: Bool

    /// `preferWriters`: a waiting writer stops new readers from entering (glibc's
    /// PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP), so that a writer is not starved by readers
    /// that overlap without end. Such a lock must never be read-locked twice by one thread.
    public init(preferWriters: Bool = false) {
        self.preferWriters = preferWriters
        rwlock = CacheLine.allocate(pthread_rwlock_t.self)
        rwlock.initialize(to: pthread_rwlock_t())
        setUp()
    }

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
    public func resetInForkedChild() { setUp() }

    @inlinable public func lockForReading() { pthread_rwlock_rdlock(rwlock) }
    @inlinable public func lockForWriting() { pthread_rwlock_wrlock(rwlock) }
    @inlinable public func unlock() { pthread_rwlock_unlock(rwlock) }

    deinit {
        pthread_rwlock_destroy(rwlock)
        rwlock.deallocate()
    }

    @inlinable public func reading<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_rwlock_rdlock(rwlock)
        defer { pthread_rwlock_unlock(rwlock) }
        return try body()
    }

    @inlinable public func writing<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_rwlock_wrlock(rwlock)
        defer { pthread_rwlock_unlock(rwlock) }
        return try body()
    }
}
