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

    /// Records the check value of a master key just unlocked by its PIN, if the keychain has none.
    func recordMasterCheck(_ master: MasterKey) {
        guard (try? store.read({ try store.metaBlob(Self.masterCheckMeta) })) ?? nil == nil, let check = try? Self.masterCheck(master.key) else { return }
        _ = try? store.write {
            if try store.metaBlob(Self.masterCheckMeta) == nil { try store.setMeta(Self.masterCheckMeta, blob: check) }
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
        try lock.held { () throws(KeychainError) -> MasterKey in
            guard bytes.count == AESGCM.keySize else { throw KeychainError(.pinIncorrect, "the session's key has the wrong size") }
            let stored = try translatingErrors { try store.read { try store.metaBlob(Self.masterCheckMeta) } }
            guard let stored else { throw KeychainError(.pinIncorrect, "the keychain has no key check yet: unlock it once with its PIN") }
            let check = try translatingErrors { try Self.masterCheck(bytes) }
            guard ConstantTime.equals(check, stored) else { throw KeychainError(.pinIncorrect, "the session's key is not this keychain's") }
            let master = try translatingErrors { try MasterKey(bytes) }
            if firstUnlock == nil { firstUnlock = try translatingErrors { try master.afterFirstUnlock() } }
            return master
        }
    }
}
