import KeychainCrypto

/// Turns key attributes into OpenSSL keys and back: validates imported key material, computes
/// the attributes derived from it, and describes generated keys as attributes.
public enum KeyFactory {
    /// The public half of a key object, from its CKA_PUBLIC_KEY_INFO (for a private key whose
    /// secret is sealed by an application password).
    public static func publicKey(of object: ObjectAttributes) throws(KeychainError) -> AsymmetricKey {
        guard let info = object[.publicKeyInfo], !info.isEmpty else {
            throw KeychainError(.attributeValueInvalid, "the key has no CKA_PUBLIC_KEY_INFO")
        }
        do { return try AsymmetricKey.publicKey(subjectPublicKeyInfo: info) } catch {
            throw KeychainError(.recordCorrupted, "CKA_PUBLIC_KEY_INFO does not parse")
        }
    }

    /// The parsed key of a key object (public or private).
    public static func key(of object: ObjectAttributes) throws(KeychainError) -> AsymmetricKey {
        guard let objectClass = object.objectClass, let keyType = object.keyType else {
            throw KeychainError(.recordCorrupted, "key object without class or key type")
        }
        let isPrivate = objectClass == .privateKey
        do {
            switch keyType {
            case .rsa:
                let parts = RSAComponents(
                    modulus: object[.modulus] ?? [], publicExponent: object[.publicExponent] ?? [],
                    privateExponent: isPrivate ? object[.privateExponent] : nil,
                    prime1: nonEmpty(object[.prime1]), prime2: nonEmpty(object[.prime2]),
                    exponent1: nonEmpty(object[.exponent1]), exponent2: nonEmpty(object[.exponent2]), coefficient: nonEmpty(object[.coefficient]))
                return try AsymmetricKey.rsa(parts)
            case .ec:
                guard case .ec(let curve) = try CurveParameters.kind(object[.ecParams] ?? [], keyType: keyType) else {
                    throw KeychainError(.attributeValueInvalid, "CKA_EC_PARAMS")
                }
                if isPrivate { return try AsymmetricKey.ec(curve, point: nil, scalar: object[.value]) }
                return try AsymmetricKey.ec(curve, point: point(object[.ecPoint] ?? [], length: 1 + 2 * curve.coordinateLength), scalar: nil)
            case .ecEdwards, .ecMontgomery:
                let kind = try CurveParameters.kind(object[.ecParams] ?? [], keyType: keyType)
                if isPrivate { return try AsymmetricKey.raw(kind, privateKey: object[.value], publicKey: nil) }
                return try AsymmetricKey.raw(kind, privateKey: nil, publicKey: point(object[.ecPoint] ?? [], length: kind.rawKeyLength ?? 0))
            case .dsa, .dh:
                let kind = keyType.finiteFieldKind ?? .dh
                let parts = FiniteFieldComponents(prime: object[.prime] ?? [], subprime: kind == .dsa ? object[.subprime] ?? [] : nil,
                                                  base: object[.base] ?? [], publicValue: isPrivate ? nil : object[.value],
                                                  privateValue: isPrivate ? object[.value] : nil)
                return try AsymmetricKey.finiteField(kind, parts)
            default:
                throw KeychainError(.attributeValueInvalid, "key type 0x\(String(keyType.rawValue, radix: 16)) is not an asymmetric key")
            }
        } catch let error as KeychainError {
            throw error
        } catch let error as CryptoError {
            throw KeychainError(error.code == .library ? .storageFailure : .attributeValueInvalid, error.reason)
        } catch {
            throw KeychainError(.attributeValueInvalid, "\(error)")
        }
    }

    /// Checks an imported key's material and fills the attributes computed from it. A computed
    /// attribute the template gave must equal the computed value.
    static func completeImported(_ object: inout ObjectAttributes, given: Set<AttributeType>, policy: KeyPolicy) throws(KeychainError) {
        if let kind = object.keyType?.finiteFieldKind {
            // Before any arithmetic on the caller's numbers.
            try policy.check(kind, bits: 0, generating: false)
        }
        if object.objectClass == .secretKey {
            try policy.check(secretKeyType: object.keyType)
            try completeSecret(&object, given: given)
            return
        }
        if let keyType = object.keyType, keyType.isLattice {
            let key = try latticeKey(of: object)
            if object.objectClass == .privateKey, let expanded = object[.value], !expanded.isEmpty {
                // 3.2 asks applications to give both seed and expanded key; the library makes keys
                // from seeds only, so the expanded key is checked against the seed's and not kept.
                let agrees = expanded.withUnsafeBytes { key.expandedPrivateKeyAgrees($0) }
                guard agrees else {
                    throw KeychainError(.attributeValueInvalid, "CKA_VALUE is not the expanded \(key.parameterSet.name) key of CKA_SEED")
                }
                object.wipeValue(.value)
            }
            try fillLatticeComputed(&object, key: key, given: given)
            return
        }
        if object.keyType == .rsa {
            try policy.check(.rsa, bits: DER.bitLength(ofUnsigned: object[.modulus] ?? []), generating: false,
                             publicOnly: object.objectClass == .publicKey)
        }
        let key = try key(of: object)
        if key.kind != .rsa { try policy.check(key.kind, bits: 0, generating: false) }
        do { try key.validate() } catch { throw KeychainError(.attributeValueInvalid, "the key's parts do not agree") }
        try fillComputed(&object, key: key, given: given)
    }

    /// Checks a DSA or DH group and fills CKA_PRIME_BITS (and CKA_SUB_PRIME_BITS).
    static func completeDomainParameters(_ object: inout ObjectAttributes, policy: KeyPolicy) throws(KeychainError) {
        let kind = object.keyType?.finiteFieldKind ?? .dh
        let domain = FiniteFieldComponents(prime: object[.prime] ?? [], subprime: object[.subprime], base: object[.base] ?? [])
        try policy.check(kind, bits: domain.primeBits, generating: false)
        guard AsymmetricKey.finiteFieldPrimeBits.contains(domain.primeBits), !domain.base.allSatisfy({ $0 == 0 }) else {
            throw KeychainError(.attributeValueInvalid, "a \(domain.primeBits)-bit prime is outside \(AsymmetricKey.finiteFieldPrimeBits)")
        }
        object[.primeBits] = AttributeValue.ulong(UInt(domain.primeBits))
        if kind == .dsa, let q = object[.subprime] {
            object[.subprimeBits] = AttributeValue.ulong(UInt(DER.bitLength(ofUnsigned: q)))
        }
    }

    /// The attributes of a freshly generated key pair's two halves (key material and the
    /// values computed from it), to merge into the caller's templates.
    public static func generatedMaterial(_ key: AsymmetricKey) throws(KeychainError) -> (publicKey: [AttributeType: [UInt8]], privateKey: [AttributeType: [UInt8]]) {
        do {
            switch key.kind {
            case .rsa:
                let parts = try key.rsaComponents()
                let publicParts: [AttributeType: [UInt8]] = [.modulus: parts.modulus, .publicExponent: parts.publicExponent]
                guard key.isPrivate else { return (publicParts, [:]) }
                var privateParts = publicParts
                privateParts[.privateExponent] = parts.privateExponent ?? []
                privateParts[.prime1] = parts.prime1
                privateParts[.prime2] = parts.prime2
                privateParts[.exponent1] = parts.exponent1
                privateParts[.exponent2] = parts.exponent2
                privateParts[.coefficient] = parts.coefficient
                return (publicParts, privateParts)
            case .ec:
                let params = CurveParameters.der(for: key.kind)
                let publicParts: [AttributeType: [UInt8]] = [.ecParams: params, .ecPoint: DER.octetString(try key.ecPoint())]
                return (publicParts, key.isPrivate ? [.ecParams: params, .value: try key.ecScalar().bytes] : [:])
            case .dsa, .dh:
                let parts = try key.finiteFieldComponents()
                var domain: [AttributeType: [UInt8]] = [.prime: parts.prime, .base: parts.base]
                if key.kind == .dsa { domain[.subprime] = parts.subprime ?? [] }
                var publicParts = domain
                publicParts[.value] = parts.publicValue ?? []
                guard key.isPrivate, let x = parts.privateValue else { return (publicParts, [:]) }
                var privateParts = domain
                privateParts[.value] = x
                if key.kind == .dh { privateParts[.valueBits] = AttributeValue.ulong(UInt(DER.bitLength(ofUnsigned: x))) }
                return (publicParts, privateParts)
            default:
                let params = CurveParameters.der(for: key.kind)
                let publicParts: [AttributeType: [UInt8]] = [.ecParams: params, .ecPoint: DER.octetString(try key.rawPublicKey())]
                return (publicParts, key.isPrivate ? [.ecParams: params, .value: try key.rawPrivateKey().bytes] : [:])
            }
        } catch {
            throw KeychainError(.storageFailure, "cannot describe the key: \(error)")
        }
    }

    /// The parameter set a lattice key object's CKA_PARAMETER_SET names: an unknown value is
    /// CKR_ATTRIBUTE_VALUE_INVALID, a set the library lacks CKR_PARAMETER_SET_NOT_SUPPORTED.
    public static func latticeParameterSet(_ value: [UInt8]?, keyType: KeyType) throws(KeychainError) -> LatticeParameterSet {
        guard let value else { throw KeychainError(.templateIncomplete, "CKA_PARAMETER_SET is required") }
        guard let number = AttributeValue.decodeULong(value), let set = keyType.latticeParameterSet(number) else {
            throw KeychainError(.attributeValueInvalid, "CKA_PARAMETER_SET names no \(keyType == .mlDSA ? "ML-DSA" : "ML-KEM") parameter set")
        }
        guard set.isOffered else {
            throw KeychainError(.parameterSetNotSupported, "\(set.name) is not offered: the library (swift-crypto) has no \(set.name)")
        }
        return set
    }

    /// The ML-DSA or ML-KEM key of a key object: a private key from its CKA_SEED, a public key
    /// from its CKA_VALUE.
    public static func latticeKey(of object: ObjectAttributes) throws(KeychainError) -> LatticeKey {
        guard let keyType = object.keyType, keyType.isLattice else { throw KeychainError(.attributeValueInvalid, "not an ML-DSA or ML-KEM key") }
        let set = try latticeParameterSet(object[.parameterSet], keyType: keyType)
        if object.objectClass == .privateKey, object[.seed] == nil {
            throw KeychainError(.templateIncomplete, "an \(set.name) private key is imported by its CKA_SEED")
        }
        do throws(CryptoError) {
            if object.objectClass == .privateKey, let seed = object[.seed] {
                return try LatticeKey.privateKey(set, seed: SecureBytes(seed))
            }
            return try LatticeKey.publicKey(set, encoded: object[.value] ?? [])
        } catch {
            throw KeychainError(error.code == .library ? .storageFailure : .attributeValueInvalid, error.reason)
        }
    }

    /// A lattice key object's computed attributes: usage defaults, CKA_PUBLIC_KEY_INFO, a default
    /// CKA_ID (SHA-1 of the encoded public key, as for other keys) and the policy history flags.
    static func fillLatticeComputed(_ object: inout ObjectAttributes, key: LatticeKey, given: Set<AttributeType>, generated: Bool = false,
                                    computed: (info: [UInt8], id: [UInt8])? = nil) throws(KeychainError) {
        KeyPolicy.applyRoleDefaults(defaultUsages(object.keyType, objectClass: object.objectClass), to: &object, given: given)
        let info = computed?.info ?? key.subjectPublicKeyInfo()
        if given.contains(.publicKeyInfo), object[.publicKeyInfo] != info {
            throw KeychainError(.attributeValueInvalid, "CKA_PUBLIC_KEY_INFO does not match the key")
        }
        object[.publicKeyInfo] = info
        if object[.id] == nil {
            if let id = computed?.id {
                object[.id] = id
            } else {
                do { object[.id] = try Digest.hash(.sha1, key.publicKey) } catch { throw KeychainError(.storageFailure, "SHA-1: \(error)") }
            }
        }
        if object.objectClass == .privateKey {
            object[.alwaysSensitive] = AttributeValue.bool(generated && object.bool(.sensitive))
            object[.neverExtractable] = AttributeValue.bool(generated && !object.bool(.extractable))
            // The expanded key is never kept (checked against the seed when given, see completeImported).
            object.wipeValue(.value)
        }
    }

    /// The usages each key type can have; usage flags a template leaves out default to these.
    static func defaultUsages(_ keyType: KeyType?, objectClass: ObjectClass?) -> KeyValuePairs<AttributeType, Bool> {
        let isPublic = objectClass == .publicKey
        switch keyType {
        case .rsa?:
            return isPublic ? [.encrypt: true, .verify: true, .wrap: true, .verifyRecover: false]
                            : [.decrypt: true, .sign: true, .unwrap: true, .signRecover: false]
        case .ec?:
            return isPublic ? [.encrypt: false, .verify: true, .wrap: false, .verifyRecover: false, .derive: false]
                            : [.decrypt: false, .sign: true, .unwrap: false, .signRecover: false, .derive: true]
        case .ecEdwards?:
            return isPublic ? [.encrypt: false, .verify: true, .wrap: false, .verifyRecover: false, .derive: false]
                            : [.decrypt: false, .sign: true, .unwrap: false, .signRecover: false, .derive: false]
        case .aes?, .des?, .des2?, .des3?:
            return [.encrypt: true, .decrypt: true, .sign: true, .verify: true, .wrap: true, .unwrap: true, .derive: false]
        case .chacha20?, .aesXTS?:
            return [.encrypt: true, .decrypt: true, .sign: false, .verify: false, .wrap: false, .unwrap: false, .derive: false]
        case .hkdf?:
            return [.encrypt: false, .decrypt: false, .sign: false, .verify: false, .wrap: false, .unwrap: false, .derive: true]
        case .genericSecret?, .md5HMAC?, .sha1HMAC?, .sha224HMAC?, .sha256HMAC?, .sha384HMAC?, .sha512HMAC?,
             .sha3_224HMAC?, .sha3_256HMAC?, .sha3_384HMAC?, .sha3_512HMAC?:
            return [.encrypt: false, .decrypt: false, .sign: true, .verify: true, .wrap: false, .unwrap: false, .derive: false]
        case .ecMontgomery?, .dh?:
            return isPublic ? [.encrypt: false, .verify: false, .wrap: false, .verifyRecover: false, .derive: false]
                            : [.decrypt: false, .sign: false, .unwrap: false, .signRecover: false, .derive: true]
        case .mlDSA?:
            return isPublic ? [.encrypt: false, .verify: true, .wrap: false, .verifyRecover: false, .derive: false]
                            : [.decrypt: false, .sign: true, .unwrap: false, .signRecover: false, .derive: false]
        case .mlKEM?:
            return isPublic ? [.encrypt: false, .verify: false, .wrap: false, .verifyRecover: false, .derive: false, .encapsulate: true]
                            : [.decrypt: false, .sign: false, .unwrap: false, .signRecover: false, .derive: false, .decapsulate: true]
        case .dsa?:
            return isPublic ? [.encrypt: false, .verify: true, .wrap: false, .verifyRecover: false, .derive: false]
                            : [.decrypt: false, .sign: true, .unwrap: false, .signRecover: false, .derive: false]
        default:
            return [:]
        }
    }

    /// Fills CKA_MODULUS_BITS, CKA_PUBLIC_KEY_INFO, a default CKA_ID and the policy history flags.
    /// `generated` keys record their sensitivity history; imported keys were outside the token,
    /// so they are never "always sensitive" or "never extractable".
    static func fillComputed(_ object: inout ObjectAttributes, key: AsymmetricKey, given: Set<AttributeType>, generated: Bool = false) throws(KeychainError) {
        KeyPolicy.applyRoleDefaults(defaultUsages(object.keyType, objectClass: object.objectClass), to: &object, given: given)
        var computed: [AttributeType: [UInt8]] = [:]
        do {
            computed[.publicKeyInfo] = try key.subjectPublicKeyInfo()
            if object.keyType == .rsa, object.objectClass == .publicKey {
                computed[.modulusBits] = AttributeValue.ulong(UInt(key.bits))
            }
            if object[.id] == nil {
                object[.id] = try Digest.hash(.sha1, try key.publicKeyBytes())
            }
        } catch {
            throw KeychainError(.attributeValueInvalid, "cannot read the key: \(error)")
        }
        for (type, value) in computed {
            if given.contains(type), object[type] != value {
                throw KeychainError(.attributeValueInvalid, "attribute \(type) does not match the key")
            }
            object[type] = value
        }
        if object.objectClass == .publicKey, object[.ecPoint] != nil {
            // Stored and returned as DER OCTET STRING, whichever form was given.
            do {
                if case .ec = key.kind { object[.ecPoint] = DER.octetString(try key.ecPoint()) } else { object[.ecPoint] = DER.octetString(try key.rawPublicKey()) }
            } catch {
                throw KeychainError(.attributeValueInvalid, "cannot read the public point: \(error)")
            }
        }
        if object.objectClass == .privateKey {
            object[.alwaysSensitive] = AttributeValue.bool(generated && object.bool(.sensitive))
            object[.neverExtractable] = AttributeValue.bool(generated && !object.bool(.extractable))
        }
    }

    /// Checks a secret key's value and fills CKA_VALUE_LEN, CKA_CHECK_VALUE, usage defaults and
    /// the policy history flags.
    static func completeSecret(_ object: inout ObjectAttributes, given: Set<AttributeType>, generated: Bool = false) throws(KeychainError) {
        let value = object[.value] ?? []
        let cipher = object.keyType?.blockCipher
        if let cipher {
            guard cipher.algorithm.accepts(keyLength: value.count), cipher.keyLength.map({ $0 == value.count }) ?? true else {
                throw KeychainError(.attributeValueInvalid, "a key of this type cannot have \(value.count) bytes")
            }
            // The parity bits are not part of the key (DES ignores them): keys written with any
            // parity are taken as given, as SoftHSM does and conformance suites' vectors expect
            // (PKCS#11's text asks for an error). Keys made here have odd parity.
        } else if let lengths = object.keyType?.secretLengths {
            guard lengths.contains(value.count) else { throw KeychainError(.attributeValueInvalid, "a key of this type cannot have \(value.count) bytes") }
            // XTS with equal halves is not XTS (IEEE 1619 §5.1; OpenSSL refuses such keys).
            if object.keyType == .aesXTS, value[..<(value.count / 2)].elementsEqual(value[(value.count / 2)...]) {
                throw KeychainError(.attributeValueInvalid, "the two halves of an AES-XTS key must differ")
            }
        } else {
            guard !value.isEmpty else { throw KeychainError(.attributeValueInvalid, "a secret key needs a value") }
        }
        // DES keys have no CKA_VALUE_LEN (their length is their type's).
        var computed: [(type: AttributeType, value: [UInt8])] = cipher?.keyLength == nil ? [(.valueLength, AttributeValue.ulong(UInt(value.count)))] : []
        do {
            let check = try cipher.map { try SymmetricCipher.encryptZeroBlock(key: SecureBytes(value), algorithm: $0.algorithm) } ?? Digest.hash(.sha1, value)
            computed.append((.checkValue, Array(check.prefix(3))))
        } catch let error as CryptoError where error.code == .library {
            throw KeychainError(.storageFailure, "cannot compute the check value: \(error)")
        } catch {
            throw KeychainError(.attributeValueInvalid, "cannot compute the check value: \(error)")
        }
        for (type, expected) in computed {
            if given.contains(type), object[type] != expected {
                throw KeychainError(.attributeValueInvalid, "attribute \(type) does not match the key value")
            }
            object[type] = expected
        }
        KeyPolicy.applyRoleDefaults(defaultUsages(object.keyType, objectClass: .secretKey), to: &object, given: given)
        if object[.id] == nil { object[.id] = [] }
        object[.alwaysSensitive] = AttributeValue.bool(generated && object.bool(.sensitive))
        object[.neverExtractable] = AttributeValue.bool(generated && !object.bool(.extractable))
        try object.checkTrustedRoles()
    }

    /// The CKA_KEY_TYPE of keys of `kind`.
    public static func keyType(of kind: AsymmetricKind) -> KeyType {
        switch kind {
        case .rsa: return .rsa
        case .ec: return .ec
        case .ed25519, .ed448: return .ecEdwards
        case .x25519, .x448: return .ecMontgomery
        case .dsa: return .dsa
        case .dh: return .dh
        }
    }

    /// The CKA_EC_PARAMS (DER OID) of an elliptic-curve kind; empty for RSA.
    public static func curveParameters(of kind: AsymmetricKind) -> [UInt8] { CurveParameters.der(for: kind) }

    /// A public-key object for a private key stored alone (OpenSSH lists only public keys); it
    /// syncs when the private key does (the pair travels together).
    public static func publicObject(for privateObject: ObjectAttributes, uniqueID: [UInt8], policy: KeyPolicy) throws(KeychainError) -> ObjectAttributes {
        let key = try key(of: privateObject)
        let material = try generatedMaterial(key).publicKey
        var template: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.publicKey.rawValue))]
        for type in [AttributeType.keyType, .token, .label, .id, .subject, .startDate, .endDate, .synchronizable] {
            if let value = privateObject[type] { template.append((type, value)) }
        }
        template.append((.isPrivate, AttributeValue.bool(false)))
        template += material.map { ($0.key, $0.value) }
        var object = try ObjectTemplate.create(template, uniqueID: uniqueID, policy: policy)
        object[.local] = privateObject[.local]
        object[.keyGenMechanism] = privateObject[.keyGenMechanism]
        return object
    }

    // MARK: helpers

    private static func nonEmpty(_ value: [UInt8]?) -> [UInt8]? {
        guard let value, !value.isEmpty else { return nil }
        return value
    }

    /// CKA_EC_POINT as given, raw or as DER OCTET STRING, → the raw point of `length` bytes.
    public static func point(_ value: [UInt8], length: Int) -> [UInt8] {
        if value.count != length, let inner = DER.content(of: value, tag: 0x04), inner.count == length { return inner }
        return value
    }
}

/// DES key bytes carry odd parity in their low bit (FIPS 46-3).
enum DESParity {
    static func makeOdd(_ bytes: inout [UInt8]) {
        for index in bytes.indices { bytes[index] = (bytes[index] & 0xFE) | ((bytes[index] >> 1).nonzeroBitCount % 2 == 0 ? 1 : 0) }
    }

    /// The DES weak and semi-weak keys (SP 800-67 §3.3.2), with odd parity.
    static let weakKeys: Set<[UInt8]> = Set([
        "0101010101010101", "FEFEFEFEFEFEFEFE", "E0E0E0E0F1F1F1F1", "1F1F1F1F0E0E0E0E",
        "011F011F010E010E", "1F011F010E010E01", "01E001E001F101F1", "E001E001F101F101", "01FE01FE01FE01FE", "FE01FE01FE01FE01",
        "1FE01FE00EF10EF1", "E01FE01FF10EF10E", "1FFE1FFE0EFE0EFE", "FE1FFE1FFE0EFE0E", "E0FEE0FEF1FEF1FE", "FEE0FEE0FEF1FEF1",
    ].compactMap { Hex.bytes(Array($0.utf8)) })

    /// Whether a generated key (odd parity) is unfit: a weak or semi-weak DES part, or a
    /// triple-DES key whose neighbouring parts are equal (it would be single DES).
    static func isUnfit(_ key: [UInt8]) -> Bool {
        let parts = stride(from: 0, to: key.count, by: 8).map { Array(key[$0..<min($0 + 8, key.count)]) }
        if parts.contains(where: weakKeys.contains) { return true }
        return zip(parts, parts.dropFirst()).contains { $0 == $1 }
    }
}
