import KeychainCore
import KeychainCrypto
import SecretService

/// The Secret Service over this daemon's own unlock session.
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
