import KeychainCrypto
import KeychainStore

/// A master key handed over by `keychaind` (the unlock session, Docs/security.md): the bytes a
/// PIN unlock produced in the daemon, checked here against the keychain before any use, so that
/// a process talking to a wrong or hostile daemon never seals a record under a key that is not
/// this keychain's.
extension Keychain {
    static let masterCheckMeta = "key.master_check"
    private static let masterCheckLabel = Array("keychain-pkcs11 master key check".utf8)

    static func masterCheck(_ key: SecureBytes) throws -> [UInt8] {
        try Digest.hmac(.sha256, key: key, data: masterCheckLabel)
    }

    static let firstUnlockCheckMeta = "key.first_unlock_check"

    /// Records the check values of a master key just unlocked by its PIN and of its
    /// AfterFirstUnlock key, if the keychain has none.
    func recordMasterCheck(_ master: MasterKey) {
        let present = (try? store.read { (try store.metaBlob(Self.masterCheckMeta), try store.metaBlob(Self.firstUnlockCheckMeta)) }) ?? (nil, nil)
        guard present.0 == nil || present.1 == nil, let check = try? Self.masterCheck(master.key),
              let firstCheck = try? Self.masterCheck(master.afterFirstUnlock().keys.recordBase) else { return }
        _ = try? store.write {
            if try store.metaBlob(Self.masterCheckMeta) == nil { try store.setMeta(Self.masterCheckMeta, blob: check) }
            if try store.metaBlob(Self.firstUnlockCheckMeta) == nil { try store.setMeta(Self.firstUnlockCheckMeta, blob: firstCheck) }
        }
    }

    /// The AfterFirstUnlock key of an unlocked master key, for the unlock session: it keeps it
    /// after the keychain is locked, until it stops ("after first unlock until restart").
    public func exportedFirstUnlockKey(_ master: MasterKey) throws(KeychainError) -> SecureBytes {
        let derived = try translatingErrors { try master.afterFirstUnlock() }
        return derived.keys.recordBase.withUnsafeBytes { SecureBytes($0) }
    }

    /// Whether `bytes` is the key whose check value is stored under `meta` (recorded at a PIN
    /// unlock); nil when none is stored yet. Called with the lock held.
    private func matchesCheck(_ bytes: SecureBytes, meta: String) throws(KeychainError) -> Bool? {
        guard let stored = try translatingErrors({ try store.read { try store.metaBlob(meta) } }) else { return nil }
        return ConstantTime.equals(try translatingErrors { try Self.masterCheck(bytes) }, stored)
    }

    /// Whether AfterFirstUnlock items can be opened in this process.
    public var isFirstUnlocked: Bool { lock.withLock { firstUnlock != nil } }

    /// An AfterFirstUnlock key received from the unlock session, accepted only if it is this
    /// keychain's: AfterFirstUnlock items become readable without the PIN.
    public func acceptFirstUnlock(fromSession bytes: SecureBytes) throws(KeychainError) {
        try lock.withLock { () throws(KeychainError) in
            guard firstUnlock == nil else { return }
            guard try matchesCheck(bytes, meta: Self.firstUnlockCheckMeta) == true else {
                throw KeychainError(.pinIncorrect, "the session's AfterFirstUnlock key is not this keychain's")
            }
            firstUnlock = AfterFirstUnlockKey(keys: try translatingErrors { try RecordKeys(base: bytes) })
        }
    }

    /// The master key's bytes, for the unlock session (`keychaind` keeps them in secure memory).
    public func exportedMasterKey(_ master: MasterKey) -> SecureBytes {
        master.key.withUnsafeBytes { SecureBytes($0) }
    }

    /// A master key received from the unlock session, accepted only if it is this keychain's
    /// (its check value, recorded at a PIN unlock, matches). Counts as an unlock of the user:
    /// AfterFirstUnlock items become readable, as after a PIN.
    public func masterKey(fromSession bytes: SecureBytes) throws(KeychainError) -> MasterKey {
        try lock.withLock { () throws(KeychainError) -> MasterKey in
            guard bytes.count == AESGCM.keySize else { throw KeychainError(.pinIncorrect, "the session's key has the wrong size") }
            guard let matches = try matchesCheck(bytes, meta: Self.masterCheckMeta) else {
                throw KeychainError(.pinIncorrect, "the keychain has no key check yet: unlock it once with its PIN")
            }
            guard matches else { throw KeychainError(.pinIncorrect, "the session's key is not this keychain's") }
            let master = try translatingErrors { try MasterKey(bytes) }
            if firstUnlock == nil { firstUnlock = try translatingErrors { try master.afterFirstUnlock() } }
            return master
        }
    }
}

/// How the unlock session treats a keychain (`keychainctl session-policy`): an idle timeout
/// (seconds without use before keychaind locks it; 0: none), whether it is locked when the
/// machine sleeps or the login session is locked (default: yes), and how often keychaind syncs
/// it with its circle while it is unlocked (seconds; 0: only after a change here; default 15 min).
public struct SessionPolicy: Sendable, Equatable {
    public static let defaultSyncInterval = 900

    public var idleTimeout: Int
    public var lockOnSleep: Bool
    public var syncInterval: Int

    public init(idleTimeout: Int = 0, lockOnSleep: Bool = true, syncInterval: Int = SessionPolicy.defaultSyncInterval) {
        self.idleTimeout = idleTimeout
        self.lockOnSleep = lockOnSleep
        self.syncInterval = syncInterval
    }
}

extension Keychain {
    private static let idleTimeoutMeta = "session.idle_timeout"
    private static let lockOnSleepMeta = "session.lock_on_sleep"
    private static let syncIntervalMeta = "session.sync_interval"

    public func sessionPolicy() throws(KeychainError) -> SessionPolicy {
        try lock.withLock { () throws(KeychainError) -> SessionPolicy in
            let (idle, sleep, interval) = try translatingErrors {
                try store.read { (try store.metaInteger(Self.idleTimeoutMeta), try store.metaInteger(Self.lockOnSleepMeta), try store.metaInteger(Self.syncIntervalMeta)) }
            }
            return SessionPolicy(idleTimeout: Int(max(0, idle ?? 0)), lockOnSleep: (sleep ?? 1) != 0,
                                 syncInterval: Int(max(0, interval ?? Int64(SessionPolicy.defaultSyncInterval))))
        }
    }

    public func setSessionPolicy(_ policy: SessionPolicy) throws(KeychainError) {
        try lock.withLock { () throws(KeychainError) in
            try translatingErrors {
                try store.write {
                    try store.setMeta(Self.idleTimeoutMeta, integer: Int64(max(0, policy.idleTimeout)))
                    try store.setMeta(Self.lockOnSleepMeta, integer: policy.lockOnSleep ? 1 : 0)
                    try store.setMeta(Self.syncIntervalMeta, integer: Int64(max(0, policy.syncInterval)))
                }
            }
        }
    }
}
