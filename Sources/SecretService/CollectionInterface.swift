internal import BusSupport
import KeychainCore
import KeychainCrypto

/// org.freedesktop.Secret.Collection: one object per collection (per keychain, and the session
/// collection), also reached through the `default` and `session` aliases.
enum CollectionInterface {
    static let name = "org.freedesktop.Secret.Collection"

    static let table = Interface(
        name: name,
        methods: [
            // Deleting a keychain needs its SO PIN, asked by the prompt.
            Method("Delete", takes: "", returns: "o") { server, call throws(BusError) in
                let collection = try server.collection(at: call.path)
                if collection == .session {
                    // Nothing to ask: its items go at once; the collection stays, empty.
                    for uniqueID in server.sessionCollection.removeAll() {
                        server.itemsChanged(collection, item: collection.itemPath(uniqueID), member: "ItemDeleted")
                    }
                    return call.reply { $0.string(ObjectPath.none, type: "o") }
                }
                let promptPath = server.newPrompt(sender: call.sender, .delete(collection))
                return call.reply { $0.string(promptPath, type: "o") }
            },
            Method("SearchItems", takes: "a{ss}", returns: "ao") { server, call throws(BusError) in
                let collection = try server.collection(at: call.path)
                guard let wanted = call.arguments.stringDictionary() else { throw .noSuchObject }
                let found = try server.findItems(in: collection, matching: wanted).paths
                return call.reply { $0.objectPaths(found) }
            },
            Method("CreateItem", takes: "a{sv}(oayays)b", returns: "oo", createItem),
        ],
        properties: [
            Property("Items", "ao") { server, path, writer throws(BusError) in
                writer.objectPaths(try server.findItems(in: try server.collection(at: path), matching: [:]).paths)
            },
            // A keychain's display name; its token label (its path, its PKCS#11 identity) stays.
            Property("Label", "s", get: { server, path, writer throws(BusError) in
                writer.string(server.displayLabel(try server.collection(at: path)))
            }, set: { server, path, reader throws(BusError) in
                let collection = try server.collection(at: path)
                guard let label = reader.string() else { throw .invalid("a label is a string") }
                try server.setDisplayLabel(collection, label)
                server.propertiesChanged(collection.path, name, ["Label"])
                server.emit(ObjectPath.root, ServiceInterface.name, "CollectionChanged", objectPath: collection.path)
            }),
            Property("Locked", "b") { server, path, writer throws(BusError) in
                writer.bool(server.isLocked(try server.collection(at: path)))
            },
            Property("Created", "t") { server, path, writer throws(BusError) in
                writer.uint64(server.times(try server.collection(at: path)).created)
            },
            Property("Modified", "t") { server, path, writer throws(BusError) in
                writer.uint64(server.times(try server.collection(at: path)).modified)
            },
        ],
        signals: [Signal("ItemCreated", carries: "o"), Signal("ItemDeleted", carries: "o"), Signal("ItemChanged", carries: "o")],
        finds: { server, path in
            if case .collection? = server.resolve(path) { return true }
            return false
        })

    /// CreateItem(a{sv} properties, (oayays) secret, b replace) -> (o item, o prompt). With
    /// `replace`, the item with the same attributes is updated in place.
    private static func createItem(_ server: SecretServiceServer, _ call: MethodCall) throws(BusError) -> Replied {
        let collection = try server.collection(at: call.path)
        let reader = call.arguments
        guard let properties = reader.properties(), let secret = reader.secret(), let replace = reader.bool() else {
            throw .invalid("properties, secret, replace")
        }
        var label = ""
        var attributes: [String: String] = [:]
        for (key, value) in properties {
            switch (key, value) {
            case ("org.freedesktop.Secret.Item.Label", .string(let text)): label = text
            case ("org.freedesktop.Secret.Item.Attributes", .dictionary(let dictionary)): attributes = dictionary
            default: break
            }
        }
        var value = try server.decode(secret, sender: call.sender)
        defer { wipe(&value) }
        let stored = try server.addItem(to: collection, label: label, attributes: attributes, secret: value, contentType: secret.contentType,
                                        replace: replace)
        if stored.replaced {
            server.itemChanged(collection, item: stored.path)
            server.emit(collection.path, name, "ItemCreated", objectPath: stored.path)
        } else {
            server.itemsChanged(collection, item: stored.path, member: "ItemCreated")
        }
        return call.reply { $0.string(stored.path, type: "o"); $0.string(ObjectPath.none, type: "o") }
    }
}
