import KeychainCrypto

/// Keys leaving and entering the token wrapped (C_WrapKey, C_UnwrapKey) or derived (C_DeriveKey).
public enum KeyTransport {
    /// What C_WrapKey encrypts: a secret key's value, or a private key as PKCS#8.
    /// Refused unless the key is extractable.
    public static func material(of object: ObjectAttributes) throws(KeychainError) -> SecureBytes {
        guard object.bool(.extractable) else { throw KeychainError(.keyUnextractable, "the key is not extractable") }
        switch object.objectClass {
        case .secretKey?:
            return SecureBytes(object[.value] ?? [])
        case .privateKey? where object.keyType?.isLattice == true:
            // ML-DSA and ML-KEM: PKCS#8 in the seed form (RFC 9881, RFC 9935).
            let key = try KeyFactory.latticeKey(of: object)
            do throws(CryptoError) { return try key.privateKeyInfo() } catch {
                throw KeychainError(.keyNotWrappable, "cannot encode the private key: \(error.reason)")
            }
        case .privateKey?:
            do { return try KeyFactory.key(of: object).pkcs8() } catch {
                throw KeychainError(.keyNotWrappable, "cannot encode the private key: \(error)")
            }
        default:
            throw KeychainError(.keyNotWrappable, "only secret and private keys can be wrapped")
        }
    }

    /// The object C_UnwrapKey creates from `material` and the caller's template, which must
    /// name the class and key type. The key has been outside the token: never "always
    /// sensitive", never "never extractable".
    /// `zeroPadded`: the material came from ECB or CBC, padded with zero bytes to whole blocks;
    /// it is cut to the template's CKA_VALUE_LEN or the key type's fixed length (PKCS#11 §2.10).
    public static func unwrappedObject(_ material: SecureBytes, template: Template, uniqueID: [UInt8], bySecurityOfficer: Bool,
                                       policy: KeyPolicy, zeroPadded: Bool = false) throws(KeychainError) -> ObjectAttributes {
        guard let classValue = template.first(where: { $0.type == .objectClass })?.value,
              let rawClass = AttributeValue.decodeULong(classValue) else {
            throw KeychainError(.templateIncomplete, "the unwrap template must give CKA_CLASS")
        }
        guard template.contains(where: { $0.type == .keyType }) else { throw KeychainError(.templateIncomplete, "the unwrap template must give CKA_KEY_TYPE") }
        if template.contains(where: { [.value, .modulus, .privateExponent, .ecPoint].contains($0.type) }) {
            throw KeychainError(.templateInconsistent, "key material comes from the wrapped key")
        }
        var full = template
        switch ObjectClass(rawValue: rawClass) {
        case .secretKey where zeroPadded:
            let keyType = template.first(where: { $0.type == .keyType }).flatMap { AttributeValue.decodeULong($0.value) }.map(KeyType.init(rawValue:))
            var length = keyType?.blockCipher?.keyLength ?? material.count
            if let lengthValue = template.first(where: { $0.type == .valueLength })?.value {
                guard let raw = AttributeValue.decodeULong(lengthValue) else { throw KeychainError(.attributeValueInvalid, "CKA_VALUE_LEN") }
                length = Int(clamping: raw)
            }
            guard length >= 1, length <= material.count else {
                throw KeychainError(.wrappedKeyInvalid, "the unwrapped value has \(material.count) bytes, fewer than the \(length) the template asks for")
            }
            full = full.filter { $0.type != .valueLength }
            full.append((.value, material.withUnsafeBytes { Array($0.prefix(length)) }))
        case .secretKey:
            full.append((.value, material.bytes))
        case .privateKey where template.first(where: { $0.type == .keyType }).flatMap({ AttributeValue.decodeULong($0.value) })
                                   .map({ KeyType(rawValue: $0).isLattice }) == true:
            // An ML-DSA or ML-KEM key as PKCS#8 (seed, or seed and expanded key checked against it);
            // the parameter set is the OID's.
            let key: LatticeKey
            do { key = try material.withUnsafeBytes { try LatticeKey.privateKey(privateKeyInfo: $0) } } catch {
                throw KeychainError(.wrappedKeyInvalid, "the unwrapped data is not an ML-DSA or ML-KEM private key with its seed")
            }
            let set = AttributeValue.ulong(key.parameterSet.pkcs11Value)
            if let given = template.first(where: { $0.type == .parameterSet })?.value, given != set {
                throw KeychainError(.templateInconsistent, "CKA_PARAMETER_SET is not the wrapped key's (\(key.parameterSet.name))")
            }
            guard template.first(where: { $0.type == .keyType }).flatMap({ AttributeValue.decodeULong($0.value) }) == (key.parameterSet.isSignature ? KeyType.mlDSA : .mlKEM).rawValue else {
                throw KeychainError(.templateInconsistent, "CKA_KEY_TYPE is not the wrapped key's (\(key.parameterSet.name))")
            }
            guard var seed = key.seedBytes()?.bytes else { throw KeychainError(.storageFailure, "no seed") }
            defer { wipe(&seed) }
            full = full.filter { $0.type != .parameterSet } + [(.parameterSet, set), (.seed, seed)]
        case .privateKey:
            let key: AsymmetricKey
            do { key = try AsymmetricKey.privateKey(pkcs8: material) } catch { throw KeychainError(.wrappedKeyInvalid, "the unwrapped data is not a private key") }
            let parts = try KeyFactory.generatedMaterial(key).privateKey
            full += parts.map { ($0.key, $0.value) }
        default:
            throw KeychainError(.templateInconsistent, "only secret and private keys can be unwrapped")
        }
        var object = try ObjectTemplate.create(full, uniqueID: uniqueID, bySecurityOfficer: bySecurityOfficer, policy: policy)
        object[.alwaysSensitive] = AttributeValue.bool(false)
        object[.neverExtractable] = AttributeValue.bool(false)
        return object
    }

    /// The secret key C_EncapsulateKey or C_DecapsulateKey makes from a KEM's shared secret
    /// (PKCS#11 3.2 §5.18.9–10): a secret key (CKA_CLASS may only say so), of CKA_KEY_TYPE
    /// (default CKK_GENERIC_SECRET), holding the first CKA_VALUE_LEN bytes of the secret
    /// (default: the type's length, else all of it; AES 16, 24 or 32). As the text asks:
    /// CKA_EXTRACTABLE defaults to CK_TRUE, CKA_ALWAYS_SENSITIVE and CKA_NEVER_EXTRACTABLE are
    /// CK_FALSE, CKA_LOCAL is CK_FALSE.
    public static func encapsulatedObject(_ secret: SecureBytes, template: Template, uniqueID: [UInt8], bySecurityOfficer: Bool,
                                          policy: KeyPolicy) throws(KeychainError) -> ObjectAttributes {
        if let value = template.first(where: { $0.type == .objectClass })?.value, AttributeValue.decodeULong(value) != ObjectClass.secretKey.rawValue {
            throw KeychainError(.templateInconsistent, "an encapsulated key is a secret key")
        }
        if template.contains(where: { $0.type == .value }) { throw KeychainError(.templateInconsistent, "CKA_VALUE comes from the KEM") }
        var keyType = KeyType.genericSecret
        if let value = template.first(where: { $0.type == .keyType })?.value {
            guard let raw = AttributeValue.decodeULong(value) else { throw KeychainError(.attributeValueInvalid, "CKA_KEY_TYPE") }
            keyType = KeyType(rawValue: raw)
        }
        guard AttributeTable.isSupported(.secretKey, keyType: keyType) else {
            throw KeychainError(.templateInconsistent, "no secret key of type 0x\(String(keyType.rawValue, radix: 16))")
        }
        var length = keyType.blockCipher?.keyLength ?? keyType.secretLengths?.first ?? secret.count
        let fixed = keyType.blockCipher?.keyLength != nil
        if let value = template.first(where: { $0.type == .valueLength })?.value {
            guard let raw = AttributeValue.decodeULong(value) else { throw KeychainError(.attributeValueInvalid, "CKA_VALUE_LEN") }
            if fixed, raw != UInt(length) { throw KeychainError(.templateInconsistent, "a key of this type has \(length) bytes") }
            length = Int(clamping: raw)
        }
        guard length >= 1, length <= secret.count else {
            throw KeychainError(.templateInconsistent, "the KEM's shared secret has \(secret.count) bytes: CKA_VALUE_LEN \(length) is more")
        }
        if keyType == .aes, ![16, 24, 32].contains(length) { throw KeychainError(.attributeValueInvalid, "an AES key has 16, 24 or 32 bytes") }
        var value = secret.withUnsafeBytes { Array($0.prefix(length)) }
        defer { wipe(&value) }
        var full = template.filter { $0.type != .objectClass && $0.type != .keyType && $0.type != .valueLength }
        full += [(.objectClass, AttributeValue.ulong(ObjectClass.secretKey.rawValue)), (.keyType, AttributeValue.ulong(keyType.rawValue)), (.value, value)]
        if !template.contains(where: { $0.type == .extractable }) { full.append((.extractable, AttributeValue.bool(true))) }
        var object = try ObjectTemplate.create(full, uniqueID: uniqueID, bySecurityOfficer: bySecurityOfficer, policy: policy)
        object[.alwaysSensitive] = AttributeValue.bool(false)
        object[.neverExtractable] = AttributeValue.bool(false)
        object[.local] = AttributeValue.bool(false)
        return object
    }

    /// The secret key C_DeriveKey makes from `secret` (already through the KDF), taking
    /// CKA_VALUE_LEN bytes of it; its history flags follow the base key's.
    public static func derivedObject(_ secret: SecureBytes, template: Template, base: ObjectAttributes, uniqueID: [UInt8],
                                     bySecurityOfficer: Bool, policy: KeyPolicy) throws(KeychainError) -> ObjectAttributes {
        if let value = template.first(where: { $0.type == .objectClass })?.value, AttributeValue.decodeULong(value) != ObjectClass.secretKey.rawValue {
            throw KeychainError(.templateInconsistent, "a derived key is a secret key")
        }
        guard let keyTypeValue = template.first(where: { $0.type == .keyType })?.value,
              let keyType = AttributeValue.decodeULong(keyTypeValue).map(KeyType.init(rawValue:)) else {
            throw KeychainError(.templateIncomplete, "the derive template must give CKA_KEY_TYPE")
        }
        if template.contains(where: { $0.type == .value }) { throw KeychainError(.templateInconsistent, "CKA_VALUE comes from the derivation") }
        let length: Int
        let fixed = keyType.blockCipher?.keyLength
        if let lengthValue = template.first(where: { $0.type == .valueLength })?.value {
            guard let raw = AttributeValue.decodeULong(lengthValue) else { throw KeychainError(.attributeValueInvalid, "CKA_VALUE_LEN") }
            if let fixed, raw != UInt(fixed) { throw KeychainError(.templateInconsistent, "a key of this type has \(fixed) bytes") }
            length = Int(clamping: raw)
        } else if let fixed {
            length = fixed
        } else if let lengths = keyType.secretLengths, lengths.count == 1 {
            length = lengths[0]
        } else if keyType == .genericSecret {
            length = secret.count
        } else {
            throw KeychainError(.templateIncomplete, "CKA_VALUE_LEN is required")
        }
        guard length >= 1, length <= secret.count else { throw KeychainError(.keySizeRange, "cannot derive \(length) bytes from \(secret.count)") }
        var full = template.filter { $0.type != .objectClass && $0.type != .valueLength }
        full.append((.objectClass, AttributeValue.ulong(ObjectClass.secretKey.rawValue)))
        var value = secret.withUnsafeBytes { Array($0.prefix(length)) }
        defer { wipe(&value) }
        if fixed != nil { DESParity.makeOdd(&value) }
        full.append((.value, value))
        var object = try ObjectTemplate.create(full, uniqueID: uniqueID, bySecurityOfficer: bySecurityOfficer, policy: policy)
        object[.alwaysSensitive] = AttributeValue.bool(base.bool(.alwaysSensitive) && object.bool(.sensitive))
        object[.neverExtractable] = AttributeValue.bool(base.bool(.neverExtractable) && !object.bool(.extractable))
        return object
    }
}
