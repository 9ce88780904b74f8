import BusSupport
import CSystemd
import KeychainCore
import KeychainCrypto

// The Item interface (org.freedesktop.Secret.Item): one object per password served.
extension SecretService {
    func itemMethod(_ member: String, _ message: OpaquePointer, _ reader: BusReader, path: String, sender: String) throws(Failure) -> Int32 {
        switch member {
        // Delete() -> o prompt
        case "Delete":
            guard case .item(let collection, let uniqueID)? = resolve(path) else { throw .noSuchObject }
            let (keychain, master) = try unlocked(collection)
            let found = try item(collection, uniqueID: uniqueID, keychain: keychain, master: master)
            do { try keychain.remove(id: found.row, master: master) } catch { throw .failed(error.reason) }
            itemsChanged(collection, item: collection.path + "/" + uniqueID, member: "ItemDeleted")
            return reply(message) { $0.string("/", type: "o") }
        // GetSecret(o session) -> (oayays) secret
        case "GetSecret":
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
        // SetSecret((oayays) secret)
        case "SetSecret":
            guard case .item(let collection, let uniqueID)? = resolve(path), let secret = reader.secret() else { throw .noSuchObject }
            var value = try decode(secret, sender: sender)
            defer { wipe(&value) }
            try change(collection, uniqueID: uniqueID, [(.value, value), (.contentType, Array(secret.contentType.utf8))])
            return reply(message) { _ in }
        default:
            throw .unknownMethod(Self.itemInterface, member)
        }
    }

    func itemProperty(_ property: String, path: String, writer: inout BusWriter) throws(Failure) {
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
    }

    func setItemProperty(_ property: String, path: String, reader: BusReader) throws(Failure) {
        switch property {
        case "Label":
            guard case .item(let collection, let uniqueID)? = resolve(path), let label = reader.string() else { throw .noSuchObject }
            try change(collection, uniqueID: uniqueID, [(.label, Array(label.utf8))])
        case "Attributes":
            guard case .item(let collection, let uniqueID)? = resolve(path), let attributes = reader.stringDictionary() else { throw .noSuchObject }
            let (keychain, master) = try unlocked(collection)
            let found = try item(collection, uniqueID: uniqueID, keychain: keychain, master: master)
            let label = found.object[.label].map { String(decoding: $0, as: UTF8.self) } ?? ""
            // The mapped fields follow the new attributes (the item keeps its class).
            var changes = SecretServiceItems.fields(attributes, label: label, contentType: contentType(found.object),
                                                    asInternet: found.object.itemClass == .internetPassword)
            changes.removeAll { $0.type == .itemClass }
            try change(collection, uniqueID: uniqueID, changes)
        default:
            throw .readOnly(property)
        }
    }

    /// Applies `changes` to an item (unlocked keychain), and says so on the bus.
    func change(_ collection: KeychainCollection, uniqueID: String, _ changes: Template) throws(Failure) {
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
}
