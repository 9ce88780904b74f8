import BusSupport
import CSystemd
import Glibc
import KeychainCore
import KeychainCrypto

/// The freedesktop Secret Service (org.freedesktop.secrets, API 0.2) over the user's keychains:
/// one collection per keychain, one item per password (SecretServiceItems). Runs on its own
/// thread; every D-Bus call is handled there, one at a time.
final class SecretService: @unchecked Sendable {
    static let name = "org.freedesktop.secrets"
    static let root = "/org/freedesktop/secrets"
    static let collectionPrefix = root + "/collection/"
    static let aliasPrefix = root + "/aliases/"
    static let sessionPrefix = root + "/session/"
    static let promptPrefix = root + "/prompt/"
    static let serviceInterface = "org.freedesktop.Secret.Service"
    static let collectionInterface = "org.freedesktop.Secret.Collection"
    static let itemInterface = "org.freedesktop.Secret.Item"
    static let sessionInterface = "org.freedesktop.Secret.Session"
    static let promptInterface = "org.freedesktop.Secret.Prompt"

    let keys: KeySource
    /// The session bus connection: opened by `start`, processed and closed by `run` (the service's thread).
    private(set) var bus: OpaquePointer?
    /// Open transfer sessions by object path (Sessions.swift).
    var sessions: [String: Session] = [:]
    /// Prompts not yet run or dismissed, by object path (Prompts.swift).
    var prompts: [String: Prompt] = [:]
    /// Numbers new session and prompt paths.
    var counter = 0

    /// Opened keychains by file, kept while the file is the same one (device and inode): a
    /// Keychain reads SQLite at each call, so it sees every other process's writes, and opening
    /// one per D-Bus call cost most of a call's time.
    var opened: [String: (device: UInt64, inode: UInt64, label: String, keychain: Keychain)] = [:]

    /// Prompts run on their own threads (a person may take minutes); their outcomes wait here
    /// for the bus thread, which `wake` rouses.
    let outcomeLock = PThreadMutex()
    var outcomes: [(path: String, action: PromptAction, outcome: PromptOutcome)] = []
    var wake: [Int32] = [-1, -1]
    /// Whether `run` is still in its loop; once it is not, the connection is `finish`'s.
    private let runLock = PThreadMutex()
    private var running = false

    init(keys: KeySource) {
        self.keys = keys
    }

    // MARK: start

    /// Connects to the session bus, registers the objects and asks for org.freedesktop.secrets
    /// without taking it from another owner. Returns nil, or why it cannot serve.
    func start() -> String? {
        var connection: OpaquePointer?
        let opened = sd_bus_open_user(&connection)
        guard opened >= 0, let connection else { return "no session bus (\(String(cString: strerror(-opened)))): set DBUS_SESSION_BUS_ADDRESS" }
        bus = connection
        do {
            let ends = try System.pipe()
            wake = [ends.read, ends.write]
        } catch {
            return "no pipe (\(error.reason))"
        }
        for fd in wake { _ = try? System.fcntl(fd, F_SETFL, O_NONBLOCK) }
        let registered = registerObjects(on: connection)
        guard registered >= 0 else { return "cannot register the Secret Service objects (\(String(cString: strerror(-registered))))" }
        // No queueing and no replacement: if gnome-keyring, KeePassXC or another keychaind owns
        // the name, it keeps it.
        let requested = sd_bus_request_name(connection, Self.name, 0)
        if requested == -EEXIST {
            return "another Secret Service owns \(Self.name)\(ownerDescription(connection)); keychaind does not take it over. "
                + "Stop that provider first (see 'keychainctl secret-service status')"
        }
        guard requested >= 0 else { return "cannot own \(Self.name) (\(String(cString: strerror(-requested))))" }
        running = true
        let service = self
        DetachedThread { service.run() }.start()
        return nil
    }

    /// Once stopRequested is set and the rest of the daemon has stopped: waits (2 s at most) for
    /// the service's thread to leave its loop, then drops the sessions' keys and the opened
    /// keychains, releases the name and closes the connection. The name goes last, so a client
    /// that sees it released knows the daemon is done. A thread still inside a call keeps the
    /// connection; the process's exit closes it (and the bus releases the name).
    func finish() {
        var waited = 0
        while runLock.withLock({ running }), waited < 200 {
            usleep(10_000)
            waited += 1
        }
        guard !runLock.withLock({ running }), let bus else { return }
        sessions.removeAll()
        prompts.removeAll()
        opened.removeAll()
        _ = sd_bus_release_name(bus, Self.name)
        sd_bus_flush_close_unref(bus)
        self.bus = nil
    }

    private func ownerDescription(_ connection: OpaquePointer) -> String {
        guard let owner = busNameOwner(connection, Self.name) else { return "" }
        return " (" + (owner.pid.map { "PID \($0)" } ?? "") + (owner.exe.map { ", \($0)" } ?? "") + ")"
    }

    private func run() {
        defer { runLock.withLock { running = false } }
        guard let bus else { return }
        while stopRequested == 0 {
            let processed = sd_bus_process(bus, nil)
            if processed > 0 { continue }
            if processed < 0 {
                // The login session's bus is gone: so is the session keychaind serves.
                complain("keychaind: the session bus connection ended (\(String(cString: strerror(-processed)))); stopping")
                stopRequested = 1
                break
            }
            // Wait for the bus, a prompt's outcome, or at most 500 ms (to see stopRequested).
            var fds = [pollfd(fd: sd_bus_get_fd(bus), events: Int16(truncatingIfNeeded: sd_bus_get_events(bus)), revents: 0),
                       pollfd(fd: wake[0], events: Int16(POLLIN), revents: 0)]
            var deadline: UInt64 = 0
            var wait: Int32 = 500
            if sd_bus_get_timeout(bus, &deadline) >= 0, deadline != UInt64.max {
                var now = timespec()
                clock_gettime(CLOCK_MONOTONIC, &now)
                let nowMicros = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
                wait = deadline <= nowMicros ? 0 : Int32(min(UInt64(wait), (deadline - nowMicros + 999) / 1000))
            }
            _ = try? System.poll(&fds, timeout: wait)
            if fds[1].revents != 0 { announceOutcomes() }
        }
    }

    func forget(sender: String) {
        for (path, session) in sessions where session.sender == sender { sessions[path] = nil }
        for (path, prompt) in prompts where prompt.sender == sender { prompts[path] = nil }
    }

    // MARK: dispatch

    /// A method call, to the handler of its interface.
    func call(_ message: OpaquePointer, path: String, interface: String, member: String) throws(Failure) -> Int32 {
        let sender = sd_bus_message_get_sender(message).map { String(cString: $0) } ?? ""
        let reader = BusReader(message: message)
        switch interface {
        case Self.serviceInterface: return try serviceMethod(member, message, reader, sender: sender)
        case Self.collectionInterface: return try collectionMethod(member, message, reader, path: path, sender: sender)
        case Self.itemInterface: return try itemMethod(member, message, reader, path: path, sender: sender)
        case Self.sessionInterface: return try sessionMethod(member, message, path: path, sender: sender)
        case Self.promptInterface: return try promptMethod(member, message, path: path, sender: sender)
        case Self.daemonInterface: return try daemonMethod(member, message)
        default: throw .unknownMethod(interface, member)
        }
    }

    func get(path: String, interface: String, property: String, writer: inout BusWriter) throws(Failure) {
        switch interface {
        case Self.serviceInterface: try serviceProperty(property, writer: &writer)
        case Self.collectionInterface: try collectionProperty(property, path: path, writer: &writer)
        case Self.itemInterface: try itemProperty(property, path: path, writer: &writer)
        default: throw .noSuchObject
        }
    }

    func set(path: String, interface: String, property: String, reader: BusReader) throws(Failure) {
        switch interface {
        case Self.collectionInterface: try setCollectionProperty(property)
        case Self.itemInterface: try setItemProperty(property, path: path, reader: reader)
        default: throw .readOnly(property)
        }
    }

    func exists(path: String, interface: String) -> Bool {
        switch interface {
        case Self.collectionInterface:
            if case .collection? = resolve(path) { return true }
            return false
        case Self.itemInterface:
            guard case .item(let collection, let uniqueID)? = resolve(path) else { return false }
            // A locked keychain's items cannot be looked up (their index needs the master key):
            // a well-formed item path there exists, and its calls answer IsLocked.
            if isLocked(collection) { return true }
            guard let (keychain, master) = try? open(collection) else { return false }
            guard var found = try? item(collection, uniqueID: uniqueID, keychain: keychain, master: master) else { return false }
            found.object.wipeValues()
            return true
        case Self.sessionInterface:
            return sessions[path] != nil
        case Self.promptInterface:
            return prompts[path] != nil
        default:
            return false
        }
    }

    /// Replies with what `fill` appends.
    func reply(_ message: OpaquePointer, _ fill: (inout BusWriter) -> Void) -> Int32 {
        var reply: OpaquePointer?
        guard sd_bus_message_new_method_return(message, &reply) >= 0, let reply else { return -ENOMEM }
        defer { sd_bus_message_unref(reply) }
        var writer = BusWriter(message: reply)
        fill(&writer)
        guard !writer.failed else { return -EINVAL }
        let sent = sd_bus_send(nil, reply, nil)
        return sent < 0 ? sent : 1
    }

    func send(_ reply: OpaquePointer, _ writer: BusWriter) throws(Failure) -> Int32 {
        guard !writer.failed else { throw .failed("cannot build the reply") }
        let sent = sd_bus_send(nil, reply, nil)
        return sent < 0 ? sent : 1
    }

    // MARK: signals

    func emit(_ path: String, _ interface: String, _ member: String, objectPath: String) {
        guard let bus else { return }
        var signal: OpaquePointer?
        guard sd_bus_message_new_signal(bus, &signal, path, interface, member) >= 0, let signal else { return }
        defer { sd_bus_message_unref(signal) }
        var writer = BusWriter(message: signal)
        writer.string(objectPath, type: "o")
        if !writer.failed { _ = sd_bus_send(bus, signal, nil) }
    }

    func propertiesChanged(_ path: String, _ interface: String, _ names: [String]) {
        guard let bus else { return }
        var pointers: [UnsafeMutablePointer<CChar>?] = names.map { strdup($0) }
        defer { pointers.forEach { free($0) } }
        pointers.append(nil)
        _ = pointers.withUnsafeMutableBufferPointer { sd_bus_emit_properties_changed_strv(bus, path, interface, $0.baseAddress) }
    }

    func itemsChanged(_ collection: KeychainCollection, item: String, member: String) {
        emit(collection.path, Self.collectionInterface, member, objectPath: item)
        propertiesChanged(collection.path, Self.collectionInterface, ["Items", "Modified"])
    }
}
