import KeychainCore
import KeychainCrypto

/// The object paths of the Secret Service (specification, "Object paths"): a collection's from
/// its label, an item's from its unique ID, sessions and prompts numbered by the server.
enum ObjectPath {
    static let root = "/org/freedesktop/secrets"
    static let collectionPrefix = root + "/collection/"
    static let aliasPrefix = root + "/aliases/"
    static let sessionPrefix = root + "/session/"
    static let promptPrefix = root + "/prompt/"
    /// "No object": no prompt needed, no collection for an alias.
    static let none = "/"

    /// A D-Bus path element for a label: letters and digits kept, any other byte as _XX.
    static func element(_ label: String) -> String {
        var out = ""
        for byte in label.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                out.unicodeScalars.append(UnicodeScalar(byte))
            default:
                let hex = String(byte, radix: 16)
                out += "_" + (hex.count < 2 ? "0" + hex : hex)
            }
        }
        return out.isEmpty ? "_" : out
    }
}

/// What a collection or item path names.
enum Target {
    case collection(SecretCollection)
    case item(SecretCollection, uniqueID: String)

    /// The collection named, or the item's.
    var collection: SecretCollection {
        switch self {
        case .collection(let collection), .item(let collection, _): return collection
        }
    }
}

extension SecretServiceServer {
    /// What a collection or item path (or its alias form) names; nil when nothing.
    func resolve(_ path: String) -> Target? {
        let all = collections()
        var rest: Substring
        var collection: SecretCollection?
        if path.hasPrefix(ObjectPath.collectionPrefix) {
            rest = path.dropFirst(ObjectPath.collectionPrefix.count)
            let element = rest.prefix { $0 != "/" }
            let prefix = ObjectPath.collectionPrefix + element
            collection = all.first { $0.path == prefix }
            rest = rest.dropFirst(element.count)
        } else if path.hasPrefix(ObjectPath.aliasPrefix) {
            rest = path.dropFirst(ObjectPath.aliasPrefix.count)
            let alias = rest.prefix { $0 != "/" }
            collection = self.collection(forAlias: String(alias), all)
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

    /// The collection an alias names: `default` (the default keychain) and `session`.
    func collection(forAlias alias: String, _ all: [SecretCollection]) -> SecretCollection? {
        switch alias {
        case "default": return defaultCollection(all)
        case SessionCollection.name: return .session
        default: return nil
        }
    }

    /// The collection at `path` (or its alias form); NoSuchObject when there is none.
    func collection(at path: String) throws(BusError) -> SecretCollection {
        guard case .collection(let collection)? = resolve(path) else { throw .noSuchObject }
        return collection
    }

    /// The item at `path`: its collection and unique ID; NoSuchObject when the path names none.
    func item(at path: String) throws(BusError) -> (collection: SecretCollection, uniqueID: String) {
        guard case .item(let collection, let uniqueID)? = resolve(path) else { throw .noSuchObject }
        return (collection, uniqueID)
    }
}
