import BusSupport
import CSystemd
import KeychainCore
import KeychainCrypto

// The Service interface (org.freedesktop.Secret.Service) at /org/freedesktop/secrets: its methods
// (OpenSession is answered in Sessions.swift) and its property.
extension SecretService {
    func serviceMethod(_ member: String, _ message: OpaquePointer, _ reader: BusReader, sender: String) throws(Failure) -> Int32 {
        switch member {
        // OpenSession(s algorithm, v input) -> (v output, o result)
        case "OpenSession": return try openSession(message, reader, sender: sender)
        // CreateCollection(a{sv} properties, s alias) -> (o collection, o prompt)
        case "CreateCollection": return try createCollection(message, reader, sender: sender)
        // SearchItems(a{ss} attributes) -> (ao unlocked, ao locked)
        case "SearchItems":
            guard let wanted = reader.stringDictionary() else { throw .invalid("attributes") }
            var unlocked: [String] = [], locked: [String] = []
            for collection in collections() {
                let (keychain, master) = try open(collection)
                let found = try search(collection, wanted, keychain: keychain, master: master)
                if master == nil { locked += found } else { unlocked += found }
            }
            return reply(message) { $0.objectPaths(unlocked); $0.objectPaths(locked) }
        // Unlock(ao objects) -> (ao unlocked, o prompt)
        case "Unlock": return try unlock(message, reader, sender: sender)
        // Lock(ao objects) -> (ao locked, o prompt)
        case "Lock":
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
        // GetSecrets(ao items, o session) -> a{o(oayays)} secrets
        case "GetSecrets":
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
        // ReadAlias(s name) -> o collection
        case "ReadAlias":
            guard let name = reader.string() else { throw .invalid("name") }
            let path = name == "default" ? defaultCollection(collections())?.path ?? "/" : "/"
            return reply(message) { $0.string(path, type: "o") }
        // SetAlias(s name, o collection)
        case "SetAlias":
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
        default:
            throw .unknownMethod(Self.serviceInterface, member)
        }
    }

    func serviceProperty(_ property: String, writer: inout BusWriter) throws(Failure) {
        switch property {
        case "Collections":
            writer.objectPaths(collections().map(\.path))
        default:
            throw .noSuchObject
        }
    }

    /// A keychain is made with its PINs by keychainctl create; asking for the default alias (or
    /// the label of a keychain that exists) answers with that keychain.
    private func createCollection(_ message: OpaquePointer, _ reader: BusReader, sender: String) throws(Failure) -> Int32 {
        guard let properties = reader.properties(), let alias = reader.string() else { throw .invalid("properties, alias") }
        guard alias.isEmpty || alias == "default" else { throw .notSupported("only the 'default' alias exists here") }
        let all = collections()
        var found: KeychainCollection?
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

    /// Unlock: what is unlocked already is answered at once; for locked keychains a prompt asks
    /// their PINs through the prompt program when the caller runs it.
    private func unlock(_ message: OpaquePointer, _ reader: BusReader, sender: String) throws(Failure) -> Int32 {
        guard let objects = reader.objectPaths() else { throw .invalid("objects") }
        var done: [String] = []
        var pending: [KeychainCollection] = []
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
}
