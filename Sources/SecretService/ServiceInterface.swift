internal import BusSupport
import KeychainCore
import KeychainCrypto

/// org.freedesktop.Secret.Service at /org/freedesktop/secrets: sessions, collections, searches
/// and secrets across collections, locking, and the `default` and `session` aliases.
enum ServiceInterface {
    static let name = "org.freedesktop.Secret.Service"

    static let table = Interface(
        name: name,
        methods: [
            Method("OpenSession", takes: "sv", returns: "vo", SessionInterface.openSession),
            Method("CreateCollection", takes: "a{sv}s", returns: "oo", createCollection),
            Method("SearchItems", takes: "a{ss}", returns: "aoao") { server, call throws(BusError) in
                guard let wanted = call.arguments.stringDictionary() else { throw .invalid("attributes") }
                var unlocked: [String] = [], locked: [String] = []
                for collection in server.collections() {
                    let found = try server.findItems(in: collection, matching: wanted)
                    if found.locked { locked += found.paths } else { unlocked += found.paths }
                }
                return call.reply { $0.objectPaths(unlocked); $0.objectPaths(locked) }
            },
            Method("Unlock", takes: "ao", returns: "aoo", unlock),
            Method("Lock", takes: "ao", returns: "aoo") { server, call throws(BusError) in
                guard let objects = call.arguments.objectPaths() else { throw .invalid("objects") }
                var done: [String] = []
                var lockedNow: [SecretCollection] = []
                for object in objects {
                    // The session collection is never locked: it is not listed as locked.
                    guard let collection = server.resolve(object)?.collection, collection != .session else { continue }
                    done.append(object)
                    guard !lockedNow.contains(collection) else { continue }
                    lockedNow.append(collection)
                    server.lock(collection)
                    server.propertiesChanged(collection.path, CollectionInterface.name, ["Locked"])
                    server.emit(ObjectPath.root, name, "CollectionChanged", objectPath: collection.path)
                }
                return call.reply { $0.objectPaths(done); $0.string(ObjectPath.none, type: "o") }
            },
            Method("GetSecrets", takes: "aoo", returns: "a{o(oayays)}", getSecrets),
            Method("ReadAlias", takes: "s", returns: "o") { server, call throws(BusError) in
                guard let alias = call.arguments.string() else { throw .invalid("name") }
                let path = server.collection(forAlias: alias, server.collections())?.path ?? ObjectPath.none
                return call.reply { $0.string(path, type: "o") }
            },
            Method("SetAlias", takes: "so", returns: "", setAlias),
        ],
        properties: [
            Property("Collections", "ao") { server, _, writer throws(BusError) in
                writer.objectPaths(server.collections().map(\.path))
            },
        ],
        signals: [Signal("CollectionCreated", carries: "o"), Signal("CollectionDeleted", carries: "o"), Signal("CollectionChanged", carries: "o")],
        finds: nil)

    /// CreateCollection(a{sv} properties, s alias) -> (o collection, o prompt). A keychain is made
    /// with its PINs: asking for the default alias (or the label of a keychain that exists)
    /// answers with that keychain; a new one is made by the prompt, which asks its PINs.
    private static func createCollection(_ server: SecretServiceServer, _ call: MethodCall) throws(BusError) -> Replied {
        guard let properties = call.arguments.properties(), let alias = call.arguments.string() else { throw .invalid("properties, alias") }
        guard alias.isEmpty || alias == "default" || alias == SessionCollection.name else {
            throw .notSupported("only the 'default' and 'session' aliases exist here")
        }
        let all = server.collections()
        var found: SecretCollection?
        if !alias.isEmpty { found = server.collection(forAlias: alias, all) }
        if found == nil, case .string(let label)? = properties["org.freedesktop.Secret.Collection.Label"] {
            found = all.first { $0.label == label }
        }
        if let found {
            return call.reply { $0.string(found.path, type: "o"); $0.string(ObjectPath.none, type: "o") }
        }
        guard case .string(let label)? = properties["org.freedesktop.Secret.Collection.Label"], KeychainDirectory.isValidLabel(label) else {
            throw .invalid("a new collection needs a label of 1 to 32 bytes (org.freedesktop.Secret.Collection.Label)")
        }
        let promptPath = server.newPrompt(sender: call.sender, .create(label: label, alias: alias))
        return call.reply { $0.string(ObjectPath.none, type: "o"); $0.string(promptPath, type: "o") }
    }

    /// Unlock(ao objects) -> (ao unlocked, o prompt): what is unlocked already is answered at
    /// once; for locked collections a prompt asks their PINs through the prompt program when the
    /// caller runs it.
    private static func unlock(_ server: SecretServiceServer, _ call: MethodCall) throws(BusError) -> Replied {
        guard let objects = call.arguments.objectPaths() else { throw .invalid("objects") }
        var done: [String] = []
        var pending: [SecretCollection] = []
        var pendingObjects: [String] = []
        for object in objects {
            guard let collection = server.resolve(object)?.collection else { continue }
            if server.isLocked(collection) {
                if !pending.contains(collection) { pending.append(collection) }
                pendingObjects.append(object)
            } else {
                done.append(object)
            }
        }
        let promptPath = pending.isEmpty ? ObjectPath.none
            : server.newPrompt(sender: call.sender, .unlock(collections: pending, objects: done + pendingObjects))
        return call.reply { $0.objectPaths(done); $0.string(promptPath, type: "o") }
    }

    /// GetSecrets(ao items, o session) -> a{o(oayays)} secrets: those of unlocked collections;
    /// other paths are left out.
    private static func getSecrets(_ server: SecretServiceServer, _ call: MethodCall) throws(BusError) -> Replied {
        guard let items = call.arguments.objectPaths(), let sessionPath = call.arguments.string("o") else { throw .invalid("items, session") }
        let session = try server.session(sessionPath, sender: call.sender)
        var secrets: [(path: String, secret: [UInt8], contentType: String)] = []
        defer { for index in secrets.indices { wipe(&secrets[index].secret) } }
        for path in items {
            guard case .item(let collection, let uniqueID)? = server.resolve(path),
                  let found = try server.readableSecret(collection, uniqueID: uniqueID) else { continue }
            secrets.append((path, found.secret, found.contentType))
        }
        return try call.reply { writer throws(BusError) in
            writer.open("a", "{o(oayays)}")
            for (path, secret, contentType) in secrets {
                writer.open("e", "o(oayays)")
                writer.string(path, type: "o")
                try server.encode(secret, contentType: contentType, sessionPath: sessionPath, session: session, into: &writer)
                writer.close()
            }
            writer.close()
            if writer.failed { throw .failed("cannot build the reply") }
        }
    }

    /// SetAlias(s name, o collection): only `default`, kept as the keychain folder's default
    /// keychain unless the configuration fixes it.
    private static func setAlias(_ server: SecretServiceServer, _ call: MethodCall) throws(BusError) -> Replied {
        guard let alias = call.arguments.string(), let path = call.arguments.string("o") else { throw .invalid("name, collection") }
        guard alias == "default" else { throw .notSupported("only the 'default' alias can be set here ('session' is the session collection's)") }
        if Configuration.current().defaultKeychainIsFixed {
            throw .notSupported("the default keychain is set by KEYCHAIN_PKCS11_DEFAULT or the configuration file's default_keychain")
        }
        let directory = KeychainDirectory(path: Configuration.current().directory)
        if path == ObjectPath.none {
            try? directory.setDefaultKeychain(nil)
        } else {
            guard case .collection(let collection)? = server.resolve(path) else { throw .invalid("\(path) is not a collection") }
            guard collection != .session else { throw .notSupported("the session collection cannot be the default: its items are not kept") }
            do { try directory.setDefaultKeychain(collection.label) } catch { throw .failed(error.reason) }
        }
        server.configurationRead = nil
        return call.reply()
    }
}
