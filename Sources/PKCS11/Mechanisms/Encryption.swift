import CPKCS11
import KeychainCore
import KeychainCrypto

/// PKCS#11 §5.8–§5.9: encryption and decryption, single- and multi-part.
///
/// Symmetric steps run on a copy of the cipher state first: a length query or a short buffer
/// leaves the operation exactly where it was, and the copy becomes the state when it succeeds.
extension ModuleState {
    func cipherInit(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism, key: CK_OBJECT_HANDLE, encrypting: Bool) throws(CKError) {
        try begin(handle, encrypting ? .encrypt : .decrypt, mechanism: mechanism) { [unowned self] session, token, mechanism throws(CKError) in
            let entry = try self.mechanism(mechanism.type)
            guard entry.supports(encrypting ? CKF_ENCRYPT : CKF_DECRYPT), let makeSpec = entry.cipher else {
                throw CKError(CK_RV(CKR_MECHANISM_INVALID), "mechanism 0x\(String(mechanism.type, radix: 16)) cannot \(encrypting ? "encrypt" : "decrypt")")
            }
            let usage: AttributeType = encrypting ? .encrypt : .decrypt
            switch try makeSpec(mechanism.parameter) {
            case .symmetric(let mode, let iv, let associatedData):
                // A token key's keychain version from before its checks, for a kept cipher.
                // (nil for a session key; a token key whose version cannot be read is not kept.)
                var keeps = KeptCipher.keeps(mechanism.type)
                var versionBefore: KeychainVersion?
                if keeps, self.entry(key)?.isTokenObject ?? true {
                    versionBefore = try? token.keychain.version()
                    keeps = versionBefore != nil
                }
                let (secret, isCached) = try cachedSecretKey(key, session: session, token: token, usage: usage, mechanism: entry)
                // Only keys held in the key cache leave their context behind (a key sealed by its
                // application password is never kept).
                let reuse = isCached ? Token.IdleCipher(handle: key, mode: mode, encrypting: encrypting) : nil
                do {
                    let cipher: SymmetricCipher
                    if let reuse, let idle = token.takeIdleCipher(reuse, key: secret) {
                        try idle.restart(iv: iv, associatedData: associatedData)
                        cipher = idle
                    } else {
                        cipher = try SymmetricCipher(mode: mode, key: secret, iv: iv, associatedData: associatedData, encrypting: encrypting,
                                                     algorithm: entry.blockCipher)
                    }
                    let operation = ActiveOperation(engine: .symmetric(cipher), outputLength: 0)
                    operation.reusable = reuse.map { ($0, secret) }
                    if keeps, reuse != nil {
                        var tagBits: CK_ULONG = 0
                        if case .gcm(let tagLength) = mode { tagBits = CK_ULONG(tagLength * 8) }
                        operation.keepable = (mechanism.type, tagBits, versionBefore)
                    }
                    return operation
                } catch {
                    throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "\(error)")
                }
            case .rsa(let padding):
                let rsa = try asymmetricKey(key, session: session, token: token, objectClass: encrypting ? .publicKey : .privateKey,
                                            usage: usage, mechanism: entry)
                let operation = ActiveOperation(engine: .rsa(rsa, padding, encrypting: encrypting), outputLength: (rsa.bits + 7) / 8)
                if !encrypting { operation.alwaysAuthenticate = try alwaysAuthenticates(key, session: session, token: token) }
                return operation
            }
        }
    }

    /// C_Encrypt / C_Decrypt.
    func cipherSinglePart(_ handle: CK_SESSION_HANDLE, encrypting: Bool, input: UnsafeRawBufferPointer, output: CallerOutput<CK_BYTE>) throws(CKError) {
        try step(handle, encrypting ? .encrypt : .decrypt, .singlePart) { operation throws(CKError) in
            let result: [UInt8]
            switch operation.engine {
            case .symmetric(let cipher):
                // Room for any result: straight into the caller's buffer (the operation ends here
                // whatever happens, so no trial copy is needed).
                let direct = try output.writeDirectly(bound: cipher.oneShotBound(input.count)) { buffer throws(CKError) in
                    try Self.run(encrypting: encrypting) { try cipher.oneShot(input, into: buffer) }
                }
                if direct { return ((), true) }
                result = try Self.run(encrypting: encrypting) {
                    let trial = try cipher.copy()
                    return try trial.update(input) + trial.finish()
                }
            case .rsa(let key, let padding, _):
                // The length query answers the modulus size (a decryption may give fewer bytes).
                if output.isLengthQuery { return ((), try output.reserve(operation.outputLength)) }
                result = try Self.rsa(Array(input), key: key, padding: padding, encrypting: encrypting, modulusBytes: operation.outputLength)
            default:
                throw CKError(CK_RV(CKR_GENERAL_ERROR), "not a cipher operation")
            }
            return ((), try output.deliver(result))
        }
    }

    /// C_EncryptUpdate / C_DecryptUpdate.
    func cipherUpdate(_ handle: CK_SESSION_HANDLE, encrypting: Bool, input: UnsafeRawBufferPointer, output: CallerOutput<CK_BYTE>) throws(CKError) {
        try step(handle, encrypting ? .encrypt : .decrypt, .update) { operation throws(CKError) in
            switch operation.engine {
            case .symmetric(let cipher) where cipher.updatesHoldInput:
                // A length query answers an upper bound (§5.2 allows one: the input's length, so
                // that a caller sizing its buffer from it goes on to send the input) and takes
                // nothing; the real call holds the input and releases nothing before the tag.
                if output.isLengthQuery { return ((), try output.reserve(input.count)) }
                _ = try Self.run(encrypting: encrypting) { try cipher.update(input) }
                output.deliverNothing()
            case .symmetric(let cipher):
                var trial: SymmetricCipher?
                let produced = try Self.run(encrypting: encrypting) {
                    let copy = try cipher.copy()
                    trial = copy
                    return try copy.update(input)
                }
                if try output.deliver(produced), let trial { cipher.adopt(trial) }
            case .rsa:
                guard operation.collected.count + input.count <= operation.outputLength else {
                    throw CKError(CK_RV(encrypting ? CKR_DATA_LEN_RANGE : CKR_ENCRYPTED_DATA_LEN_RANGE), "more input than one RSA block")
                }
                operation.collected += input
                output.deliverNothing()
            default:
                throw CKError(CK_RV(CKR_GENERAL_ERROR), "not a cipher operation")
            }
            return ((), false)
        }
    }

    /// C_EncryptFinal / C_DecryptFinal.
    func cipherFinal(_ handle: CK_SESSION_HANDLE, encrypting: Bool, output: CallerOutput<CK_BYTE>) throws(CKError) {
        try step(handle, encrypting ? .encrypt : .decrypt, .final) { operation throws(CKError) in
            let result: [UInt8]
            switch operation.engine {
            case .symmetric(let cipher):
                result = try Self.run(encrypting: encrypting) { try cipher.copy().finish() }
            case .rsa(let key, let padding, _):
                if output.isLengthQuery { return ((), try output.reserve(operation.outputLength)) }
                result = try Self.rsa(operation.collected, key: key, padding: padding, encrypting: encrypting, modulusBytes: operation.outputLength)
            default:
                throw CKError(CK_RV(CKR_GENERAL_ERROR), "not a cipher operation")
            }
            return ((), try output.deliver(result))
        }
    }

    /// Runs a symmetric step, mapping failures to the codes PKCS#11 gives them.
    static func run<R>(encrypting: Bool, _ body: () throws -> R) throws(CKError) -> R {
        do {
            return try body()
        } catch let error as CryptoError where error.code == .authenticationFailed {
            throw CKError(CK_RV(CKR_ENCRYPTED_DATA_INVALID), error.reason)
        } catch let error as CryptoError where error.code == .limitExceeded {
            throw CKError(CK_RV(CKR_DATA_LEN_RANGE), error.reason)
        } catch let error as CryptoError where error.code == .invalidInput {
            throw CKError(CK_RV(encrypting ? CKR_DATA_LEN_RANGE : CKR_ENCRYPTED_DATA_LEN_RANGE), error.reason)
        } catch {
            throw CKError(CK_RV(CKR_DEVICE_ERROR), "\(error)")
        }
    }

    /// One RSA block. Length problems are *_LEN_RANGE; a failed decryption is
    /// CKR_ENCRYPTED_DATA_INVALID whatever went wrong inside it.
    static func rsa(_ input: [UInt8], key: AsymmetricKey, padding: RSACipher.Padding, encrypting: Bool, modulusBytes: Int) throws(CKError) -> [UInt8] {
        if encrypting {
            guard input.count <= RSACipher.maximumInput(padding, modulusBytes: modulusBytes) else {
                throw CKError(CK_RV(CKR_DATA_LEN_RANGE), "too much data for one RSA block")
            }
            do { return try RSACipher.encrypt(input, key: key, padding: padding) } catch {
                throw CKError(CK_RV(CKR_DATA_INVALID), "\(error)")
            }
        }
        guard input.count == modulusBytes else { throw CKError(CK_RV(CKR_ENCRYPTED_DATA_LEN_RANGE), "RSA ciphertext must have \(modulusBytes) bytes") }
        do { return try RSACipher.decrypt(input, key: key, padding: padding).bytes } catch {
            throw CKError(CK_RV(CKR_ENCRYPTED_DATA_INVALID), "decryption failed")
        }
    }
}
