import CPKCS11
import KeychainCore
import KeychainCrypto

/// PKCS#11 §5.14: C_WrapKey, C_UnwrapKey and C_DeriveKey.
extension ModuleState {
    /// How a wrapping mechanism encrypts key material with a wrapping key.
    private enum Wrapper {
        /// AES key wrap, with the caller's initial value or the RFC's default (nil).
        case aes(KeyWrap.Mode, SecureBytes, iv: [UInt8]?)
        case rsa(AsymmetricKey, RSACipher.Padding)
        /// CKM_RSA_AES_KEY_WRAP with the one-time AES key's length in bytes.
        case rsaAES(AsymmetricKey, RSACipher.Padding, aesKeyLength: Int)
        /// A block cipher mode (ECB, CBC, CBC with padding) of AES or DES.
        case block(SymmetricCipher.Mode, SymmetricCipher.Algorithm, SecureBytes, iv: [UInt8])
    }

    /// The wrapping (or unwrapping) key's problems carry their own codes:
    /// CKR_WRAPPING_KEY_HANDLE_INVALID, …_TYPE_INCONSISTENT, …_SIZE_RANGE (and UNWRAPPING_…).
    private func wrapper(_ mechanism: CallerMechanism, key: CK_OBJECT_HANDLE, wrapping: Bool, session: Session, token: Token) throws(CKError) -> Wrapper {
        do {
            return try wrapperKey(mechanism, key: key, wrapping: wrapping, session: session, token: token)
        } catch {
            let renamed: [CK_RV: UInt] = wrapping
                ? [CK_RV(CKR_KEY_HANDLE_INVALID): CKR_WRAPPING_KEY_HANDLE_INVALID, CK_RV(CKR_KEY_TYPE_INCONSISTENT): CKR_WRAPPING_KEY_TYPE_INCONSISTENT,
                   CK_RV(CKR_KEY_SIZE_RANGE): CKR_WRAPPING_KEY_SIZE_RANGE]
                : [CK_RV(CKR_KEY_HANDLE_INVALID): CKR_UNWRAPPING_KEY_HANDLE_INVALID, CK_RV(CKR_KEY_TYPE_INCONSISTENT): CKR_UNWRAPPING_KEY_TYPE_INCONSISTENT,
                   CK_RV(CKR_KEY_SIZE_RANGE): CKR_UNWRAPPING_KEY_SIZE_RANGE]
            if let code = renamed[error.rv] { throw CKError(CK_RV(code), error.reason) }
            throw error
        }
    }

    private func wrapperKey(_ mechanism: CallerMechanism, key: CK_OBJECT_HANDLE, wrapping: Bool, session: Session, token: Token) throws(CKError) -> Wrapper {
        let entry = try self.mechanism(mechanism.type)
        guard entry.supports(wrapping ? CKF_WRAP : CKF_UNWRAP) else {
            throw CKError(CK_RV(CKR_MECHANISM_INVALID), "mechanism 0x\(String(mechanism.type, radix: 16)) cannot \(wrapping ? "wrap" : "unwrap")")
        }
        let usage: AttributeType = wrapping ? .wrap : .unwrap
        if let mode = entry.keyWrap {
            // PKCS#11 §2.14.3: an optional initial value, 8 bytes for KW, 4 for KWP.
            let iv: [UInt8]? = mechanism.parameter.isEmpty ? nil : try mechanism.parameter.flatBytes(count: KeyWrap.ivLength(mode), what: "key wrap IV")
            return .aes(mode, try secretKey(key, session: session, token: token, usage: usage, mechanism: entry), iv: iv)
        }
        if entry.wrapsWithRSAAndAES {
            guard case .rsaAESKeyWrap(let bits, let oaep) = mechanism.parameter else {
                throw Mechanisms.paramInvalid("CKM_RSA_AES_KEY_WRAP needs CK_RSA_AES_KEY_WRAP_PARAMS")
            }
            guard [128, 192, 256].contains(bits) else { throw Mechanisms.paramInvalid("ulAESKeyBits must be 128, 192 or 256") }
            let padding = try Mechanisms.oaepPadding(oaep)
            if !wrapping { try refuseAlwaysAuthenticate(key, session: session, token: token, function: "C_UnwrapKey") }
            let rsa = try asymmetricKey(key, session: session, token: token, objectClass: wrapping ? .publicKey : .privateKey, usage: usage, mechanism: entry)
            return .rsaAES(rsa, padding, aesKeyLength: Int(bits / 8))
        }
        if entry.wrapsWithBlockCipher, let makeSpec = entry.cipher, case .symmetric(let mode, let iv, _) = try makeSpec(mechanism.parameter) {
            return .block(mode, entry.blockCipher, try secretKey(key, session: session, token: token, usage: usage, mechanism: entry), iv: iv)
        }
        guard let makeSpec = entry.cipher, case .rsa(let padding) = try makeSpec(mechanism.parameter) else {
            throw CKError(CK_RV(CKR_MECHANISM_INVALID), "not a wrapping mechanism")
        }
        if !wrapping { try refuseAlwaysAuthenticate(key, session: session, token: token, function: "C_UnwrapKey") }
        let rsa = try asymmetricKey(key, session: session, token: token, objectClass: wrapping ? .publicKey : .privateKey, usage: usage, mechanism: entry)
        return .rsa(rsa, padding)
    }

    func wrapKey(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism, wrappingKey: CK_OBJECT_HANDLE, key: CK_OBJECT_HANDLE,
                 output: CallerOutput<CK_BYTE>) throws(CKError) {
        try withSession(handle) { session, token throws(CKError) in
            let wrapper = try wrapper(mechanism, key: wrappingKey, wrapping: true, session: session, token: token)
            let target = try keyAttributes(key, session: session, token: token)
            let wrapping = try keyAttributes(wrappingKey, session: session, token: token)
            // PKCS#11 C_WrapKey: CKA_EXTRACTABLE false is CKR_KEY_UNEXTRACTABLE, before any
            // other reason not to wrap (those are CKR_KEY_NOT_WRAPPABLE).
            guard target.objectClass != .secretKey && target.objectClass != .privateKey || target.bool(.extractable) else {
                throw CKError(CK_RV(CKR_KEY_UNEXTRACTABLE), "the key is not extractable (CKA_EXTRACTABLE = FALSE)")
            }
            guard !target.hasSealedSecrets else {
                throw CKError(CK_RV(CKR_KEY_NOT_WRAPPABLE), "a key sealed by its application password is not wrapped")
            }
            if target.bool(.wrapWithTrusted) {
                guard wrapping.bool(.trusted) else { throw CKError(CK_RV(CKR_KEY_NOT_WRAPPABLE), "this key may only be wrapped by a trusted key") }
            }
            if target.bool(.sensitive), configuration.sensitiveWrapping == .trusted {
                guard wrapping.bool(.trusted) else {
                    throw CKError(CK_RV(CKR_KEY_NOT_WRAPPABLE), "a sensitive key is wrapped only by a key the SO marked CKA_TRUSTED (sensitive_wrapping = trusted)")
                }
                if wrapping.objectClass == .secretKey, !wrapping.bool(.sensitive) || wrapping.bool(.encrypt) || wrapping.bool(.decrypt) {
                    throw CKError(CK_RV(CKR_KEY_NOT_WRAPPABLE), "a trusted wrapping key must be sensitive and must not encrypt or decrypt data")
                }
            }
            guard NestedTemplate.object(target, matches: .wrapTemplate, of: wrapping) else {
                throw CKError(CK_RV(CKR_KEY_NOT_WRAPPABLE), "the key does not match the wrapping key's CKA_WRAP_TEMPLATE")
            }
            let material = try translating { () throws(KeychainError) in try KeyTransport.material(of: target) }
            let wrapped: [UInt8]
            switch wrapper {
            case .aes(let mode, let wrappingSecret, let iv):
                do { wrapped = try KeyWrap.wrap(mode, key: wrappingSecret, material: material, iv: iv) } catch {
                    throw CKError(CK_RV(CKR_KEY_SIZE_RANGE), "AES key wrap cannot wrap \(material.count) bytes with this mechanism")
                }
            case .block(let mode, let algorithm, let secret, let iv):
                guard target.objectClass == .secretKey || mode == .cbcPad else {
                    throw CKError(CK_RV(CKR_KEY_NOT_WRAPPABLE), "ECB and CBC wrap secret keys only (CBC_PAD wraps private keys too)")
                }
                var input = material.bytes
                defer { wipe(&input) }
                // §2.10: ECB and CBC pad the value with zero bytes to whole blocks.
                if mode != .cbcPad, input.count % algorithm.blockSize != 0 {
                    input += [UInt8](repeating: 0, count: algorithm.blockSize - input.count % algorithm.blockSize)
                }
                wrapped = try Self.blockCipher(mode, algorithm, key: secret, iv: iv, input: input, encrypting: true)
            case .rsa(let rsa, let padding):
                guard target.objectClass == .secretKey else { throw CKError(CK_RV(CKR_KEY_NOT_WRAPPABLE), "RSA wraps secret keys only") }
                wrapped = try Self.rsa(material.bytes, key: rsa, padding: padding, encrypting: true, modulusBytes: (rsa.bits + 7) / 8)
            case .rsaAES(let rsa, let padding, let aesKeyLength):
                // PKCS#11 §2.1.21: RSA-OAEP(K) ‖ AES-KWP(K, key material), K fresh and forgotten.
                var fresh: [UInt8]
                do { fresh = try Random.bytes(aesKeyLength) } catch { throw CKError(CK_RV(CKR_DEVICE_ERROR), "random generator failed") }
                let oneTime = SecureBytes(fresh)
                wipe(&fresh)
                var oneTimeBytes = oneTime.bytes
                defer { wipe(&oneTimeBytes) }
                let header = try Self.rsa(oneTimeBytes, key: rsa, padding: padding, encrypting: true, modulusBytes: (rsa.bits + 7) / 8)
                do { wrapped = header + (try KeyWrap.wrap(.kwp, key: oneTime, material: material)) } catch {
                    throw CKError(CK_RV(CKR_KEY_SIZE_RANGE), "AES key wrap cannot wrap \(material.count) bytes")
                }
            }
            try output.deliver(wrapped)
        }
    }

    func unwrapKey(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism, unwrappingKey: CK_OBJECT_HANDLE, wrapped: UnsafeRawBufferPointer,
                   template: Template) throws(CKError) -> CK_OBJECT_HANDLE {
        try withSession(handle) { session, token throws(CKError) in
            let wrapper = try wrapper(mechanism, key: unwrappingKey, wrapping: false, session: session, token: token)
            let material: SecureBytes
            var zeroPadded = false
            switch wrapper {
            case .block(let mode, let algorithm, let secret, let iv):
                guard wrapped.count >= algorithm.blockSize, wrapped.count % algorithm.blockSize == 0,
                      wrapped.count <= AttributeTable.maximumValueLength + algorithm.blockSize else {
                    throw CKError(CK_RV(CKR_WRAPPED_KEY_LEN_RANGE), "wrapped key length")
                }
                var plain = try Self.blockCipher(mode, algorithm, key: secret, iv: iv, input: Array(wrapped), encrypting: false)
                material = SecureBytes(plain)
                wipe(&plain)
                zeroPadded = mode != .cbcPad
            case .aes(let mode, let secret, let iv):
                guard wrapped.count >= 16, wrapped.count % 8 == 0, wrapped.count <= AttributeTable.maximumValueLength + 16 else {
                    throw CKError(CK_RV(CKR_WRAPPED_KEY_LEN_RANGE), "wrapped key length")
                }
                do { material = try KeyWrap.unwrap(mode, key: secret, wrapped: Array(wrapped), iv: iv) } catch {
                    throw CKError(CK_RV(CKR_WRAPPED_KEY_INVALID), "the wrapped key does not verify")
                }
            case .rsa(let rsa, let padding):
                let modulusBytes = (rsa.bits + 7) / 8
                guard wrapped.count == modulusBytes else { throw CKError(CK_RV(CKR_WRAPPED_KEY_LEN_RANGE), "wrapped key length") }
                do { material = try RSACipher.decrypt(Array(wrapped), key: rsa, padding: padding) } catch {
                    throw CKError(CK_RV(CKR_WRAPPED_KEY_INVALID), "the wrapped key does not decrypt")
                }
            case .rsaAES(let rsa, let padding, let aesKeyLength):
                let modulusBytes = (rsa.bits + 7) / 8
                let body = wrapped.count - modulusBytes
                guard body >= 16, body % 8 == 0, body <= AttributeTable.maximumValueLength + 16 else {
                    throw CKError(CK_RV(CKR_WRAPPED_KEY_LEN_RANGE), "wrapped key length")
                }
                do {
                    let oneTime = try RSACipher.decrypt(Array(wrapped.prefix(modulusBytes)), key: rsa, padding: padding)
                    guard oneTime.count == aesKeyLength else { throw CryptoError(.invalidInput, "the one-time key has the wrong length") }
                    material = try KeyWrap.unwrap(.kwp, key: oneTime, wrapped: Array(wrapped.suffix(body)))
                } catch {
                    throw CKError(CK_RV(CKR_WRAPPED_KEY_INVALID), "the wrapped key does not decrypt")
                }
            }
            let id = try Self.newUniqueID()
            let bySO = token.login == .securityOfficer
            let unwrapping = try keyAttributes(unwrappingKey, session: session, token: token)
            if try mayHoldSensitiveKeys(unwrapping, token: token),
               template.contains(where: { $0.type == .sensitive && AttributeValue.decodeBool($0.value) == false }) {
                throw CKError(CK_RV(CKR_TEMPLATE_INCONSISTENT),
                              "a key unwrapped with a key that may wrap sensitive keys (CKA_TRUSTED) is sensitive: CKA_SENSITIVE = FALSE is refused")
            }
            let object = try translating { () throws(KeychainError) in
                let full = try NestedTemplate.merge(template, with: .unwrapTemplate, of: unwrapping)
                return try KeyTransport.unwrappedObject(material, template: full, uniqueID: id.text, bySecurityOfficer: bySO, policy: configuration.keyPolicy,
                                                        zeroPadded: zeroPadded)
            }
            return try store(object, uid: id.bytes, session: session, token: token)
        }
    }

    /// One whole block-cipher pass for C_WrapKey / C_UnwrapKey. A CBC_PAD blob whose padding
    /// does not check is CKR_WRAPPED_KEY_INVALID.
    private static func blockCipher(_ mode: SymmetricCipher.Mode, _ algorithm: SymmetricCipher.Algorithm, key: SecureBytes, iv: [UInt8],
                                    input: [UInt8], encrypting: Bool) throws(CKError) -> [UInt8] {
        do {
            let cipher = try SymmetricCipher(mode: mode, key: key, iv: iv, encrypting: encrypting, algorithm: algorithm)
            var head = try input.withUnsafeBytes { try cipher.update($0) }
            var tail = try cipher.finish()
            defer { wipe(&head); wipe(&tail) }
            return head + tail
        } catch {
            throw encrypting ? CKError(CK_RV(CKR_DEVICE_ERROR), "the block cipher failed") : CKError(CK_RV(CKR_WRAPPED_KEY_INVALID), "the wrapped key does not decrypt")
        }
    }

    /// Whether blobs this unwrapping key opens may hold sensitive keys: under
    /// `sensitive_wrapping = trusted` only trusted keys wrap those, so a trusted secret key, or an
    /// RSA private key whose public half is a trusted public key (same modulus), may.
    private func mayHoldSensitiveKeys(_ unwrapping: ObjectAttributes, token: Token) throws(CKError) -> Bool {
        guard configuration.sensitiveWrapping == .trusted else { return false }
        if unwrapping.objectClass == .secretKey { return unwrapping.bool(.trusted) }
        guard unwrapping.objectClass == .privateKey, let modulus = unwrapping[.modulus] else { return false }
        let trustedPublic: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.publicKey.rawValue)), (.trusted, AttributeValue.bool(true)),
                                       (.modulus, modulus)]
        let found = try translating { () throws(KeychainError) in try token.keychain.find(trustedPublic, master: token.userMaster) }
        return !found.isEmpty
    }

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
                let key = try asymmetricKey(baseKey, session: session, token: token, objectClass: .privateKey, usage: .derive, mechanism: entry)
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
    /// optional shared data).
    private static func ecdhSecret(kdf kdfType: CK_ULONG, sharedData: [UInt8], publicData: [UInt8], key: AsymmetricKey, cofactor: Bool,
                                   template: Template) throws(CKError) -> SecureBytes {
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
        do {
            switch key.kind {
            case .ec(let curve):
                peer = try AsymmetricKey.ec(curve, point: KeyFactory.point(publicData, length: 1 + 2 * curve.coordinateLength), scalar: nil)
            default:
                peer = try AsymmetricKey.raw(key.kind, privateKey: nil, publicKey: KeyFactory.point(publicData, length: key.kind.rawKeyLength ?? 0))
            }
        } catch {
            throw Mechanisms.paramInvalid("the peer's public value is not a point of this curve")
        }
        do {
            let z = try key.sharedSecret(with: peer, cofactor: cofactor)
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

    /// Single-call functions have no moment for C_Login(CKU_CONTEXT_SPECIFIC): a key that needs
    /// the PIN at every use cannot serve them.
    private func refuseAlwaysAuthenticate(_ key: CK_OBJECT_HANDLE, session: Session, token: Token, function: String) throws(CKError) {
        if try alwaysAuthenticates(key, session: session, token: token) {
            throw CKError(CK_RV(CKR_KEY_FUNCTION_NOT_PERMITTED), "\(function) cannot take the per-use PIN that CKA_ALWAYS_AUTHENTICATE asks for")
        }
    }
}
