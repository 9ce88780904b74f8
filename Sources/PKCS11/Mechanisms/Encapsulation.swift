import CPKCS11
import KeychainCore
import KeychainCrypto

/// PKCS#11 3.2 §5.18 key encapsulation: C_EncapsulateKey and C_DecapsulateKey (CKM_ML_KEM).
extension ModuleState {
    /// C_EncapsulateKey: a ciphertext for `publicKey` into `ciphertext` (call-twice convention:
    /// a length query makes no key and returns nil) and a new secret key from `template`.
    func encapsulateKey(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism, publicKey: CK_OBJECT_HANDLE, template: Template,
                        ciphertext: CallerOutput<CK_BYTE>) throws(CKError) -> CK_OBJECT_HANDLE? {
        try withSession(handle) { session, token throws(CKError) -> CK_OBJECT_HANDLE? in
            let entry = try kemMechanism(mechanism, flag: CKF_ENCAPSULATE)
            let key = try latticeKey(publicKey, session: session, token: token, objectClass: .publicKey, usage: .encapsulate, mechanism: entry)
            guard !key.parameterSet.isSignature else { throw CKError(CK_RV(CKR_KEY_TYPE_INCONSISTENT), "not an ML-KEM key") }
            // The length (and a buffer too small) first: no key is made for either.
            guard try ciphertext.reserve(key.parameterSet.ciphertextLength) else { return nil }
            let encapsulated: (ciphertext: [UInt8], sharedSecret: SecureBytes)
            do throws(CryptoError) { encapsulated = try key.encapsulate() } catch { throw CKError(CK_RV(CKR_DEVICE_ERROR), error.reason) }
            let newKey = try storeSharedSecret(encapsulated.sharedSecret, template: template, session: session, token: token)
            do throws(CKError) {
                _ = try ciphertext.deliver(encapsulated.ciphertext)
            } catch {
                try? destroyStored(newKey, token: token)
                throw error
            }
            return newKey
        }
    }

    /// C_DecapsulateKey: the secret key `ciphertext` carries, made from `template`. An altered
    /// ciphertext of the right length gives ML-KEM's implicit-rejection secret (FIPS 203), not an
    /// error; a ciphertext of another length is CKR_WRAPPED_KEY_LEN_RANGE.
    func decapsulateKey(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism, privateKey: CK_OBJECT_HANDLE, template: Template,
                        ciphertext: UnsafeRawBufferPointer) throws(CKError) -> CK_OBJECT_HANDLE {
        try withSession(handle) { session, token throws(CKError) in
            let entry = try kemMechanism(mechanism, flag: CKF_DECAPSULATE)
            let key = try latticeKey(privateKey, session: session, token: token, objectClass: .privateKey, usage: .decapsulate, mechanism: entry)
            guard !key.parameterSet.isSignature else { throw CKError(CK_RV(CKR_KEY_TYPE_INCONSISTENT), "not an ML-KEM key") }
            try refuseAlwaysAuthenticate(privateKey, session: session, token: token, function: "C_DecapsulateKey")
            guard ciphertext.count == key.parameterSet.ciphertextLength else {
                throw CKError(CK_RV(CKR_WRAPPED_KEY_LEN_RANGE), "a \(key.parameterSet.name) ciphertext has \(key.parameterSet.ciphertextLength) bytes, not \(ciphertext.count)")
            }
            let secret: SecureBytes
            do throws(CryptoError) { secret = try key.decapsulate(ciphertext) } catch { throw CKError(CK_RV(CKR_DEVICE_ERROR), error.reason) }
            return try storeSharedSecret(secret, template: template, session: session, token: token)
        }
    }

    private func kemMechanism(_ mechanism: CallerMechanism, flag: UInt) throws(CKError) -> Mechanism {
        let entry = try self.mechanism(mechanism.type)
        guard entry.encapsulates, entry.supports(flag) else {
            throw CKError(CK_RV(CKR_MECHANISM_INVALID), "mechanism 0x\(String(mechanism.type, radix: 16)) is not a key encapsulation mechanism")
        }
        guard case .none = mechanism.parameter else { throw Mechanisms.paramInvalid("CKM_ML_KEM takes no parameter") }
        return entry
    }

    private func storeSharedSecret(_ secret: SecureBytes, template: Template, session: Session, token: Token) throws(CKError) -> CK_OBJECT_HANDLE {
        let id = try Self.newUniqueID()
        var object = try translating { () throws(KeychainError) in
            try KeyTransport.encapsulatedObject(secret, template: template, uniqueID: id.text, bySecurityOfficer: token.login == .securityOfficer,
                                                policy: configuration.keyPolicy)
        }
        guard object.isToken else {
            // A session object keeps these very buffers (`store` wipes them if it refuses).
            return try store(object, uid: id.bytes, session: session, token: token)
        }
        defer { object.wipeValues() }
        return try store(object, uid: id.bytes, session: session, token: token)
    }
}
