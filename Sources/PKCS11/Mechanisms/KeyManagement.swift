import CPKCS11
import KeychainCore
import KeychainCrypto

/// PKCS#11 §5.14 key management: key pair generation.
extension ModuleState {
    func generateKeyPair(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism, publicTemplate: Template,
                         privateTemplate: Template) throws(CKError) -> (publicKey: CK_OBJECT_HANDLE, privateKey: CK_OBJECT_HANDLE) {
        try withSession(handle) { session, token throws(CKError) in
            let entry = try self.mechanism(mechanism.type)
            guard entry.supports(CKF_GENERATE_KEY_PAIR), let keyType = entry.generates else {
                throw CKError(CK_RV(CKR_MECHANISM_INVALID), "mechanism 0x\(String(mechanism.type, radix: 16)) does not generate key pairs")
            }
            try mechanism.parameter.requireEmpty()
            let request = try translating { () throws(KeychainError) in
                try KeyGeneration.request(keyType: keyType, publicTemplate: publicTemplate, privateTemplate: privateTemplate, policy: configuration.keyPolicy)
            }
            let key: AsymmetricKey
            do {
                if let domain = request.domain {
                    key = try AsymmetricKey.generate(request.kind, domain: domain)
                } else {
                    key = try AsymmetricKey.generate(request.kind, bits: request.bits, publicExponent: request.publicExponent)
                }
            } catch let error as CryptoError where error.code == .invalidInput {
                throw CKError(CK_RV(CKR_TEMPLATE_INCONSISTENT), "the domain parameters are unusable: \(error)")
            } catch {
                throw CKError(CK_RV(CKR_DEVICE_ERROR), "key generation failed: \(error)")
            }
            let publicID = try Self.newUniqueID(), privateID = try Self.newUniqueID()
            let bySO = token.login == .securityOfficer
            var (publicObject, privateObject) = try translating { () throws(KeychainError) in
                try KeyGeneration.objects(for: key, request: request, mechanism: UInt(mechanism.type), publicTemplate: publicTemplate,
                                          privateTemplate: privateTemplate, uniqueIDs: (publicID.text, privateID.text), bySecurityOfficer: bySO)
            }
            defer { privateObject.wipeValues() }
            // Check both before storing either, so a refusal leaves nothing behind.
            try checkWritable(token: publicObject.isToken, private: publicObject.isPrivate, session: session, login: token.login)
            try checkWritable(token: privateObject.isToken, private: privateObject.isPrivate, session: session, login: token.login)
            let privateHandle = try store(privateObject, uid: privateID.bytes, session: session, token: token)
            do throws(CKError) {
                let publicHandle = try store(publicObject, uid: publicID.bytes, session: session, token: token)
                return (publicHandle, privateHandle)
            } catch {
                try? destroyStored(privateHandle, token: token)
                throw error
            }
        }
    }

    func generateKey(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism, template: Template) throws(CKError) -> CK_OBJECT_HANDLE {
        if try self.mechanism(mechanism.type).derivesFromPassword { return try passwordDerivedKey(handle, mechanism: mechanism, template: template) }
        return try withSession(handle) { session, token throws(CKError) in
            let entry = try self.mechanism(mechanism.type)
            guard entry.supports(CKF_GENERATE), let keyType = entry.generates else {
                throw CKError(CK_RV(CKR_MECHANISM_INVALID), "mechanism 0x\(String(mechanism.type, radix: 16)) does not generate secret keys")
            }
            try mechanism.parameter.requireEmpty()
            let id = try Self.newUniqueID()
            let bySO = token.login == .securityOfficer
            let object = try translating { () throws(KeychainError) in
                if entry.generatesDomainParameters {
                    return try KeyGeneration.domainParameters(keyType: keyType, mechanism: UInt(mechanism.type), template: template, uniqueID: id.text,
                                                              bySecurityOfficer: bySO, policy: configuration.keyPolicy)
                }
                return try KeyGeneration.secretKey(keyType: keyType, mechanism: UInt(mechanism.type), template: template, uniqueID: id.text, bySecurityOfficer: bySO)
            }
            return try store(object, uid: id.bytes, session: session, token: token)
        }
    }

    /// Removes an object this module just stored (undoing half of a failed pair, or the keys an
    /// SP 800-108 derivation stored before one failed).
    func destroyStored(_ handle: CK_OBJECT_HANDLE, token: Token) throws(CKError) {
        if case .token(let rowID)? = entry(handle)?.location {
            try translating { () throws(KeychainError) in try token.keychain.remove(id: rowID, master: token.writingMaster) }
        }
        tables.writing { handles.remove(handle) }
    }
}
