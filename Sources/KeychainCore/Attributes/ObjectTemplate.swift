/// A caller's template: attribute types and values, in the caller's order.
public typealias Template = [(type: AttributeType, value: [UInt8])]

/// Applies the attribute table to templates: what C_CreateObject, C_CopyObject and
/// C_SetAttributeValue may do, each in one place.
public enum ObjectTemplate {
    /// Builds a new object from a creation template, filling defaults, a fresh unique ID and, for
    /// keys, the attributes computed from the key material (which is checked).
    /// Keys outside `policy` are refused.
    public static func create(_ template: Template, uniqueID: [UInt8], bySecurityOfficer: Bool = false,
                              policy: KeyPolicy) throws(KeychainError) -> ObjectAttributes {
        var object = try assemble(template, uniqueID: uniqueID, bySecurityOfficer: bySecurityOfficer)
        if AttributeTable.isKeyClass(object.objectClass ?? .data) {
            try KeyFactory.completeImported(&object, given: Set(template.map(\.type)), policy: policy)
        } else if object.objectClass == .certificate {
            try CertificateFactory.complete(&object, given: Set(template.map(\.type)))
        } else if object.objectClass == .domainParameters {
            try KeyFactory.completeDomainParameters(&object, policy: policy)
        }
        return object
    }

    /// The object a template describes, before key material is examined: class and key type
    /// resolved, every attribute checked against the table, defaults filled.
    /// `heldElsewhere`: required attributes the object does not hold, its key material being
    /// inside the TPM (a CKA_KC_TPM private key has no CKA_VALUE or private exponent here).
    static func assemble(_ template: Template, uniqueID: [UInt8], bySecurityOfficer: Bool, generated: Set<AttributeType> = [],
                         heldElsewhere: Set<AttributeType> = []) throws(KeychainError) -> ObjectAttributes {
        try checkNoDuplicates(template)
        // Only a key made inside the TPM is one (KeyGeneration.enclaveObjects sets it after this):
        // no import, unwrap, derivation or copy template can claim it.
        if let value = template.first(where: { $0.type == .tpm })?.value, value != AttributeValue.bool(false) {
            throw KeychainError(.attributeValueInvalid, "CKA_KC_TPM: only C_GenerateKeyPair makes a key in the TPM")
        }
        guard let classValue = template.first(where: { $0.type == .objectClass })?.value else {
            throw KeychainError(.templateIncomplete, "CKA_CLASS is missing")
        }
        guard let rawClass = AttributeValue.decodeULong(classValue) else {
            throw KeychainError(.attributeValueInvalid, "CKA_CLASS must be a CK_ULONG")
        }
        let objectClass = ObjectClass(rawValue: rawClass)
        guard AttributeTable.isSupported(objectClass) else {
            throw KeychainError(.attributeValueInvalid, "object class 0x\(String(rawClass, radix: 16)) cannot be created here")
        }
        var keyType: KeyType?
        if objectClass == .certificate {
            guard let value = template.first(where: { $0.type == .certificateType })?.value else {
                throw KeychainError(.templateIncomplete, "CKA_CERTIFICATE_TYPE is missing")
            }
            guard AttributeValue.decodeULong(value) == CertificateType.x509.rawValue else {
                throw KeychainError(.attributeValueInvalid, "only X.509 certificates (CKC_X_509) are supported")
            }
        }
        if AttributeTable.hasKeyType(objectClass) {
            guard let value = template.first(where: { $0.type == .keyType })?.value else {
                throw KeychainError(.templateIncomplete, "CKA_KEY_TYPE is missing")
            }
            guard let raw = AttributeValue.decodeULong(value) else { throw KeychainError(.attributeValueInvalid, "CKA_KEY_TYPE must be a CK_ULONG") }
            keyType = KeyType(rawValue: raw)
            guard AttributeTable.isSupported(objectClass, keyType: keyType) else {
                throw KeychainError(.attributeValueInvalid, "key type 0x\(String(raw, radix: 16)) is not supported for this class")
            }
        }
        guard let schema = AttributeTable.schema(objectClass, keyType: keyType) else {
            throw KeychainError(.attributeValueInvalid, "unsupported object")
        }
        // The defaults first, the template's values over them (defaults cannot be required).
        var object = schema.creationDefaults
        var givesPrivate = false
        for (type, value) in template {
            let rule = try rule(type, in: schema)
            if rule.flags.contains(.generated), !generated.contains(type) {
                throw KeychainError(.attributeReadOnly, "attribute \(type) is set by the token")
            }
            try check(value, against: rule)
            if rule.flags.contains(.securityOfficerOnly), AttributeValue.decodeBool(value) == true, !bySecurityOfficer {
                throw KeychainError(.attributeReadOnly, "only the SO may set attribute \(type)")
            }
            object[type] = value
            if type == .isPrivate { givesPrivate = true }
        }
        if !givesPrivate, schema.attributes.contains(.isPrivate), let raw = template.first(where: { $0.type == .accessible }).flatMap({ AttributeValue.decodeULong($0.value) }),
           let given = ProtectionClass(rawValue: raw) {
            // A protection class without CKA_PRIVATE: the class says whether a login is needed.
            object[.isPrivate] = AttributeValue.bool(given.needsLogin)
        }
        for type in schema.requiredOnCreate where object[type] == nil && !heldElsewhere.contains(type) {
            throw KeychainError(.templateIncomplete, "attribute \(type) is required")
        }
        if object.bool(.alwaysAuthenticate), !object.isPrivate {
            // The per-use PIN is the user's: a key that needs no login cannot ask for it again.
            throw KeychainError(.templateInconsistent, "CKA_ALWAYS_AUTHENTICATE = TRUE needs CKA_PRIVATE = TRUE")
        }
        object[.uniqueID] = uniqueID
        return object
    }

    /// The object after C_SetAttributeValue with `template`.
    public static func set(_ template: Template, on object: ObjectAttributes, bySecurityOfficer: Bool = false) throws(KeychainError) -> ObjectAttributes {
        guard object.isModifiable else { throw KeychainError(.actionProhibited, "the object is not modifiable") }
        return try apply(template, to: object, permitted: .settable, bySecurityOfficer: bySecurityOfficer)
    }

    /// The new object of C_CopyObject: the source with `template` applied and a fresh unique ID.
    public static func copy(_ object: ObjectAttributes, with template: Template, uniqueID: [UInt8], bySecurityOfficer: Bool = false) throws(KeychainError) -> ObjectAttributes {
        guard object.isCopyable else { throw KeychainError(.actionProhibited, "the object is not copyable") }
        var copy = try apply(template, to: object, permitted: .copySettable, bySecurityOfficer: bySecurityOfficer)
        copy[.uniqueID] = uniqueID
        return copy
    }

    private static func apply(_ template: Template, to object: ObjectAttributes, permitted: AttributeRule.Flags, bySecurityOfficer: Bool) throws(KeychainError) -> ObjectAttributes {
        try checkNoDuplicates(template)
        guard let objectClass = object.objectClass, let schema = AttributeTable.schema(objectClass, keyType: object.keyType) else {
            throw KeychainError(.recordCorrupted, "object without a known class")
        }
        var result = object
        for (type, value) in template {
            let rule = try rule(type, in: schema)
            try check(value, against: rule)
            // C_SetAttributeValue on what the token made or fixed at creation is refused even with
            // the same value (PKCS#11 §4.1.2: CKR_ATTRIBUTE_READ_ONLY); a copy's template may
            // restate such values (clients copy with the source's own attributes).
            if permitted == .settable, rule.flags.contains(.generated) || schema.fixed.contains(type) {
                throw KeychainError(.attributeReadOnly, "attribute \(type) cannot be changed")
            }
            if object[type] == value { continue }
            guard !rule.flags.contains(.generated), !schema.fixed.contains(type), !rule.flags.isDisjoint(with: permitted) else {
                throw KeychainError(.attributeReadOnly, "attribute \(type) cannot be changed")
            }
            if rule.flags.contains(.changeToFalseOnly), AttributeValue.decodeBool(value) == true {
                throw KeychainError(.attributeReadOnly, "attribute \(type) can only change to CK_FALSE")
            }
            if rule.flags.contains(.changeToTrueOnly), AttributeValue.decodeBool(value) == false {
                throw KeychainError(.attributeReadOnly, "attribute \(type) can only change to CK_TRUE")
            }
            if rule.flags.contains(.securityOfficerOnly), !bySecurityOfficer {
                throw KeychainError(.attributeReadOnly, "only the SO may change attribute \(type)")
            }
            result[type] = value
        }
        try result.checkTrustedRoles()
        return result
    }

    private static func rule(_ type: AttributeType, in schema: AttributeTable.Schema) throws(KeychainError) -> AttributeRule {
        guard let rule = schema.rules[type] else {
            throw KeychainError(.attributeTypeInvalid, "attribute \(type) is not valid for this object class")
        }
        return rule
    }

    private static func check(_ value: [UInt8], against rule: AttributeRule) throws(KeychainError) {
        guard rule.accepts(value) else {
            throw KeychainError(.attributeValueInvalid, "attribute \(rule.type) has a value of the wrong size (\(value.count) bytes)")
        }
    }

    private static func checkNoDuplicates(_ template: Template) throws(KeychainError) {
        if template.count <= 32 {
            // The usual short template: compared pairwise, no set to allocate (the same first duplicate).
            for index in template.indices where template[..<index].contains(where: { $0.type == template[index].type }) {
                throw KeychainError(.templateInconsistent, "attribute \(template[index].type) appears twice")
            }
            return
        }
        var seen = Set<AttributeType>()
        for (type, _) in template where !seen.insert(type).inserted {
            throw KeychainError(.templateInconsistent, "attribute \(type) appears twice")
        }
    }
}
