internal import BusSupport
import KeychainCore
import KeychainCrypto

/// org.freedesktop.Secret.Item: one object per password served, below its collection's path.
enum ItemInterface {
    static let name = "org.freedesktop.Secret.Item"
    static let genericType = "org.freedesktop.Secret.Generic"

    static let table = Interface(
        name: name,
        methods: [
            Method("Delete", takes: "", returns: "o") { server, call throws(BusError) in
                let (collection, uniqueID) = try server.item(at: call.path)
                try server.deleteItem(collection, uniqueID: uniqueID)
                server.itemsChanged(collection, item: collection.itemPath(uniqueID), member: "ItemDeleted")
                return call.reply { $0.string(ObjectPath.none, type: "o") }
            },
            Method("GetSecret", takes: "o", returns: "(oayays)", getSecret),
            Method("SetSecret", takes: "(oayays)", returns: "") { server, call throws(BusError) in
                let (collection, uniqueID) = try server.item(at: call.path)
                guard let secret = call.arguments.secret() else { throw .noSuchObject }
                var value = try server.decode(secret, sender: call.sender)
                defer { wipe(&value) }
                try server.changeItem(collection, uniqueID: uniqueID, .secret(value, contentType: secret.contentType))
                server.itemChanged(collection, item: collection.itemPath(uniqueID))
                return call.reply()
            },
        ],
        properties: [
            Property("Locked", "b") { server, path, writer throws(BusError) in
                writer.bool(server.isLocked(try server.item(at: path).collection))
            },
            // Clients read every property when they make an item proxy: a locked item answers
            // empty values (its label and attributes are sealed), not an error that would make it
            // look missing rather than locked.
            described("Attributes", "a{ss}", whenLocked: { $0.stringDictionary([:]) }, { $1.stringDictionary($0.attributes) },
                      set: { server, path, reader throws(BusError) in
                          let (collection, uniqueID) = try server.item(at: path)
                          guard let attributes = reader.stringDictionary() else { throw .noSuchObject }
                          try server.changeItem(collection, uniqueID: uniqueID, .attributes(attributes))
                          server.itemChanged(collection, item: collection.itemPath(uniqueID))
                      }),
            described("Label", "s", whenLocked: { $0.string("") }, { $1.string($0.label) },
                      set: { server, path, reader throws(BusError) in
                          let (collection, uniqueID) = try server.item(at: path)
                          guard let label = reader.string() else { throw .noSuchObject }
                          try server.changeItem(collection, uniqueID: uniqueID, .label(label))
                          server.itemChanged(collection, item: collection.itemPath(uniqueID))
                      }),
            described("Type", "s", whenLocked: { $0.string(genericType) }, { $1.string($0.attributes["xdg:schema"] ?? genericType) }),
            described("Created", "t", whenLocked: { $0.uint64(0) }, { $1.uint64($0.created) }),
            described("Modified", "t", whenLocked: { $0.uint64(0) }, { $1.uint64($0.modified) }),
        ],
        signals: [],
        finds: { server, path in
            guard case .item(let collection, let uniqueID)? = server.resolve(path) else { return false }
            return server.hasItem(collection, uniqueID: uniqueID)
        })

    /// A read-only or writable property of what `describeItem` tells, with its value while the
    /// collection is locked.
    private static func described(_ name: String, _ signature: String, whenLocked: @escaping @Sendable (inout BusWriter) -> Void,
                                  _ value: @escaping @Sendable (ItemDescription, inout BusWriter) -> Void,
                                  set: Property.Setter? = nil) -> Property {
        Property(name, signature, get: { server, path, writer throws(BusError) in
            let (collection, uniqueID) = try server.item(at: path)
            if server.isLocked(collection) {
                whenLocked(&writer)
                return
            }
            value(try server.describeItem(collection, uniqueID: uniqueID), &writer)
        }, set: set)
    }

    /// GetSecret(o session) -> (oayays) secret
    private static func getSecret(_ server: SecretServiceServer, _ call: MethodCall) throws(BusError) -> Replied {
        let (collection, uniqueID) = try server.item(at: call.path)
        guard let sessionPath = call.arguments.string("o") else { throw .noSuchObject }
        let session = try server.session(sessionPath, sender: call.sender)
        return try server.withSecret(collection, uniqueID: uniqueID) { secret, contentType throws(BusError) in
            try call.reply { writer throws(BusError) in
                try server.encode(secret, contentType: contentType, sessionPath: sessionPath, session: session, into: &writer)
                if writer.failed { throw .failed("cannot build the reply") }
            }
        }
    }
}

extension SecretServiceServer {
    /// An item's label, attributes or secret changed: its collection and its properties say so.
    func itemChanged(_ collection: SecretCollection, item path: String) {
        emit(collection.path, CollectionInterface.name, "ItemChanged", objectPath: path)
        propertiesChanged(path, ItemInterface.name, ["Label", "Attributes", "Modified"])
    }
}
