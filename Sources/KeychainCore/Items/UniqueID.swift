import KeychainCrypto

/// A new object's unique identifier: 16 random bytes, kept in the store's `uid` column, and the
/// same bytes as 32 lower-case hex digits, the object's CKA_UNIQUE_ID. The PKCS#11 module, the
/// Swift keychain API and keychainctl all make their objects' identifiers here.
public struct UniqueID: Sendable {
    public let bytes: [UInt8]

    public static let byteCount = 16

    /// A fresh identifier from the system's random generator.
    public static func random() throws(KeychainError) -> UniqueID {
        do { return UniqueID(bytes: try Random.identifierBytes(byteCount)) } catch {
            throw KeychainError(.storageFailure, "the random generator failed")
        }
    }

    /// CKA_UNIQUE_ID's value: the bytes in lower-case hex, as UTF-8.
    public var text: [UInt8] { Hex.digits(bytes) }
}
