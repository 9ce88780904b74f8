import BusSupport
import CSecretService
import CSystemd
import Glibc
import KeychainCore
import KeychainCrypto

/// Where the Secret Service gets master keys and unlocks keychains: this daemon's own unlock
/// session, or (when another keychaind already serves the socket) that daemon through its socket.
protocol KeySource: AnyObject, Sendable {
    /// The session's key of the keychain at `path` (a use: it restarts the idle timer); nil when
    /// it is locked.
    func sessionKey(path: String) -> SecureBytes?
    /// Whether the keychain is unlocked, without using it (the idle timer keeps running).
    func isHeld(path: String) -> Bool
    /// Unlocks with `pin` (checked and counted by the keychain).
    func unlock(path: String, pin: UnsafeRawBufferPointer) -> Result<Void, KeychainError>
    func lock(path: String)
}

extension Daemon: KeySource {
    func unlock(path: String, pin: UnsafeRawBufferPointer) -> Result<Void, KeychainError> {
        var copy = Array(pin)
        defer { wipe(&copy) }
        let (status, fields) = unlock(path: path, pin: copy, idleTimeout: 0)
        if status == .ok { return .success(()) }
        let reason = fields.first.map { String(decoding: $0, as: UTF8.self) } ?? "refused"
        return .failure(KeychainError(reason.hasPrefix("pin") ? .pinIncorrect : .storageFailure, reason))
    }

    func lock(path: String) { lockKeychain(path: path) }
}

/// Another keychaind's unlock session, through its socket.
final class SocketKeySource: KeySource, @unchecked Sendable {
    func sessionKey(path: String) -> SecureBytes? {
        guard let keychain = try? Keychain.open(at: path), let master = UnlockSession.masterKey(for: keychain) else { return nil }
        return keychain.exportedMasterKey(master)
    }

    func isHeld(path: String) -> Bool { UnlockSession.holds(path) }

    func unlock(path: String, pin: UnsafeRawBufferPointer) -> Result<Void, KeychainError> {
        UnlockSession.unlock(path: path, pin: pin, idleTimeout: 0) ?? .failure(KeychainError(.storageFailure, "keychaind does not answer"))
    }

    func lock(path: String) { UnlockSession.lock(path: path) }
}

/// The freedesktop Secret Service (org.freedesktop.secrets, API 0.2) over the user's keychains:
/// one collection per keychain, one item per password (SecretServiceItems). Runs on its own
/// thread; every D-Bus call is handled there, one at a time.
final class SecretService: @unchecked Sendable {
    nonisolated(unsafe) static var current: SecretService?

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

    enum Failure: Error {
        case error(String, String)
        static let noSuchObject = Failure.error("org.freedesktop.Secret.Error.NoSuchObject", "No such object")
        static func isLocked(_ what: String) -> Failure { .error("org.freedesktop.Secret.Error.IsLocked", "\(what) is locked: unlock it first (keychainctl unlock, or the Unlock method)") }
        static let noSession = Failure.error("org.freedesktop.Secret.Error.NoSession", "The session does not exist")
        static func invalid(_ why: String) -> Failure { .error("org.freedesktop.DBus.Error.InvalidArgs", why) }
        static func notSupported(_ why: String) -> Failure { .error("org.freedesktop.DBus.Error.NotSupported", why) }
        static func failed(_ why: String) -> Failure { .error("org.freedesktop.DBus.Error.Failed", why) }
    }

    /// An open transfer session of one client connection.
    final class Session {
        let sender: String
        let key: SecureBytes?
        init(sender: String, key: SecureBytes?) {
            self.sender = sender
            self.key = key
        }
    }

    /// What a prompt does when its caller runs it.
    enum PromptAction {
        /// Unlock these keychains; the result lists the object paths the caller named that are then unlocked.
        case unlock(keychains: [Collection], objects: [String])
        /// Make a keychain (its SO PIN and user PIN are asked), optionally the default alias.
        case create(label: String, alias: String)
        /// Delete a keychain and everything in it (its SO PIN is asked).
        case delete(Collection)
    }

    final class Prompt {
        let sender: String
        let action: PromptAction
        init(sender: String, action: PromptAction) {
            self.sender = sender
            self.action = action
        }
    }

    /// A keychain as a collection.
    struct Collection: Equatable {
        let file: String
        let label: String
        var path: String { SecretService.collectionPrefix + SecretService.pathElement(label) }
    }

    let keys: KeySource
    private var bus: OpaquePointer?
    private var sessions: [String: Session] = [:]
    private var prompts: [String: Prompt] = [:]
    private var counter = 0

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
        Self.current = self
        guard pipe(&wake) == 0 else { return "no pipe (\(String(cString: strerror(errno))))" }
        for fd in wake {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, O_NONBLOCK)
        }
        let registered = kc_secret_service_register(connection, secretServiceMethod, secretServiceGet, secretServiceSet, secretServiceFind)
        guard registered >= 0 else { return "cannot register the Secret Service objects (\(String(cString: strerror(-registered))))" }
        // Sessions and prompts end with the connection that opened them.
        _ = sd_bus_match_signal(connection, nil, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameOwnerChanged",
                                { message, _, _ in
                                    guard let message else { return 0 }
                                    let reader = BusReader(message: message)
                                    if let name = reader.string(), reader.string() != nil, let newOwner = reader.string(), newOwner.isEmpty {
                                        SecretService.current?.forget(sender: name)
                                    }
                                    return 0
                                }, nil)
        // No queueing and no replacement: if gnome-keyring, KeePassXC or another keychaind owns
        // the name, it keeps it.
        let requested = sd_bus_request_name(connection, Self.name, 0)
        if requested == -EEXIST {
            return "another Secret Service owns \(Self.name)\(ownerDescription(connection)); keychaind does not take it over. "
                + "Stop that provider first (see 'keychainctl secret-service status')"
        }
        guard requested >= 0 else { return "cannot own \(Self.name) (\(String(cString: strerror(-requested))))" }
        let service = self
        Thread { service.run() }.start()
        return nil
    }

    private func ownerDescription(_ connection: OpaquePointer) -> String {
        guard let owner = busNameOwner(connection, Self.name) else { return "" }
        return " (" + (owner.pid.map { "PID \($0)" } ?? "") + (owner.exe.map { ", \($0)" } ?? "") + ")"
    }

    private func run() {
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
            _ = poll(&fds, 2, wait)
            if fds[1].revents != 0 { announceOutcomes() }
        }
        _ = sd_bus_release_name(bus, Self.name)
        sd_bus_flush_close_unref(bus)
    }

    func forget(sender: String) {
        for (path, session) in sessions where session.sender == sender { sessions[path] = nil }
        for (path, prompt) in prompts where prompt.sender == sender { prompts[path] = nil }
    }

    // MARK: names

    /// A D-Bus path element for a label: letters and digits kept, any other byte as _XX.
    static func pathElement(_ label: String) -> String {
        var out = ""
        for byte in label.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                out.unicodeScalars.append(UnicodeScalar(byte))
            default:
                out += "_" + String(byte, radix: 16).leftPadded(2)
            }
        }
        return out.isEmpty ? "_" : out
    }

    /// Opened keychains by file, kept while the file is the same one (device and inode): a
    /// Keychain reads SQLite at each call, so it sees every other process's writes, and opening
    /// one per D-Bus call cost most of a call's time.
    private var opened: [String: (device: UInt64, inode: UInt64, label: String, keychain: Keychain)] = [:]

    func collections() -> [Collection] {
        let files = KeychainDirectory(path: Configuration.current().directory).keychainFiles()
        var kept: [String: (device: UInt64, inode: UInt64, label: String, keychain: Keychain)] = [:]
        var result: [Collection] = []
        for file in files {
            var info = stat()
            guard stat(file, &info) == 0 else { continue }
            let device = UInt64(info.st_dev), inode = UInt64(info.st_ino)
            if let cached = opened[file], cached.device == device, cached.inode == inode {
                kept[file] = cached
            } else if let keychain = try? Keychain.open(at: file), let label = try? keychain.info(countingObjects: false).label {
                kept[file] = (device, inode, label, keychain)
            } else {
                continue
            }
            if let entry = kept[file] { result.append(Collection(file: file, label: entry.label)) }
        }
        opened = kept
        return result
    }

    private func keychain(_ collection: Collection) throws(Failure) -> Keychain {
        if let cached = opened[collection.file] { return cached.keychain }
        do { return try Keychain.open(at: collection.file) } catch { throw .failed("cannot open keychain '\(printable(collection.label))': \(error.reason)") }
    }

    /// The default keychain, as keychainctl chooses it: the configured default, else "login",
    /// else the only one.
    func defaultCollection(_ all: [Collection]) -> Collection? {
        if let wanted = Configuration.current().defaultKeychain, let match = all.first(where: { $0.label == wanted }) { return match }
        if let login = all.first(where: { $0.label == "login" }) { return login }
        return all.count == 1 ? all.first : nil
    }

    enum Target {
        case collection(Collection)
        case item(Collection, uniqueID: String)

        /// The collection named, or the item's.
        var collection: Collection {
            switch self {
            case .collection(let collection), .item(let collection, _): return collection
            }
        }
    }

    /// What a collection or item path (or its alias form) names; nil when nothing.
    func resolve(_ path: String) -> Target? {
        let all = collections()
        var rest: Substring
        var collection: Collection?
        if path.hasPrefix(Self.collectionPrefix) {
            rest = path.dropFirst(Self.collectionPrefix.count)
            let element = rest.prefix { $0 != "/" }
            collection = all.first { Self.pathElement($0.label) == element }
            rest = rest.dropFirst(element.count)
        } else if path.hasPrefix(Self.aliasPrefix) {
            rest = path.dropFirst(Self.aliasPrefix.count)
            let alias = rest.prefix { $0 != "/" }
            guard alias == "default" else { return nil }
            collection = defaultCollection(all)
            rest = rest.dropFirst(alias.count)
        } else {
            return nil
        }
        guard let collection else { return nil }
        if rest.isEmpty { return .collection(collection) }
        guard rest.first == "/" else { return nil }
        let uniqueID = String(rest.dropFirst())
        guard uniqueID.count == 32, uniqueID.utf8.allSatisfy({ Hex.value($0) != nil }) else { return nil }
        return .item(collection, uniqueID: uniqueID)
    }

    func itemPath(_ collection: Collection, _ object: ObjectAttributes) -> String? {
        guard let unique = object[.uniqueID], !unique.isEmpty else { return nil }
        return collection.path + "/" + String(decoding: unique, as: UTF8.self)
    }

    // MARK: keychains

    /// The open keychain and its master key (nil while locked).
    func open(_ collection: Collection) throws(Failure) -> (Keychain, MasterKey?) {
        let keychain = try keychain(collection)
        guard let key = keys.sessionKey(path: collection.file) else { return (keychain, nil) }
        return (keychain, try? keychain.masterKey(fromSession: key))
    }

    func unlocked(_ collection: Collection) throws(Failure) -> (Keychain, MasterKey) {
        let (keychain, master) = try open(collection)
        guard let master else { throw .isLocked("Keychain '\(collection.label)'") }
        return (keychain, master)
    }

    func isLocked(_ collection: Collection) -> Bool { !keys.isHeld(path: collection.file) }

    /// The item's row and object; NoSuchObject when it is gone, not a password, or one whose
    /// access control asks a credential at each use (user presence, an application password):
    /// the Secret Service has no way to ask it, so such items are not served over D-Bus.
    /// Damage found on the way is reported, not hidden as a missing item.
    func item(_ collection: Collection, uniqueID: String, keychain: Keychain, master: MasterKey?) throws(Failure) -> (row: Int64, object: ObjectAttributes) {
        do {
            let rows = try keychain.find([(.uniqueID, Array(uniqueID.utf8)), (.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue))], master: master)
            guard let row = rows.first else { throw Failure.noSuchObject }
            var object = try keychain.object(id: row.id, master: master)
            guard Self.isServed(object) else {
                object.wipeValues()
                throw Failure.noSuchObject
            }
            return (row.id, object)
        } catch let failure as Failure {
            throw failure
        } catch let error as KeychainError where error.code == .recordCorrupted {
            throw .failed("keychain '\(printable(collection.label))' is damaged or was altered: \(error.reason) (keychainctl verify)")
        } catch {
            throw .noSuchObject
        }
    }

    /// Items whose secret needs nothing beyond the unlocked keychain.
    static func isServed(_ object: ObjectAttributes) -> Bool { object.requiredCredential == .none }


    /// Items of `collection` showing every pair of `wanted` (those served over D-Bus).
    func search(_ collection: Collection, _ wanted: [String: String], keychain: Keychain, master: MasterKey?) throws(Failure) -> [String] {
        var seen: Set<Int64> = []
        var paths: [String] = []
        do {
            for template in SecretServiceItems.searchTemplates(wanted) {
                for row in try keychain.find(template, master: master) where !seen.contains(row.id) {
                    seen.insert(row.id)
                    guard var object = try? keychain.object(id: row.id, master: master) else { continue }
                    defer { object.wipeValues() }
                    guard Self.isServed(object), SecretServiceItems.matches(object, wanted), let path = itemPath(collection, object) else { continue }
                    paths.append(path)
                }
            }
        } catch {
            throw .failed("keychain '\(printable(collection.label))' could not be searched: \(error.reason) (keychainctl verify)")
        }
        return paths
    }

    // MARK: secrets in transfer

    func session(_ path: String, sender: String) throws(Failure) -> Session {
        guard let session = sessions[path], session.sender == sender else { throw .noSession }
        return session
    }

    func encode(_ secret: [UInt8], contentType: String, sessionPath: String, session: Session, into writer: inout BusWriter) throws(Failure) {
        if let key = session.key {
            do {
                let sealed = try SecretServiceTransport.encrypt(secret, key: key)
                writer.secret(session: sessionPath, parameters: sealed.iv, value: sealed.value, contentType: contentType)
            } catch {
                throw .failed("cannot encrypt the secret")
            }
        } else {
            writer.secret(session: sessionPath, parameters: [], value: secret, contentType: contentType)
        }
    }

    func decode(_ secret: (session: String, parameters: [UInt8], value: [UInt8], contentType: String), sender: String) throws(Failure) -> [UInt8] {
        let session = try session(secret.session, sender: sender)
        guard let key = session.key else {
            guard secret.parameters.isEmpty else { throw .invalid("a plain session's secret has no parameters") }
            return secret.value
        }
        do { return try SecretServiceTransport.decrypt(secret.value, iv: secret.parameters, key: key).bytes } catch {
            throw .invalid("The secret was transferred or encrypted in an invalid way.")
        }
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

    func itemsChanged(_ collection: Collection, item: String, member: String) {
        emit(collection.path, Self.collectionInterface, member, objectPath: item)
        propertiesChanged(collection.path, Self.collectionInterface, ["Items", "Modified"])
    }

    // MARK: dispatch

    func call(_ message: OpaquePointer, path: String, interface: String, member: String) throws(Failure) -> Int32 {
        let sender = sd_bus_message_get_sender(message).map { String(cString: $0) } ?? ""
        let reader = BusReader(message: message)
        switch (interface, member) {
        case (Self.serviceInterface, "OpenSession"): return try openSession(message, reader, sender: sender)
        case (Self.serviceInterface, "CreateCollection"): return try createCollection(message, reader, sender: sender)
        case (Self.serviceInterface, "SearchItems"):
            guard let wanted = reader.stringDictionary() else { throw .invalid("attributes") }
            var unlocked: [String] = [], locked: [String] = []
            for collection in collections() {
                let (keychain, master) = try open(collection)
                let found = try search(collection, wanted, keychain: keychain, master: master)
                if master == nil { locked += found } else { unlocked += found }
            }
            return reply(message) { $0.objectPaths(unlocked); $0.objectPaths(locked) }
        case (Self.serviceInterface, "Unlock"): return try unlock(message, reader, sender: sender)
        case (Self.serviceInterface, "Lock"):
            guard let objects = reader.objectPaths() else { throw .invalid("objects") }
            var done: [String] = []
            var lockedNow: Set<String> = []
            for object in objects {
                guard let collection = resolve(object)?.collection else { continue }
                done.append(object)
                guard !lockedNow.contains(collection.file) else { continue }
                lockedNow.insert(collection.file)
                keys.lock(path: collection.file)
                propertiesChanged(collection.path, Self.collectionInterface, ["Locked"])
                emit(Self.root, Self.serviceInterface, "CollectionChanged", objectPath: collection.path)
            }
            return reply(message) { $0.objectPaths(done); $0.string("/", type: "o") }
        case (Self.serviceInterface, "GetSecrets"):
            guard let items = reader.objectPaths(), let sessionPath = reader.string("o") else { throw .invalid("items, session") }
            let session = try session(sessionPath, sender: sender)
            var secrets: [(String, [UInt8], String)] = []
            defer { for index in secrets.indices { wipe(&secrets[index].1) } }
            for path in items {
                guard case .item(let collection, let uniqueID)? = resolve(path) else { continue }
                let (keychain, master) = try open(collection)
                guard master != nil, var found = try? item(collection, uniqueID: uniqueID, keychain: keychain, master: master) else { continue }
                secrets.append((path, found.object[.value] ?? [], contentType(found.object)))
                found.object.wipeValues()
            }
            var reply: OpaquePointer?
            guard sd_bus_message_new_method_return(message, &reply) >= 0, let reply else { throw .failed("no reply") }
            defer { sd_bus_message_unref(reply) }
            var writer = BusWriter(message: reply)
            writer.open("a", "{o(oayays)}")
            for (path, secret, type) in secrets {
                writer.open("e", "o(oayays)")
                writer.string(path, type: "o")
                try encode(secret, contentType: type, sessionPath: sessionPath, session: session, into: &writer)
                writer.close()
            }
            writer.close()
            return try send(reply, writer)
        case (Self.serviceInterface, "ReadAlias"):
            guard let name = reader.string() else { throw .invalid("name") }
            let path = name == "default" ? defaultCollection(collections())?.path ?? "/" : "/"
            return reply(message) { $0.string(path, type: "o") }
        case (Self.serviceInterface, "SetAlias"):
            guard let name = reader.string(), let path = reader.string("o") else { throw .invalid("name, collection") }
            guard name == "default" else { throw .notSupported("only the 'default' alias exists here") }
            if Configuration.current().defaultKeychainIsFixed {
                throw .notSupported("the default keychain is set by KEYCHAIN_PKCS11_DEFAULT or the configuration file's default_keychain")
            }
            let directory = KeychainDirectory(path: Configuration.current().directory)
            if path == "/" {
                try? directory.setDefaultKeychain(nil)
            } else {
                guard case .collection(let collection)? = resolve(path) else { throw .invalid("\(path) is not a collection") }
                do { try directory.setDefaultKeychain(collection.label) } catch { throw .failed(error.reason) }
            }
            return reply(message) { _ in }
        case (Self.collectionInterface, "Delete"):
            // Deleting a keychain needs its SO PIN, asked by the prompt.
            guard case .collection(let collection)? = resolve(path) else { throw .noSuchObject }
            let promptPath = newPrompt(sender: sender, .delete(collection))
            return reply(message) { $0.string(promptPath, type: "o") }
        case (Self.collectionInterface, "SearchItems"):
            guard case .collection(let collection)? = resolve(path), let wanted = reader.stringDictionary() else { throw .noSuchObject }
            let (keychain, master) = try open(collection)
            let found = try search(collection, wanted, keychain: keychain, master: master)
            return reply(message) { $0.objectPaths(found) }
        case (Self.collectionInterface, "CreateItem"): return try createItem(message, reader, path: path, sender: sender)
        case (Self.itemInterface, "Delete"):
            guard case .item(let collection, let uniqueID)? = resolve(path) else { throw .noSuchObject }
            let (keychain, master) = try unlocked(collection)
            let found = try item(collection, uniqueID: uniqueID, keychain: keychain, master: master)
            do { try keychain.remove(id: found.row, master: master) } catch { throw .failed(error.reason) }
            itemsChanged(collection, item: collection.path + "/" + uniqueID, member: "ItemDeleted")
            return reply(message) { $0.string("/", type: "o") }
        case (Self.itemInterface, "GetSecret"):
            guard case .item(let collection, let uniqueID)? = resolve(path), let sessionPath = reader.string("o") else { throw .noSuchObject }
            let session = try session(sessionPath, sender: sender)
            let (keychain, master) = try unlocked(collection)
            var found = try item(collection, uniqueID: uniqueID, keychain: keychain, master: master)
            defer { found.object.wipeValues() }
            var reply: OpaquePointer?
            guard sd_bus_message_new_method_return(message, &reply) >= 0, let reply else { throw .failed("no reply") }
            defer { sd_bus_message_unref(reply) }
            var writer = BusWriter(message: reply)
            try encode(found.object[.value] ?? [], contentType: contentType(found.object), sessionPath: sessionPath, session: session, into: &writer)
            return try send(reply, writer)
        case (Self.itemInterface, "SetSecret"):
            guard case .item(let collection, let uniqueID)? = resolve(path), let secret = reader.secret() else { throw .noSuchObject }
            var value = try decode(secret, sender: sender)
            defer { wipe(&value) }
            try change(collection, uniqueID: uniqueID, [(.value, value), (.contentType, Array(secret.contentType.utf8))])
            return reply(message) { _ in }
        case (Self.sessionInterface, "Close"):
            guard let session = sessions[path], session.sender == sender else { throw .noSession }
            sessions[path] = nil
            return reply(message) { _ in }
        case (Self.promptInterface, "Prompt"): return try runPrompt(message, path: path, sender: sender)
        case (Self.promptInterface, "Dismiss"):
            guard let prompt = prompts[path], prompt.sender == sender else { throw .noSuchObject }
            prompts[path] = nil
            let result = reply(message) { _ in }
            dismiss(path, prompt.action)
            return result
        default:
            throw .error("org.freedesktop.DBus.Error.UnknownMethod", "Unknown method \(interface).\(member)")
        }
    }

    func contentType(_ object: ObjectAttributes) -> String {
        guard let bytes = object[.contentType], !bytes.isEmpty else { return "text/plain" }
        return String(decoding: bytes, as: UTF8.self)
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

    // MARK: methods

    private func openSession(_ message: OpaquePointer, _ reader: BusReader, sender: String) throws(Failure) -> Int32 {
        guard let algorithm = reader.string(), let signature = reader.variantSignature() else { throw .invalid("algorithm, input") }
        counter += 1
        let path = Self.sessionPrefix + "s\(counter)"
        switch algorithm {
        case "plain":
            guard signature == "s" else { throw .invalid("the plain algorithm takes an empty string") }
            sessions[path] = Session(sender: sender, key: nil)
            return reply(message) { writer in
                writer.open("v", "s")
                writer.string("")
                writer.close()
                writer.string(path, type: "o")
            }
        case SecretServiceTransport.algorithm:
            guard signature == "ay", reader.enter("v", "ay") == true, let clientPublic = reader.bytes(), reader.exit() else {
                throw .invalid("the DH algorithm takes the client's public value as bytes")
            }
            let agreed: (publicValue: [UInt8], key: SecureBytes)
            do { agreed = try SecretServiceTransport.agree(clientPublic: clientPublic) } catch { throw .invalid("the client's public value is not usable") }
            sessions[path] = Session(sender: sender, key: agreed.key)
            return reply(message) { writer in
                writer.open("v", "ay")
                writer.bytes(agreed.publicValue)
                writer.close()
                writer.string(path, type: "o")
            }
        default:
            throw .notSupported("Algorithm \(algorithm) is not supported (plain, \(SecretServiceTransport.algorithm))")
        }
    }

    /// A keychain is made with its PINs by keychainctl create; asking for the default alias (or
    /// the label of a keychain that exists) answers with that keychain.
    private func createCollection(_ message: OpaquePointer, _ reader: BusReader, sender: String) throws(Failure) -> Int32 {
        guard let properties = reader.properties(), let alias = reader.string() else { throw .invalid("properties, alias") }
        guard alias.isEmpty || alias == "default" else { throw .notSupported("only the 'default' alias exists here") }
        let all = collections()
        var found: Collection?
        if alias == "default" { found = defaultCollection(all) }
        if found == nil, case .string(let label)? = properties["org.freedesktop.Secret.Collection.Label"] {
            found = all.first { $0.label == label }
        }
        if let found {
            return reply(message) { $0.string(found.path, type: "o"); $0.string("/", type: "o") }
        }
        // A new keychain: its PINs are asked by the prompt.
        guard case .string(let label)? = properties["org.freedesktop.Secret.Collection.Label"], KeychainDirectory.isValidLabel(label) else {
            throw .invalid("a new collection needs a label of 1 to 32 bytes (org.freedesktop.Secret.Collection.Label)")
        }
        let promptPath = newPrompt(sender: sender, .create(label: label, alias: alias))
        return reply(message) { $0.string("/", type: "o"); $0.string(promptPath, type: "o") }
    }

    func newPrompt(sender: String, _ action: PromptAction) -> String {
        counter += 1
        let path = Self.promptPrefix + "p\(counter)"
        prompts[path] = Prompt(sender: sender, action: action)
        return path
    }

    private func createItem(_ message: OpaquePointer, _ reader: BusReader, path: String, sender: String) throws(Failure) -> Int32 {
        guard case .collection(let collection)? = resolve(path) else { throw .noSuchObject }
        guard let properties = reader.properties(), let secret = reader.secret(), let replace = reader.bool() else { throw .invalid("properties, secret, replace") }
        var label = ""
        var attributes: [String: String] = [:]
        for (key, value) in properties {
            switch (key, value) {
            case ("org.freedesktop.Secret.Item.Label", .string(let text)): label = text
            case ("org.freedesktop.Secret.Item.Attributes", .dictionary(let dictionary)): attributes = dictionary
            default: break
            }
        }
        var value = try decode(secret, sender: sender)
        defer { wipe(&value) }
        let (keychain, master) = try unlocked(collection)
        if replace {
            // The item with the same attributes is updated in place.
            for itemPath in try search(collection, attributes, keychain: keychain, master: master) {
                guard case .item(_, let uniqueID)? = resolve(itemPath),
                      let existing = try? item(collection, uniqueID: uniqueID, keychain: keychain, master: master),
                      SecretServiceItems.attributes(of: existing.object) == attributes else { continue }
                try change(collection, uniqueID: uniqueID, [(.value, value), (.label, Array(label.utf8)), (.contentType, Array(secret.contentType.utf8))])
                emit(collection.path, Self.collectionInterface, "ItemCreated", objectPath: itemPath)
                return reply(message) { $0.string(itemPath, type: "o"); $0.string("/", type: "o") }
            }
        }
        let object: ObjectAttributes
        do {
            object = try SecretServiceItems.add(attributes, label: label, contentType: secret.contentType, secret: value, to: keychain, master: master)
        } catch {
            throw .failed("the keychain refuses the item: \(error.reason)")
        }
        guard let itemPath = itemPath(collection, object) else { throw .failed("the item was not stored") }
        itemsChanged(collection, item: itemPath, member: "ItemCreated")
        return reply(message) { $0.string(itemPath, type: "o"); $0.string("/", type: "o") }
    }

    /// Applies `changes` to an item (unlocked keychain), and says so on the bus.
    func change(_ collection: Collection, uniqueID: String, _ changes: Template) throws(Failure) {
        let (keychain, master) = try unlocked(collection)
        var found = try item(collection, uniqueID: uniqueID, keychain: keychain, master: master)
        defer { found.object.wipeValues() }
        do {
            var changed = try ObjectTemplate.set(changes, on: found.object)
            defer { changed.wipeValues() }
            try keychain.replace(id: found.row, with: changed, master: master)
        } catch {
            throw .failed("the keychain refuses the change: \(error.reason)")
        }
        let path = collection.path + "/" + uniqueID
        emit(collection.path, Self.collectionInterface, "ItemChanged", objectPath: path)
        propertiesChanged(path, Self.itemInterface, ["Label", "Attributes", "Modified"])
    }

    /// Unlock: what is unlocked already is answered at once; for locked keychains a prompt asks
    /// their PINs through the prompt program when the caller runs it.
    private func unlock(_ message: OpaquePointer, _ reader: BusReader, sender: String) throws(Failure) -> Int32 {
        guard let objects = reader.objectPaths() else { throw .invalid("objects") }
        var done: [String] = []
        var pending: [Collection] = []
        var pendingObjects: [String] = []
        for object in objects {
            guard let collection = resolve(object)?.collection else { continue }
            if isLocked(collection) {
                if !pending.contains(collection) { pending.append(collection) }
                pendingObjects.append(object)
            } else {
                done.append(object)
            }
        }
        let promptPath = pending.isEmpty ? "/" : newPrompt(sender: sender, .unlock(keychains: pending, objects: done + pendingObjects))
        return reply(message) { $0.objectPaths(done); $0.string(promptPath, type: "o") }
    }

    /// What a prompt's worker found, for the bus thread to announce.
    enum PromptOutcome {
        case dismissed
        case unlocked(files: [String], objects: [String])
        case created(file: String, label: String)
        case deleted(Collection)
    }

    /// Prompts run on their own threads (a person may take minutes); their outcomes wait here
    /// for the bus thread, which `wake` rouses.
    private let outcomeLock = PThreadMutex()
    private var outcomes: [(path: String, action: PromptAction, outcome: PromptOutcome)] = []
    private var wake: [Int32] = [-1, -1]

    /// Prompt(window-id): answers at once; a worker thread asks what the action needs with the
    /// prompt program (no bus call waits for the person), and the bus thread then signals
    /// Completed (dismissed when the user cancels, a PIN is wrong, or no prompt program is set).
    private func runPrompt(_ message: OpaquePointer, path: String, sender: String) throws(Failure) -> Int32 {
        guard let prompt = prompts[path], prompt.sender == sender else { throw .noSuchObject }
        prompts[path] = nil
        let result = reply(message) { _ in }
        guard let program = Configuration.current().promptProgram else {
            complain("keychaind: a Secret Service prompt was run, but no prompt program is configured (KEYCHAIN_PKCS11_PROMPT / prompt_program)")
            dismiss(path, prompt.action)
            return result
        }
        let existing = collections().map(\.label)
        let keys = self.keys
        let service = self
        Thread {
            let outcome = Self.ask(program: program, action: prompt.action, existingLabels: existing, keys: keys)
            service.post(path: path, action: prompt.action, outcome: outcome)
        }.start()
        return result
    }

    private func post(path: String, action: PromptAction, outcome: PromptOutcome) {
        outcomeLock.withLock { outcomes.append((path, action, outcome)) }
        var byte: UInt8 = 1
        _ = Glibc.write(wake[1], &byte, 1)
    }

    /// The slow part of a prompt, off the bus thread: only the prompt program, the unlock
    /// session and the keychain files are touched here.
    private static func ask(program: String, action: PromptAction, existingLabels: [String], keys: KeySource) -> PromptOutcome {
        func ask(_ text: String) -> SecureBytes? { try? PromptProgram.run(program, text: text) }
        switch action {
        case .unlock(let keychains, let objects):
            var files: [String] = []
            for collection in keychains {
                guard let answer = ask("Unlock the keychain '\(printable(collection.label))' for an application (Secret Service)") else { break }
                if case .success = answer.withUnsafeBytes({ keys.unlock(path: collection.file, pin: $0) }) {
                    files.append(collection.file)
                } else {
                    complain("keychaind: the Secret Service prompt for '\(printable(collection.label))' got a wrong PIN")
                }
            }
            return files.isEmpty ? .dismissed : .unlocked(files: files, objects: objects)
        case .create(let label, let alias):
            let shown = printable(label)
            guard let so = ask("New keychain '\(shown)': its SO PIN (administers the keychain; keep it offline)"),
                  let soAgain = ask("New keychain '\(shown)': the SO PIN again"), so.constantTimeEquals(soAgain),
                  let user = ask("New keychain '\(shown)': its user PIN (the keychain password)"),
                  let userAgain = ask("New keychain '\(shown)': the user PIN again"), user.constantTimeEquals(userAgain) else {
                return .dismissed
            }
            let configuration = Configuration.current()
            let directory = KeychainDirectory(path: configuration.directory)
            // Checked again now: another prompt or keychainctl may have made the label meanwhile.
            let labels = directory.keychainFiles().compactMap { try? Keychain.open(at: $0).info(countingObjects: false).label }
            guard !labels.contains(label), !existingLabels.contains(label) else {
                complain("keychaind: a keychain labelled '\(shown)' exists already; nothing created")
                return .dismissed
            }
            do {
                let keychain = try so.withUnsafeBytes { soBytes throws(KeychainError) in
                    try user.withUnsafeBytes { userBytes throws(KeychainError) in
                        try directory.create(label: label, soPIN: soBytes, userPIN: userBytes, kdf: configuration.kdf, policy: configuration.pinPolicy)
                    }
                }
                // Unlocked in this session, as a collection just made is for gnome-keyring.
                _ = user.withUnsafeBytes { keys.unlock(path: keychain.path, pin: $0) }
                if alias == "default", !configuration.defaultKeychainIsFixed { try? directory.setDefaultKeychain(label) }
                return .created(file: keychain.path, label: label)
            } catch {
                complain("keychaind: the keychain '\(shown)' was not created: \(error.reason)")
                return .dismissed
            }
        case .delete(let collection):
            guard let so = ask("Delete the keychain '\(printable(collection.label))' and every item in it: its SO PIN") else { return .dismissed }
            do {
                let keychain = try Keychain.open(at: collection.file)
                _ = try so.withUnsafeBytes { bytes throws(KeychainError) in try keychain.unlock(.securityOfficer, pin: bytes) }
            } catch {
                complain("keychaind: the keychain '\(printable(collection.label))' was not deleted: \(error.reason)")
                return .dismissed
            }
            keys.lock(path: collection.file)
            do {
                try KeychainDirectory(path: Configuration.current().directory).delete(at: collection.file, label: collection.label)
            } catch {
                complain("keychaind: the keychain '\(printable(collection.label))' was not deleted: \(error.reason)")
                return .dismissed
            }
            return .deleted(collection)
        }
    }

    /// On the bus thread: announces the outcomes the prompt workers posted.
    private func announceOutcomes() {
        var byte: UInt8 = 0
        while Glibc.read(wake[0], &byte, 1) == 1 {}
        let ready = outcomeLock.withLock { () -> [(path: String, action: PromptAction, outcome: PromptOutcome)] in
            defer { outcomes.removeAll() }
            return outcomes
        }
        for (path, action, outcome) in ready {
            switch outcome {
            case .dismissed:
                dismiss(path, action)
            case .unlocked(let files, let objects):
                for collection in collections() where files.contains(collection.file) {
                    propertiesChanged(collection.path, Self.collectionInterface, ["Locked"])
                    emit(Self.root, Self.serviceInterface, "CollectionChanged", objectPath: collection.path)
                }
                let unlocked = objects.filter { object in resolve(object).map { !isLocked($0.collection) } ?? false }
                completed(path, dismissed: false, result: .objects(unlocked))
            case .created(let file, let label):
                let collection = Collection(file: file, label: label)
                emit(Self.root, Self.serviceInterface, "CollectionCreated", objectPath: collection.path)
                propertiesChanged(Self.root, Self.serviceInterface, ["Collections"])
                completed(path, dismissed: false, result: .object(collection.path))
            case .deleted(let collection):
                emit(Self.root, Self.serviceInterface, "CollectionDeleted", objectPath: collection.path)
                propertiesChanged(Self.root, Self.serviceInterface, ["Collections"])
                completed(path, dismissed: false, result: .objects([]))
            }
        }
    }

    /// Completed as dismissed, with the result type the action's callers expect.
    func dismiss(_ path: String, _ action: PromptAction) {
        if case .create = action {
            completed(path, dismissed: true, result: .object("/"))
        } else {
            completed(path, dismissed: true, result: .objects([]))
        }
    }

    /// A prompt's result: object paths (Unlock, Delete) or one object path (CreateCollection).
    enum PromptResult {
        case objects([String])
        case object(String)
    }

    func completed(_ path: String, dismissed: Bool, result: PromptResult) {
        guard let bus else { return }
        var signal: OpaquePointer?
        guard sd_bus_message_new_signal(bus, &signal, path, Self.promptInterface, "Completed") >= 0, let signal else { return }
        defer { sd_bus_message_unref(signal) }
        var writer = BusWriter(message: signal)
        writer.bool(dismissed)
        switch result {
        case .objects(let paths):
            writer.open("v", "ao")
            writer.objectPaths(paths)
        case .object(let objectPath):
            writer.open("v", "o")
            writer.string(objectPath, type: "o")
        }
        writer.close()
        if !writer.failed { _ = sd_bus_send(bus, signal, nil) }
    }

    // MARK: properties

    func get(path: String, interface: String, property: String, writer: inout BusWriter) throws(Failure) {
        switch (interface, property) {
        case (Self.serviceInterface, "Collections"):
            writer.objectPaths(collections().map(\.path))
        case (Self.collectionInterface, _):
            guard case .collection(let collection)? = resolve(path) else { throw .noSuchObject }
            switch property {
            case "Items":
                let (keychain, master) = try open(collection)
                writer.objectPaths(try search(collection, [:], keychain: keychain, master: master))
            case "Label": writer.string(collection.label)
            case "Locked": writer.bool(isLocked(collection))
            case "Created", "Modified":
                var info = stat()
                let time = stat(collection.file, &info) == 0 ? UInt64(max(0, property == "Created" ? info.st_ctim.tv_sec : info.st_mtim.tv_sec)) : 0
                writer.uint64(time)
            default: throw .noSuchObject
            }
        case (Self.itemInterface, _):
            guard case .item(let collection, let uniqueID)? = resolve(path) else { throw .noSuchObject }
            let locked = isLocked(collection)
            if property == "Locked" {
                writer.bool(locked)
                return
            }
            if locked {
                // Its label and attributes are sealed until the keychain is unlocked: empty values
                // (clients read every property when they make an item proxy: an error there would
                // make the item look missing rather than locked).
                switch property {
                case "Attributes": writer.stringDictionary([:])
                case "Label": writer.string("")
                case "Type": writer.string("org.freedesktop.Secret.Generic")
                case "Created", "Modified": writer.uint64(0)
                default: throw .noSuchObject
                }
                return
            }
            let (keychain, master) = try open(collection)
            var found = try item(collection, uniqueID: uniqueID, keychain: keychain, master: master)
            defer { found.object.wipeValues() }
            switch property {
            case "Attributes": writer.stringDictionary(SecretServiceItems.attributes(of: found.object))
            case "Label": writer.string(found.object[.label].map { String(decoding: $0, as: UTF8.self) } ?? "")
            case "Type": writer.string(SecretServiceItems.attributes(of: found.object)["xdg:schema"] ?? "org.freedesktop.Secret.Generic")
            case "Created": writer.uint64(found.object[.creationTime].flatMap(AttributeValue.decodeULong).map(UInt64.init) ?? 0)
            case "Modified": writer.uint64(found.object[.modificationTime].flatMap(AttributeValue.decodeULong).map(UInt64.init) ?? 0)
            default: throw .noSuchObject
            }
        default:
            throw .noSuchObject
        }
    }

    func set(path: String, interface: String, property: String, reader: BusReader) throws(Failure) {
        switch (interface, property) {
        case (Self.itemInterface, "Label"):
            guard case .item(let collection, let uniqueID)? = resolve(path), let label = reader.string() else { throw .noSuchObject }
            try change(collection, uniqueID: uniqueID, [(.label, Array(label.utf8))])
        case (Self.itemInterface, "Attributes"):
            guard case .item(let collection, let uniqueID)? = resolve(path), let attributes = reader.stringDictionary() else { throw .noSuchObject }
            let (keychain, master) = try unlocked(collection)
            let found = try item(collection, uniqueID: uniqueID, keychain: keychain, master: master)
            let label = found.object[.label].map { String(decoding: $0, as: UTF8.self) } ?? ""
            // The mapped fields follow the new attributes (the item keeps its class).
            var changes = SecretServiceItems.fields(attributes, label: label, contentType: contentType(found.object),
                                                    asInternet: found.object.itemClass == .internetPassword)
            changes.removeAll { $0.type == .itemClass }
            try change(collection, uniqueID: uniqueID, changes)
        case (Self.collectionInterface, "Label"):
            throw .notSupported("a keychain's label is its token label: it is set when the keychain is created")
        default:
            throw .error("org.freedesktop.DBus.Error.PropertyReadOnly", "\(property) cannot be set")
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
}

// MARK: C callbacks (sd-bus calls these on the service's thread)

private func failureCode(_ failure: SecretService.Failure, _ busError: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
    switch failure {
    case .error(let name, let message):
        let r = sd_bus_error_set(busError, name, message)
        return r < 0 ? r : -EINVAL
    }
}

private let secretServiceMethod: kc_ss_method_fn = { message, path, interface, member, busError in
    guard let service = SecretService.current, let message, let path, let interface, let member else { return -EINVAL }
    do {
        return try service.call(message, path: String(cString: path), interface: String(cString: interface), member: String(cString: member))
    } catch let failure as SecretService.Failure {
        return failureCode(failure, busError)
    } catch {
        return -EIO
    }
}

private let secretServiceGet: kc_ss_get_fn = { path, interface, property, reply, busError in
    guard let service = SecretService.current, let path, let interface, let property, let reply else { return -EINVAL }
    var writer = BusWriter(message: reply)
    do {
        try service.get(path: String(cString: path), interface: String(cString: interface), property: String(cString: property), writer: &writer)
    } catch let failure as SecretService.Failure {
        return failureCode(failure, busError)
    } catch {
        return -EIO
    }
    return writer.failed ? -EINVAL : 1
}

private let secretServiceSet: kc_ss_set_fn = { path, interface, property, value, busError in
    guard let service = SecretService.current, let path, let interface, let property, let value else { return -EINVAL }
    do {
        try service.set(path: String(cString: path), interface: String(cString: interface), property: String(cString: property),
                        reader: BusReader(message: value))
    } catch let failure as SecretService.Failure {
        return failureCode(failure, busError)
    } catch {
        return -EIO
    }
    return 1
}

private let secretServiceFind: kc_ss_find_fn = { path, interface in
    guard let service = SecretService.current, let path, let interface else { return 0 }
    return service.exists(path: String(cString: path), interface: String(cString: interface)) ? 1 : 0
}
