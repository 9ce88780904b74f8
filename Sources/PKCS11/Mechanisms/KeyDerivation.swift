import CPKCS11
import KeychainCore
import KeychainCrypto

/// The PKCS#11 3.0 key derivation functions: HKDF (§2.43), SP 800-108 (§2.44) and PBKDF2
/// through C_GenerateKey (§2.63 of 2.40 current mechanisms).
extension ModuleState {
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
