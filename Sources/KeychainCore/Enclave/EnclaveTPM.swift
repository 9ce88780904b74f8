import Glibc
import KeychainCrypto
import KeychainTPM

/// This process's TPM, the Linux counterpart of Apple's Secure Enclave (Docs/architecture.md,
/// "The TPM layer").
///
/// One connection per process, opened on first use from the configured TCTI
/// (`KEYCHAIN_PKCS11_TCTI`, `tcti =`, else `device:/dev/tpmrm0` when it exists) and shared by
/// every key loaded from it. The connection lives as long as something holds it (a loaded key
/// holds its connection): when the last loaded key goes — logout, C_Finalize, the last SecKey
/// released — it closes, so a TPM without a resource manager (swtpm, the simulator) is free for
/// the next process. A connection closed by a failure (timeout, TPM gone) is replaced by a new
/// one at the next call.
public enum EnclaveTPM {
    private static let lock = PThreadMutex(.plain)
    private final class WeakConnection: @unchecked Sendable {
        weak var connection: TPMConnection?
    }
    private static let current = WeakConnection()
    /// Command deadlines (tests shorten them through `withTimeouts`).
    nonisolated(unsafe) private static var timeouts = TPMConnection.Timeouts.standard

    /// The TCTI this process would open, or nil when it has no TPM (nothing configured and no
    /// `/dev/tpmrm0`, or `tcti = none`). Says nothing about whether the TPM answers.
    public static var configuredTCTI: String? {
        TPMDevice.tcti(configured: Configuration.current().tcti)
    }

    /// Whether a TPM is configured and answers (its primary key is made, as every key needs it).
    /// Apple's `SecureEnclave.isAvailable`.
    public static var isAvailable: Bool {
        guard configuredTCTI != nil else { return false }
        do {
            let connection = try connection()
            try connection.prepare()
            return true
        } catch {
            return false
        }
    }

    /// What every door says when no TPM is configured (each with its own code).
    public static let noTPM = "this machine has no TPM (set KEYCHAIN_PKCS11_TCTI or `tcti` in the configuration file, or give /dev/tpmrm0)"

    /// The process's open connection, opened now if there is none (or the last one failed).
    /// `.tpmUnavailable` when no TPM is configured; `.tpmFailure` when it cannot be opened.
    public static func connection() throws(KeychainError) -> TPMConnection {
        guard let tcti = configuredTCTI else { throw KeychainError(.tpmUnavailable, noTPM) }
        return try lock.withLock { () throws(KeychainError) in
            if let open = current.connection, !open.isClosed, open.tcti == tcti { return open }
            let opened: TPMConnection
            do throws(TPMError) { opened = try TPMConnection(tcti: tcti, timeouts: timeouts) } catch {
                throw KeychainError(tpm: error, "cannot open the TPM (\(tcti))")
            }
            current.connection = opened
            if !releaseAtExitRegistered {
                releaseAtExitRegistered = true
                atexit { EnclaveTPM.releaseLoadedKeys() }
            }
            return opened
        }
    }

    // MARK: Room for loaded objects

    private final class WeakKey: @unchecked Sendable {
        weak var key: EnclaveKey?
        init(_ key: EnclaveKey) { self.key = key }
    }
    nonisolated(unsafe) private static var loadedKeys: [WeakKey] = []

    nonisolated(unsafe) private static var releaseAtExitRegistered = false

    /// At exit, this process's loaded keys let go of their TPM objects, and with the last one the
    /// connection flushes its primary key and session: a TPM without a resource manager (swtpm)
    /// keeps what a process leaves loaded until it restarts, and a program that never releases its
    /// keys (a SecKey in a global, a host that skips C_Finalize) would fill its few slots.
    /// `/dev/tpmrm0` flushes them itself when the file closes.
    static func releaseLoadedKeys() {
        let keys = lock.withLock { () -> [EnclaveKey] in
            let alive = loadedKeys.compactMap(\.key)
            loadedKeys.removeAll()
            return alive
        }
        for key in keys { key.unload() }
    }

    /// Notes a key that holds an object loaded in the TPM, so that it can be asked to let go.
    static func register(_ key: EnclaveKey) {
        lock.withLock {
            loadedKeys.removeAll { $0.key == nil }
            if !loadedKeys.contains(where: { $0.key === key }) { loadedKeys.append(WeakKey(key)) }
        }
    }

    /// Runs `body` (a TPM command that loads an object); when the TPM has no slot left
    /// (TPM2_RC_OBJECT_MEMORY: swtpm and TPMs without a resource manager hold a few), this
    /// process's loaded keys other than `keeping` let go of theirs — each loads itself again
    /// at its next use — and `body` runs once more.
    public static func withRoom<R>(keeping: EnclaveKey? = nil, _ body: () throws(TPMError) -> R) throws(TPMError) -> R {
        do { return try body() } catch where error.code.response == .objectMemory {
            let others = lock.withLock { loadedKeys.compactMap(\.key).filter { $0 !== keeping } }
            for key in others { key.unload() }
            return try body()
        }
    }

    /// Runs `body` with shorter (or longer) command deadlines for connections opened meanwhile.
    public static func withTimeouts<R>(_ value: TPMConnection.Timeouts, _ body: () throws -> R) rethrows -> R {
        let before = lock.withLock { () -> TPMConnection.Timeouts in
            let old = timeouts
            timeouts = value
            return old
        }
        defer { lock.withLock { timeouts = before } }
        return try body()
    }
}

extension KeychainError {
    /// A TPM failure in keychain terms: no TPM, or the TPM's own error with what was being done.
    public init(tpm error: TPMError, _ doing: String) {
        switch error.code {
        case .noTPM: self.init(.tpmUnavailable, "\(doing): \(error.reason)")
        case .invalidInput: self.init(.argumentsBad, "\(doing): \(error.reason)")
        default: self.init(.tpmFailure, "\(doing): \(error)")
        }
    }
}
