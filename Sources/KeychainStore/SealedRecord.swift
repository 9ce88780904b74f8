import KeychainCrypto

/// An object's attribute record sealed with AES-256-GCM under a per-object key.
///
/// The per-object key is HKDF-SHA-256(base key, salt: uid, info: "keychain-pkcs11 object").
/// The associated data binds the record to its row: uid, object class, protection class and
/// record version, so a record copied onto another row, or a row whose class or protection was
/// edited, fails to open.
public enum SealedRecord {
    /// 2: the associated data also commits to the row's index entries and primary-key digest.
    /// 1 (earlier builds): uid, class, protection and version only.
    public static let currentVersion: UInt32 = 2

    static func associatedData(uid: [UInt8], objectClass: UInt64, protection: UInt8, version: UInt32, index: IndexCommitment?, epoch: UInt64 = 0) -> [UInt8] {
        var aad = Array("keychain-pkcs11 record".utf8)
        aad += withUnsafeBytes(of: version.bigEndian) { Array($0) }
        aad += uid
        aad += withUnsafeBytes(of: objectClass.bigEndian) { Array($0) }
        aad.append(protection)
        if version >= 2 {
            aad += index?.bytes ?? []
            aad += withUnsafeBytes(of: epoch.bigEndian) { Array($0) }
        }
        return aad
    }

    static func objectKey(base: SecureBytes, uid: [UInt8]) throws -> SecureBytes {
        try KeyDerivation.hkdf(key: base, salt: uid, info: Array("keychain-pkcs11 object".utf8))
    }

    public static func seal(_ plaintext: SecureBytes, base: SecureBytes, uid: [UInt8], objectClass: UInt64, protection: UInt8,
                            index: IndexCommitment, epoch: UInt64 = 0) throws -> [UInt8] {
        let key = try objectKey(base: base, uid: uid)
        return try AESGCM.seal(plaintext, key: key, associatedData: associatedData(uid: uid, objectClass: objectClass, protection: protection,
                                                                                   version: currentVersion, index: index, epoch: epoch))
    }

    /// Opens a record against its row: a version-2 record opens only with the index entries and
    /// primary key its row has now, so index rows swapped, edited or deleted on disk fail here.
    public static func open(_ box: [UInt8], base: SecureBytes, uid: [UInt8], objectClass: UInt64, protection: UInt8, version: UInt32,
                            index: IndexCommitment, epoch: UInt64 = 0) throws -> SecureBytes {
        guard version == 1 || version == currentVersion else { throw StoreError(.malformed, "record version \(version) is not known") }
        let key = try objectKey(base: base, uid: uid)
        return try AESGCM.open(box, key: key, associatedData: associatedData(uid: uid, objectClass: objectClass, protection: protection,
                                                                             version: version, index: index, epoch: epoch))
    }
}

/// What a record's associated data says about its row's search entries: SHA-256 over the index
/// entries (in a canonical order) and the primary-key digest.
public struct IndexCommitment: Sendable {
    public let bytes: [UInt8]

    public init(entries: [IndexEntry], primaryKey: [UInt8]?) throws {
        var message = Array("keychain-pkcs11 index entries".utf8)
        let sorted = entries.sorted(by: IndexEntry.precedes)
        for entry in sorted {
            message += withUnsafeBytes(of: entry.attribute.bigEndian) { Array($0) }
            message.append(UInt8(truncatingIfNeeded: entry.digest.count))
            message += entry.digest
        }
        if let primaryKey {
            message += [0xFF, UInt8(truncatingIfNeeded: primaryKey.count)] + primaryKey
        }
        bytes = try Digest.hash(.sha256, message)
    }
}

/// Keyed digests of searchable attribute values ("blind indexes"): HMAC-SHA-256 under an index
/// key, truncated to 128 bits. Equal values give equal digests under one key; without the key a
/// digest says nothing about the value.
public struct BlindIndex: Sendable {
    private let mac: KeyedMAC

    public init(key: SecureBytes) throws { mac = try KeyedMAC(key: key, algorithm: .sha256) }

    /// Derives the index key of a keychain from one of its base keys.
    public init(deriving base: SecureBytes) throws {
        try self.init(key: try KeyDerivation.hkdf(key: base, salt: [], info: Array("keychain-pkcs11 index".utf8)))
    }

    public func digest(attribute: UInt64, value: [UInt8]) throws -> [UInt8] {
        var message = withUnsafeBytes(of: attribute.bigEndian) { Array($0) }
        message += value
        defer { wipe(&message) }
        return Array(try message.withUnsafeBytes { try mac.mac($0) }.prefix(16))
    }
}
