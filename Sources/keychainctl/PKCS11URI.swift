import KeychainCore
import KeychainCrypto

/// A PKCS#11 URI (RFC 7512) naming a token or an object, as p11tool and p11-kit print them.
struct PKCS11URI: Equatable {
    /// Path attributes in the order printed: model, manufacturer, serial, token, id, object, type.
    var attributes: [(name: String, value: [UInt8])] = []

    static let manufacturer = "Keychain PKCS#11"
    static let model = "Keychain"

    static func == (lhs: PKCS11URI, rhs: PKCS11URI) -> Bool { lhs.text == rhs.text }

    subscript(_ name: String) -> [UInt8]? { attributes.first { $0.name == name }?.value }

    func string(_ name: String) -> String? { self[name].map { String(decoding: $0, as: UTF8.self) } }

    /// The URI of a keychain's token.
    static func token(label: String, serial: String) -> PKCS11URI {
        PKCS11URI(attributes: [("model", Array(model.utf8)), ("manufacturer", Array(manufacturer.utf8)), ("serial", Array(serial.utf8)),
                               ("token", Array(label.utf8))])
    }

    /// The URI of an object: its token, CKA_ID, CKA_LABEL and class.
    /// With `byUniqueID`, `id=` holds the object's unique ID (CKA_UNIQUE_ID as bytes) instead of
    /// its CKA_ID: keychainctl's printed URIs then name one item even where two share a label,
    /// class and CKA_ID (two generic passwords of one service, for example).
    static func object(_ object: ObjectAttributes, token label: String, serial: String, byUniqueID: Bool = false) -> PKCS11URI {
        var uri = token(label: label, serial: serial)
        if byUniqueID, let unique = object[.uniqueID].flatMap({ Hex.bytes($0) }) {
            uri.attributes.append(("id", unique))
        } else if let id = object[.id], !id.isEmpty {
            uri.attributes.append(("id", id))
        }
        if let name = object[.label], !name.isEmpty { uri.attributes.append(("object", name)) }
        if let type = typeName(object.objectClass) { uri.attributes.append(("type", Array(type.utf8))) }
        return uri
    }

    /// RFC 7512 §2.3 object types.
    static func typeName(_ objectClass: ObjectClass?) -> String? {
        switch objectClass {
        case .data?: return "data"
        case .certificate?: return "cert"
        case .publicKey?: return "public"
        case .privateKey?: return "private"
        case .secretKey?: return "secret-key"
        default: return nil
        }
    }

    static func objectClass(typeName: String) -> ObjectClass? {
        [ObjectClass.data, .certificate, .publicKey, .privateKey, .secretKey].first { Self.typeName($0) == typeName }
    }

    var text: String {
        "pkcs11:" + attributes.map { "\($0.name)=\(Self.encode($0.value, everything: $0.name == "id"))" }.joined(separator: ";")
    }

    /// Characters a path attribute value may hold unencoded (RFC 7512 pk11-pchar without ';').
    private static func isPlain(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): return true
        default: return Array("-._~:[]@!$'()*+,=&".utf8).contains(byte)
        }
    }

    private static func encode(_ bytes: [UInt8], everything: Bool) -> String {
        let hex = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        for byte in bytes {
            if !everything, isPlain(byte) { out.append(byte) } else { out += [UInt8(ascii: "%"), hex[Int(byte >> 4)], hex[Int(byte & 15)]] }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// RFC 7512 path attributes; any other name (a typo would widen a search) is refused.
    static let pathAttributes: Set<String> = ["token", "manufacturer", "serial", "model", "object", "id", "type", "library-manufacturer",
                                              "library-description", "library-version", "slot-manufacturer", "slot-description", "slot-id"]

    /// Why a URI was refused.
    enum ParseError: Error { case notAURI, malformed(String), unknownAttribute(String), repeated(String), containsPIN }

    /// Parses "pkcs11:name=value;…[?query]": each path attribute known and given once; the query
    /// (module-path…) is ignored, except that a PIN in it is refused rather than silently used.
    init(parsing text: String) throws(ParseError) {
        guard text.hasPrefix("pkcs11:") else { throw .notAURI }
        let parts = text.dropFirst("pkcs11:".count).split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        if parts.count == 2, parts[1].split(separator: "&").contains(where: { $0.hasPrefix("pin-value=") || $0.hasPrefix("pin-source=") }) {
            throw .containsPIN
        }
        for part in (parts.first ?? "").split(separator: ";") where !part.isEmpty {
            let pair = part.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard pair.count == 2, let value = Self.decode(pair[1]) else { throw .malformed(String(part)) }
            let name = String(pair[0])
            guard Self.pathAttributes.contains(name) else { throw .unknownAttribute(name) }
            guard self[name] == nil else { throw .repeated(name) }
            attributes.append((name, value))
        }
    }

    init(attributes: [(name: String, value: [UInt8])]) { self.attributes = attributes }

    private static func decode(_ text: Substring) -> [UInt8]? {
        var out: [UInt8] = []
        var bytes = Array(text.utf8)[...]
        while let byte = bytes.popFirst() {
            guard byte == UInt8(ascii: "%") else { out.append(byte); continue }
            guard bytes.count >= 2, let high = Hex.value(bytes.removeFirst()), let low = Hex.value(bytes.removeFirst()) else { return nil }
            out.append(high << 4 | low)
        }
        return out
    }

}

extension Hex {
    /// The bytes of an --id value: hex digits, optionally in colon-separated pairs ("01ab", "01:ab").
    static func bytes(option text: String) -> [UInt8]? {
        bytes(text.utf8.filter { $0 != UInt8(ascii: ":") })
    }
}
