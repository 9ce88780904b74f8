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

/// An unlocked master key; dropping the last reference wipes it.
public final class MasterKey: @unchecked Sendable {
    let keys: RecordKeys
    var key: SecureBytes { keys.recordBase }
    /// The record keys of this master key combined with the device key, once derived.
    var deviceBound: RecordKeys?

    init(_ key: SecureBytes) throws {
        keys = try RecordKeys(base: key)
    }
}
