/// A PKCS#11 attribute type (`CKA_*`), as a Swift value: KeychainCore has no C types.
public struct AttributeType: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    public init(_ rawValue: UInt) { self.rawValue = rawValue }

    /// CKA_CLASS
    public static let objectClass = AttributeType(0x0)
    /// CKA_TOKEN
    public static let token = AttributeType(0x1)
    /// CKA_PRIVATE
    public static let isPrivate = AttributeType(0x2)
    /// CKA_LABEL
    public static let label = AttributeType(0x3)
    /// CKA_UNIQUE_ID (PKCS#11 3.0)
    public static let uniqueID = AttributeType(0x4)
    /// CKA_APPLICATION
    public static let application = AttributeType(0x10)
    /// CKA_VALUE
    public static let value = AttributeType(0x11)
    /// CKA_OBJECT_ID
    public static let objectID = AttributeType(0x12)
    /// CKA_MODIFIABLE
    public static let modifiable = AttributeType(0x170)
    /// CKA_COPYABLE
    public static let copyable = AttributeType(0x171)
    /// CKA_DESTROYABLE
    public static let destroyable = AttributeType(0x172)

    /// CKA_VENDOR_DEFINED | 0x4B430000: the base of this module's vendor attributes.
    public static let vendorBase: UInt = 0x8000_0000 | 0x4B43_0000
    /// CKA_KC_CREATION_TIME: seconds since 1970 when a token object was stored (read-only).
    public static let creationTime = AttributeType(vendorBase + 0x02)
    /// CKA_KC_MODIFICATION_TIME: seconds since 1970 of the last change to a token object (read-only).
    public static let modificationTime = AttributeType(vendorBase + 0x03)

    public static func < (lhs: AttributeType, rhs: AttributeType) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { "0x" + String(rawValue, radix: 16) }
}

/// A PKCS#11 object class (`CKO_*`).
public struct ObjectClass: RawRepresentable, Hashable, Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// CKO_DATA
    public static let data = ObjectClass(rawValue: 0x0)
    /// CKO_CERTIFICATE
    public static let certificate = ObjectClass(rawValue: 0x1)
    /// CKO_PUBLIC_KEY
    public static let publicKey = ObjectClass(rawValue: 0x2)
    /// CKO_PRIVATE_KEY
    public static let privateKey = ObjectClass(rawValue: 0x3)
    /// CKO_SECRET_KEY
    public static let secretKey = ObjectClass(rawValue: 0x4)
}

/// Encodings of attribute values in their PKCS#11 in-memory form on this platform:
/// CK_BBOOL is one byte, CK_ULONG is a native `unsigned long` (8 bytes on LP64 Linux).
public enum AttributeValue {
    public static let ulongSize = MemoryLayout<UInt>.size

    public static func bool(_ value: Bool) -> [UInt8] { [value ? 1 : 0] }

    public static func ulong(_ value: UInt) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }

    /// CK_TRUE is any non-zero byte; nil when the bytes are not a CK_BBOOL.
    public static func decodeBool(_ bytes: [UInt8]) -> Bool? {
        bytes.count == 1 ? bytes[0] != 0 : nil
    }

    public static func decodeULong(_ bytes: [UInt8]) -> UInt? {
        guard bytes.count == ulongSize else { return nil }
        var value: UInt = 0
        withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: bytes) }
        return value
    }
}
