import CPKCS11
import Glibc
import KeychainCore
import KeychainCrypto
import Logging
import KeychainTPM

/// Silent by default (the module runs inside other programs); `KEYCHAIN_PKCS11_LOG=debug` (or
/// trace, info…) prints each refused call with its reason to standard error. Never secrets.
let logger: Logger = {
    let level = getenv("KEYCHAIN_PKCS11_LOG").flatMap { Logger.Level(rawValue: String(cString: $0)) }
    var logger = Logger(label: "keychain-pkcs11") { label in
        level == nil ? SwiftLogNoOpLogHandler() as any LogHandler : StreamLogHandler.standardError(label: label)
    }
    logger.logLevel = level ?? .critical
    return logger
}()

/// tpm2-tss's lines (routed away from the host's stderr by KeychainTPM) go to the same log.
private let tpmLogHandler: TPMLog.Handler = { level, line in
    let mapped: Logger.Level = switch level {
    case .error: .error
    case .warning: .warning
    case .info: .info
    case .debug: .debug
    case .trace: .trace
    }
    logger.log(level: mapped, "tpm2-tss: \(line)")
}

/// The module's process-wide state: initialised by C_Initialize, torn down by C_Finalize, and
/// unusable in a forked child until that child calls C_Initialize itself.
///
/// Locking (Docs/architecture.md, "Threads"): this lock guards only which state is current and
/// is held for an instant; each call then runs on that state without it. The state's tables
/// have their own read/write lock (`ModuleState`), each session a lock held by the thread
/// running a call on it, each token a lock for its login and caches, each keychain a lock for
/// its database connection. None is held across cryptography, scrypt or key generation.
final class Module: @unchecked Sendable {
    static let shared = Module()

    private let lock = PThreadMutex()
    /// Held for reading by every call for its whole length, and for writing across fork():
    /// a fork waits until no call is inside the module, so that the child never inherits a lock
    /// of SQLite, OpenSSL or ours taken by another thread mid-call (the child's C_Initialize
    /// would wait for it for ever). Calls never nest, so no thread reads it twice.
    private let forkGate = PThreadRWLock(preferWriters: true)
    private var state: ModuleState?
    /// Set in a forked child: the state is the parent's (no getpid() on every call).
    private var inheritedByFork = false
    /// States left behind by fork: a child must not close its parent's SQLite connections.
    private var abandoned: [ModuleState] = []
    private var forkHandlersInstalled = false

    /// Runs `body` with the current state. The state stays valid for the call even if another
    /// thread finalizes the module meanwhile (its tables are then empty: the call fails cleanly).
    func withState<R>(_ body: (ModuleState) throws(CKError) -> R) throws(CKError) -> R {
        forkGate.lockForReading()
        defer { forkGate.unlock() }
        lock.lock()
        let current = inheritedByFork ? nil : state
        lock.unlock()
        guard let current else { throw CKError.notInitialized }
        return try body(current)
    }

    func initialize(configuration: Configuration) throws(CKError) {
        forkGate.lockForReading()
        defer { forkGate.unlock() }
        lock.lock()
        defer { lock.unlock() }
        if let state {
            if !inheritedByFork {
                throw CKError(CK_RV(CKR_CRYPTOKI_ALREADY_INITIALIZED), "C_Initialize was already called")
            }
            abandoned.append(state)
            self.state = nil
        }
        inheritedByFork = false
        installForkHandlers()
        let state = ModuleState(configuration: configuration)
        try state.start()
        self.state = state
    }

    func finalize() throws(CKError) {
        forkGate.lockForReading()
        defer { forkGate.unlock() }
        lock.lock()
        guard let state, !inheritedByFork else {
            lock.unlock()
            throw CKError.notInitialized
        }
        self.state = nil
        lock.unlock()
        // Calls already running keep their reference and finish; new calls see no state.
        state.stop()
    }

    /// Takes the gate for writing (no call inside any more, none can enter) and the lock across
    /// fork; parent and child each let both go afterwards, the child with no call inside.
    private func installForkHandlers() {
        guard !forkHandlersInstalled else { return }
        forkHandlersInstalled = true
        // Secure memory's handler first, so that it runs after the gate is closed.
        SecurePages.registerForkHandlers()
        pthread_atfork(
            {
                Module.shared.forkGate.lockForWriting()
                Module.shared.lock.lock()
            },
            {
                Module.shared.lock.unlock()
                Module.shared.forkGate.unlock()
            },
            {
                Module.shared.inheritedByFork = Module.shared.state != nil
                Module.shared.lock.unlock()
                Module.shared.forkGate.resetInForkedChild()
            })
    }
}

/// Everything C_Initialize creates: slots, sessions and object handles of this process.
/// `slots`, `sessions` and `handles` are read and changed only inside `tables.reading` /
/// `tables.writing`, held for the lookup or change alone (never while another lock is taken
/// inside, except a token's own lock for an instant).
final class ModuleState: @unchecked Sendable {
    let configuration: Configuration
    let directory: KeychainDirectory
    let tables = PThreadRWLock()
    var slots = SlotTable()
    var sessions = HandleMap<Session>()
    private var nextSessionHandle: CK_SESSION_HANDLE = 1
    var handles = ObjectHandleTable()

    init(configuration: Configuration) {
        self.configuration = configuration
        directory = KeychainDirectory(path: configuration.directory)
    }

    /// Discovers the keychains in the keychain folder. The folder is not made here: p11-kit
    /// loads the module into every program that lists its modules, as every user, and loading
    /// only looks; the folder appears with the first keychain (`KeychainDirectory.create`).
    func start() throws(CKError) {
        TPMLog.setHandler(tpmLogHandler)
        // (checkSafe passes a folder that does not exist yet.)
        do { try KeychainDirectory.checkSafe(directory.path, what: "keychain folder") } catch { logger.warning("keychain directory: \(error)") }
        tables.writing { slots.refresh(directory: directory, keepingSlotsWith: []) }
    }

    func stop() {
        let (closed, tokens) = tables.writing { () -> ([Session], [Token]) in
            let closed = Array(sessions.values)
            let tokens = slots.all.compactMap(\.token)
            sessions.removeAll()
            handles = ObjectHandleTable()
            slots = SlotTable()
            return (closed, tokens)
        }
        for session in closed { session.lock.withLock { session.close() } }
        for token in tokens { token.logout() }
    }

    func refreshSlots() {
        tables.writing {
            let busy = Set(sessions.values.map(\.slotID))
            slots.refresh(directory: directory, keepingSlotsWith: busy)
        }
    }

    // MARK: sessions

    func openSession(slotID: CK_SLOT_ID, readWrite: Bool) -> CK_SESSION_HANDLE {
        tables.writing {
            let handle = nextSessionHandle
            nextSessionHandle += 1
            sessions[handle] = Session(handle: handle, slotID: slotID, readWrite: readWrite)
            return handle
        }
    }

    func session(_ handle: CK_SESSION_HANDLE) throws(CKError) -> Session {
        if let current = CallContext.session(handle) { return current }
        guard let session = tables.reading({ sessions[handle] }) else { throw CKError.sessionHandleInvalid }
        return session
    }

    func sessions(on slotID: CK_SLOT_ID) -> [Session] {
        tables.reading { sessions.values.filter { $0.slotID == slotID } }
    }

    /// What an object handle refers to, if anything.
    func entry(_ handle: CK_OBJECT_HANDLE) -> ObjectEntry? {
        tables.reading { handles[handle] }
    }

    /// The token of a slot, if the slot holds a keychain.
    func token(of slotID: CK_SLOT_ID) -> Token? {
        if let current = CallContext.token(of: slotID) { return current }
        return tables.reading { slots[slotID]?.token }
    }

    /// Closes a session: out of the table at once (new calls on it fail), then, once a call
    /// running on it in another thread has returned, its operations end; its session objects
    /// go, and the token logs out with the last session.
    func closeSession(_ session: Session) {
        let (removed, token) = tables.writing { () -> ([CK_OBJECT_HANDLE], Token?) in
            guard sessions.removeValue(forKey: session.handle) != nil else { return ([], nil) }
            let removed = handles.removeSessionObjects(ownedBy: session.handle)
            let token = slots[session.slotID]?.token
            if !sessions.values.contains(where: { $0.slotID == session.slotID }) {
                handles.removeSessionObjects(onSlot: session.slotID)
                // Here, so that a session opened right after this one closed keeps its login.
                token?.logout()
            }
            return (removed, token)
        }
        session.lock.withLock { session.close() }
        token?.dropKeptCiphers(session: session.handle)
        for handle in removed { token?.forgetKey(handle) }
    }

    /// The session and the token it is open on.
    func withSession<R>(_ handle: CK_SESSION_HANDLE, _ body: (Session, Token) throws(CKError) -> R) throws(CKError) -> R {
        let session = try session(handle)
        guard let token = token(of: session.slotID) else {
            throw CKError(CK_RV(CKR_DEVICE_REMOVED), "the keychain of this session is gone")
        }
        return try body(session, token)
    }

    /// Runs a call on session `handle` holding the session's lock: calls on one session take
    /// turns (a host that shares a session between threads gets each call whole), calls on
    /// different sessions run at once. First the session catches up with logouts made through
    /// other sessions of its token.
    func inSession<R>(_ handle: CK_SESSION_HANDLE, _ body: () throws(CKError) -> R) throws(CKError) -> R {
        let session = try session(handle)
        return try session.lock.withLock { () throws(CKError) -> R in
            // Without a token (its keychain gone, or the module finalized meanwhile) the call's
            // own lookups give their errors, as before any context.
            guard let token = token(of: session.slotID) else { return try body() }
            session.catchUp(with: token)
            return try CallContext.with(session, token, body)
        }
    }
}
