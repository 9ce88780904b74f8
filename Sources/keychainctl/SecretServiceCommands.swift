import ArgumentParser
import BusSupport
import CSystemd
import Glibc
import KeychainCore
import KeychainCrypto

/// A client of whatever serves org.freedesktop.secrets on the session bus (keychaind,
/// gnome-keyring, KeePassXC), through sd-bus.
final class SecretServiceClient {
    struct Failure: Error { let message: String }

    static let name = "org.freedesktop.secrets"
    let bus: OpaquePointer

    init() throws {
        var connection: OpaquePointer?
        let r = sd_bus_open_user(&connection)
        guard r >= 0, let connection else {
            throw Failure(message: "no session bus (\(String(cString: strerror(-r)))): run this in your login session, or set DBUS_SESSION_BUS_ADDRESS")
        }
        bus = connection
    }

    deinit { sd_bus_flush_close_unref(bus) }

    /// The owner of the name: its unique name, PID and executable, nil when nobody owns it.
    func owner() -> (uniqueName: String?, pid: pid_t?, exe: String?)? { busNameOwner(bus, Self.name) }

    /// Calls a method (25 s at most) of the name's owner, or of `destination` (a unique name:
    /// that one connection), and hands the reply to `read`.
    func call<R>(_ path: String, _ interface: String, _ member: String, destination: String = SecretServiceClient.name,
                 _ fill: (inout BusWriter) -> Void = { _ in }, read: (BusReader) throws -> R) throws -> R {
        var message: OpaquePointer?
        guard sd_bus_message_new_method_call(bus, &message, destination, path, interface, member) >= 0, let message else {
            throw Failure(message: "cannot build a \(member) call")
        }
        defer { sd_bus_message_unref(message) }
        var writer = BusWriter(message: message)
        fill(&writer)
        guard !writer.failed else { throw Failure(message: "cannot build a \(member) call") }
        var error = sd_bus_error(name: nil, message: nil, _need_free: 0)
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let r = sd_bus_call(bus, message, 25_000_000, &error, &reply)
        guard r >= 0, let reply else {
            let name = error.name.map { String(cString: $0) } ?? String(cString: strerror(-r))
            let text = error.message.map { String(cString: $0) } ?? ""
            throw Failure(message: "\(member) on \(path): \(name)\(text.isEmpty ? "" : ": \(text)")")
        }
        defer { sd_bus_message_unref(reply) }
        return try read(BusReader(message: reply))
    }

    /// Properties.Get of a value the reader `read` takes out of the variant.
    func property<R>(_ path: String, _ interface: String, _ name: String, _ signature: String, read: (BusReader) -> R?) throws -> R {
        try call(path, "org.freedesktop.DBus.Properties", "Get", { $0.string(interface); $0.string(name) }) { reader in
            guard reader.enter("v", signature) == true, let value = read(reader) else {
                throw Failure(message: "\(path) has no \(interface).\(name) of type \(signature)")
            }
            return value
        }
    }
}

struct SecretServiceCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "secret-service",
        abstract: "Show who serves the freedesktop Secret Service (org.freedesktop.secrets) on this session bus.",
        subcommands: [SecretServiceStatus.self, SecretServiceEnable.self, SecretServiceDisable.self, SecretServiceSyncCommand.self]
    )

    /// The user's activation file (~/.local/share/dbus-1/services), which comes before the
    /// system's (/usr/share/dbus-1/services, where gnome-keyring puts its own).
    static var userActivationFile: String {
        let home = getenv("HOME").map { String(cString: $0) } ?? "/"
        let data = getenv("XDG_DATA_HOME").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? home + "/.local/share"
        return data + "/dbus-1/services/org.freedesktop.secrets.service"
    }

    /// keychaind beside this keychainctl.
    static func keychaindPath() -> String? {
        guard let folder = ModulePath.executableFolder() else { return nil }
        return access(folder + "/keychaind", X_OK) == 0 ? folder + "/keychaind" : nil
    }
}

struct SecretServiceEnable: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enable",
        abstract: "Make keychaind your Secret Service: write the user's D-Bus activation file for org.freedesktop.secrets.",
        discussion: """
        Writes ~/.local/share/dbus-1/services/org.freedesktop.secrets.service (it comes before \
        the system's files, such as gnome-keyring's), so that the first client call of a login \
        session starts 'keychaind --secret-service'. A provider that is already running keeps \
        the name until it stops (log out and in, or stop it); 'keychainctl secret-service \
        status' shows who serves now. 'disable' switches back.

        Examples:
          keychainctl secret-service enable
        """
    )

    func run() throws {
        guard let keychaind = SecretServiceCommand.keychaindPath() else {
            throw fail("keychaind is not beside keychainctl; install both with 'make install'.", status: ExitStatus.notFound)
        }
        let file = SecretServiceCommand.userActivationFile
        var prefix = ""
        for part in file.split(separator: "/").dropLast() {
            prefix += "/" + part
            do {
                try System.mkdir(prefix, mode: 0o755)
            } catch where error.code != EEXIST {
                throw fail("cannot create \(prefix): \(error.reason).", status: ExitStatus.storage)
            } catch {}
        }
        let text = """
            # Written by keychainctl secret-service enable: keychaind serves the Secret Service.
            [D-BUS Service]
            Name=org.freedesktop.secrets
            Exec=\(keychaind) --foreground --secret-service

            """
        try writeOutput(Array(text.utf8), to: file + ".new", secret: false)
        do {
            try System.chmod(file + ".new", mode: 0o644)
            try System.rename(file + ".new", to: file)
        } catch {
            try? System.unlink(file + ".new")
            throw fail("cannot write \(file): \(error.reason).", status: ExitStatus.storage)
        }
        print("Wrote \(file): the session bus starts \(keychaind) --secret-service for the first Secret Service client.")
        if let client = try? SecretServiceClient(), let owner = client.owner(), owner.exe?.hasSuffix("/keychaind") != true {
            print("\(owner.exe ?? "Another provider") serves the Secret Service now and keeps it until it stops; import its items first: keychainctl import-secret-service")
        }
    }
}

struct SecretServiceStatus: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Which program owns org.freedesktop.secrets, which D-Bus activation file starts one, and the collections.",
        discussion: """
        keychaind serves the Secret Service when started with --secret-service (the D-Bus \
        activation file that 'make install' installs does so); gnome-keyring, KeePassXC and \
        KWallet serve the same name, and only one program can own it. The last lines say, for \
        each keychain, whether its Secret Service items sync ('secret-service sync').

        Examples:
          keychainctl secret-service status
          keychainctl secret-service status --json
        """
    )

    @Flag(help: "Print JSON: owner (pid, exe, isKeychaind), activationFile, activationExec, collections [{path, label, locked}], keychains [{label, syncItems}].")
    var json = false

    func run() throws {
        let client: SecretServiceClient
        do { client = try SecretServiceClient() } catch let error as SecretServiceClient.Failure {
            throw fail(error.message + ".", status: ExitStatus.failure)
        }
        let owner = client.owner()
        let isKeychaind = owner?.exe.map { $0.hasSuffix("/keychaind") } ?? false
        let activation = Self.activationFile()
        let syncChoices = SecretServiceSyncCommand.choices()
        var collections: [(path: String, label: String, locked: Bool)] = []
        if owner != nil {
            let paths = (try? client.property("/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "Collections", "ao") { $0.objectPaths() }) ?? []
            for path in paths {
                let label = (try? client.property(path, "org.freedesktop.Secret.Collection", "Label", "s") { $0.string() }) ?? "?"
                let locked = (try? client.property(path, "org.freedesktop.Secret.Collection", "Locked", "b") { $0.bool() }) ?? true
                collections.append((path, label, locked))
            }
        }
        if json {
            var fields: [String] = []
            if let owner {
                fields.append("\"owner\":{\"pid\":\(owner.pid.map { String($0) } ?? "null"),\"exe\":\(owner.exe.map(JSON.string) ?? "null"),\"isKeychaind\":\(isKeychaind)}")
            } else {
                fields.append("\"owner\":null")
            }
            fields.append("\"activationFile\":\(activation.map { JSON.string($0.file) } ?? "null")")
            fields.append("\"activationExec\":\(activation.map { JSON.string($0.exec) } ?? "null")")
            fields.append("\"collections\":[" + collections.map { "{\"path\":\(JSON.string($0.path)),\"label\":\(JSON.string($0.label)),\"locked\":\($0.locked)}" }
                .joined(separator: ",") + "]")
            fields.append("\"keychains\":[" + syncChoices.map { "{\"label\":\(JSON.string($0.label)),\"syncItems\":\($0.sync.map { String($0) } ?? "null")}" }
                .joined(separator: ",") + "]")
            print("{" + fields.joined(separator: ",") + "}")
            return
        }
        if let owner {
            let who = (owner.exe ?? "?") + (owner.pid.map { " (PID \($0))" } ?? "")
            print("org.freedesktop.secrets: served by \(isKeychaind ? "keychaind" : "another provider"): \(who)")
        } else {
            print("org.freedesktop.secrets: nobody serves it now" + (activation == nil ? "" : "; a client's first call starts the program below"))
        }
        if let activation {
            print("D-Bus activation: \(activation.file) starts \(activation.exec)")
        } else {
            print("D-Bus activation: no file names org.freedesktop.secrets")
        }
        for collection in collections {
            print("  \(printable(collection.label)): \(collection.locked ? "locked" : "unlocked")  \(collection.path)")
        }
        if owner != nil, !isKeychaind {
            print("To move its items into a keychain: keychainctl import-secret-service; then stop that provider and start keychaind --secret-service.")
        }
        for keychain in syncChoices {
            print("Secret Service items of keychain '\(printable(keychain.label))' sync: \(keychain.sync.map { $0 ? "yes" : "no" } ?? "unknown (unreadable)")")
        }
    }

    /// The session bus's activation file for the name, in dbus-daemon's search order.
    static func activationFile() -> (file: String, exec: String)? {
        func env(_ name: String) -> String? { getenv(name).map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } }
        let home = env("HOME") ?? "/"
        var folders: [String] = []
        if let runtime = env("XDG_RUNTIME_DIR") { folders.append(runtime + "/dbus-1/services") }
        folders.append((env("XDG_DATA_HOME") ?? home + "/.local/share") + "/dbus-1/services")
        for folder in (env("XDG_DATA_DIRS") ?? "/usr/local/share:/usr/share").split(separator: ":") { folders.append(folder + "/dbus-1/services") }
        for folder in folders {
            let file = folder + "/org.freedesktop.secrets.service"
            guard let handle = fopen(file, "r") else { continue }
            defer { fclose(handle) }
            var line = [CChar](repeating: 0, count: 4096)
            while fgets(&line, Int32(line.count), handle) != nil {
                let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self).trimmingCharacters
                if text.hasPrefix("Exec=") { return (file, String(text.dropFirst(5))) }
            }
            return (file, "?")
        }
        return nil
    }
}

extension String {
    /// Without the trailing newline and spaces.
    var trimmingCharacters: String {
        String(decoding: Array(utf8.reversed().drop { $0 == 0x0A || $0 == 0x0D || $0 == 0x20 }.reversed()), as: UTF8.self)
    }
}

struct ImportSecretService: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-secret-service",
        abstract: "Copy every item of the running Secret Service provider (gnome-keyring, KeePassXC, …) into a keychain.",
        discussion: """
        Reads each unlocked collection of the program that owns org.freedesktop.secrets through \
        the Secret Service API (over an encrypted transfer session) and adds its items to the \
        keychain as Secret Service items, with their labels, attributes and content types: \
        keychaind then serves them the same way once it owns the name. Items already in the \
        keychain (same label and attributes) are left alone, so a second run copies only what is \
        new. Locked collections are reported and skipped: unlock them in their provider first. \
        Run it before switching providers (see the user guide, "Use it as your desktop keyring").

        Examples:
          keychainctl import-secret-service
          keychainctl import-secret-service -k login --dry-run
        """
    )

    @OptionGroup var selection: KeychainOptions

    @Flag(help: "Count what would be copied; change nothing.")
    var dryRun = false

    func run() throws {
        let client: SecretServiceClient
        do { client = try SecretServiceClient() } catch let error as SecretServiceClient.Failure {
            throw fail(error.message + ".", status: ExitStatus.failure)
        }
        guard let owner = client.owner() else {
            throw fail("no program serves org.freedesktop.secrets on this session bus (is gnome-keyring running?).", status: ExitStatus.notFound)
        }
        if owner.exe?.hasSuffix("/keychaind") == true {
            throw fail("keychaind already serves the Secret Service: its items are keychain items already.", status: ExitStatus.usage)
        }
        let provider = owner.exe ?? "the provider"
        let open = try selection.open()
        let master = try open.unlock()
        do {
            try copy(from: client, provider: provider, into: open, master: master)
        } catch let error as SecretServiceClient.Failure {
            throw fail("\(provider): \(error.message).", status: ExitStatus.failure)
        } catch let error as CryptoError {
            throw fail("\(provider): the transfer session failed (\(error.reason)).", status: ExitStatus.failure)
        }
    }

    private func copy(from client: SecretServiceClient, provider: String, into open: OpenKeychain, master: MasterKey) throws {
        let service = "/org/freedesktop/secrets"
        // An encrypted transfer session (the secrets cross the bus under AES, as with libsecret).
        let pair = try SecretServiceTransport.keyPair()
        let (serverPublic, sessionPath) = try client.call(service, "org.freedesktop.Secret.Service", "OpenSession", { writer in
            writer.string(SecretServiceTransport.algorithm)
            writer.open("v", "ay")
            // 128 bytes, leading zeros kept: KWallet refuses shorter values.
            writer.bytes([UInt8](repeating: 0, count: max(0, 128 - pair.publicValue.count)) + pair.publicValue)
            writer.close()
        }) { reader -> ([UInt8], String) in
            guard reader.enter("v", "ay") == true, let value = reader.bytes(), reader.exit(), let path = reader.string("o") else {
                throw SecretServiceClient.Failure(message: "OpenSession gave no DH public value")
            }
            return (value, path)
        }
        let key = try SecretServiceTransport.sessionKey(pair.key, peerPublic: serverPublic)
        let collections = try client.property(service, "org.freedesktop.Secret.Service", "Collections", "ao") { $0.objectPaths() }
        var imported = 0, present = 0, skippedCollections: [String] = [], failed: [String] = []
        for collection in collections {
            let label = (try? client.property(collection, "org.freedesktop.Secret.Collection", "Label", "s") { $0.string() }) ?? collection
            let locked = (try? client.property(collection, "org.freedesktop.Secret.Collection", "Locked", "b") { $0.bool() }) ?? true
            if locked {
                skippedCollections.append(label)
                continue
            }
            let items = try client.property(collection, "org.freedesktop.Secret.Collection", "Items", "ao") { $0.objectPaths() }
            let secrets: [String: (parameters: [UInt8], value: [UInt8], contentType: String)] = try client.call(
                service, "org.freedesktop.Secret.Service", "GetSecrets", { $0.objectPaths(items); $0.string(sessionPath, type: "o") }) { reader in
                guard reader.enter("a", "{o(oayays)}") == true else { throw SecretServiceClient.Failure(message: "GetSecrets: no secrets") }
                var found: [String: (parameters: [UInt8], value: [UInt8], contentType: String)] = [:]
                while reader.enter("e", "o(oayays)") == true {
                    guard let path = reader.string("o"), let secret = reader.secret(), reader.exit() else {
                        throw SecretServiceClient.Failure(message: "GetSecrets: a malformed secret")
                    }
                    found[path] = (secret.parameters, secret.value, secret.contentType)
                }
                return found
            }
            for item in items {
                guard let secret = secrets[item] else {
                    failed.append("\(item): its secret was not given")
                    continue
                }
                let itemLabel = (try? client.property(item, "org.freedesktop.Secret.Item", "Label", "s") { $0.string() }) ?? ""
                let attributes = (try? client.property(item, "org.freedesktop.Secret.Item", "Attributes", "a{ss}") { $0.stringDictionary() }) ?? [:]
                guard var value = try? SecretServiceTransport.decrypt(secret.value, iv: secret.parameters, key: key).bytes else {
                    failed.append("\(itemLabel): its secret did not decrypt (run the import again)")
                    continue
                }
                defer { wipe(&value) }
                if try isPresent(attributes, label: itemLabel, in: open, master: master) {
                    present += 1
                    continue
                }
                if dryRun {
                    imported += 1
                    continue
                }
                switch Result(catching: { () throws(KeychainError) in
                    try SecretServiceItems.add(attributes, label: itemLabel, contentType: secret.contentType, secret: value, to: open.keychain, master: master)
                }) {
                case .success: imported += 1
                case .failure(let error): failed.append("\(itemLabel): \(error.reason)")
                }
            }
        }
        _ = try? client.call(sessionPath, "org.freedesktop.Secret.Session", "Close") { _ in () }
        let verb = dryRun ? "Would import" : "Imported"
        print("\(verb) \(imported) item(s) from \(collections.count - skippedCollections.count) collection(s) of \(provider) into keychain '\(printable(open.label))'; "
              + "\(present) already there.")
        for label in skippedCollections { print("  skipped the locked collection '\(printable(label))': unlock it in \(provider) and run this again") }
        for problem in failed { print("  not imported: \(printable(problem))") }
        if !failed.isEmpty { throw fail("\(failed.count) item(s) were not imported (listed above).", status: ExitStatus.failure) }
    }

    private func isPresent(_ attributes: [String: String], label: String, in open: OpenKeychain, master: MasterKey) throws -> Bool {
        for template in SecretServiceItems.searchTemplates(attributes) {
            let rows = try open.run { () throws(KeychainError) in try open.keychain.find(template, master: master) }
            for row in rows {
                guard let object = try? open.keychain.object(id: row.id, master: master) else { continue }
                if SecretServiceItems.attributes(of: object) == attributes, object[.label] ?? [] == Array(label.utf8) { return true }
            }
        }
        return false
    }
}
