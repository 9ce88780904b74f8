import KeychainCrypto
import KeychainStore

/// The keys that open a keychain's records and search its indexes.
///
/// Public objects use a key stored in the file itself: it detects damage, it does not hide
/// anything (public objects are readable without login by design). Private objects use the
/// master key, which exists only wrapped under a PIN-derived key.
public final class RecordKeys: @unchecked Sendable {
    let recordBase: SecureBytes
    let index: BlindIndex

    init(base: SecureBytes) throws {
        recordBase = base
        index = try BlindIndex(deriving: base)
    }
}

/// The record keys of the AfterFirstUnlock classes, kept from the first login until C_Finalize.
final class AfterFirstUnlockKey: @unchecked Sendable {
    let keys: RecordKeys
    /// Combined with the device key (AfterFirstUnlockThisDeviceOnly), once derived.
    var deviceBound: RecordKeys?

    init(keys: RecordKeys) { self.keys = keys }
}

/// An unlocked master key; dropping the last reference wipes it.
public final class MasterKey: @unchecked Sendable {
    let keys: RecordKeys
    var key: SecureBytes { keys.recordBase }
    /// The record keys of this master key combined with the device key, once derived.
    var deviceBound: RecordKeys?

    /// The key of the AfterFirstUnlock classes: derived from the master key, so that a process
    /// keeps only it (not the master key) after logout.
    func afterFirstUnlock() throws -> AfterFirstUnlockKey {
        if let derived = afterFirstUnlockKey { return derived }
        let derived = AfterFirstUnlockKey(keys: try RecordKeys(base: KeyDerivation.hkdf(key: key, salt: [], info: Array("keychain-pkcs11 after first unlock".utf8))))
        afterFirstUnlockKey = derived
        return derived
    }
    private var afterFirstUnlockKey: AfterFirstUnlockKey?

    init(_ key: SecureBytes) throws {
        keys = try RecordKeys(base: key)
    }
}
