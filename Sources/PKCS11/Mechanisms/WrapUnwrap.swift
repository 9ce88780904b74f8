import CPKCS11
import KeychainCore
import KeychainCrypto

/// C_WrapKey and C_UnwrapKey (PKCS#11 "Key management functions"); C_DeriveKey is in DeriveKey.swift.
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
                do { fresh = try Random.secretBytes(aesKeyLength) } catch { throw CKError(CK_RV(CKR_DEVICE_ERROR), "random generator failed") }
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

    /// Single-call functions have no moment for C_Login(CKU_CONTEXT_SPECIFIC): a key that needs
    /// the PIN at every use cannot serve them.
    func refuseAlwaysAuthenticate(_ key: CK_OBJECT_HANDLE, session: Session, token: Token, function: String) throws(CKError) {
        if try alwaysAuthenticates(key, session: session, token: token) {
            throw CKError(CK_RV(CKR_KEY_FUNCTION_NOT_PERMITTED), "\(function) cannot take the per-use PIN that CKA_ALWAYS_AUTHENTICATE asks for")
        }
    }
}
