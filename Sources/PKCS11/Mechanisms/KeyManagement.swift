import CPKCS11
import KeychainCore
import KeychainCrypto

/// PKCS#11 §5.14 key management: key pair generation (in OpenSSL, or in the TPM for CKA_KC_TPM).
extension ModuleState {
    func generateKeyPair(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism, publicTemplate: Template,
                         privateTemplate: Template) throws(CKError) -> (publicKey: CK_OBJECT_HANDLE, privateKey: CK_OBJECT_HANDLE) {
        try withSession(handle) { session, token throws(CKError) in
            let entry = try self.mechanism(mechanism.type)
            guard entry.supports(CKF_GENERATE_KEY_PAIR), let keyType = entry.generates else {
                throw CKError(CK_RV(CKR_MECHANISM_INVALID), "mechanism 0x\(String(mechanism.type, radix: 16)) does not generate key pairs")
            }
            try mechanism.parameter.requireEmpty()
            let bySO = token.login == .securityOfficer
            var (publicObject, privateObject): (ObjectAttributes, ObjectAttributes)
            let publicID = try Self.newUniqueID(), privateID = try Self.newUniqueID()
            if keyType.isLattice {
                (publicObject, privateObject) = try latticeKeyPair(keyType, mechanism: mechanism, publicTemplate: publicTemplate, privateTemplate: privateTemplate,
                                                                   token: token, uniqueIDs: (publicID.text, privateID.text))
            } else {
            let request = try translating { () throws(KeychainError) in
                try KeyGeneration.request(keyType: keyType, publicTemplate: publicTemplate, privateTemplate: privateTemplate, policy: configuration.keyPolicy)
            }
            if try translating({ () throws(KeychainError) in try KeyGeneration.asksForTPM(privateTemplate) }) {
                // Made in the TPM (CKA_KC_TPM): its authorisation comes from the unlocked keychain.
                // A key in the TPM never syncs (SyncRule): refused before the TPM makes one.
                if privateTemplate.contains(where: { $0.type == .synchronizable && AttributeValue.decodeBool($0.value) == true }) {
                    throw Self.syncRefused(.inTPM)
                }
                guard let master = token.userMaster else {
                    throw CKError(CK_RV(CKR_USER_NOT_LOGGED_IN), "a key in the TPM is made while the user is logged in (its TPM authorisation comes from the unlocked keychain)")
                }
                (publicObject, privateObject) = try translating { () throws(KeychainError) in
                    let key = try token.keychain.createEnclaveKey(for: request, master: master)
                    return try KeyGeneration.enclaveObjects(for: key, request: request, mechanism: UInt(mechanism.type), publicTemplate: publicTemplate,
                                                            privateTemplate: privateTemplate, uniqueIDs: (publicID.text, privateID.text), bySecurityOfficer: bySO)
                }
            } else {
                let key = try Self.generatedKey(request)
                (publicObject, privateObject) = try translating { () throws(KeychainError) in
                    try KeyGeneration.objects(for: key, request: request, mechanism: UInt(mechanism.type), publicTemplate: publicTemplate,
                                              privateTemplate: privateTemplate, uniqueIDs: (publicID.text, privateID.text), bySecurityOfficer: bySO)
                }
            }
            }
            // Check both before storing either, so a refusal leaves nothing behind.
            do throws(CKError) {
                try checkWritable(token: publicObject.isToken, private: publicObject.isPrivate, session: session, login: token.login)
                try checkWritable(token: privateObject.isToken, private: privateObject.isPrivate, session: session, login: token.login)
                if let refusal = privateObject.syncRefusal ?? publicObject.syncRefusal { throw Self.syncRefused(refusal) }
            } catch {
                privateObject.wipeValues()
                throw error
            }
            let privateHandle: CK_OBJECT_HANDLE
            if privateObject.isToken {
                defer { privateObject.wipeValues() }
                privateHandle = try store(privateObject, uid: privateID.bytes, session: session, token: token)
            } else {
                // A session object keeps these very buffers, wiped when it goes (`SessionObject`).
                privateHandle = try store(privateObject, uid: privateID.bytes, session: session, token: token)
            }
            do throws(CKError) {
                let publicHandle = try store(publicObject, uid: publicID.bytes, session: session, token: token)
                return (publicHandle, privateHandle)
            } catch {
                try? destroyStored(privateHandle, token: token)
                throw error
            }
        }
    }

    /// A key pair made here by OpenSSL.
    private static func generatedKey(_ request: KeyGeneration.Request) throws(CKError) -> AsymmetricKey {
        do {
            if let domain = request.domain { return try AsymmetricKey.generate(request.kind, domain: domain) }
            return try AsymmetricKey.generate(request.kind, bits: request.bits, publicExponent: request.publicExponent)
        } catch let error as CryptoError where error.code == .invalidInput {
            throw CKError(CK_RV(CKR_TEMPLATE_INCONSISTENT), "the domain parameters are unusable: \(error)")
        } catch {
            throw CKError(CK_RV(CKR_DEVICE_ERROR), "key generation failed: \(error)")
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
