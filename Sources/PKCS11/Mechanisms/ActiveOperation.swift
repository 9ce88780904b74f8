import CPKCS11
import KeychainCore
import KeychainCrypto

/// The kinds of operation a session can have active, one of each at a time.
enum OperationKind: Int, CaseIterable {
    case digest, sign, verify, encrypt, decrypt
}

/// A key ready for use: parsed once per login (PKCS11 keeps these in `Token.keyCache`). Exactly
/// one of the three is set.
///
/// Not an enum of class payloads: Swift keeps such an enum's case in the spare high bits of
/// the reference itself, where LeakSanitizer sees no pointer, so a cached secret key held only by
/// the cache read as leaked in the C API fuzzing runs (Docs/reliability.md). Optional
/// references are stored as plain pointers.
struct ReadyKey {
    let asymmetric: AsymmetricKey?
    let secret: SecureBytes?
    /// A private key made in the TPM (CKA_KC_TPM), loaded there: it holds the process's TPM
    /// connection, which closes when the last such key is dropped (logout, C_Finalize).
    let enclave: EnclaveKey?
    /// An ML-DSA or ML-KEM key (swift-crypto's, made from the seed once).
    var lattice: LatticeKey? = nil

    static func asymmetric(_ key: AsymmetricKey) -> ReadyKey { ReadyKey(asymmetric: key, secret: nil, enclave: nil) }
    static func secret(_ bytes: SecureBytes) -> ReadyKey { ReadyKey(asymmetric: nil, secret: bytes, enclave: nil) }
    static func enclave(_ key: EnclaveKey) -> ReadyKey { ReadyKey(asymmetric: nil, secret: nil, enclave: key) }
    static func lattice(_ key: LatticeKey) -> ReadyKey { ReadyKey(asymmetric: nil, secret: nil, enclave: nil, lattice: key) }

    /// The key's public form, for sizes and peer checks: the key itself, or a TPM key's public half.
    var publicForm: AsymmetricKey? { asymmetric ?? enclave?.publicKey }
}

/// The call a data step of an operation is: `C_Encrypt`, `C_EncryptUpdate`, `C_EncryptFinal` and
/// their digest, sign, verify and decrypt counterparts (`C_DigestKey` is an update).
enum OperationCall {
    case singlePart, update, final
}

/// An active C_*Init operation and how far it has gone.
final class ActiveOperation {
    /// Started: any call. After a single-part length query (or CKR_BUFFER_TOO_SMALL) only the
    /// single-part call; after an update only updates and the final call.
    enum Phase {
        case started, singlePart, multiPart
    }

    enum Engine {
        case digest(StreamingDigest)
        case signature(SignatureOperation)
        case mac(StreamingMAC)
        /// A signature made in the TPM with a CKA_KC_TPM key (the input hashed here first).
        case tpmSignature(TPMSigner)
        /// ML-DSA (the message collected, signed or verified whole at the end).
        case lattice(LatticeSigner)
        case symmetric(SymmetricCipher)
        /// RSA encryption or decryption: the input is collected and processed at the end.
        case rsa(AsymmetricKey, RSACipher.Padding, encrypting: Bool)
        /// The key's secret is sealed under its application password: the operation is built
        /// when C_Login(CKU_CONTEXT_SPECIFIC) presents it.
        case awaitingCredential
    }

    private(set) var engine: Engine
    /// The exact result length of signatures, MACs and digests (for length queries).
    private(set) var outputLength: Int
    /// For `.awaitingCredential`: the key, and how to build the operation once it is open.
    var pending: (key: CK_OBJECT_HANDLE, build: (Session, Token) throws(CKError) -> ActiveOperation)?
    /// The key is sealed by its application password (which, not the user PIN, is its
    /// context-specific PIN, also when presented again after the operation was released).
    var sealedKey: CK_OBJECT_HANDLE?
    /// Which calls the operation takes now (see `step`).
    var phase = Phase.started
    /// Input collected for RSA encryption and decryption.
    var collected: [UInt8] = []
    /// The key has CKA_ALWAYS_AUTHENTICATE (PKCS#11 §4.9): this operation accepts
    /// C_Login(CKU_CONTEXT_SPECIFIC) ...
    var alwaysAuthenticate = false
    /// ... and no step runs while this is set, until that login presents the user PIN.
    var awaitsContextLogin = false
    /// A symmetric operation on a cached key: when it finishes, its context is kept for the next
    /// operation on that key (`Token.idleCiphers`).
    var reusable: (entry: Token.IdleCipher, key: SecureBytes)?
    /// ... and, for a mechanism whose contexts sessions keep (`KeptCipher.keeps`), what its key
    /// was checked for: the context then becomes its session's kept cipher instead.
    var keepable: (mechanism: CK_MECHANISM_TYPE, tagBits: CK_ULONG, version: KeychainVersion?)?
    /// The operation is a kept cipher's (`KeptCipher.operation`), reused for each message.
    var isKept = false
    /// A verification begun by C_VerifySignatureInit (PKCS#11 3.2): the signature it was given
    /// (VerifySignature.swift). Nil for one begun by C_VerifyInit.
    var expectedSignature: [UInt8]?

    init(engine: Engine, outputLength: Int) {
        self.engine = engine
        self.outputLength = outputLength
    }

    /// Takes over the engine of the operation built once the key's credential was presented.
    func resume(with built: ActiveOperation) {
        engine = built.engine
        outputLength = built.outputLength
        pending = nil
    }

    deinit { wipe(&collected) }

    /// A kept cipher's operation starts again (its cipher restarted with the new IV).
    func reuse() {
        phase = .started
        awaitsContextLogin = false
        alwaysAuthenticate = false
    }

    /// Feeds input to a digest, signature or MAC.
    func absorb(_ data: UnsafeRawBufferPointer) throws(CKError) {
        do {
            switch engine {
            case .digest(let digest): try digest.update(data)
            case .signature(let signature): try signature.update(data)
            case .mac(let mac): try mac.update(data)
            case .tpmSignature(let signer): try signer.update(data)
            case .lattice(let signer): try signer.update(data)
            case .symmetric, .rsa, .awaitingCredential: throw CKError(CK_RV(CKR_GENERAL_ERROR), "not an absorbing operation")
            }
        } catch let error as CKError {
            throw error
        } catch {
            throw CKError(CK_RV(CKR_DATA_LEN_RANGE), "\(error)")
        }
    }

    /// The digest, signature or MAC.
    func result() throws(CKError) -> [UInt8] {
        do {
            switch engine {
            case .digest(let digest): return try digest.finish()
            case .signature(let signer): return try signer.sign()
            case .mac(let mac): return try mac.finish()
            case .tpmSignature(let signer): return try signer.sign()
            case .lattice(let signer): return try signer.sign()
            case .symmetric, .rsa, .awaitingCredential: throw CKError(CK_RV(CKR_GENERAL_ERROR), "not a signing operation")
            }
        } catch let error as CKError {
            throw error
        } catch let error as CryptoError where error.code == .invalidInput {
            throw CKError(CK_RV(CKR_DATA_LEN_RANGE), error.reason)
        } catch {
            throw CKError(CK_RV(CKR_DEVICE_ERROR), "\(error)")
        }
    }
}

/// The operation lifecycle (PKCS#11 §5.2, §5.8–§5.12), in one place: every data step of every
/// operation goes through `step`.
extension ModuleState {
    /// Runs one data step of the session's operation of `kind`. The rules, all here:
    /// - a single-part call or a final call ends the operation whatever it returns, except
    ///   CKR_BUFFER_TOO_SMALL and a successful length query (the body says `finished: false`);
    /// - a failed update ends it;
    /// - after a single-part length query the operation is single-part: an update or a final call
    ///   is CKR_OPERATION_ACTIVE; after an update a single-part call is CKR_OPERATION_ACTIVE
    ///   (and, being a single-part call, ends the operation).
    func step<R>(_ handle: CK_SESSION_HANDLE, _ kind: OperationKind, _ call: OperationCall,
                 _ body: (ActiveOperation) throws(CKError) -> (result: R, finished: Bool)) throws(CKError) -> R {
        let session = try session(handle)
        guard let operation = session.operations[kind] else {
            throw CKError(CK_RV(CKR_OPERATION_NOT_INITIALIZED), "no \(kind) operation is active")
        }
        do throws(CKError) {
            guard !operation.awaitsContextLogin else {
                throw CKError(CK_RV(CKR_USER_NOT_LOGGED_IN), "the key has CKA_ALWAYS_AUTHENTICATE: C_Login(CKU_CONTEXT_SPECIFIC) must follow C_\(kind == .sign ? "Sign" : "Decrypt")Init")
            }
            switch (operation.phase, call) {
            case (.singlePart, .update), (.singlePart, .final):
                throw CKError(CK_RV(CKR_OPERATION_ACTIVE), "a single-part \(kind) operation is in progress (its length was queried)")
            case (.multiPart, .singlePart):
                throw CKError(CK_RV(CKR_OPERATION_ACTIVE), "a multi-part \(kind) operation is in progress")
            default:
                break
            }
            let (result, finished) = try body(operation)
            if finished {
                session.operations[kind] = nil
                keepIdleCipher(of: operation, session: session)
            } else {
                operation.phase = call == .singlePart ? .singlePart : .multiPart
            }
            return result
        } catch {
            if error.rv == CK_RV(CKR_BUFFER_TOO_SMALL), call == .singlePart { operation.phase = .singlePart }
            endOperation(handle, kind, after: error)
            throw error
        }
    }

    /// Ends the session's operation of `kind` after a data step failed with `error` (unless the
    /// failure was CKR_BUFFER_TOO_SMALL, which leaves it for the call with a bigger buffer).
    func endOperation(_ handle: CK_SESSION_HANDLE, _ kind: OperationKind, after error: CKError) {
        guard error.rv != CK_RV(CKR_BUFFER_TOO_SMALL), let session = try? session(handle) else { return }
        session.operations[kind] = nil
    }

    /// Leaves the context of a finished symmetric operation for the next one on the same key, if
    /// the key is still the cached one (not after a logout or the key's destruction).
    private func keepIdleCipher(of operation: ActiveOperation, session: Session) {
        guard let (entry, key) = operation.reusable, case .symmetric(let cipher) = operation.engine,
              let token = token(of: session.slotID) else { return }
        if let keepable = operation.keepable {
            let kept = KeptCipher(handle: entry.handle, mechanism: keepable.mechanism, tagBits: keepable.tagBits, encrypting: entry.encrypting,
                                  key: key, version: keepable.version, cipher: cipher)
            if token.keep(kept, session: session.handle) { return }
        }
        token.keepIdle(cipher, as: entry, key: key)
    }

    /// Ends the active operation of `kind`, if any.
    func cancel(_ handle: CK_SESSION_HANDLE, _ kind: OperationKind) throws(CKError) {
        try session(handle).operations[kind] = nil
    }

    /// Starts an operation made by `make`, which must capture no caller memory other than the
    /// mechanism it is given: an operation on a key sealed by its application password is made
    /// again, with an owned copy of the mechanism, when C_Login(CKU_CONTEXT_SPECIFIC) opens the key.
    func begin(_ handle: CK_SESSION_HANDLE, _ kind: OperationKind, mechanism: CallerMechanism,
               _ make: @escaping (Session, Token, CallerMechanism) throws(CKError) -> ActiveOperation) throws(CKError) {
        try withSession(handle) { session, token throws(CKError) in
            guard session.operations[kind] == nil else { throw CKError(CK_RV(CKR_OPERATION_ACTIVE), "a \(kind) operation is already active") }
            let operation: ActiveOperation
            do throws(CKError) {
                operation = try make(session, token, mechanism)
                if operation.alwaysAuthenticate { operation.awaitsContextLogin = !session.pinJustPresented }
            } catch {
                guard let key = error.awaitingCredentialFor else { throw error }
                // The key's application password is its context-specific PIN: nothing else opens it.
                // The decoded mechanism owns its parameter: it is kept for that login.
                operation = ActiveOperation(engine: .awaitingCredential, outputLength: 0)
                operation.pending = (key, { session, token throws(CKError) in try make(session, token, mechanism) })
                operation.sealedKey = key
                operation.alwaysAuthenticate = true
                operation.awaitsContextLogin = true
            }
            // The grace of the signature right after C_Login(CKU_USER) ends with any operation.
            session.pinJustPresented = false
            session.operations[kind] = operation
        }
    }
}
