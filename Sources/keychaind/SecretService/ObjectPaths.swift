import KeychainCore
import KeychainCrypto

// Object paths: a collection's from its label, an item's from its unique ID, and what a path
// (or its alias form) names.
extension SecretService {
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

    enum Target {
        case collection(KeychainCollection)
        case item(KeychainCollection, uniqueID: String)

        /// The collection named, or the item's.
        var collection: KeychainCollection {
            switch self {
            case .collection(let collection), .item(let collection, _): return collection
            }
        }
    }

    /// What a collection or item path (or its alias form) names; nil when nothing.
    func resolve(_ path: String) -> Target? {
        let all = collections()
        var rest: Substring
        var collection: KeychainCollection?
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

    func itemPath(_ collection: KeychainCollection, _ object: ObjectAttributes) -> String? {
        guard let unique = object[.uniqueID], !unique.isEmpty else { return nil }
        return collection.path + "/" + String(decoding: unique, as: UTF8.self)
    }
}
