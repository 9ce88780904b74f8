import CPKCS11
import Glibc
import KeychainCore
import Logging

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

/// The module's process-wide state: initialised by C_Initialize, torn down by C_Finalize, and
/// unusable in a forked child until that child calls C_Initialize itself.
final class Module: @unchecked Sendable {
    static let shared = Module()

    private let lock = PThreadMutex()
    private var state: ModuleState?
    private var ownerProcess: pid_t = 0
    /// States left behind by fork: a child must not close its parent's SQLite connections.
    private var abandoned: [ModuleState] = []
    private var forkHandlersInstalled = false

    /// Runs `body` with the state under the module lock.
    func withState<R>(_ body: (ModuleState) throws(CKError) -> R) throws(CKError) -> R {
        lock.lock()
        defer { lock.unlock() }
        guard let state, ownerProcess == getpid() else { throw CKError.notInitialized }
        return try body(state)
    }

    func initialize(configuration: Configuration) throws(CKError) {
        lock.lock()
        defer { lock.unlock() }
        if let state {
            if ownerProcess == getpid() {
                throw CKError(CK_RV(CKR_CRYPTOKI_ALREADY_INITIALIZED), "C_Initialize was already called")
            }
            abandoned.append(state)
            self.state = nil
        }
        installForkHandlers()
        let state = ModuleState(configuration: configuration)
        try state.start()
        self.state = state
        ownerProcess = getpid()
    }

    func finalize() throws(CKError) {
        lock.lock()
        defer { lock.unlock() }
        guard let state, ownerProcess == getpid() else { throw CKError.notInitialized }
        state.stop()
        self.state = nil
        ownerProcess = 0
    }

    /// Holds the lock across fork so the child never inherits it mid-call.
    private func installForkHandlers() {
        guard !forkHandlersInstalled else { return }
        forkHandlersInstalled = true
        pthread_atfork(
            { Module.shared.lock.lock() },
            { Module.shared.lock.unlock() },
            { Module.shared.lock.unlock() })
    }
}

/// Everything C_Initialize creates: slots, sessions and object handles of this process.
final class ModuleState {
    let configuration: Configuration
    let directory: KeychainDirectory
    var slots = SlotTable()
    var sessions: [CK_SESSION_HANDLE: Session] = [:]
    private var nextSessionHandle: CK_SESSION_HANDLE = 1
    var handles = ObjectHandleTable()

    init(configuration: Configuration) {
        self.configuration = configuration
        directory = KeychainDirectory(path: configuration.directory)
    }

    /// Creates the keychain folder on first use and discovers the keychains in it.
    func start() throws(CKError) {
        do { try directory.ensureExists() } catch { logger.warning("keychain directory: \(error)") }
        slots.refresh(directory: directory, keepingSlotsWith: [])
    }

    func stop() {
        for session in sessions.values { session.find = nil }
        sessions.removeAll()
        for slot in slots.all { slot.token?.logout() }
        handles = ObjectHandleTable()
        slots = SlotTable()
    }

    func refreshSlots() {
        let busy = Set(sessions.values.map(\.slotID))
        slots.refresh(directory: directory, keepingSlotsWith: busy)
    }

    // MARK: sessions

    func openSession(slotID: CK_SLOT_ID, readWrite: Bool) -> CK_SESSION_HANDLE {
        let handle = nextSessionHandle
        nextSessionHandle += 1
        sessions[handle] = Session(handle: handle, slotID: slotID, readWrite: readWrite)
        return handle
    }

    func session(_ handle: CK_SESSION_HANDLE) throws(CKError) -> Session {
        guard let session = sessions[handle] else { throw CKError.sessionHandleInvalid }
        return session
    }

    func sessions(on slotID: CK_SLOT_ID) -> [Session] {
        sessions.values.filter { $0.slotID == slotID }
    }

    /// Closes a session, destroys its session objects, and logs the token out with the last one.
    func closeSession(_ session: Session) {
        sessions[session.handle] = nil
        let token = slots[session.slotID]?.token
        for handle in handles.removeSessionObjects(ownedBy: session.handle) { token?.forgetKey(handle) }
        if sessions(on: session.slotID).isEmpty {
            slots[session.slotID]?.token?.logout()
            handles.removeSessionObjects(onSlot: session.slotID)
        }
    }

    /// The session and the token it is open on.
    func withSession<R>(_ handle: CK_SESSION_HANDLE, _ body: (Session, Token) throws(CKError) -> R) throws(CKError) -> R {
        let session = try session(handle)
        guard let token = slots[session.slotID]?.token else {
            throw CKError(CK_RV(CKR_DEVICE_REMOVED), "the keychain of this session is gone")
        }
        return try body(session, token)
    }
}
