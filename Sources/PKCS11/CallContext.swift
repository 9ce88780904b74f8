import Glibc

/// The session and token a call on a session is running on, for the thread running it
/// (`ModuleState.inSession` sets them for the call's length). The helpers a call goes through
/// look their session and token up again by handle; with these they skip the tables' shared
/// lock and the lookup: each is an atomic operation on a cache line every thread's calls share.
///
/// Stored unretained: `inSession` holds both for as long as they are set. Calls never nest, and
/// a fork waits until no call is inside (`Module`), so a child never inherits a set context.
enum CallContext {
    private static let sessionKey = makeKey()
    private static let tokenKey = makeKey()

    private static func makeKey() -> pthread_key_t {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }

    /// Runs `body` with `session` and `token` as this thread's current ones.
    static func with<R, E: Error>(_ session: Session, _ token: Token, _ body: () throws(E) -> R) throws(E) -> R {
        let previousSession = pthread_getspecific(sessionKey), previousToken = pthread_getspecific(tokenKey)
        pthread_setspecific(sessionKey, Unmanaged.passUnretained(session).toOpaque())
        pthread_setspecific(tokenKey, Unmanaged.passUnretained(token).toOpaque())
        defer {
            pthread_setspecific(sessionKey, previousSession)
            pthread_setspecific(tokenKey, previousToken)
        }
        return try withExtendedLifetime((session, token)) { () throws(E) -> R in try body() }
    }

    /// The current call's session, if it is `handle`.
    static func session(_ handle: UInt) -> Session? {
        guard let pointer = pthread_getspecific(sessionKey) else { return nil }
        let session = Unmanaged<Session>.fromOpaque(pointer).takeUnretainedValue()
        return session.handle == handle ? session : nil
    }

    /// The current call's token, if it is slot `slotID`'s.
    static func token(of slotID: UInt) -> Token? {
        guard let pointer = pthread_getspecific(tokenKey) else { return nil }
        let token = Unmanaged<Token>.fromOpaque(pointer).takeUnretainedValue()
        return token.slotID == slotID ? token : nil
    }
}
