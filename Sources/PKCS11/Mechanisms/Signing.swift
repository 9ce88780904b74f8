import CPKCS11
import KeychainCore
import KeychainCrypto

/// PKCS#11 §5.10–§5.12: digesting, signing and verifying (MACs included), single- and multi-part.
extension ModuleState {
    // MARK: digest

    func digestInit(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism) throws(CKError) {
        try begin(handle, .digest, mechanism: mechanism) { [unowned self] _, _, mechanism throws(CKError) in
            guard let algorithm = try self.mechanism(mechanism.type).digest else {
                throw CKError(CK_RV(CKR_MECHANISM_INVALID), "not a digest mechanism")
            }
            try mechanism.parameter.requireEmpty()
            do {
                return ActiveOperation(engine: .digest(try StreamingDigest(algorithm)), outputLength: algorithm.outputSize)
            } catch {
                throw CKError(CK_RV(CKR_DEVICE_ERROR), "\(error)")
            }
        }
    }

    /// C_DigestKey: feeds a secret key's value into the digest; other keys are indigestible.
    func digestKey(_ handle: CK_SESSION_HANDLE, key: CK_OBJECT_HANDLE) throws(CKError) {
        let session = try session(handle)
        guard let token = token(of: session.slotID) else { throw CKError(CK_RV(CKR_DEVICE_REMOVED), "the keychain is gone") }
        try step(handle, .digest, .update) { operation throws(CKError) -> ((), Bool) in
            let attributes = try keyAttributes(key, session: session, token: token)
            guard attributes.objectClass == .secretKey, let value = attributes[.value] else {
                throw CKError(CK_RV(CKR_KEY_INDIGESTIBLE), "only secret keys can be digested")
            }
            try SecureBytes(value).withUnsafeBytes { (bytes: UnsafeRawBufferPointer) throws(CKError) in try operation.absorb(bytes) }
            return ((), false)
        }
    }

    // MARK: sign and verify

    func signInit(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism, key: CK_OBJECT_HANDLE) throws(CKError) {
        try begin(handle, .sign, mechanism: mechanism) { [unowned self] session, token, mechanism throws(CKError) in
            try authenticationOperation(mechanism, key: key, signing: true, session: session, token: token)
        }
    }

    func verifyInit(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism, key: CK_OBJECT_HANDLE) throws(CKError) {
        try begin(handle, .verify, mechanism: mechanism) { [unowned self] session, token, mechanism throws(CKError) in
            try authenticationOperation(mechanism, key: key, signing: false, session: session, token: token)
        }
    }

    /// A signature (asymmetric) or MAC (secret key) operation.
    private func authenticationOperation(_ mechanism: CallerMechanism, key handle: CK_OBJECT_HANDLE, signing: Bool, session: Session,
                                         token: Token) throws(CKError) -> ActiveOperation {
        let entry = try self.mechanism(mechanism.type)
        guard entry.supports(signing ? CKF_SIGN : CKF_VERIFY) else {
            throw CKError(CK_RV(CKR_MECHANISM_INVALID), "mechanism 0x\(String(mechanism.type, radix: 16)) cannot \(signing ? "sign" : "verify")")
        }
        if var algorithm = entry.mac {
            var truncated: Int?
            if entry.macLengthIsParameter {
                // CK_MAC_GENERAL_PARAMS: the MAC length, 1 to the full MAC (a block for CBC-MAC).
                guard case .length(let length) = mechanism.parameter else { throw Mechanisms.paramInvalid("a _GENERAL MAC needs CK_MAC_GENERAL_PARAMS") }
                guard length >= 1, length <= CK_ULONG(algorithm.outputSize) else { throw Mechanisms.paramInvalid("a MAC of 1–\(algorithm.outputSize) bytes") }
                if case .cbcMAC(let cipher, _) = algorithm { algorithm = .cbcMAC(cipher, length: Int(length)) } else { truncated = Int(length) }
            } else {
                try mechanism.parameter.requireEmpty()
            }
            let secret = try secretKey(handle, session: session, token: token, usage: signing ? .sign : .verify, mechanism: entry)
            do {
                let mac = try StreamingMAC(algorithm, key: secret)
                mac.truncatedLength = truncated
                return ActiveOperation(engine: .mac(mac), outputLength: truncated ?? algorithm.outputSize)
            } catch {
                throw CKError(CK_RV(CKR_KEY_SIZE_RANGE), "\(error)")
            }
        }
        if entry.signsWithLattice {
            return try latticeSignatureOperation(mechanism, entry: entry, key: handle, signing: signing, session: session, token: token)
        }
        guard let makeScheme = entry.signature else { throw CKError(CK_RV(CKR_MECHANISM_INVALID), "not a signature mechanism") }
        let ready = try asymmetricOrTPMKey(handle, session: session, token: token, objectClass: signing ? .privateKey : .publicKey,
                                           usage: signing ? .sign : .verify, mechanism: entry)
        let active: ActiveOperation
        if let enclave = ready.enclave {
            // A key in the TPM signs there; the scheme says what to hash and how to shape the digest.
            let signer = try TPMSigner(key: enclave, scheme: try makeScheme(mechanism.parameter, enclave.publicKey))
            active = ActiveOperation(engine: .tpmSignature(signer), outputLength: signer.signatureLength)
        } else {
            guard let key = ready.asymmetric else { throw CKError(CK_RV(CKR_KEY_TYPE_INCONSISTENT), "not an asymmetric key") }
            let scheme = try makeScheme(mechanism.parameter, key)
            do {
                let operation = try SignatureOperation(key: key, scheme: scheme, signing: signing)
                active = ActiveOperation(engine: .signature(operation), outputLength: operation.signatureLength)
            } catch {
                throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "\(error)")
            }
        }
        if signing { active.alwaysAuthenticate = try alwaysAuthenticates(handle, session: session, token: token) }
        return active
    }

    /// Whether a private key asks for the PIN at every use (CKA_ALWAYS_AUTHENTICATE).
    func alwaysAuthenticates(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token) throws(CKError) -> Bool {
        if let cached = try cachedUse(handle, session: session, token: token) { return cached.use.alwaysAuthenticate }
        // A cache miss reads the whole record: its secret parts are wiped here, not left to the heap.
        var policy = try keyPolicy(handle, session: session, token: token)
        defer { policy.wipeValuesIfSecret() }
        return policy.bool(.alwaysAuthenticate)
    }

    /// C_Login(CKU_CONTEXT_SPECIFIC): the user PIN, checked (and counted) like a login, releases
    /// the session's sign or decrypt operation with a CKA_ALWAYS_AUTHENTICATE key; that operation
    /// alone. Presenting it again for an operation already released is accepted.
    func contextLogin(_ session: Session, token: Token, pin: UnsafeRawBufferPointer) throws(CKError) {
        guard token.login == .user else { throw CKError.userNotLoggedIn }
        let candidates = [OperationKind.sign, .decrypt].compactMap { session.operations[$0] }.filter(\.alwaysAuthenticate)
        guard let waiting = candidates.first(where: \.awaitsContextLogin) ?? candidates.first else {
            throw CKError(CK_RV(CKR_OPERATION_NOT_INITIALIZED), "no operation of this session uses a CKA_ALWAYS_AUTHENTICATE key")
        }
        if let pending = waiting.pending {
            // The PIN here is the key's application password: it opens the key, which builds the operation.
            let attributes = try keyAttributes(pending.key, session: session, token: token)
            let revealed = try translating { () throws(KeychainError) in try token.keychain.reveal(attributes, applicationPassword: pin) }
            session.revealedKeys[pending.key] = try token.parse(revealed)
            defer { session.revealedKeys[pending.key] = nil }
            waiting.resume(with: try pending.build(session, token))
        } else if let key = waiting.sealedKey {
            // Presented again: checked against the seal (not counted against the user PIN).
            let attributes = try keyAttributes(key, session: session, token: token)
            _ = try translating { () throws(KeychainError) in try token.keychain.reveal(attributes, applicationPassword: pin) }
        } else {
            _ = try checkPIN(.user, pin, of: token)
        }
        waiting.awaitsContextLogin = false
    }

    // MARK: the data steps of digest, sign and verify

    /// C_Digest / C_Sign: the whole input at once, under the call-twice convention.
    func finishSinglePart(_ handle: CK_SESSION_HANDLE, _ kind: OperationKind, data: UnsafeRawBufferPointer, output: CallerOutput<CK_BYTE>) throws(CKError) {
        try step(handle, kind, .singlePart) { operation throws(CKError) in
            guard try output.reserve(operation.outputLength) else { return ((), false) }
            try operation.absorb(data)
            try output.deliver(try operation.result())
            return ((), true)
        }
    }

    func update(_ handle: CK_SESSION_HANDLE, _ kind: OperationKind, data: UnsafeRawBufferPointer) throws(CKError) {
        try step(handle, kind, .update) { operation throws(CKError) in
            try operation.absorb(data)
            return ((), false)
        }
    }

    /// C_DigestFinal / C_SignFinal.
    func finishMultiPart(_ handle: CK_SESSION_HANDLE, _ kind: OperationKind, output: CallerOutput<CK_BYTE>) throws(CKError) {
        try step(handle, kind, .final) { operation throws(CKError) in
            guard try output.reserve(operation.outputLength) else { return ((), false) }
            try output.deliver(try operation.result())
            return ((), true)
        }
    }

    /// C_Verify (with data) and C_VerifyFinal (data == nil).
    func verify(_ handle: CK_SESSION_HANDLE, data: UnsafeRawBufferPointer?, signature: UnsafeRawBufferPointer) throws(CKError) {
        try step(handle, .verify, data == nil ? .final : .singlePart) { operation throws(CKError) in
            if let data { try operation.absorb(data) }
            guard signature.count == operation.outputLength else {
                throw CKError(CK_RV(CKR_SIGNATURE_LEN_RANGE), "a signature has \(operation.outputLength) bytes")
            }
            let valid: Bool
            switch operation.engine {
            case .signature(let verifier):
                do { valid = try verifier.verify(Array(signature)) } catch let error as CryptoError where error.code == .invalidInput {
                    throw CKError(CK_RV(CKR_DATA_LEN_RANGE), error.reason)
                } catch {
                    throw CKError(CK_RV(CKR_DEVICE_ERROR), "\(error)")
                }
            case .lattice(let verifier):
                valid = try verifier.verify(Array(signature))
            case .mac:
                valid = ConstantTime.equals(try operation.result(), Array(signature))
            default:
                throw CKError(CK_RV(CKR_GENERAL_ERROR), "not a verification")
            }
            guard valid else { throw CKError(CK_RV(CKR_SIGNATURE_INVALID), "the signature does not verify") }
            return ((), true)
        }
    }
}
