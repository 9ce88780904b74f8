import KeychainCore
import KeychainCrypto

/// Where the Secret Service gets master keys and unlocks keychains: keychaind's own unlock
/// session, another keychaind through its socket (SocketKeySource), or a test's own.
public protocol KeySource: AnyObject, Sendable {
    /// The session's key of the keychain at `path` (a use: it restarts the idle timer); nil when
    /// it is locked.
    func sessionKey(path: String) -> SecureBytes?
    /// Whether the keychain is unlocked, without using it (the idle timer keeps running).
    func isHeld(path: String) -> Bool
    /// Unlocks with `pin` (checked and counted by the keychain).
    func unlock(path: String, pin: UnsafeRawBufferPointer) -> Result<Void, KeychainError>
    func lock(path: String)
}

/// Another keychaind's unlock session, through its socket (when D-Bus activation starts a second
/// keychaind beside the one `keychainctl unlock` started).
public final class SocketKeySource: KeySource, @unchecked Sendable {
    public init() {}

    public func sessionKey(path: String) -> SecureBytes? {
        guard let keychain = try? Keychain.open(at: path), let master = UnlockSession.masterKey(for: keychain) else { return nil }
        return keychain.exportedMasterKey(master)
    }

    public func isHeld(path: String) -> Bool { UnlockSession.holds(path) }

    public func unlock(path: String, pin: UnsafeRawBufferPointer) -> Result<Void, KeychainError> {
        UnlockSession.unlock(path: path, pin: pin, idleTimeout: 0) ?? .failure(KeychainError(.storageFailure, "keychaind does not answer"))
    }

    public func lock(path: String) { UnlockSession.lock(path: path) }
}
