import KeychainCore
import KeychainCrypto

/// Where the Secret Service gets master keys and unlocks keychains: this daemon's own unlock
/// session, or (when another keychaind already serves the socket) that daemon through its socket.
protocol KeySource: AnyObject, Sendable {
    /// The session's key of the keychain at `path` (a use: it restarts the idle timer); nil when
    /// it is locked.
    func sessionKey(path: String) -> SecureBytes?
    /// Whether the keychain is unlocked, without using it (the idle timer keeps running).
    func isHeld(path: String) -> Bool
    /// Unlocks with `pin` (checked and counted by the keychain).
    func unlock(path: String, pin: UnsafeRawBufferPointer) -> Result<Void, KeychainError>
    func lock(path: String)
}

extension Daemon: KeySource {
    func unlock(path: String, pin: UnsafeRawBufferPointer) -> Result<Void, KeychainError> {
        var copy = Array(pin)
        defer { wipe(&copy) }
        let (status, fields) = unlock(path: path, pin: copy, idleTimeout: 0)
        if status == .ok { return .success(()) }
        let reason = fields.first.map { String(decoding: $0, as: UTF8.self) } ?? "refused"
        return .failure(KeychainError(reason.hasPrefix("pin") ? .pinIncorrect : .storageFailure, reason))
    }

    func lock(path: String) { lockKeychain(path: path) }
}

/// Another keychaind's unlock session, through its socket.
final class SocketKeySource: KeySource, @unchecked Sendable {
    func sessionKey(path: String) -> SecureBytes? {
        guard let keychain = try? Keychain.open(at: path), let master = UnlockSession.masterKey(for: keychain) else { return nil }
        return keychain.exportedMasterKey(master)
    }

    func isHeld(path: String) -> Bool { UnlockSession.holds(path) }

    func unlock(path: String, pin: UnsafeRawBufferPointer) -> Result<Void, KeychainError> {
        UnlockSession.unlock(path: path, pin: pin, idleTimeout: 0) ?? .failure(KeychainError(.storageFailure, "keychaind does not answer"))
    }

    func lock(path: String) { UnlockSession.lock(path: path) }
}
