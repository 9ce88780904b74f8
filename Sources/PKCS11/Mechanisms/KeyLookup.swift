import CPKCS11
import KeychainCore
import KeychainCrypto

/// The keys operations run with: visibility, class, type, usage and CKA_ALLOWED_MECHANISMS
/// checks, and the parsed keys kept per login.
extension ModuleState {

    /// The attributes of a key object visible to the session.
    func keyAttributes(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token) throws(CKError) -> ObjectAttributes {
        guard let entry = entry(handle), entry.slotID == session.slotID, !entry.isPrivate || token.login == .user else {
            throw CKError(CK_RV(CKR_KEY_HANDLE_INVALID), "no such key")
        }
        switch entry.location {
        case .session(let object): return object.attributes
        case .token(let rowID):
            do { return try token.keychain.object(id: rowID, master: token.userMaster) } catch where error.code == .objectNotFound {
                throw CKError(CK_RV(CKR_KEY_HANDLE_INVALID), "the key is gone")
            } catch { throw CKError(error) }
        }
    }

    /// A key's attributes without its secret parts, from the policy cache while the keychain is
    /// unchanged (no record is decrypted then).
    func keyPolicy(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token) throws(CKError) -> ObjectAttributes {
        guard let entry = entry(handle), entry.slotID == session.slotID, !entry.isPrivate || token.login == .user else {
            return try keyAttributes(handle, session: session, token: token)
        }
        if case .session(let object) = entry.location { return object.policy }
        let version = try translating { () throws(KeychainError) in try token.keychain.version() }
        if let cached = token.cachedPolicy(handle, version: version) {
            return cached
        }
        let attributes = try keyAttributes(handle, session: session, token: token)
        token.keepPolicy(attributes.withoutSecrets, for: handle, version: version)
        return attributes
    }

    /// The checks every key operation makes: the right class and type, this usage allowed, this
    /// mechanism allowed. Returns the attributes (secret parts only if they were just read).
    func checkedKey(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token, objectClass: ObjectClass, usage: AttributeType,
                    mechanism: Mechanism) throws(CKError) -> ObjectAttributes {
        let attributes = try keyPolicy(handle, session: session, token: token)
        try KeyUse(attributes).check(objectClass: objectClass, usage: usage, mechanism: mechanism)
        return attributes
    }

    /// The key's checks and its ready form from the caches, when both are there (a key in use):
    /// no attribute is looked up. Nil sends the caller down the full path (`checkedKey`), which
    /// also gives the errors of a key that is not visible.
    private func cachedReadyKey(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token, objectClass: ObjectClass, usage: AttributeType,
                                mechanism: Mechanism) throws(CKError) -> (key: ReadyKey, use: KeyUse)? {
        guard let (use, key) = try cachedUse(handle, session: session, token: token), !use.hasSealedSecrets, let key else { return nil }
        try use.check(objectClass: objectClass, usage: usage, mechanism: mechanism)
        return (key, use)
    }

    /// A visible key's cached checks and its ready form if that is cached too; nil when the
    /// policy is not cached (or the key is not visible: the full path gives that error).
    func cachedUse(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token) throws(CKError) -> (use: KeyUse, key: ReadyKey?)? {
        guard let entry = entry(handle), entry.slotID == session.slotID, !entry.isPrivate || token.login == .user else { return nil }
        switch entry.location {
        case .session(let object):
            let use = object.use
            return (use, use.hasSealedSecrets ? nil : token.cachedKey(handle))
        case .token:
            let version = try translating { () throws(KeychainError) in try token.keychain.version() }
            return token.cachedUse(handle, version: version)
        }
    }

    /// An asymmetric key computed with here (OpenSSL). A key in the TPM is refused: it only signs
    /// and agrees keys there (`asymmetricOrTPMKey`).
    func asymmetricKey(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token, objectClass: ObjectClass, usage: AttributeType,
                       mechanism: Mechanism) throws(CKError) -> AsymmetricKey {
        let ready = try asymmetricOrTPMKey(handle, session: session, token: token, objectClass: objectClass, usage: usage, mechanism: mechanism)
        guard let key = ready.asymmetric else {
            throw CKError(CK_RV(CKR_KEY_FUNCTION_NOT_PERMITTED), "a key in the TPM (CKA_KC_TPM) only signs and derives (ECDH) there")
        }
        return key
    }

    /// An asymmetric key ready for an operation: in OpenSSL's form, or (CKA_KC_TPM) loaded in the TPM.
    func asymmetricOrTPMKey(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token, objectClass: ObjectClass, usage: AttributeType,
                            mechanism: Mechanism) throws(CKError) -> ReadyKey {
        if let ready = try cachedReadyKey(handle, session: session, token: token, objectClass: objectClass, usage: usage, mechanism: mechanism),
           let key = ready.key.publicForm {
            try Self.checkSize(Self.mechanismKeySize(key), mechanism)
            return ready.key
        }
        var attributes = try checkedKey(handle, session: session, token: token, objectClass: objectClass, usage: usage, mechanism: mechanism)
        defer { attributes.wipeValuesIfSecret() }
        let ready = try readyKey(handle, policy: attributes, session: session, token: token)
        guard let key = ready.publicForm else {
            throw CKError(CK_RV(CKR_KEY_TYPE_INCONSISTENT), "not an asymmetric key")
        }
        try Self.checkSize(Self.mechanismKeySize(key), mechanism)
        return ready
    }

    /// An ML-DSA or ML-KEM key ready for an operation.
    func latticeKey(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token, objectClass: ObjectClass, usage: AttributeType,
                    mechanism: Mechanism) throws(CKError) -> LatticeKey {
        if let ready = try cachedReadyKey(handle, session: session, token: token, objectClass: objectClass, usage: usage, mechanism: mechanism),
           let key = ready.key.lattice {
            return key
        }
        var attributes = try checkedKey(handle, session: session, token: token, objectClass: objectClass, usage: usage, mechanism: mechanism)
        defer { attributes.wipeValuesIfSecret() }
        guard let key = try readyKey(handle, policy: attributes, session: session, token: token).lattice else {
            throw CKError(CK_RV(CKR_KEY_TYPE_INCONSISTENT), "not an ML-DSA or ML-KEM key")
        }
        return key
    }

    func secretKey(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token, usage: AttributeType, mechanism: Mechanism) throws(CKError) -> SecureBytes {
        try cachedSecretKey(handle, session: session, token: token, usage: usage, mechanism: mechanism).value
    }

    /// `secretKey`, and whether the value is the key cache's (only such keys leave their cipher
    /// contexts for the next operation; a key sealed by its application password never is).
    func cachedSecretKey(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token, usage: AttributeType,
                         mechanism: Mechanism) throws(CKError) -> (value: SecureBytes, isCached: Bool) {
        if let ready = try cachedReadyKey(handle, session: session, token: token, objectClass: .secretKey, usage: usage, mechanism: mechanism),
           let value = ready.key.secret {
            if ready.use.keyType?.blockCipher?.keyLength == nil { try Self.checkSize(value.count, mechanism) }
            return (value, true)
        }
        var attributes = try checkedKey(handle, session: session, token: token, objectClass: .secretKey, usage: usage, mechanism: mechanism)
        defer { attributes.wipeValuesIfSecret() }
        guard let value = try readyKey(handle, policy: attributes, session: session, token: token).secret else {
            throw CKError(CK_RV(CKR_KEY_TYPE_INCONSISTENT), "not a secret key")
        }
        // A DES key's length is its type's (checked when it was made); AES and HMAC sizes are bytes.
        if attributes.keyType?.blockCipher?.keyLength == nil { try Self.checkSize(value.count, mechanism) }
        return (value, token.cachedKey(handle)?.secret === value)
    }

    /// The parsed key; the full record is read only when the key is not parsed yet.
    private func readyKey(_ handle: CK_OBJECT_HANDLE, policy: ObjectAttributes, session: Session, token: Token) throws(CKError) -> ReadyKey {
        if policy.hasSealedSecrets {
            // Never cached: each use presents the application password again.
            if let key = session.revealedKeys[handle] { return key }
            var error = CKError(CK_RV(CKR_USER_NOT_LOGGED_IN), "the key's application password must be presented with C_Login(CKU_CONTEXT_SPECIFIC)")
            error.awaitingCredentialFor = handle
            throw error
        }
        if let key = token.cachedKey(handle) { return key }
        // Public keys have no secret parts; for the others, `policy` holds them only when it was
        // just read in full (`withoutSecrets` strips every sensitive attribute).
        let complete = policy.objectClass == .publicKey || policy[.tpmBlob] != nil
            || policy.values.keys.contains { AttributeTable.rule($0)?.flags.contains(.sensitive) == true }
        if complete { return try token.readyKey(for: handle, attributes: policy) }
        var attributes = try keyAttributes(handle, session: session, token: token)
        defer { attributes.wipeValues() }
        return try token.readyKey(for: handle, attributes: attributes)
    }

    private static func checkSize(_ size: Int, _ mechanism: Mechanism) throws(CKError) {
        guard mechanism.minimumKeySize == 0 || (CK_ULONG(size) >= mechanism.minimumKeySize && CK_ULONG(size) <= mechanism.maximumKeySize) else {
            throw CKError(CK_RV(CKR_KEY_SIZE_RANGE), "a key of size \(size) is outside this mechanism's range")
        }
    }

    /// Key size in the units CK_MECHANISM_INFO uses: modulus or prime bits, curve bits, 255 or
    /// 448 for the Edwards and Montgomery curves.
    static func mechanismKeySize(_ key: AsymmetricKey) -> Int {
        switch key.kind {
        case .rsa, .dsa, .dh: return key.bits
        case .ec(let curve): return curve.bits
        case .ed25519, .x25519: return 255
        case .ed448, .x448: return 448
        }
    }
}

extension Token {
    /// The usable form of a key object, parsed once while logged in (outside the token's lock:
    /// two threads may parse the same key at once, and the first one kept is used).
    func readyKey(for handle: CK_OBJECT_HANDLE, attributes: ObjectAttributes) throws(CKError) -> ReadyKey {
        if let key = cachedKey(handle) { return key }
        let logoutsBefore = logouts
        let key: ReadyKey
        do {
            key = try parse(attributes)
        } catch where attributes.objectClass == .privateKey && !attributes.bool(.tpm) && OpenSSLSecureHeap.isAvailable {
            // OpenSSL's secure heap fails when full: make room by dropping the ready keys, once.
            do throws(CKError) {
                guard dropReadyAsymmetricKeys() else { throw error }
                key = try parse(attributes)
            } catch {
                guard OpenSSLSecureHeap.isCrowded else { throw error }
                throw CKError(CK_RV(CKR_DEVICE_MEMORY), "OpenSSL's secure heap is full: raise openssl_secure_heap")
            }
        }
        // Keep the module's share of the secure heap at half at most (OpenSSLSecureHeap).
        let crowded = key.asymmetric?.isPrivate == true && OpenSSLSecureHeap.isCrowded
        return keep(key, for: handle, logoutsBefore: logoutsBefore, dropReadyKeysFirst: crowded)
    }

    /// A key's usable form: its value, OpenSSL's parsed key, or a key made in the TPM loaded there.
    func parse(_ attributes: ObjectAttributes) throws(CKError) -> ReadyKey {
        if attributes.objectClass == .secretKey { return .secret(SecureBytes(attributes[.value] ?? [])) }
        if attributes.bool(.tpm) { return .enclave(try loadEnclaveKey(attributes)) }
        if attributes.keyType?.isLattice == true {
            return .lattice(try translating { () throws(KeychainError) in try KeyFactory.latticeKey(of: attributes) })
        }
        return .asymmetric(try translating { () throws(KeychainError) in try KeyFactory.key(of: attributes) })
    }

    /// Loads a CKA_KC_TPM key into the TPM. Its TPM authorisation comes from the master key, so
    /// it is usable only while the user is logged in, whatever its CKA_PRIVATE says.
    private func loadEnclaveKey(_ attributes: ObjectAttributes) throws(CKError) -> EnclaveKey {
        guard let master = userMaster else {
            throw CKError(CK_RV(CKR_USER_NOT_LOGGED_IN), "a key in the TPM is used only while the user is logged in (its TPM authorisation comes from the unlocked keychain)")
        }
        do throws(KeychainError) {
            guard let blob = try EnclaveKeyBlob(of: attributes) else { throw KeychainError(.recordCorrupted, "the TPM key's blob is missing") }
            return try keychain.loadEnclaveKey(blob, master: master)
        } catch where error.code == .tpmUnavailable || error.code == .tpmFailure {
            throw CKError(error)
        } catch {
            // Another keychain's blob, or a damaged one: the object is unusable, not the caller's fault.
            throw CKError(CK_RV(CKR_DEVICE_ERROR), "the key's TPM blob does not load: \(error.reason)")
        }
    }
}
