import Glibc
import KeychainCrypto

/// The lock that makes one `Keychain` safe to share between threads: every public method holds
/// it, so the SQLite connection and the caches beside it are used by one thread at a time.
/// Recursive, because public methods call each other (`changePIN` calls `unlock`, `transaction`
/// bodies call `add`). Methods that run scrypt let go of it for that time (`released`), so a
/// login does not hold up the other threads using the keychain.
final class KeychainLock: @unchecked Sendable {
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

    func held<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }

    /// Runs slow work that touches no shared state with the lock let go (once: a caller that
    /// holds it more deeply keeps it, which is correct, only slower).
    func released<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        pthread_mutex_unlock(mutex)
        defer { pthread_mutex_lock(mutex) }
        return try body()
    }
}
