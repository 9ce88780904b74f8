internal import BusSupport
import Glibc
import KeychainCore
import KeychainCrypto

/// The freedesktop Secret Service (org.freedesktop.secrets, API 0.2) over the user's keychains:
/// one collection per keychain, one item per password (SecretServiceItems). `start` connects to
/// the session bus and serves on a thread of its own, where every D-Bus call is handled, one at a
/// time, by the handler the dispatch table names (Dispatch.swift); `stop` ends it.
public final class SecretServiceServer: @unchecked Sendable {
    public static let busName = "org.freedesktop.secrets"

    let keys: KeySource
    /// Where the server's complaints go (keychaind: standard error). Never given a secret.
    let report: @Sendable (String) -> Void

    // The bus thread's state: only that thread touches these once the server runs.

    /// Open transfer sessions by object path (SessionInterface.swift).
    var sessions: [String: TransferSession] = [:]
    /// Prompts not yet run or dismissed, by object path (PromptInterface.swift).
    var prompts: [String: PendingPrompt] = [:]
    /// Numbers new session and prompt paths.
    var counter = 0
    /// Keychains kept open, by file (Collections.swift).
    var opened: [String: OpenedKeychain] = [:]
    /// The configuration as last read, and when (milliseconds, monotonic; Collections.swift).
    var configurationRead: (at: Int64, configuration: Configuration)?
    /// The last listing of the collections, while the keychain folder is unchanged.
    var listing: (stamp: FolderStamp, collections: [SecretCollection])?
    /// Master keys made from the key source's session keys, by file, kept while the source
    /// hands out the same key (KeychainItems.swift): one per unlock, not one per call.
    var masters: [String: (sessionKey: SecureBytes, master: MasterKey)] = [:]
    /// What calls found in each keychain, by file, while it is unchanged (KeychainItems.swift).
    var lookupCache: [String: KeychainLookups] = [:]
    /// The `session` collection's items (in memory only).
    let sessionCollection = SessionCollection()

    // Shared with other threads, under `lock`: the outcomes prompt workers post (PromptWorker.swift)
    // and whether `stop` was asked; `wake` rouses the bus thread for either.

    let lock = PThreadMutex()
    var outcomes: [PostedOutcome] = []
    private var stopping = false
    private(set) var wake: WakePipe?

    // Set by `start`, released by `stop` (the objects before the connection).

    private(set) var connection: BusConnection?
    private var registration: ObjectRegistration?
    private var thread: JoinableThread?
    private var whenBusEnds: @Sendable () -> Void = {}
    private var whenAskedToStop: @Sendable () -> Void = {}

    /// A server over `keys`; `report` receives what a person running the daemon should read.
    public init(keys: KeySource, report: @escaping @Sendable (String) -> Void) {
        self.keys = keys
        self.report = report
    }

    deinit {
        registration = nil
        connection = nil
    }

    // MARK: start and stop

    /// Connects to the session bus, registers the objects, asks for org.freedesktop.secrets
    /// without taking it from another owner, and serves on a thread of its own. Returns nil, or
    /// why it cannot serve (then nothing stays registered). `whenBusEnds` is called on the
    /// server's thread if the bus connection ends by itself (the login session is over);
    /// `whenAskedToStop` when a caller of this user sends keychaind's Stop (DaemonInterface).
    public func start(whenBusEnds: @escaping @Sendable () -> Void = {}, whenAskedToStop: @escaping @Sendable () -> Void = {}) -> String? {
        guard connection == nil else { return "the Secret Service is served already" }
        let connection: BusConnection
        do { connection = try BusConnection() } catch {
            return "no session bus (\(error.reason)): set DBUS_SESSION_BUS_ADDRESS"
        }
        let wake: WakePipe
        do { wake = try WakePipe() } catch { return "no pipe (\(error.reason))" }
        let registration: ObjectRegistration
        do { registration = try ObjectRegistration.register(self, on: connection) } catch {
            return "cannot register the Secret Service objects (\(error.reason))"
        }
        let requested = connection.requestName(Self.busName)
        if requested == -EEXIST {
            return "another Secret Service owns \(Self.busName)\(connection.ownerDescription(Self.busName)); keychaind does not take it over. "
                + "Stop that provider first (see 'keychainctl secret-service status')"
        }
        guard requested >= 0 else { return "cannot own \(Self.busName) (\(BusCallFailure(requested).reason))" }
        lock.withLock { stopping = false }
        self.wake = wake
        self.whenBusEnds = whenBusEnds
        self.whenAskedToStop = whenAskedToStop
        self.registration = registration
        self.connection = connection
        let thread = JoinableThread { [self] in run(connection) }
        guard thread.start() else {
            connection.releaseName(Self.busName)
            self.registration = nil
            self.connection = nil
            return "cannot start the Secret Service's thread"
        }
        self.thread = thread
        return nil
    }

    /// Stops serving: the bus thread releases the name and ends, then the objects are
    /// unregistered and the connection is flushed and closed. Call it from another thread than
    /// the server's. Prompt workers still asking finish on their own; their outcomes are dropped.
    public func stop() {
        lock.withLock { stopping = true }
        wake?.ring()
        thread?.join()
        thread = nil
        registration = nil
        connection = nil
    }

    private var isStopping: Bool { lock.withLock { stopping } }

    /// The bus thread: handles calls one at a time, and announces prompt outcomes when `wake` rings.
    private func run(_ connection: BusConnection) {
        while !isStopping {
            let processed = connection.process()
            if processed > 0 { continue }
            if processed < 0 {
                // The login session's bus is gone: so is the session keychaind serves.
                report("keychaind: the session bus connection ended (\(BusCallFailure(processed).reason)); stopping")
                whenBusEnds()
                break
            }
            // Wait for the bus, a prompt's outcome or `stop`, at most 500 ms.
            if let wake, connection.wait(orReadable: wake.readEnd, atMost: 500) { announceOutcomes() }
        }
        connection.releaseName(Self.busName)
    }

    /// keychaind's Stop was asked (on the bus thread): the daemon stops, and calls `stop`.
    func askedToStop() { whenAskedToStop() }

    /// A client left the bus: its sessions and prompts go with it.
    func forget(sender: String) {
        for (path, session) in sessions where session.sender == sender { sessions[path] = nil }
        for (path, prompt) in prompts where prompt.sender == sender { prompts[path] = nil }
    }

    // MARK: signals (on the bus thread)

    /// A signal carrying one object path (CollectionCreated, ItemChanged…).
    func emit(_ path: String, _ interface: String, _ member: String, objectPath: String) {
        connection?.signal(path, interface, member) { $0.string(objectPath, type: "o") }
    }

    func propertiesChanged(_ path: String, _ interface: String, _ names: [String]) {
        connection?.propertiesChanged(path, interface, names)
    }

    /// An item appeared in or left `collection`: the collection says so, and its Items changed.
    func itemsChanged(_ collection: SecretCollection, item: String, member: String) {
        emit(collection.path, CollectionInterface.name, member, objectPath: item)
        propertiesChanged(collection.path, CollectionInterface.name, ["Items", "Modified"])
    }
}

/// A pipe whose write end rouses the bus thread from `poll` (both ends non-blocking), closed in
/// `deinit`.
final class WakePipe: @unchecked Sendable {
    let readEnd: Int32
    private let writeEnd: Int32

    init() throws(SystemError) {
        let ends = try System.pipe()
        readEnd = ends.read
        writeEnd = ends.write
        for fd in [readEnd, writeEnd] { _ = try? System.fcntl(fd, F_SETFL, O_NONBLOCK) }
    }

    deinit {
        System.close(readEnd)
        System.close(writeEnd)
    }

    func ring() {
        let byte: UInt8 = 1
        _ = withUnsafeBytes(of: byte) { try? System.writeAll(writeEnd, $0) }
    }

    /// Empties the pipe (on the bus thread, before it looks at what rang).
    func drain() {
        var byte: UInt8 = 0
        while withUnsafeMutableBytes(of: &byte, { try? System.read(readEnd, into: $0) }) == 1 {}
    }
}
