import CPKCS11
import KeychainCore

/// What every key operation checks of a key, read once from its attributes and kept beside them
/// (the token's policy cache, a session object): each C_SignInit or C_EncryptInit then tests
/// bits instead of looking up class, type, usage flag, CKA_ALLOWED_MECHANISMS and
/// CKA_ALWAYS_AUTHENTICATE in the attributes' hashed dictionary.
struct KeyUse: Sendable {
    let objectClass: ObjectClass?
    let keyType: KeyType?
    /// One bit per usage attribute, CKA_ENCRYPT (0x104) … CKA_DERIVE (0x10C).
    private let usages: UInt16
    /// CKA_ALLOWED_MECHANISMS; nil when absent or empty (any mechanism).
    let allowedMechanisms: [UInt]?
    /// The key's secret is sealed under its application password (never in the key cache).
    let hasSealedSecrets: Bool
    let alwaysAuthenticate: Bool
    /// CKA_ENCAPSULATE and CKA_DECAPSULATE (3.2), outside the range of the other usages.
    private let encapsulate: Bool
    private let decapsulate: Bool

    private static let firstUsage = AttributeType.encrypt.rawValue
    private static let lastUsage = AttributeType.derive.rawValue

    init(_ attributes: ObjectAttributes) {
        objectClass = attributes.objectClass
        keyType = attributes.keyType
        var usages: UInt16 = 0
        for raw in Self.firstUsage...Self.lastUsage where attributes.bool(AttributeType(raw)) {
            usages |= 1 << UInt16(raw - Self.firstUsage)
        }
        self.usages = usages
        if let allowed = attributes[.allowedMechanisms], !allowed.isEmpty {
            allowedMechanisms = stride(from: 0, to: allowed.count, by: AttributeValue.ulongSize).compactMap {
                AttributeValue.decodeULong(Array(allowed[$0..<min($0 + AttributeValue.ulongSize, allowed.count)]))
            }
        } else {
            allowedMechanisms = nil
        }
        hasSealedSecrets = attributes.hasSealedSecrets
        alwaysAuthenticate = attributes.bool(.alwaysAuthenticate)
        encapsulate = attributes.bool(.encapsulate)
        decapsulate = attributes.bool(.decapsulate)
    }

    /// Whether usage attribute `usage` (CKA_SIGN, CKA_ENCRYPT…) is CK_TRUE.
    func allows(_ usage: AttributeType) -> Bool {
        if usage == .encapsulate { return encapsulate }
        if usage == .decapsulate { return decapsulate }
        guard usage.rawValue >= Self.firstUsage, usage.rawValue <= Self.lastUsage else { return false }
        return usages & (1 << UInt16(usage.rawValue - Self.firstUsage)) != 0
    }

    /// The checks every key operation makes: the right class and type, this usage allowed, this
    /// mechanism allowed (PKCS#11 §5.8–§5.14: CKR_KEY_TYPE_INCONSISTENT,
    /// CKR_KEY_FUNCTION_NOT_PERMITTED, CKR_MECHANISM_INVALID).
    func check(objectClass expected: ObjectClass, usage: AttributeType, mechanism: Mechanism) throws(CKError) {
        guard objectClass == expected, let keyType, mechanism.keyTypes.contains(keyType) else {
            throw CKError(CK_RV(CKR_KEY_TYPE_INCONSISTENT), "this key does not fit the mechanism")
        }
        guard allows(usage) else {
            throw CKError(CK_RV(CKR_KEY_FUNCTION_NOT_PERMITTED), "the key's attribute \(usage) is CK_FALSE")
        }
        if let allowedMechanisms, !allowedMechanisms.contains(UInt(mechanism.type)) {
            throw CKError(CK_RV(CKR_MECHANISM_INVALID), "not in CKA_ALLOWED_MECHANISMS")
        }
    }
}
