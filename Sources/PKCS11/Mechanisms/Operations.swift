import CPKCS11
import KeychainCore
import KeychainCrypto

/// The kinds of operation a session can have active, one of each at a time.
enum OperationKind: Hashable {
    case digest, sign, verify
}

/// An active C_DigestInit / C_SignInit / C_VerifyInit operation.
final class ActiveOperation {
    enum Engine {
        case digest(StreamingDigest)
        case signature(SignatureOperation)
    }

    let engine: Engine
    /// The exact length of the result (digest or signature), for length queries.
    let outputLength: Int
    /// Set by the first Update: the single-part call is then refused.
    var isMultiPart = false

    init(engine: Engine, outputLength: Int) {
        self.engine = engine
        self.outputLength = outputLength
    }

    func update(_ data: UnsafeRawBufferPointer) throws(CKError) {
        do {
            switch engine {
            case .digest(let digest): try digest.update(data)
            case .signature(let signature): try signature.update(data)
            }
        } catch {
            throw CKError(CK_RV(CKR_DATA_LEN_RANGE), "\(error)")
        }
    }
}

/// PKCS#11 §5.10–§5.12: digesting, signing and verifying, single- and multi-part.
extension ModuleState {
    /// Runs a step of an active operation. The operation ends on success, unless `keepsGoing`
    /// says so, and on any error but CKR_BUFFER_TOO_SMALL (PKCS#11 §5.2).
    private func step<R>(_ handle: CK_SESSION_HANDLE, _ kind: OperationKind, keepsGoing: Bool = false,
                         _ body: (ActiveOperation) throws(CKError) -> (result: R, finished: Bool)) throws(CKError) -> R {
        let session = try session(handle)
        guard let operation = session.operations[kind] else {
            throw CKError(CK_RV(CKR_OPERATION_NOT_INITIALIZED), "no \(kind) operation is active")
        }
        do {
            let (result, finished) = try body(operation)
            if finished && !keepsGoing { session.operations[kind] = nil }
            return result
        } catch where error.rv == CK_RV(CKR_BUFFER_TOO_SMALL) {
            throw error
        } catch {
            session.operations[kind] = nil
            throw error
        }
    }

    private func begin(_ handle: CK_SESSION_HANDLE, _ kind: OperationKind, _ make: (Session, Token) throws(CKError) -> ActiveOperation) throws(CKError) {
        try withSession(handle) { session, token throws(CKError) in
            guard session.operations[kind] == nil else { throw CKError(CK_RV(CKR_OPERATION_ACTIVE), "a \(kind) operation is already active") }
            session.operations[kind] = try make(session, token)
        }
    }

    // MARK: digest

    func digestInit(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism) throws(CKError) {
        try begin(handle, .digest) { _, _ throws(CKError) in
            guard case .digest(let algorithm) = try Mechanisms.mechanism(mechanism.type).role else {
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

    /// C_DigestKey: only secret keys can be digested; there are none of those yet.
    func digestKey(_ handle: CK_SESSION_HANDLE, key: CK_OBJECT_HANDLE) throws(CKError) {
        try step(handle, .digest) { _ throws(CKError) -> ((), Bool) in
            try withSession(handle) { session, token throws(CKError) -> ((), Bool) in
                guard handles[key]?.slotID == session.slotID, !(handles[key]?.isPrivate ?? false) || token.login == .user else {
                    throw CKError(CK_RV(CKR_KEY_HANDLE_INVALID), "no such key")
                }
                throw CKError(CK_RV(CKR_KEY_INDIGESTIBLE), "only secret keys can be digested")
            }
        }
    }

    // MARK: sign and verify

    func signInit(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism, key: CK_OBJECT_HANDLE) throws(CKError) {
        try begin(handle, .sign) { session, token throws(CKError) in
            try signatureOperation(mechanism, key: key, signing: true, session: session, token: token)
        }
    }

    func verifyInit(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism, key: CK_OBJECT_HANDLE) throws(CKError) {
        try begin(handle, .verify) { session, token throws(CKError) in
            try signatureOperation(mechanism, key: key, signing: false, session: session, token: token)
        }
    }

    private func signatureOperation(_ mechanism: CallerMechanism, key handle: CK_OBJECT_HANDLE, signing: Bool, session: Session, token: Token) throws(CKError) -> ActiveOperation {
        let entry = try Mechanisms.mechanism(mechanism.type)
        guard case .signature(let keyTypes, let makeScheme) = entry.role, entry.flags & CK_FLAGS(signing ? CKF_SIGN : CKF_VERIFY) != 0 else {
            throw CKError(CK_RV(CKR_MECHANISM_INVALID), "mechanism 0x\(String(mechanism.type, radix: 16)) cannot \(signing ? "sign" : "verify")")
        }
        let key = try usableKey(handle, session: session, token: token, objectClass: signing ? .privateKey : .publicKey,
                                usage: signing ? .sign : .verify, mechanism: entry, keyTypes: keyTypes)
        let scheme = try makeScheme(mechanism.parameter, key)
        do {
            let operation = try SignatureOperation(key: key, scheme: scheme, signing: signing)
            return ActiveOperation(engine: .signature(operation), outputLength: operation.signatureLength)
        } catch {
            throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "\(error)")
        }
    }

    /// The parsed key behind `handle`, after the checks every key operation makes: visible,
    /// of the right class and type, allowed this usage and this mechanism, of a size the
    /// mechanism takes. Parsed keys are cached until logout.
    func usableKey(_ handle: CK_OBJECT_HANDLE, session: Session, token: Token, objectClass: ObjectClass, usage: AttributeType,
                   mechanism: Mechanism, keyTypes: Set<KeyType>) throws(CKError) -> AsymmetricKey {
        guard let entry = handles[handle], entry.slotID == session.slotID, !entry.isPrivate || token.login == .user else {
            throw CKError(CK_RV(CKR_KEY_HANDLE_INVALID), "no such key")
        }
        let attributes: ObjectAttributes
        switch entry.location {
        case .session(let object): attributes = object.attributes
        case .token(let rowID):
            do { attributes = try token.keychain.object(id: rowID, master: token.userMaster) } catch where error.code == .objectNotFound {
                throw CKError(CK_RV(CKR_KEY_HANDLE_INVALID), "the key is gone")
            } catch { throw CKError(error) }
        }
        guard attributes.objectClass == objectClass, let keyType = attributes.keyType, keyTypes.contains(keyType) else {
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
        let key = try token.cachedKey(for: handle, attributes: attributes)
        let size = CK_ULONG(Self.mechanismKeySize(key))
        guard mechanism.minimumKeySize == 0 || (size >= mechanism.minimumKeySize && size <= mechanism.maximumKeySize) else {
            throw CKError(CK_RV(CKR_KEY_SIZE_RANGE), "a \(size)-bit key is outside this mechanism's range")
        }
        return key
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

    // MARK: the data steps, shared by digest, sign and verify

    /// C_Digest / C_Sign: the whole input at once, under the call-twice convention.
    func finishSinglePart(_ handle: CK_SESSION_HANDLE, _ kind: OperationKind, data: UnsafeRawBufferPointer,
                          output: UnsafeMutablePointer<CK_BYTE>?, length: UnsafeMutablePointer<CK_ULONG>?) throws(CKError) {
        try step(handle, kind) { operation throws(CKError) in
            guard !operation.isMultiPart else { throw CKError(CK_RV(CKR_OPERATION_ACTIVE), "a multi-part operation is in progress") }
            guard try Self.hasRoom(operation, output: output, length: length) else { return ((), false) }
            try operation.update(data)
            try OutputBuffer.write(try Self.result(of: operation), to: output, length: length)
            return ((), true)
        }
    }

    func update(_ handle: CK_SESSION_HANDLE, _ kind: OperationKind, data: UnsafeRawBufferPointer) throws(CKError) {
        try step(handle, kind, keepsGoing: true) { operation throws(CKError) in
            operation.isMultiPart = true
            try operation.update(data)
            return ((), true)
        }
    }

    /// C_DigestFinal / C_SignFinal.
    func finishMultiPart(_ handle: CK_SESSION_HANDLE, _ kind: OperationKind, output: UnsafeMutablePointer<CK_BYTE>?, length: UnsafeMutablePointer<CK_ULONG>?) throws(CKError) {
        try step(handle, kind) { operation throws(CKError) in
            guard try Self.hasRoom(operation, output: output, length: length) else { return ((), false) }
            try OutputBuffer.write(try Self.result(of: operation), to: output, length: length)
            return ((), true)
        }
    }

    /// C_Verify (with data) and C_VerifyFinal (data == nil).
    func verify(_ handle: CK_SESSION_HANDLE, data: UnsafeRawBufferPointer?, signature: UnsafeRawBufferPointer) throws(CKError) {
        try step(handle, .verify) { operation throws(CKError) in
            guard case .signature(let verifier) = operation.engine else { throw CKError(CK_RV(CKR_GENERAL_ERROR), "not a verification") }
            if let data {
                guard !operation.isMultiPart else { throw CKError(CK_RV(CKR_OPERATION_ACTIVE), "a multi-part operation is in progress") }
                try operation.update(data)
            }
            guard signature.count == operation.outputLength else {
                throw CKError(CK_RV(CKR_SIGNATURE_LEN_RANGE), "a signature has \(operation.outputLength) bytes")
            }
            let valid: Bool
            do { valid = try verifier.verify(Array(signature)) } catch { throw CKError(CK_RV(CKR_DEVICE_ERROR), "\(error)") }
            guard valid else { throw CKError(CK_RV(CKR_SIGNATURE_INVALID), "the signature does not verify") }
            return ((), true)
        }
    }

    /// Answers a length query (true: there is room to produce the result now).
    private static func hasRoom(_ operation: ActiveOperation, output: UnsafeMutablePointer<CK_BYTE>?, length: UnsafeMutablePointer<CK_ULONG>?) throws(CKError) -> Bool {
        guard let length else { throw CKError.argumentsBad }
        guard output != nil else {
            length.pointee = CK_ULONG(operation.outputLength)
            return false
        }
        guard length.pointee >= CK_ULONG(operation.outputLength) else {
            let needed = operation.outputLength
            length.pointee = CK_ULONG(needed)
            throw CKError.bufferTooSmall(required: needed)
        }
        return true
    }

    private static func result(of operation: ActiveOperation) throws(CKError) -> [UInt8] {
        do {
            switch operation.engine {
            case .digest(let digest): return try digest.finish()
            case .signature(let signer): return try signer.sign()
            }
        } catch let error as CryptoError where error.code == .invalidInput {
            throw CKError(CK_RV(CKR_DATA_LEN_RANGE), error.reason)
        } catch {
            throw CKError(CK_RV(CKR_DEVICE_ERROR), "\(error)")
        }
    }
}

extension Token {
    /// The OpenSSL key of a key object, parsed once while logged in.
    func cachedKey(for handle: CK_OBJECT_HANDLE, attributes: ObjectAttributes) throws(CKError) -> AsymmetricKey {
        if let key = keyCache[handle] { return key }
        let key = try translating { () throws(KeychainError) in try KeyFactory.key(of: attributes) }
        keyCache[handle] = key
        return key
    }
}
