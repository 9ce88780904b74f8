import CPKCS11
import KeychainCore
import KeychainCrypto

/// C_DeriveKey and its derivations: ECDH and DH, the encrypt-data mechanisms, PKCS#11 3.0's
/// HKDF and SP 800-108 KDFs; and PBKDF2 through C_GenerateKey. The simple derivations
/// (concatenation, XOR, extraction) are in SimpleDerivation.swift.
extension ModuleState {
    /// C_DeriveKey: the new key's value comes from the mechanism's derivation, its attributes
    /// from the template merged with the base key's CKA_DERIVE_TEMPLATE. SP 800-108's additional
    /// keys come back with their handles, in the order of the parameter's list.
    func deriveKey(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism, baseKey: CK_OBJECT_HANDLE,
                   template: Template) throws(CKError) -> (key: CK_OBJECT_HANDLE, additional: [CK_OBJECT_HANDLE]) {
        try withSession(handle) { session, token throws(CKError) -> (key: CK_OBJECT_HANDLE, additional: [CK_OBJECT_HANDLE]) in
            let entry = try self.mechanism(mechanism.type)
            guard entry.supports(CKF_DERIVE), let derivation = entry.derivation else {
                throw CKError(CK_RV(CKR_MECHANISM_INVALID), "not a derivation mechanism")
            }
            try refuseAlwaysAuthenticate(baseKey, session: session, token: token, function: "C_DeriveKey")
            let base = try keyAttributes(baseKey, session: session, token: token)
            let fullTemplate: Template
            let shared: SecureBytes
            switch derivation {
            case .ecdh(let cofactor):
                guard case .ecdh(let kdf, let sharedData, let publicData) = mechanism.parameter else {
                    throw Mechanisms.paramInvalid("ECDH needs CK_ECDH1_DERIVE_PARAMS")
                }
                // A key in the TPM (CKA_KC_TPM) agrees there; the KDF runs here either way.
                let key = try asymmetricOrTPMKey(baseKey, session: session, token: token, objectClass: .privateKey, usage: .derive, mechanism: entry)
                fullTemplate = try Self.mergedDeriveTemplate(template, base: base)
                shared = try Self.ecdhSecret(kdf: kdf, sharedData: sharedData, publicData: publicData, key: key, cofactor: cofactor, template: fullTemplate)
            case .hkdf(let dataObject):
                let secret = try hkdfInput(baseKey, base: base, parameter: mechanism.parameter, session: session, token: token, mechanism: entry)
                fullTemplate = dataObject ? template : try Self.mergedDeriveTemplate(template, base: base)
                shared = try hkdfSecret(mechanism.parameter, base: secret, template: fullTemplate, session: session, token: token)
                if dataObject { return (try storeDerivedData(shared, template: fullTemplate, session: session, token: token), []) }
            case .sp800108(let mode):
                guard case .sp800108(_, _, _, let additionalKeys) = mechanism.parameter else { throw Mechanisms.paramInvalid("SP 800-108 needs its KDF parameters") }
                let secret = try secretKey(baseKey, session: session, token: token, usage: .derive, mechanism: entry)
                let templates = try ([template] + additionalKeys.map(\.template)).map { t throws(CKError) in try Self.mergedDeriveTemplate(t, base: base) }
                let secrets = try sp800108Secrets(mechanism.parameter, mode: mode, base: secret, baseType: base.keyType, templates: templates)
                return try storeDerived(secrets, templates: templates, base: base, session: session, token: token)
            case .diffieHellman:
                let key = try asymmetricKey(baseKey, session: session, token: token, objectClass: .privateKey, usage: .derive, mechanism: entry)
                fullTemplate = try Self.mergedDeriveTemplate(template, base: base)
                shared = try Self.diffieHellmanSecret(mechanism.parameter, key: key, template: fullTemplate)
            case .encryptData(let mode):
                let secret = try secretKey(baseKey, session: session, token: token, usage: .derive, mechanism: entry)
                fullTemplate = try Self.mergedDeriveTemplate(template, base: base)
                shared = try Self.encryptedData(mechanism.parameter, mode: mode, algorithm: entry.blockCipher, key: secret, template: fullTemplate)
            case .simple(let kind):
                let derived = try simpleDerivation(kind, parameter: mechanism.parameter, baseKey: baseKey, base: base, template: template,
                                                   session: session, token: token, mechanism: entry)
                return try storeDerived([derived.value], templates: [derived.template], base: derived.history, session: session, token: token)
            }
            return try storeDerived([shared], templates: [fullTemplate], base: base, session: session, token: token)
        }
    }

    /// The caller's template with the base key's CKA_DERIVE_TEMPLATE.
    static func mergedDeriveTemplate(_ template: Template, base: ObjectAttributes) throws(CKError) -> Template {
        try translating { () throws(KeychainError) in try NestedTemplate.merge(template, with: .deriveTemplate, of: base) }
    }

    /// Derived keys (one, or SP 800-108's several), stored together: if one cannot be stored,
    /// none is left.
    private func storeDerived(_ secrets: [SecureBytes], templates: [Template], base: ObjectAttributes, session: Session,
                              token: Token) throws(CKError) -> (key: CK_OBJECT_HANDLE, additional: [CK_OBJECT_HANDLE]) {
        let bySO = token.login == .securityOfficer
        var objects: [(ObjectAttributes, UniqueID)] = []
        for (secret, template) in zip(secrets, templates) {
            let id = try Self.newUniqueID()
            let object = try translating { () throws(KeychainError) in
                try KeyTransport.derivedObject(secret, template: template, base: base, uniqueID: id.text, bySecurityOfficer: bySO, policy: configuration.keyPolicy)
            }
            try checkWritable(token: object.isToken, private: object.isPrivate, session: session, login: token.login)
            objects.append((object, id))
        }
        var handles: [CK_OBJECT_HANDLE] = []
        do throws(CKError) {
            for (object, id) in objects { handles.append(try store(object, uid: id.bytes, session: session, token: token)) }
        } catch {
            for stored in handles { try? destroyStored(stored, token: token) }
            throw error
        }
        return (handles[0], Array(handles.dropFirst()))
    }

    /// CKM_HKDF_DATA's result: a data object (class CKO_DATA by default) whose CKA_VALUE is the
    /// output; CKA_VALUE_LEN, which asked for the length, is not a data object's attribute.
    private func storeDerivedData(_ value: SecureBytes, template: Template, session: Session, token: Token) throws(CKError) -> CK_OBJECT_HANDLE {
        if let given = template.first(where: { $0.type == .objectClass })?.value, AttributeValue.decodeULong(given) != ObjectClass.data.rawValue {
            throw CKError(CK_RV(CKR_TEMPLATE_INCONSISTENT), "CKM_HKDF_DATA makes a data object")
        }
        if template.contains(where: { $0.type == .value }) { throw CKError(CK_RV(CKR_TEMPLATE_INCONSISTENT), "CKA_VALUE comes from the derivation") }
        var full = template.filter { $0.type != .valueLength && $0.type != .objectClass }
        full.append((.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue)))
        full.append((.value, value.bytes))
        let id = try Self.newUniqueID()
        let bySO = token.login == .securityOfficer
        let object = try translating { () throws(KeychainError) in
            try ObjectTemplate.create(full, uniqueID: id.text, bySecurityOfficer: bySO, policy: configuration.keyPolicy)
        }
        return try store(object, uid: id.bytes, session: session, token: token)
    }

    /// CKM_ECDH1_DERIVE with CK_ECDH1_DERIVE_PARAMS: the peer's public value (raw, or as DER
    /// OCTET STRING), and the KDF (CKD_NULL or CKD_SHA*_KDF / CKD_SHA3_*_KDF, ANSI X9.63, with
    /// optional shared data). The shared secret comes from OpenSSL, or from the TPM for a
    /// CKA_KC_TPM key (P-256 and P-384 have cofactor 1: the cofactor variant is the same there).
    private static func ecdhSecret(kdf kdfType: CK_ULONG, sharedData: [UInt8], publicData: [UInt8], key ready: ReadyKey, cofactor: Bool,
                                   template: Template) throws(CKError) -> SecureBytes {
        guard let key = ready.publicForm else { throw CKError(CK_RV(CKR_KEY_TYPE_INCONSISTENT), "not an asymmetric key") }
        let kdf: Digest.Algorithm?
        switch kdfType {
        case UInt(CKD_NULL):
            guard sharedData.isEmpty else { throw Mechanisms.paramInvalid("CKD_NULL takes no shared data") }
            kdf = nil
        case UInt(CKD_SHA1_KDF): kdf = .sha1
        case UInt(CKD_SHA224_KDF): kdf = .sha224
        case UInt(CKD_SHA256_KDF): kdf = .sha256
        case UInt(CKD_SHA384_KDF): kdf = .sha384
        case UInt(CKD_SHA512_KDF): kdf = .sha512
        case 0xA: kdf = .sha3_224  // CKD_SHA3_224_KDF … CKD_SHA3_512_KDF (3.0)
        case 0xB: kdf = .sha3_256
        case 0xC: kdf = .sha3_384
        case 0xD: kdf = .sha3_512
        default: throw Mechanisms.paramInvalid("unsupported KDF \(kdfType)")
        }
        let peer: AsymmetricKey
        let point: [UInt8]
        do {
            switch key.kind {
            case .ec(let curve):
                point = KeyFactory.point(publicData, length: 1 + 2 * curve.coordinateLength)
                peer = try AsymmetricKey.ec(curve, point: point, scalar: nil)
            default:
                point = KeyFactory.point(publicData, length: key.kind.rawKeyLength ?? 0)
                peer = try AsymmetricKey.raw(key.kind, privateKey: nil, publicKey: point)
            }
        } catch {
            throw Mechanisms.paramInvalid("the peer's public value is not a point of this curve")
        }
        if let enclave = ready.enclave {
            let z = try translating { () throws(KeychainError) in try enclave.sharedSecret(peerPoint: point) }
            return try finishECDH(z, kdf: kdf, sharedData: sharedData, template: template)
        }
        let z: SecureBytes
        do { z = try key.sharedSecret(with: peer, cofactor: cofactor) } catch { throw CKError(CK_RV(CKR_KEY_SIZE_RANGE), "\(error)") }
        return try finishECDH(z, kdf: kdf, sharedData: sharedData, template: template)
    }

    /// ECDH's key from the shared secret `z`: CKD_NULL or the X9.63 KDF.
    private static func finishECDH(_ z: SecureBytes, kdf: Digest.Algorithm?, sharedData: [UInt8], template: Template) throws(CKError) -> SecureBytes {
        do {
            // CKD_NULL: the shared secret itself, cut from its leading end to the key's length
            // (as for CKM_DH_PKCS_DERIVE).
            guard let kdf else { return trailing(z, requestedLength(template)) }
            let wanted = requestedLength(template) ?? kdf.outputSize
            return try X963KDF.derive(kdf, secret: z, sharedInfo: sharedData, length: wanted)
        } catch {
            throw CKError(CK_RV(CKR_KEY_SIZE_RANGE), "\(error)")
        }
    }

    /// CKM_DH_PKCS_DERIVE: the parameter is the other party's public value y; PKCS #3's secret,
    /// as long as the prime, is cut to the new key's length from its leading end (PKCS#11 §2.5.6).
    private static func diffieHellmanSecret(_ parameter: MechanismParameter, key: AsymmetricKey, template: Template) throws(CKError) -> SecureBytes {
        guard case .bytes(let peer) = parameter, !peer.isEmpty else { throw Mechanisms.paramInvalid("the other party's public value is missing") }
        let secret: SecureBytes
        do { secret = try key.diffieHellmanSecret(peerPublicValue: peer) } catch let error as CryptoError where error.code == .invalidInput {
            throw Mechanisms.paramInvalid(error.reason)
        } catch {
            throw CKError(CK_RV(CKR_DEVICE_ERROR), "\(error)")
        }
        let keyType = template.first { $0.type == .keyType }.flatMap { AttributeValue.decodeULong($0.value) }.map(KeyType.init(rawValue:))
        return trailing(secret, requestedLength(template) ?? keyType?.blockCipher?.keyLength)
    }

    /// The last `wanted` bytes of `secret` (all of it when `wanted` is nil or not shorter).
    private static func trailing(_ secret: SecureBytes, _ wanted: Int?) -> SecureBytes {
        guard let wanted, wanted > 0, wanted < secret.count else { return secret }
        let trailing = SecureBytes(count: wanted)
        secret.withUnsafeBytes { source in
            trailing.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: source.suffix(wanted))) }
        }
        return trailing
    }

    /// CKM_AES_ECB_ENCRYPT_DATA and CKM_DES3_ECB_ENCRYPT_DATA (CK_KEY_DERIVATION_STRING_DATA),
    /// CKM_AES_CBC_ENCRYPT_DATA (CK_AES_CBC_ENCRYPT_DATA_PARAMS) and CKM_DES3_CBC_ENCRYPT_DATA
    /// (CK_DES_CBC_ENCRYPT_DATA_PARAMS): the data, whole blocks, encrypted under the base key; the
    /// new key takes the first CKA_VALUE_LEN bytes (or its type's length), which the data must cover.
    private static func encryptedData(_ parameter: MechanismParameter, mode: SymmetricCipher.Mode, algorithm: SymmetricCipher.Algorithm,
                                      key: SecureBytes, template: Template) throws(CKError) -> SecureBytes {
        guard case .derivationData(let iv, let secretData) = parameter, (mode == .cbc) == !iv.isEmpty else {
            throw Mechanisms.paramInvalid("an encrypt-data derivation needs its CK_KEY_DERIVATION_STRING_DATA or CBC parameters")
        }
        let dataLength = secretData.count
        guard dataLength > 0, dataLength % algorithm.blockSize == 0 else {
            throw Mechanisms.paramInvalid("the data to encrypt must be whole \(algorithm.blockSize)-byte blocks")
        }
        let keyType = template.first { $0.type == .keyType }.flatMap { AttributeValue.decodeULong($0.value) }.map(KeyType.init(rawValue:))
        if let wanted = requestedLength(template) ?? keyType?.blockCipher?.keyLength, wanted > dataLength {
            throw Mechanisms.paramInvalid("\(dataLength) bytes of data cannot make a \(wanted)-byte key")
        }
        do {
            // Straight into zeroising storage: no plain copy of the new key's value is left behind.
            let cipher = try SymmetricCipher(mode: mode, key: key, iv: iv, encrypting: true, algorithm: algorithm)
            let output = SecureBytes(count: cipher.oneShotBound(dataLength))
            let written = try secretData.withUnsafeBytes { input in try output.withUnsafeMutableBytes { try cipher.oneShot(input, into: $0) } }
            guard written == dataLength else { throw CryptoError(.library, "ECB/CBC output of \(written) bytes for \(dataLength)") }
            let value = SecureBytes(count: written)
            output.withUnsafeBytes { source in value.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: source.prefix(written))) } }
            return value
        } catch {
            throw CKError(CK_RV(CKR_DEVICE_ERROR), "\(error)")
        }
    }

    /// CKA_VALUE_LEN of a template, when it has one.
    static func requestedLength(_ template: Template) -> Int? {
        template.first { $0.type == .valueLength }.flatMap { AttributeValue.decodeULong($0.value) }.map { Int(clamping: $0) }
    }

    /// The length a derive template asks for: CKA_VALUE_LEN, or the one length of its key type.
    static func templateLength(_ template: Template) -> Int? {
        if let given = requestedLength(template) { return given }
        let keyType = template.first { $0.type == .keyType }.flatMap { AttributeValue.decodeULong($0.value) }.map(KeyType.init(rawValue:))
        if let fixed = keyType?.blockCipher?.keyLength { return fixed }
        if let lengths = keyType?.secretLengths, lengths.count == 1 { return lengths[0] }
        return nil
    }

    /// CKM_HKDF_DERIVE / CKM_HKDF_DATA: extract (salt: none, data or a key's value), expand, or both.
    /// Extract alone gives the PRK (HashLen bytes, or fewer when the template asks).
    func hkdfSecret(_ parameter: MechanismParameter, base: SecureBytes, template: Template, session: Session, token: Token) throws(CKError) -> SecureBytes {
        guard case .hkdf(let extract, let expand, let prf, let saltType, let salt, let saltKey, let info) = parameter else {
            throw Mechanisms.paramInvalid("HKDF needs CK_HKDF_PARAMS")
        }
        guard extract || expand else { throw Mechanisms.paramInvalid("HKDF must extract, expand or both") }
        guard let digest = Mechanisms.parameterDigest(prf) else { throw Mechanisms.paramInvalid("unsupported HKDF hash mechanism 0x\(String(prf, radix: 16))") }
        // PKCS#11 3.0's HKDF text takes the length from the template and says nothing of a
        // template without one: then the output is HashLen bytes, as Kryoptic derives.
        let wanted = Self.templateLength(template) ?? digest.outputSize
        guard wanted >= 1 else { throw CKError(CK_RV(CKR_TEMPLATE_INCONSISTENT), "CKA_VALUE_LEN must be at least 1") }
        if !expand, wanted > digest.outputSize {
            throw CKError(CK_RV(CKR_TEMPLATE_INCONSISTENT), "HKDF-Extract gives \(digest.outputSize) bytes with this hash")
        }
        if expand, wanted > 255 * digest.outputSize {
            throw CKError(CK_RV(CKR_KEY_SIZE_RANGE), "HKDF-Expand gives at most \(255 * digest.outputSize) bytes with this hash")
        }
        do {
            var prk = base
            if extract {
                let saltBytes: SecureBytes
                switch saltType {
                case 1:  // CKF_HKDF_SALT_NULL
                    guard salt.isEmpty else { throw Mechanisms.paramInvalid("CKF_HKDF_SALT_NULL takes no salt") }
                    saltBytes = SecureBytes([])
                case 2:  // CKF_HKDF_SALT_DATA
                    guard !salt.isEmpty else { throw Mechanisms.paramInvalid("CKF_HKDF_SALT_DATA needs pSalt") }
                    saltBytes = SecureBytes(salt)
                case 4:  // CKF_HKDF_SALT_KEY
                    saltBytes = try hkdfSaltKey(saltKey, session: session, token: token)
                default:
                    throw Mechanisms.paramInvalid("ulSaltType must be CKF_HKDF_SALT_NULL, _DATA or _KEY")
                }
                prk = try saltBytes.withUnsafeBytes { s in try HKDF.extract(digest, salt: s, inputKey: base) }
            }
            guard expand else { return Self.leading(prk, wanted) }
            return try HKDF.expand(digest, pseudorandomKey: prk, info: info, length: wanted)
        } catch let error as CKError {
            throw error
        } catch {
            throw CKError(CK_RV(CKR_DEVICE_ERROR), "\(error)")
        }
    }

    /// HKDF's input key material: a secret key with CKA_DERIVE (CKK_HKDF or CKK_GENERIC_SECRET),
    /// or — PKCS#11 3.0 §2.43's exception — a data object's CKA_VALUE, when the derivation
    /// extracts with a salt (a data object's value is readable anyway: nothing is revealed).
    func hkdfInput(_ handle: CK_OBJECT_HANDLE, base: ObjectAttributes, parameter: MechanismParameter, session: Session, token: Token,
                   mechanism: Mechanism) throws(CKError) -> SecureBytes {
        guard base.objectClass == .data else {
            return try secretKey(handle, session: session, token: token, usage: .derive, mechanism: mechanism)
        }
        guard case .hkdf(true, _, _, let saltType, _, _, _) = parameter, saltType == 2 || saltType == 4 else {
            throw Mechanisms.paramInvalid("a data object is HKDF input only to extract with a salt (CKF_HKDF_SALT_DATA or _KEY)")
        }
        guard !base.hasSealedSecrets, let value = base[.value], !value.isEmpty else {
            throw CKError(CK_RV(CKR_KEY_TYPE_INCONSISTENT), "this data object's value cannot be HKDF input")
        }
        return SecureBytes(value)
    }

    /// CKF_HKDF_SALT_KEY: the salt is a secret key's value (CKK_HKDF or CKK_GENERIC_SECRET); it is
    /// not the key being used, so CKA_DERIVE is not asked of it.
    private func hkdfSaltKey(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token) throws(CKError) -> SecureBytes {
        var attributes = try keyAttributes(handle, session: session, token: token)
        defer { attributes.wipeValues() }
        guard attributes.objectClass == .secretKey, let keyType = attributes.keyType, keyType == .hkdf || keyType == .genericSecret else {
            throw Mechanisms.paramInvalid("the HKDF salt key must be a CKK_HKDF or CKK_GENERIC_SECRET key")
        }
        guard !attributes.hasSealedSecrets, let value = attributes[.value], !value.isEmpty else {
            throw Mechanisms.paramInvalid("the HKDF salt key's value cannot be used here")
        }
        return SecureBytes(value)
    }

    /// The first `count` bytes of `secret`.
    static func leading(_ secret: SecureBytes, _ count: Int) -> SecureBytes {
        guard count < secret.count else { return secret }
        let result = SecureBytes(count: count)
        secret.withUnsafeBytes { source in result.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: source.prefix(count))) } }
        return result
    }

    /// SP 800-108: the PRF (an HMAC, or AES/triple-DES CMAC) must fit the base key's type
    /// (CKR_KEY_TYPE_INCONSISTENT otherwise); the data parameters must fit the mode; the output
    /// is split between the new key and the additional keys, in order.
    func sp800108Secrets(_ parameter: MechanismParameter, mode: SP800108.Mode, base: SecureBytes, baseType: KeyType?,
                         templates: [Template]) throws(CKError) -> [SecureBytes] {
        guard case .sp800108(let prfType, let fields, let iv, _) = parameter else { throw Mechanisms.paramInvalid("SP 800-108 needs its KDF parameters") }
        let prf: SP800108.PRF
        switch prfType {
        case CK_MECHANISM_TYPE(CKM_AES_CMAC):
            guard baseType == .aes else { throw CKError(CK_RV(CKR_KEY_TYPE_INCONSISTENT), "AES-CMAC needs an AES base key") }
            prf = .cmac(.aes)
        case CK_MECHANISM_TYPE(CKM_DES3_CMAC) where configuration.keyPolicy.allowsLegacyAlgorithms:
            guard baseType == .des2 || baseType == .des3 else { throw CKError(CK_RV(CKR_KEY_TYPE_INCONSISTENT), "DES3-CMAC needs a DES3 base key") }
            prf = .cmac(.tripleDES)
        default:
            guard let entry = Mechanisms.table(for: configuration.keyPolicy)[prfType], case .hmac(let digest)? = entry.mac, !entry.macLengthIsParameter else {
                throw Mechanisms.paramInvalid("unsupported SP 800-108 PRF 0x\(String(prfType, radix: 16))")
            }
            guard let baseType, entry.keyTypes.contains(baseType) else {
                throw CKError(CK_RV(CKR_KEY_TYPE_INCONSISTENT), "this HMAC needs a generic secret or its own HMAC key type")
            }
            prf = .hmac(digest)
        }
        let iterations = fields.filter { if case .iteration = $0 { return true } else { return false } }
        let counters = fields.filter { if case .counter = $0 { return true } else { return false } }
        let lengths = fields.filter { if case .length = $0 { return true } else { return false } }
        guard iterations.count == 1, lengths.count <= 1 else {
            throw Mechanisms.paramInvalid("SP 800-108 takes one iteration variable and at most one DKM length")
        }
        switch mode {
        case .counter:
            guard case .iteration(_?)? = iterations.first, counters.isEmpty else {
                throw Mechanisms.paramInvalid("counter mode: the iteration variable is the counter (with its format); no optional counter")
            }
        case .feedback, .doublePipeline:
            guard case .iteration(nil)? = iterations.first, counters.count <= 1 else {
                throw Mechanisms.paramInvalid("feedback and double-pipeline modes: the iteration variable has no format; at most one optional counter")
            }
        }
        if mode != .feedback, !iv.isEmpty { throw Mechanisms.paramInvalid("only feedback mode takes an IV") }
        var sizes: [Int] = []
        for template in templates {
            guard let size = Self.templateLength(template) else {
                throw CKError(CK_RV(CKR_TEMPLATE_INCOMPLETE), "each derived key needs CKA_VALUE_LEN (or a key type of one length)")
            }
            guard size >= 1, size <= 4096 else { throw CKError(CK_RV(CKR_KEY_SIZE_RANGE), "a derived key of \(size) bytes") }
            sizes.append(size)
        }
        do {
            return try SP800108.derive(mode, prf: prf, key: base, fields: fields, iv: iv, keyLengths: sizes)
        } catch let error as CryptoError where error.code == .limitExceeded {
            throw CKError(CK_RV(CKR_KEY_SIZE_RANGE), error.reason)
        } catch {
            throw CKError(CK_RV(CKR_DEVICE_ERROR), "\(error)")
        }
    }

    /// C_GenerateKey with CKM_PKCS5_PBKD2: PBKDF2 over the parameter's password; the key type
    /// defaults to a generic secret, its length is CKA_VALUE_LEN (or its type's one length).
    func passwordDerivedKey(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism, template: Template) throws(CKError) -> CK_OBJECT_HANDLE {
        try withSession(handle) { session, token throws(CKError) in
            guard case .pbkdf2(let saltSource, let salt, let iterations, let prf, let password) = mechanism.parameter else {
                throw Mechanisms.paramInvalid("CKM_PKCS5_PBKD2 needs CK_PKCS5_PBKD2_PARAMS2")
            }
            guard saltSource == 1 else { throw Mechanisms.paramInvalid("the PBKDF2 salt source must be CKZ_SALT_SPECIFIED") }
            let prfs: [CK_ULONG: Digest.Algorithm] = [1: .sha1, 3: .sha224, 4: .sha256, 5: .sha384, 6: .sha512]
            guard let digest = prfs[prf] else { throw Mechanisms.paramInvalid("unsupported PBKDF2 PRF \(prf) (HMAC-SHA-1, -224, -256, -384, -512)") }
            guard iterations >= 1, iterations <= CK_ULONG(PBKDF2.maximumIterations) else {
                throw Mechanisms.paramInvalid("PBKDF2 takes 1 to \(PBKDF2.maximumIterations) iterations")
            }
            var full = template
            if !full.contains(where: { $0.type == .keyType }) { full.append((.keyType, AttributeValue.ulong(KeyType.genericSecret.rawValue))) }
            guard let length = Self.templateLength(full) else { throw CKError(CK_RV(CKR_TEMPLATE_INCOMPLETE), "CKA_VALUE_LEN is required") }
            guard length >= 1, length <= 512 else { throw CKError(CK_RV(CKR_KEY_SIZE_RANGE), "no \(length)-byte key from PBKDF2") }
            // The whole cost of the call: iterations for each output block of the hash.
            guard Int(iterations) * ((length + digest.outputSize - 1) / digest.outputSize) <= PBKDF2.maximumWork else {
                throw Mechanisms.paramInvalid("PBKDF2: iterations × output blocks above \(PBKDF2.maximumWork)")
            }
            let secret: SecureBytes
            do {
                secret = try password.withUnsafeBytes { try PBKDF2.derive(digest, password: $0, salt: salt, iterations: Int(iterations), length: length) }
            } catch {
                throw CKError(CK_RV(CKR_DEVICE_ERROR), "\(error)")
            }
            let id = try Self.newUniqueID()
            let bySO = token.login == .securityOfficer
            var object = try translating { () throws(KeychainError) in
                try KeyTransport.derivedObject(secret, template: full, base: ObjectAttributes(), uniqueID: id.text, bySecurityOfficer: bySO,
                                               policy: configuration.keyPolicy)
            }
            // Made by C_GenerateKey on the token: CKA_LOCAL (PKCS#11 §4.7: "generated locally …
            // with a C_GenerateKey or C_GenerateKeyPair call"), its mechanism, and the history
            // flags of a key that never existed outside.
            object[.local] = AttributeValue.bool(true)
            object[.keyGenMechanism] = AttributeValue.ulong(UInt(CKM_PKCS5_PBKD2))
            object[.alwaysSensitive] = AttributeValue.bool(object.bool(.sensitive))
            object[.neverExtractable] = AttributeValue.bool(!object.bool(.extractable))
            return try store(object, uid: id.bytes, session: session, token: token)
        }
    }
}
