import Glibc
import KeychainCore
import KeychainCrypto

/// What a person reads about one stored item: its kind, names, protection and URI.
struct ItemDescription {
    let rowID: Int64
    let object: ObjectAttributes
    let uri: PKCS11URI

    init(rowID: Int64, object: ObjectAttributes, token: String, serial: String) {
        self.rowID = rowID
        self.object = object
        self.uri = PKCS11URI.object(object, token: token, serial: serial)
    }

    /// generic-password, internet-password, data, certificate, public-key, private-key, secret-key.
    var kind: String {
        if object.objectClass == .data {
            switch object.itemClass {
            case .genericPassword?: return "generic-password"
            case .internetPassword?: return "internet-password"
            default: return "data"
            }
        }
        switch object.objectClass {
        case .certificate?: return "certificate"
        case .publicKey?: return "public-key"
        case .privateKey?: return "private-key"
        case .secretKey?: return "secret-key"
        case .credential?: return "credential"
        default: return "object"
        }
    }

    func text(_ type: AttributeType) -> String? {
        guard let bytes = object[type], !bytes.isEmpty else { return nil }
        return String(decoding: bytes, as: UTF8.self)
    }

    var label: String { text(.label) ?? "" }

    /// The algorithm and size of a key ("RSA-2048", "EC-P256", "Ed25519", "AES-256").
    var algorithm: String? {
        guard let keyType = object.keyType else { return nil }
        if keyType == .rsa {
            var bits = DER.bitLength(ofUnsigned: object[.modulus] ?? [])
            if let stated = object[.modulusBits].flatMap(AttributeValue.decodeULong), let exact = Int(exactly: stated) { bits = exact }
            return "RSA-\(bits)"
        }
        if keyType == .ec || keyType == .ecEdwards || keyType == .ecMontgomery {
            guard let key = try? KeyFactory.publicKey(of: object) else { return "EC" }
            switch key.kind {
            case .ec(let curve): return "EC-P\(curve.bits)"
            case .ed25519: return "Ed25519"
            case .ed448: return "Ed448"
            case .x25519: return "X25519"
            case .x448: return "X448"
            case .rsa: return "RSA"
            case .dsa: return "DSA"
            case .dh: return "DH"
            }
        }
        if keyType == .aes { return "AES-\((object[.valueLength].flatMap(AttributeValue.decodeULong) ?? 0).multipliedReportingOverflow(by: 8).partialValue)" }
        if keyType == .genericSecret { return "generic-secret" }
        return nil
    }

    /// A short description: the account and service of a password, a certificate's subject, a key's algorithm.
    var summary: String {
        switch kind {
        case "generic-password", "internet-password":
            let account = text(.account) ?? ""
            let place = text(.application) ?? ""
            return account.isEmpty ? place : "\(account) @ \(place)"
        case "certificate":
            return (object[.value].flatMap { try? Certificate(der: $0) }?.subjectSummary) ?? ""
        default:
            return algorithm ?? ""
        }
    }

    var protection: String {
        if let raw = object[.accessible].flatMap(AttributeValue.decodeULong), let value = ProtectionClass(rawValue: raw) {
            return ProtectionChoice.name(of: value)
        }
        return object.isPrivate ? "when-unlocked" : "always"
    }

    var accessControl: [String] {
        let flags = object.accessControlFlags
        var names: [String] = []
        if flags.contains(.userPresence) { names.append("user-presence") }
        if flags.contains(.devicePasscode) { names.append("device-passcode") }
        if !flags.isDisjoint(with: [.biometryAny, .biometryCurrentSet, .watch]) { names.append("biometry") }
        if flags.contains(.applicationPassword) { names.append("application-password") }
        if flags.contains(.privateKeyUsage) { names.append("private-key-usage") }
        return names
    }

    static func date(_ bytes: [UInt8]?) -> String? {
        guard let seconds = bytes.flatMap(AttributeValue.decodeULong), seconds > 0, let stamp = time_t(exactly: seconds) else { return nil }
        var time = stamp
        var parts = tm()
        gmtime_r(&time, &parts)
        var buffer = [CChar](repeating: 0, count: 32)
        let length = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%SZ", &parts)
        return String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Name/value lines for `show` (secrets never shown).
    var details: [(String, String)] {
        var rows: [(String, String)] = [("Kind", kind), ("Label", label)]
        func add(_ name: String, _ value: String?) { if let value, !value.isEmpty { rows.append((name, value)) } }
        add("Algorithm", algorithm)
        if let id = object[.id], !id.isEmpty { rows.append(("ID", Hex.string(id))) }
        switch kind {
        case "generic-password":
            add("Service", text(.application)); add("Account", text(.account))
        case "internet-password":
            add("Server", text(.application)); add("Account", text(.account)); add("Protocol", fourCharacterCode(.itemProtocol))
            add("Port", object[.port].flatMap(AttributeValue.decodeULong).flatMap { $0 == 0 ? nil : String($0) })
            add("Path", text(.path)); add("Security domain", text(.securityDomain)); add("Authentication", fourCharacterCode(.authenticationType))
        case "data":
            add("Application", text(.application))
        case "certificate":
            if let der = object[.value], let certificate = try? Certificate(der: der) {
                add("Subject", certificate.subjectSummary)
                rows.append(("Serial", Hex.string(certificate.serialNumber)))
            }
        default:
            break
        }
        add("Comment", text(.comment))
        add("Description", text(.itemDescription))
        rows.append(("Protection", protection))
        add("Access control", accessControl.joined(separator: ","))
        if object.objectClass == .privateKey || object.objectClass == .secretKey {
            rows.append(("Sensitive", object.bool(.sensitive) ? "yes" : "no"))
            rows.append(("Extractable", object.bool(.extractable) ? "yes" : "no"))
            if object.bool(.alwaysAuthenticate) { rows.append(("Per-use PIN", "yes (CKA_ALWAYS_AUTHENTICATE)")) }
            let usages: [(AttributeType, String)] = [(.sign, "sign"), (.verify, "verify"), (.encrypt, "encrypt"), (.decrypt, "decrypt"),
                                                     (.wrap, "wrap"), (.unwrap, "unwrap"), (.derive, "derive")]
            add("Usage", usages.filter { object.bool($0.0) }.map(\.1).joined(separator: ","))
        }
        add("Created", Self.date(object[.creationTime]))
        add("Modified", Self.date(object[.modificationTime]))
        rows.append(("URI", uri.text))
        return rows
    }

    /// Prints the item as aligned name/value lines, or as JSON.
    func print(json: Bool) {
        if json {
            Swift.print(self.json)
            return
        }
        let rows = details
        let width = rows.map(\.0.count).max() ?? 0
        for (name, value) in rows { Swift.print(name.padding(toLength: width + 2, withPad: " ", startingAt: 0) + value) }
    }

    private func fourCharacterCode(_ type: AttributeType) -> String? {
        guard let raw = object[type].flatMap(AttributeValue.decodeULong), raw != 0 else { return nil }
        let bytes = (0..<4).map { UInt8(truncatingIfNeeded: raw >> (24 - 8 * UInt($0))) }
        return bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) ? String(decoding: bytes, as: UTF8.self) : String(raw)
    }

    /// One JSON object (keys sorted as written).
    var json: String {
        var fields: [(String, String)] = [("kind", JSON.string(kind)), ("label", JSON.string(label))]
        if let id = object[.id], !id.isEmpty { fields.append(("id", JSON.string(Hex.string(id)))) }
        if let algorithm { fields.append(("algorithm", JSON.string(algorithm))) }
        for (name, type) in [("account", AttributeType.account), (kind == "internet-password" ? "server" : "service", .application), ("comment", .comment)] {
            if let value = text(type), object.objectClass == .data || type == .comment { fields.append((name, JSON.string(value))) }
        }
        if kind == "certificate" { fields.append(("subject", JSON.string(summary))) }
        fields.append(("protection", JSON.string(protection)))
        fields.append(("accessControl", "[" + accessControl.map(JSON.string).joined(separator: ",") + "]"))
        fields.append(("private", object.isPrivate ? "true" : "false"))
        fields.append(("uri", JSON.string(uri.text)))
        return "{" + fields.map { JSON.string($0.0) + ":" + $0.1 }.joined(separator: ",") + "}"
    }
}

enum JSON {
    static func string(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }
}

/// Prints rows as aligned columns.
func printTable(_ rows: [[String]]) {
    guard let first = rows.first else { return }
    let widths = first.indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
    for row in rows {
        let line = row.enumerated().map { $0.offset == row.count - 1 ? $0.element : $0.element.padding(toLength: widths[$0.offset] + 2, withPad: " ", startingAt: 0) }
        print(line.joined())
    }
}
