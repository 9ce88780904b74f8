import Glibc

/// The session and token a call on a session is running on, for the thread running it
/// (`ModuleState.inSession` sets them for the call's length). The helpers a call goes through
/// look their session and token up again by handle; with these they skip the tables' shared
/// lock and the lookup: each is an atomic operation on a cache line every thread's calls share.
///
/// One thread-specific pointer to the call's frame on the stack, both references unretained:
/// `inSession` holds them while the frame exists. Calls never nest, and a fork waits until no
/// call is inside (`Module`), so a child never inherits a frame.
enum CallContext {
    private struct Frame {
        let session: Unmanaged<Session>
        let token: Unmanaged<Token>
    }

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// Runs `body` with `session` and `token` as this thread's current ones.
    static func with<R, E: Error>(_ session: Session, _ token: Token, _ body: () throws(E) -> R) throws(E) -> R {
        var frame = Frame(session: .passUnretained(session), token: .passUnretained(token))
        return try withExtendedLifetime((session, token)) { () throws(E) -> R in
            try withUnsafeBytes(of: &frame) { (bytes) throws(E) -> R in
                let previous = pthread_getspecific(key)
                pthread_setspecific(key, bytes.baseAddress)
                defer { pthread_setspecific(key, previous) }
                return try body()
            }
        }
    }

    private static var frame: Frame? {
        pthread_getspecific(key).map { UnsafeRawPointer($0).load(as: Frame.self) }
    }

    /// The current call's session, if it is `handle`.
    static func session(_ handle: UInt) -> Session? {
        guard let session = frame?.session.takeUnretainedValue(), session.handle == handle else { return nil }
        return session
    }

    /// The current call's token, if it is slot `slotID`'s.
    static func token(of slotID: UInt) -> Token? {
        guard let token = frame?.token.takeUnretainedValue(), token.slotID == slotID else { return nil }
        return token
    }
}
