import BusSupport
import CSystemd
import Glibc
import KeychainCore
import KeychainCrypto

// The Collection interface (org.freedesktop.Secret.Collection): one object per keychain; its
// methods and properties.
extension SecretService {
    func collectionMethod(_ member: String, _ message: OpaquePointer, _ reader: BusReader, path: String, sender: String) throws(Failure) -> Int32 {
        switch member {
        // Delete() -> o prompt
        case "Delete":
            // Deleting a keychain needs its SO PIN, asked by the prompt.
            guard case .collection(let collection)? = resolve(path) else { throw .noSuchObject }
            let promptPath = newPrompt(sender: sender, .delete(collection))
            return reply(message) { $0.string(promptPath, type: "o") }
        // SearchItems(a{ss} attributes) -> ao results
        case "SearchItems":
            guard case .collection(let collection)? = resolve(path), let wanted = reader.stringDictionary() else { throw .noSuchObject }
            let (keychain, master) = try open(collection)
            let found = try search(collection, wanted, keychain: keychain, master: master)
            return reply(message) { $0.objectPaths(found) }
        // CreateItem(a{sv} properties, (oayays) secret, b replace) -> (o item, o prompt)
        case "CreateItem": return try createItem(message, reader, path: path, sender: sender)
        default:
            throw .unknownMethod(Self.collectionInterface, member)
        }
    }

    func collectionProperty(_ property: String, path: String, writer: inout BusWriter) throws(Failure) {
        guard case .collection(let collection)? = resolve(path) else { throw .noSuchObject }
        switch property {
        case "Items":
            let (keychain, master) = try open(collection)
            writer.objectPaths(try search(collection, [:], keychain: keychain, master: master))
        case "Label": writer.string(collection.label)
        case "Locked": writer.bool(isLocked(collection))
        case "Created", "Modified":
            let info = try? System.stat(collection.file)
            let time = info.map { UInt64(max(0, property == "Created" ? $0.st_ctim.tv_sec : $0.st_mtim.tv_sec)) } ?? 0
            writer.uint64(time)
        default: throw .noSuchObject
        }
    }

    func setCollectionProperty(_ property: String) throws(Failure) {
        switch property {
        case "Label":
            throw .notSupported("a keychain's label is its token label: it is set when the keychain is created")
        default:
            throw .readOnly(property)
        }
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
}
