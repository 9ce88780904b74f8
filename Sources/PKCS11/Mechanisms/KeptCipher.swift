import CPKCS11
import KeychainCore
import KeychainCrypto

/// The context of a session's last symmetric operation on a cached key (`Token.keptCiphers`,
/// one per session and direction), with what its key was checked for: the next
/// C_EncryptInit/C_DecryptInit of that session with the same key and mechanism restarts it with
/// the new IV and additional data, read where the caller has them, without decoding the
/// mechanism into owned values, looking the key up, checking its attributes again or making an
/// operation (`SymmetricFastPath`). A host encrypting many small messages under one key pays
/// about what OpenSSL's own EVP loop pays.
///
/// What makes the checks it skips stale drops it: the key's destruction, a logout, the module's
/// finalization, a change to a session key's attributes (all under the token's lock, as the key
/// cache), and for a token key any change to the keychain file (its version, compared at each
/// use). Its session's close drops it too.
final class KeptCipher {
    let handle: CK_OBJECT_HANDLE
    let mechanism: CK_MECHANISM_TYPE
    /// GCM: the tag length the context was made for (a different one takes the full path).
    let tagBits: CK_ULONG
    let encrypting: Bool
    /// The cached key bytes the context was made from (compared by identity when kept).
    let key: SecureBytes
    /// A token key's keychain version from before its checks; nil for a session key.
    let version: KeychainVersion?
    /// The session's operation while a message is under way, the same object each time.
    let operation: ActiveOperation
    let cipher: SymmetricCipher

    init(handle: CK_OBJECT_HANDLE, mechanism: CK_MECHANISM_TYPE, tagBits: CK_ULONG, encrypting: Bool, key: SecureBytes,
         version: KeychainVersion?, cipher: SymmetricCipher) {
        self.handle = handle
        self.mechanism = mechanism
        self.tagBits = tagBits
        self.encrypting = encrypting
        self.key = key
        self.version = version
        self.cipher = cipher
        operation = ActiveOperation(engine: .symmetric(cipher), outputLength: 0)
        operation.isKept = true
    }

    /// The token's key for the kept cipher of `session` in one direction.
    static func slot(session: CK_SESSION_HANDLE, encrypting: Bool) -> UInt { UInt(session) &<< 1 | (encrypting ? 1 : 0) }

    /// The mechanisms whose contexts are kept: AES in the modes a message loop uses, and
    /// ChaCha20-Poly1305.
    static func keeps(_ mechanism: CK_MECHANISM_TYPE) -> Bool {
        switch mechanism {
        case CK_MECHANISM_TYPE(CKM_AES_GCM), CK_MECHANISM_TYPE(CKM_AES_CBC), CK_MECHANISM_TYPE(CKM_AES_CBC_PAD), CK_MECHANISM_TYPE(CKM_AES_ECB),
             CK_MECHANISM_TYPE(UInt(CKM_CHACHA20_POLY1305)): return true
        default: return false
        }
    }
}

/// C_EncryptInit + C_Encrypt and C_DecryptInit + C_Decrypt on a kept cipher, straight from the
/// caller's arguments. Each answers nil whenever anything differs from the plain case — no kept
/// cipher, another key or mechanism, a parameter the full path would refuse, a length query, a
/// short buffer, an operation already active — and the full path then runs as if this did not
/// exist, giving every error code and state rule from one place.
enum SymmetricFastPath {
    /// The session and its token, in one look at the tables.
    private static func sessionAndToken(_ state: ModuleState, _ handle: CK_SESSION_HANDLE) -> (Session, Token)? {
        state.tables.reading { () -> (Session, Token)? in
            guard let session = state.sessions[handle], let token = state.slots[session.slotID]?.token else { return nil }
            return (session, token)
        }
    }

    /// C_EncryptInit / C_DecryptInit.
    static func initialize(_ handle: CK_SESSION_HANDLE, _ parameters: CallerKeptParameters, _ key: CK_OBJECT_HANDLE, encrypting: Bool) -> CK_RV? {
        OpenSSLErrorQueue.preserving { () -> CK_RV? in
            let answer = try? Module.shared.withState { state throws(CKError) -> CK_RV? in
                guard let (session, token) = sessionAndToken(state, handle) else { return nil }
                return session.lock.withLock { () -> CK_RV? in
                    let kind: OperationKind = encrypting ? .encrypt : .decrypt
                    guard session.operations[kind] == nil, let kept = token.keptCipher(session: handle, encrypting: encrypting),
                          kept.handle == key, kept.mechanism == parameters.mechanism, kept.tagBits == parameters.tagBits else { return nil }
                    if let version = kept.version {
                        guard let current = try? token.keychain.version(), current == version else { return nil }
                    }
                    do { try kept.cipher.restart(iv: parameters.iv, associatedData: parameters.associatedData) } catch {
                        token.dropKeptCipher(kept, session: handle)
                        return nil
                    }
                    kept.operation.reuse()
                    // As ModuleState.begin: the grace of a just-presented PIN ends with any operation.
                    session.pinJustPresented = false
                    session.operations[kind] = kept.operation
                    return CK_RV(CKR_OK)
                }
            }
            return answer ?? nil
        }
    }

    /// C_Encrypt / C_Decrypt of an operation a kept cipher runs, into a buffer with room for
    /// any result.
    static func singlePart(_ handle: CK_SESSION_HANDLE, input: UnsafeRawBufferPointer, output: CallerOutput<CK_BYTE>, encrypting: Bool) -> CK_RV? {
        guard !output.isLengthQuery, input.count <= Int(Int32.max) - 64 else { return nil }
        return OpenSSLErrorQueue.preserving { () -> CK_RV? in
            let answer = try? Module.shared.withState { state throws(CKError) -> CK_RV? in
                guard let session = state.tables.reading({ state.sessions[handle] }) else { return nil }
                return session.lock.withLock { () -> CK_RV? in
                    let kind: OperationKind = encrypting ? .encrypt : .decrypt
                    guard let operation = session.operations[kind], operation.isKept, operation.phase == .started,
                          case .symmetric(let cipher) = operation.engine else { return nil }
                    let bound = cipher.oneShotBound(input.count)
                    guard output.hasRoom(for: bound) else { return nil }
                    // A single-part call ends the operation whatever it returns (here: no length
                    // query and no short buffer, which the full path handles).
                    session.operations[kind] = nil
                    do throws(CKError) {
                        _ = try output.writeDirectly(bound: bound) { (room) throws(CKError) -> Int in
                            try ModuleState.run(encrypting: encrypting) { try cipher.oneShot(input, into: room) }
                        }
                        return CK_RV(CKR_OK)
                    } catch {
                        logger.debug("\(encrypting ? "C_Encrypt" : "C_Decrypt"): \(error.description)")
                        return error.rv
                    }
                }
            }
            return answer ?? nil
        }
    }
}
