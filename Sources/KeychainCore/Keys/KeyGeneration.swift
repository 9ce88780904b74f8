import KeychainCrypto

/// C_GenerateKeyPair in keychain terms: the caller's two templates plus the generated material.
public enum KeyGeneration {
    /// Attributes a generation template may not give: the token makes them.
    private static let material: Set<AttributeType> = [.modulus, .privateExponent, .prime1, .prime2, .exponent1, .exponent2, .coefficient,
                                                        .ecPoint, .value]

    /// What the templates ask for: the key kind, RSA size and exponent.
    public struct Request {
        public let kind: AsymmetricKind
        public let keyType: KeyType
        public let bits: Int
        public let publicExponent: [UInt8]?
        /// DSA and DH: the domain (CKA_PRIME, CKA_SUBPRIME, CKA_BASE of the public template).
        public var domain: FiniteFieldComponents? = nil
    }

    /// Reads the request from the public template (CKA_MODULUS_BITS, CKA_PUBLIC_EXPONENT,
    /// CKA_EC_PARAMS), for a mechanism that makes keys of `keyType`.
    public static func request(keyType: KeyType, publicTemplate: Template, privateTemplate: Template,
                               policy: KeyPolicy) throws(KeychainError) -> Request {
        try checkPairTemplates(keyType: keyType, publicTemplate: publicTemplate, privateTemplate: privateTemplate, madeByToken: material)
        let find = { (type: AttributeType) in publicTemplate.first { $0.type == type }?.value ?? privateTemplate.first { $0.type == type }?.value }
        switch keyType {
        case .rsa:
            guard let bitsValue = publicTemplate.first(where: { $0.type == .modulusBits })?.value else {
                throw KeychainError(.templateIncomplete, "CKA_MODULUS_BITS is required")
            }
            guard let bits = AttributeValue.decodeULong(bitsValue) else { throw KeychainError(.attributeValueInvalid, "CKA_MODULUS_BITS") }
            try policy.check(.rsa, bits: Int(clamping: bits), generating: true)
            let exponent = publicTemplate.first { $0.type == .publicExponent }?.value
            if let exponent {
                let trimmed = exponent.drop { $0 == 0 }
                guard !trimmed.isEmpty, trimmed.count <= 8, (trimmed.last ?? 0) & 1 == 1, Array(trimmed) != [1] else {
                    throw KeychainError(.attributeValueInvalid, "CKA_PUBLIC_EXPONENT must be an odd number above 1")
                }
            }
            return Request(kind: .rsa, keyType: .rsa, bits: Int(bits), publicExponent: exponent)
        case .ec, .ecEdwards, .ecMontgomery:
            guard let params = find(.ecParams) else { throw KeychainError(.templateIncomplete, "CKA_EC_PARAMS is required") }
            let kind = try CurveParameters.kind(params, keyType: keyType)
            try policy.check(kind, bits: 0, generating: true)
            return Request(kind: kind, keyType: keyType, bits: 0, publicExponent: nil)
        case .dsa, .dh:
            let kind = keyType.finiteFieldKind ?? .dh
            guard let prime = find(.prime), let base = find(.base) else {
                throw KeychainError(.templateIncomplete, "CKA_PRIME and CKA_BASE are required")
            }
            let subprime = find(.subprime)
            if kind == .dsa, subprime == nil { throw KeychainError(.templateIncomplete, "CKA_SUBPRIME is required") }
            let domain = FiniteFieldComponents(prime: prime, subprime: kind == .dsa ? subprime : nil, base: base)
            try policy.check(kind, bits: domain.primeBits, generating: true)
            return Request(kind: kind, keyType: keyType, bits: domain.primeBits, publicExponent: nil, domain: domain)
        default:
            throw KeychainError(.templateInconsistent, "not an asymmetric key type")
        }
    }

    /// What both kinds of pair generation refuse in either template: a CKA_CLASS other than the
    /// half's, a CKA_KEY_TYPE other than the mechanism's, and key material the token makes.
    private static func checkPairTemplates(keyType: KeyType, publicTemplate: Template, privateTemplate: Template,
                                           madeByToken: Set<AttributeType>) throws(KeychainError) {
        for (template, objectClass) in [(publicTemplate, ObjectClass.publicKey), (privateTemplate, .privateKey)] {
            if let value = template.first(where: { $0.type == .objectClass })?.value, AttributeValue.decodeULong(value) != objectClass.rawValue {
                throw KeychainError(.templateInconsistent, "CKA_CLASS does not fit a key pair")
            }
            if let value = template.first(where: { $0.type == .keyType })?.value, AttributeValue.decodeULong(value) != keyType.rawValue {
                throw KeychainError(.templateInconsistent, "CKA_KEY_TYPE does not fit the mechanism")
            }
            if let given = template.first(where: { madeByToken.contains($0.type) }) {
                throw KeychainError(.templateInconsistent, "attribute \(given.type) is made by the token")
            }
        }
    }

    /// The parameter set an ML-DSA or ML-KEM key pair generation asks for: CKA_PARAMETER_SET in
    /// the public template (or the private one; both must then agree). CKA_KC_TPM cannot be
    /// asked for: a TPM 2.0 has no lattice keys.
    public static func latticeRequest(keyType: KeyType, publicTemplate: Template, privateTemplate: Template) throws(KeychainError) -> LatticeParameterSet {
        try checkPairTemplates(keyType: keyType, publicTemplate: publicTemplate, privateTemplate: privateTemplate, madeByToken: [.value, .seed])
        if let tpm = privateTemplate.first(where: { $0.type == .tpm })?.value, tpm != AttributeValue.bool(false) {
            throw KeychainError(.attributeValueInvalid, "a TPM 2.0 cannot hold ML-DSA or ML-KEM keys (CKA_KC_TPM)")
        }
        let inPublic = publicTemplate.first { $0.type == .parameterSet }?.value
        let inPrivate = privateTemplate.first { $0.type == .parameterSet }?.value
        if let inPublic, let inPrivate, inPublic != inPrivate {
            throw KeychainError(.templateInconsistent, "the two templates name different parameter sets")
        }
        return try KeyFactory.latticeParameterSet(inPublic ?? inPrivate, keyType: keyType)
    }

    /// The two objects of a generated ML-DSA or ML-KEM pair.
    public static func latticeObjects(for key: LatticeKey, keyType: KeyType, mechanism: UInt, publicTemplate: Template, privateTemplate: Template,
                                      uniqueIDs: (public: [UInt8], private: [UInt8]), bySecurityOfficer: Bool) throws(KeychainError) -> (publicKey: ObjectAttributes, privateKey: ObjectAttributes) {
        guard var seed = key.seedBytes()?.bytes else { throw KeychainError(.storageFailure, "a generated key has no seed") }
        defer { wipe(&seed) }
        let set = AttributeValue.ulong(key.parameterSet.pkcs11Value)
        // The two halves' CKA_PUBLIC_KEY_INFO and default CKA_ID are the same: made once.
        let computed: (info: [UInt8], id: [UInt8])
        do { computed = (key.subjectPublicKeyInfo(), try Digest.hash(.sha1, key.publicKey)) } catch {
            throw KeychainError(.storageFailure, "SHA-1: \(error)")
        }
        func build(_ template: Template, objectClass: ObjectClass, material: Template, uniqueID: [UInt8]) throws(KeychainError) -> ObjectAttributes {
            var full = template.filter { $0.type != .objectClass && $0.type != .keyType && $0.type != .parameterSet }
            full += [(.objectClass, AttributeValue.ulong(objectClass.rawValue)), (.keyType, AttributeValue.ulong(keyType.rawValue)), (.parameterSet, set)]
            full += material
            full += [(.local, AttributeValue.bool(true)), (.keyGenMechanism, AttributeValue.ulong(mechanism))]
            var object = try ObjectTemplate.assemble(full, uniqueID: uniqueID, bySecurityOfficer: bySecurityOfficer, generated: [.local, .keyGenMechanism])
            try KeyFactory.fillLatticeComputed(&object, key: key, given: Set(template.map(\.type)), generated: true, computed: computed)
            return object
        }
        var publicKey = try build(publicTemplate, objectClass: .publicKey, material: [(.value, key.publicKey)], uniqueID: uniqueIDs.public)
        var privateKey = try build(privateTemplate, objectClass: .privateKey, material: [(.seed, seed)], uniqueID: uniqueIDs.private)
        let givenPublicID = publicTemplate.contains { $0.type == .id }
        let givenPrivateID = privateTemplate.contains { $0.type == .id }
        if givenPublicID, !givenPrivateID { privateKey[.id] = publicKey[.id] }
        if givenPrivateID, !givenPublicID { publicKey[.id] = privateKey[.id] }
        return (publicKey, privateKey)
    }

    /// C_GenerateKey with CKM_DSA_PARAMETER_GEN or CKM_DH_PKCS_PARAMETER_GEN: a domain-parameters
    /// object with a new group of CKA_PRIME_BITS bits.
    public static func domainParameters(keyType: KeyType, mechanism: UInt, template: Template, uniqueID: [UInt8], bySecurityOfficer: Bool,
                                        policy: KeyPolicy) throws(KeychainError) -> ObjectAttributes {
        if let value = template.first(where: { $0.type == .objectClass })?.value, AttributeValue.decodeULong(value) != ObjectClass.domainParameters.rawValue {
            throw KeychainError(.templateInconsistent, "CKA_CLASS does not fit domain parameters")
        }
        if let value = template.first(where: { $0.type == .keyType })?.value, AttributeValue.decodeULong(value) != keyType.rawValue {
            throw KeychainError(.templateInconsistent, "CKA_KEY_TYPE does not fit the mechanism")
        }
        guard let bitsValue = template.first(where: { $0.type == .primeBits })?.value else {
            throw KeychainError(.templateIncomplete, "CKA_PRIME_BITS is required")
        }
        guard let bits = AttributeValue.decodeULong(bitsValue) else { throw KeychainError(.attributeValueInvalid, "CKA_PRIME_BITS") }
        let kind = keyType.finiteFieldKind ?? .dh
        try policy.check(kind, bits: Int(clamping: bits), generating: true)
        let range = AsymmetricKey.generatedPrimeBits
        guard range.contains(Int(clamping: bits)), bits % 64 == 0 else {
            throw KeychainError(.keySizeRange, "primes of \(range.lowerBound)–\(range.upperBound) bits, multiples of 64")
        }
        // CKA_SUB_PRIME_BITS (DSA): 160, 224 or 256; by default 160 below 2048 bits, else 256.
        var subprimeBits: Int?
        if let value = template.first(where: { $0.type == .subprimeBits })?.value {
            guard keyType == .dsa, let given = AttributeValue.decodeULong(value), [160, 224, 256].contains(given), given < bits else {
                throw KeychainError(.templateInconsistent, "CKA_SUB_PRIME_BITS must be 160, 224 or 256 (DSA)")
            }
            subprimeBits = Int(given)
        }
        let domain: FiniteFieldComponents
        do { domain = try AsymmetricKey.generateDomainParameters(kind, primeBits: Int(bits), subprimeBits: subprimeBits) } catch {
            throw KeychainError(.storageFailure, "domain parameter generation failed: \(error)")
        }
        var full = template.filter { ![.objectClass, .keyType, .primeBits, .subprimeBits].contains($0.type) }
        full += [(.objectClass, AttributeValue.ulong(ObjectClass.domainParameters.rawValue)), (.keyType, AttributeValue.ulong(keyType.rawValue)),
                 (.prime, domain.prime), (.base, domain.base), (.local, AttributeValue.bool(true))]
        if let q = domain.subprime { full.append((.subprime, q)) }
        var object = try ObjectTemplate.assemble(full, uniqueID: uniqueID, bySecurityOfficer: bySecurityOfficer, generated: [.local])
        try KeyFactory.completeDomainParameters(&object, policy: policy)
        return object
    }

    /// A generated secret key (C_GenerateKey): CKA_VALUE_LEN from the template (AES: 16, 24, 32;
    /// generic secrets: 1 to 512 bytes), random value, CKA_LOCAL and CKA_KEY_GEN_MECHANISM.
    public static func secretKey(keyType: KeyType, mechanism: UInt, template: Template, uniqueID: [UInt8], bySecurityOfficer: Bool) throws(KeychainError) -> ObjectAttributes {
        if let value = template.first(where: { $0.type == .objectClass })?.value, AttributeValue.decodeULong(value) != ObjectClass.secretKey.rawValue {
            throw KeychainError(.templateInconsistent, "CKA_CLASS does not fit a secret key")
        }
        if let value = template.first(where: { $0.type == .keyType })?.value, AttributeValue.decodeULong(value) != keyType.rawValue {
            throw KeychainError(.templateInconsistent, "CKA_KEY_TYPE does not fit the mechanism")
        }
        if template.contains(where: { $0.type == .value }) { throw KeychainError(.templateInconsistent, "CKA_VALUE is made by the token") }
        let length: UInt
        if let fixed = keyType.blockCipher?.keyLength {
            // DES keys: the type fixes the length. CKA_VALUE_LEN is not theirs, but pkcs11-tool
            // --keygen sends it: the type's own length is taken (and not stored), another refused.
            if let given = template.first(where: { $0.type == .valueLength })?.value, AttributeValue.decodeULong(given) != UInt(fixed) {
                throw KeychainError(.templateInconsistent, "a key of this type has \(fixed) bytes")
            }
            length = UInt(fixed)
        } else {
            let onlyLength = keyType.secretLengths.flatMap { $0.count == 1 ? $0[0] : nil }
            guard let lengthValue = template.first(where: { $0.type == .valueLength })?.value ?? onlyLength.map({ AttributeValue.ulong(UInt($0)) }) else {
                throw KeychainError(.templateIncomplete, "CKA_VALUE_LEN is required")
            }
            guard let given = AttributeValue.decodeULong(lengthValue) else { throw KeychainError(.attributeValueInvalid, "CKA_VALUE_LEN") }
            let valid = keyType == .aes ? [16, 24, 32].contains(given) : keyType.secretLengths.map { $0.contains(Int(given)) } ?? (1...512).contains(given)
            guard valid else { throw KeychainError(.keySizeRange, "no \(given)-byte key of this type") }
            length = given
        }
        var value: [UInt8] = []
        defer { wipe(&value) }
        repeat {
            wipe(&value)
            do { value = try Random.secretBytes(Int(length)) } catch { throw KeychainError(.storageFailure, "random generator failed") }
            if keyType.blockCipher?.keyLength != nil { DESParity.makeOdd(&value) }
        } while (keyType.blockCipher?.keyLength != nil && DESParity.isUnfit(value))
            || (keyType == .aesXTS && value[..<(value.count / 2)].elementsEqual(value[(value.count / 2)...]))
        var full = template.filter { $0.type != .objectClass && $0.type != .keyType && ($0.type != .valueLength || keyType.blockCipher?.keyLength == nil) }
        full += [(.objectClass, AttributeValue.ulong(ObjectClass.secretKey.rawValue)), (.keyType, AttributeValue.ulong(keyType.rawValue)),
                 (.value, value), (.local, AttributeValue.bool(true)), (.keyGenMechanism, AttributeValue.ulong(mechanism))]
        var object = try ObjectTemplate.assemble(full, uniqueID: uniqueID, bySecurityOfficer: bySecurityOfficer, generated: [.local, .keyGenMechanism])
        try KeyFactory.completeSecret(&object, given: Set(template.map(\.type)), generated: true)
        return object
    }

    /// The two objects of a generated pair: templates, generated material, CKA_LOCAL and
    /// CKA_KEY_GEN_MECHANISM, computed attributes, and a shared default CKA_ID.
    public static func objects(for key: AsymmetricKey, request: Request, mechanism: UInt, publicTemplate: Template, privateTemplate: Template,
                               uniqueIDs: (public: [UInt8], private: [UInt8]), bySecurityOfficer: Bool) throws(KeychainError) -> (publicKey: ObjectAttributes, privateKey: ObjectAttributes) {
        try objects(publicKey: key, material: try KeyFactory.generatedMaterial(key), request: request, mechanism: mechanism,
                    publicTemplate: publicTemplate, privateTemplate: privateTemplate, uniqueIDs: uniqueIDs, bySecurityOfficer: bySecurityOfficer)
    }

    /// The pair's objects from `key` (private, or public for a TPM key: it fills the computed
    /// attributes) and the material each half stores; `heldElsewhere`: the private key's secret
    /// parts, when the TPM holds them.
    static func objects(publicKey key: AsymmetricKey, material: (publicKey: [AttributeType: [UInt8]], privateKey: [AttributeType: [UInt8]]),
                        request: Request, mechanism: UInt, publicTemplate: Template, privateTemplate: Template,
                        uniqueIDs: (public: [UInt8], private: [UInt8]), bySecurityOfficer: Bool,
                        heldElsewhere: Set<AttributeType> = []) throws(KeychainError) -> (publicKey: ObjectAttributes, privateKey: ObjectAttributes) {
        let local: Template = [(.local, AttributeValue.bool(true)), (.keyGenMechanism, AttributeValue.ulong(mechanism))]
        func build(_ template: Template, objectClass: ObjectClass, parts: [AttributeType: [UInt8]], uniqueID: [UInt8],
                   heldElsewhere: Set<AttributeType> = []) throws(KeychainError) -> ObjectAttributes {
            var full = template.filter { $0.type != .objectClass && $0.type != .keyType && $0.type != .ecParams }
            full.append((.objectClass, AttributeValue.ulong(objectClass.rawValue)))
            full.append((.keyType, AttributeValue.ulong(request.keyType.rawValue)))
            full += parts.filter { entry in !full.contains { $0.type == entry.key } }.map { ($0.key, $0.value) }
            full += local
            var object = try ObjectTemplate.assemble(full, uniqueID: uniqueID, bySecurityOfficer: bySecurityOfficer,
                                                     generated: [.local, .keyGenMechanism], heldElsewhere: heldElsewhere)
            try KeyFactory.fillComputed(&object, key: key, given: Set(template.map(\.type)), generated: true)
            return object
        }
        var publicKey = try build(publicTemplate, objectClass: .publicKey, parts: material.publicKey, uniqueID: uniqueIDs.public)
        var privateKey = try build(privateTemplate, objectClass: .privateKey, parts: material.privateKey, uniqueID: uniqueIDs.private,
                                   heldElsewhere: heldElsewhere)
        // One template naming CKA_ID gives it to both halves, so they pair up.
        let givenPublicID = publicTemplate.contains { $0.type == .id }
        let givenPrivateID = privateTemplate.contains { $0.type == .id }
        if givenPublicID, !givenPrivateID { privateKey[.id] = publicKey[.id] }
        if givenPrivateID, !givenPublicID { publicKey[.id] = privateKey[.id] }
        return (publicKey, privateKey)
    }
}
