import CPKCS11
import KeychainCore
import KeychainCrypto

/// The kinds of operation a session can have active, one of each at a time.
enum OperationKind: Int, CaseIterable {
    case digest, sign, verify, encrypt, decrypt
}

/// A key ready for use: parsed once per login (PKCS11 keeps these in `Token.keyCache`). Exactly
/// one of the two is set.
///
/// Not an enum of two class payloads: Swift keeps such an enum's case in the spare high bits of
/// the reference itself, where LeakSanitizer sees no pointer, so a cached secret key held only by
/// the cache read as leaked in the C API fuzzing runs (Docs/reliability.md). Two optional
/// references are stored as plain pointers.
struct ReadyKey {
    let asymmetric: AsymmetricKey?
    let secret: SecureBytes?

    static func asymmetric(_ key: AsymmetricKey) -> ReadyKey { ReadyKey(asymmetric: key, secret: nil) }
    static func secret(_ bytes: SecureBytes) -> ReadyKey { ReadyKey(asymmetric: nil, secret: bytes) }
}

/// An active C_*Init operation and how far it has gone.
final class ActiveOperation {
    enum Engine {
        case digest(StreamingDigest)
        case signature(SignatureOperation)
        case mac(StreamingMAC)
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
    /// Set by the first Update: the single-part call is then refused.
    var isMultiPart = false
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

    /// Feeds input to a digest, signature or MAC.
    func absorb(_ data: UnsafeRawBufferPointer) throws(CKError) {
        do {
            switch engine {
            case .digest(let digest): try digest.update(data)
            case .signature(let signature): try signature.update(data)
            case .mac(let mac): try mac.update(data)
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

/// PKCS#11 §5.10–§5.12: digesting, signing and verifying (MACs included), single- and multi-part.
extension ModuleState {
    /// Runs a step of an active operation. The operation ends when `body` says it finished and on
    /// any error but CKR_BUFFER_TOO_SMALL (PKCS#11 §5.2); a length query leaves it running.
    func step<R>(_ handle: CK_SESSION_HANDLE, _ kind: OperationKind,
                 _ body: (ActiveOperation) throws(CKError) -> (result: R, finished: Bool)) throws(CKError) -> R {
        let session = try session(handle)
        guard let operation = session.operations[kind] else {
            throw CKError(CK_RV(CKR_OPERATION_NOT_INITIALIZED), "no \(kind) operation is active")
        }
        guard !operation.awaitsContextLogin else {
            session.operations[kind] = nil
            throw CKError(CK_RV(CKR_USER_NOT_LOGGED_IN), "the key has CKA_ALWAYS_AUTHENTICATE: C_Login(CKU_CONTEXT_SPECIFIC) must follow C_\(kind == .sign ? "Sign" : "Decrypt")Init")
        }
        do {
            let (result, finished) = try body(operation)
            if finished {
                session.operations[kind] = nil
                keepIdleCipher(of: operation, session: session)
            }
            return result
        } catch where error.rv == CK_RV(CKR_BUFFER_TOO_SMALL) {
            throw error
        } catch {
            session.operations[kind] = nil
            throw error
        }
    }

    /// Leaves the context of a finished symmetric operation for the next one on the same key, if
    /// the key is still the cached one (not after a logout or the key's destruction).
    private func keepIdleCipher(of operation: ActiveOperation, session: Session) {
        guard let (entry, key) = operation.reusable, case .symmetric(let cipher) = operation.engine,
              let token = slots[session.slotID]?.token, token.keyCache[entry.handle]?.secret === key else { return }
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
                let owned = try mechanism.ownedCopy()
                operation = ActiveOperation(engine: .awaitingCredential, outputLength: 0)
                operation.pending = (key, { session, token throws(CKError) in try make(session, token, owned) })
                operation.sealedKey = key
                operation.alwaysAuthenticate = true
                operation.awaitsContextLogin = true
            }
            if kind == .sign || kind == .decrypt { session.pinJustPresented = false }
            session.operations[kind] = operation
        }
    }

    // MARK: digest

    func digestInit(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism) throws(CKError) {
        try begin(handle, .digest, mechanism: mechanism) { _, _, mechanism throws(CKError) in
            guard let algorithm = try Mechanisms.mechanism(mechanism.type).digest else {
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
        guard let token = slots[session.slotID]?.token else { throw CKError(CK_RV(CKR_DEVICE_REMOVED), "the keychain is gone") }
        try step(handle, .digest) { operation throws(CKError) -> ((), Bool) in
            let attributes = try keyAttributes(key, session: session, token: token)
            guard attributes.objectClass == .secretKey, let value = attributes[.value] else {
                throw CKError(CK_RV(CKR_KEY_INDIGESTIBLE), "only secret keys can be digested")
            }
            operation.isMultiPart = true
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
        let entry = try Mechanisms.mechanism(mechanism.type)
        guard entry.supports(signing ? CKF_SIGN : CKF_VERIFY) else {
            throw CKError(CK_RV(CKR_MECHANISM_INVALID), "mechanism 0x\(String(mechanism.type, radix: 16)) cannot \(signing ? "sign" : "verify")")
        }
        if let algorithm = entry.mac {
            try mechanism.parameter.requireEmpty()
            let secret = try secretKey(handle, session: session, token: token, usage: signing ? .sign : .verify, mechanism: entry)
            do {
                return ActiveOperation(engine: .mac(try StreamingMAC(algorithm, key: secret)), outputLength: algorithm.outputSize)
            } catch {
                throw CKError(CK_RV(CKR_KEY_SIZE_RANGE), "\(error)")
            }
        }
        guard let makeScheme = entry.signature else { throw CKError(CK_RV(CKR_MECHANISM_INVALID), "not a signature mechanism") }
        let key = try asymmetricKey(handle, session: session, token: token, objectClass: signing ? .privateKey : .publicKey,
                                    usage: signing ? .sign : .verify, mechanism: entry)
        let scheme = try makeScheme(mechanism.parameter, key)
        let active: ActiveOperation
        do {
            let operation = try SignatureOperation(key: key, scheme: scheme, signing: signing)
            active = ActiveOperation(engine: .signature(operation), outputLength: operation.signatureLength)
        } catch {
            throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "\(error)")
        }
        if signing { active.alwaysAuthenticate = try alwaysAuthenticates(handle, session: session, token: token) }
        return active
    }

    /// Whether a private key asks for the PIN at every use (CKA_ALWAYS_AUTHENTICATE).
    func alwaysAuthenticates(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token) throws(CKError) -> Bool {
        try keyPolicy(handle, session: session, token: token).bool(.alwaysAuthenticate)
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
            session.revealedKeys[pending.key] = try Token.parse(revealed)
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

    // MARK: keys for operations

    /// The attributes of a key object visible to the session.
    func keyAttributes(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token) throws(CKError) -> ObjectAttributes {
        guard let entry = handles[handle], entry.slotID == session.slotID, !entry.isPrivate || token.login == .user else {
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
        guard case .token? = handles[handle]?.location else { return try keyAttributes(handle, session: session, token: token) }
        let version = try translating { () throws(KeychainError) in try token.keychain.version() }
        if let cached = token.policyCache[handle], cached.version == version,
           handles[handle].map({ !$0.isPrivate || token.login == .user }) == true {
            return cached.attributes
        }
        let attributes = try keyAttributes(handle, session: session, token: token)
        token.policyCache[handle] = (version, attributes.withoutSecrets)
        return attributes
    }

    /// The checks every key operation makes: the right class and type, this usage allowed, this
    /// mechanism allowed. Returns the attributes (secret parts only if they were just read).
    func checkedKey(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token, objectClass: ObjectClass, usage: AttributeType,
                    mechanism: Mechanism) throws(CKError) -> ObjectAttributes {
        let attributes = try keyPolicy(handle, session: session, token: token)
        guard attributes.objectClass == objectClass, let keyType = attributes.keyType, mechanism.keyTypes.contains(keyType) else {
            throw CKError(CK_RV(CKR_KEY_TYPE_INCONSISTENT), "this key does not fit the mechanism")
        }
        guard attributes.bool(usage) else {
            throw CKError(CK_RV(CKR_KEY_FUNCTION_NOT_PERMITTED), "the key's attribute \(usage) is CK_FALSE")
        }
        if let allowed = attributes[.allowedMechanisms], !allowed.isEmpty {
            let types = stride(from: 0, to: allowed.count, by: AttributeValue.ulongSize).compactMap {
                AttributeValue.decodeULong(Array(allowed[$0..<($0 + AttributeValue.ulongSize)]))
            }
            guard types.contains(UInt(mechanism.type)) else { throw CKError(CK_RV(CKR_MECHANISM_INVALID), "not in CKA_ALLOWED_MECHANISMS") }
        }
        return attributes
    }

    func asymmetricKey(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token, objectClass: ObjectClass, usage: AttributeType,
                       mechanism: Mechanism) throws(CKError) -> AsymmetricKey {
        let attributes = try checkedKey(handle, session: session, token: token, objectClass: objectClass, usage: usage, mechanism: mechanism)
        guard let key = try readyKey(handle, policy: attributes, session: session, token: token).asymmetric else {
            throw CKError(CK_RV(CKR_KEY_TYPE_INCONSISTENT), "not an asymmetric key")
        }
        try Self.checkSize(Self.mechanismKeySize(key), mechanism)
        return key
    }

    func secretKey(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token, usage: AttributeType, mechanism: Mechanism) throws(CKError) -> SecureBytes {
        let attributes = try checkedKey(handle, session: session, token: token, objectClass: .secretKey, usage: usage, mechanism: mechanism)
        guard let value = try readyKey(handle, policy: attributes, session: session, token: token).secret else {
            throw CKError(CK_RV(CKR_KEY_TYPE_INCONSISTENT), "not a secret key")
        }
        try Self.checkSize(value.count, mechanism)
        return value
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
        if let key = token.keyCache[handle] { return key }
        // Public keys have no secret parts; for the others, `policy` holds them only when it was
        // just read in full (`withoutSecrets` strips every sensitive attribute).
        let complete = policy.objectClass == .publicKey || policy.values.keys.contains { AttributeTable.rule($0)?.flags.contains(.sensitive) == true }
        let attributes = complete ? policy : try keyAttributes(handle, session: session, token: token)
        return try token.readyKey(for: handle, attributes: attributes)
    }

    private static func checkSize(_ size: Int, _ mechanism: Mechanism) throws(CKError) {
        guard mechanism.minimumKeySize == 0 || (CK_ULONG(size) >= mechanism.minimumKeySize && CK_ULONG(size) <= mechanism.maximumKeySize) else {
            throw CKError(CK_RV(CKR_KEY_SIZE_RANGE), "a key of size \(size) is outside this mechanism's range")
        }
    }

    /// Key size in the units CK_MECHANISM_INFO uses: modulus bits, curve bits, 255 or 448
    /// for the Edwards and Montgomery curves.
    static func mechanismKeySize(_ key: AsymmetricKey) -> Int {
        switch key.kind {
        case .rsa: return key.bits
        case .ec(let curve): return curve.bits
        case .ed25519, .x25519: return 255
        case .ed448, .x448: return 448
        }
    }

    // MARK: the data steps of digest, sign and verify

    /// C_Digest / C_Sign: the whole input at once, under the call-twice convention.
    func finishSinglePart(_ handle: CK_SESSION_HANDLE, _ kind: OperationKind, data: UnsafeRawBufferPointer,
                          output: UnsafeMutablePointer<CK_BYTE>?, length: UnsafeMutablePointer<CK_ULONG>?) throws(CKError) {
        try step(handle, kind) { operation throws(CKError) in
            guard !operation.isMultiPart else { throw CKError(CK_RV(CKR_OPERATION_ACTIVE), "a multi-part operation is in progress") }
            guard try Self.hasRoom(operation.outputLength, output: output, length: length) else { return ((), false) }
            try operation.absorb(data)
            try OutputBuffer.write(try operation.result(), to: output, length: length)
            return ((), true)
        }
    }

    func update(_ handle: CK_SESSION_HANDLE, _ kind: OperationKind, data: UnsafeRawBufferPointer) throws(CKError) {
        try step(handle, kind) { operation throws(CKError) in
            operation.isMultiPart = true
            try operation.absorb(data)
            return ((), false)
        }
    }

    /// C_DigestFinal / C_SignFinal.
    func finishMultiPart(_ handle: CK_SESSION_HANDLE, _ kind: OperationKind, output: UnsafeMutablePointer<CK_BYTE>?, length: UnsafeMutablePointer<CK_ULONG>?) throws(CKError) {
        try step(handle, kind) { operation throws(CKError) in
            guard try Self.hasRoom(operation.outputLength, output: output, length: length) else { return ((), false) }
            try OutputBuffer.write(try operation.result(), to: output, length: length)
            return ((), true)
        }
    }

    /// C_Verify (with data) and C_VerifyFinal (data == nil).
    func verify(_ handle: CK_SESSION_HANDLE, data: UnsafeRawBufferPointer?, signature: UnsafeRawBufferPointer) throws(CKError) {
        try step(handle, .verify) { operation throws(CKError) in
            if let data {
                guard !operation.isMultiPart else { throw CKError(CK_RV(CKR_OPERATION_ACTIVE), "a multi-part operation is in progress") }
                try operation.absorb(data)
            }
            guard signature.count == operation.outputLength else {
                throw CKError(CK_RV(CKR_SIGNATURE_LEN_RANGE), "a signature has \(operation.outputLength) bytes")
            }
            let valid: Bool
            switch operation.engine {
            case .signature(let verifier):
                do { valid = try verifier.verify(Array(signature)) } catch { throw CKError(CK_RV(CKR_DEVICE_ERROR), "\(error)") }
            case .mac:
                valid = ConstantTime.equals(try operation.result(), Array(signature))
            default:
                throw CKError(CK_RV(CKR_GENERAL_ERROR), "not a verification")
            }
            guard valid else { throw CKError(CK_RV(CKR_SIGNATURE_INVALID), "the signature does not verify") }
            return ((), true)
        }
    }

    /// Answers a length query (false) or checks there is room for `needed` bytes (true).
    static func hasRoom(_ needed: Int, output: UnsafeMutablePointer<CK_BYTE>?, length: UnsafeMutablePointer<CK_ULONG>?) throws(CKError) -> Bool {
        guard let length else { throw CKError.argumentsBad }
        guard output != nil else {
            length.pointee = CK_ULONG(needed)
            return false
        }
        guard length.pointee >= CK_ULONG(needed) else {
            length.pointee = CK_ULONG(needed)
            throw CKError.bufferTooSmall(required: needed)
        }
        return true
    }
}

extension Token {
    /// The usable form of a key object, parsed once while logged in.
    func readyKey(for handle: CK_OBJECT_HANDLE, attributes: ObjectAttributes) throws(CKError) -> ReadyKey {
        if let key = keyCache[handle] { return key }
        let key = try Self.parse(attributes)
        keyCache[handle] = key
        return key
    }

    static func parse(_ attributes: ObjectAttributes) throws(CKError) -> ReadyKey {
        if attributes.objectClass == .secretKey { return .secret(SecureBytes(attributes[.value] ?? [])) }
        return .asymmetric(try translating { () throws(KeychainError) in try KeyFactory.key(of: attributes) })
    }
}
