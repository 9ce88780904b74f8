import Glibc
import KeychainCore
import KeychainCrypto

/// What a person reads about one stored item: its kind, names, protection and URI.
struct ItemDescription {
    let rowID: Int64
    let object: ObjectAttributes
    /// The full URI (model, manufacturer, serial, token, id, object, type); `id=` carries the
    /// item's unique ID when no other item could otherwise be told apart from it.
    let uri: PKCS11URI
    /// The same without model, manufacturer and serial: enough within this folder's keychains.
    let shortURI: PKCS11URI

    init(rowID: Int64, object: ObjectAttributes, token: String, serial: String, byUniqueID: Bool = false) {
        self.rowID = rowID
        self.object = object
        self.uri = PKCS11URI.object(object, token: token, serial: serial, byUniqueID: byUniqueID)
        self.shortURI = PKCS11URI(attributes: uri.attributes.filter { !["model", "manufacturer", "serial"].contains($0.name) })
    }

    /// The item's unique ID (CKA_UNIQUE_ID's 16 bytes), which `id=` names when nothing else does.
    var uniqueID: [UInt8]? { object[.uniqueID].flatMap { Hex.bytes($0) } }

    /// generic-password, internet-password, certificate, public-key, private-key, secret-key.
    /// A data object a PKCS#11 program wrote (no item class) is a generic password whose
    /// service is CKA_APPLICATION, as the user guide says.
    var kind: String {
        if object.objectClass == .data {
            switch object.itemClass {
            case .internetPassword?: return "internet-password"
            default: return "generic-password"
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

    /// The algorithm and size of a key ("RSA-2048", "EC-P256", "Ed25519", "AES-256"), or its
    /// parameter set ("ML-DSA-65", "ML-KEM-768").
    var algorithm: String? {
        guard let keyType = object.keyType else { return nil }
        if keyType.isLattice { return LatticeKeys.parameterSet(of: object)?.name ?? (keyType == .mlDSA ? "ML-DSA" : "ML-KEM") }
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
        if keyType == .chacha20 { return "ChaCha20" }
        if keyType == .aesXTS { return "AES-XTS-\((object[.valueLength].flatMap(AttributeValue.decodeULong) ?? 0).multipliedReportingOverflow(by: 4).partialValue)" }
        if keyType == .hkdf { return "HKDF" }
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
            // A key made in the TPM says so where keys are listed.
            return (algorithm ?? "") + (object.bool(.tpm) ? " (TPM)" : "")
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

    /// One field of an item as `show` prints it (name) and as JSON has it (key).
    struct Field {
        enum Value { case text(String), flag(Bool), list([String]), number(UInt) }
        let key: String
        let name: String
        let value: Value
    }

    /// Every field of the item, in the order printed: one list behind `show`, `find-…` and every
    /// `--json` item (secrets never shown). Absent fields are left out.
    var fields: [Field] {
        var fields: [Field] = [Field(key: "kind", name: "Kind", value: .text(kind)), Field(key: "label", name: "Label", value: .text(label))]
        func add(_ key: String, _ name: String, _ value: String?) { if let value, !value.isEmpty { fields.append(Field(key: key, name: name, value: .text(value))) } }
        add("algorithm", "Algorithm", algorithm)
        if let id = object[.id], !id.isEmpty { add("id", "ID", Hex.string(id)) }
        switch kind {
        case "generic-password":
            add("service", "Service", text(.application)); add("account", "Account", text(.account))
        case "internet-password":
            add("server", "Server", text(.application)); add("account", "Account", text(.account)); add("protocol", "Protocol", fourCharacterCode(.itemProtocol))
            if let port = object[.port].flatMap(AttributeValue.decodeULong), port != 0 { fields.append(Field(key: "port", name: "Port", value: .number(port))) }
            add("path", "Path", text(.path)); add("securityDomain", "Security domain", text(.securityDomain))
            add("authenticationType", "Authentication", fourCharacterCode(.authenticationType))
        case "certificate":
            if let der = object[.value], let certificate = try? Certificate(der: der) {
                add("subject", "Subject", certificate.subjectSummary)
                add("serial", "Serial", Self.serialHex(certificate.serialNumber))
                if let validity = certificate.validity {
                    add("notBefore", "Not before", Self.date(seconds: validity.notBefore))
                    add("notAfter", "Not after", Self.date(seconds: validity.notAfter))
                }
            }
        default:
            break
        }
        add("comment", "Comment", text(.comment))
        add("description", "Description", text(.itemDescription))
        fields.append(Field(key: "protection", name: "Protection", value: .text(protection)))
        fields.append(Field(key: "accessControl", name: "Access control", value: .list(accessControl)))
        fields.append(Field(key: "private", name: "Private", value: .flag(object.isPrivate)))
        fields.append(Field(key: "synchronizable", name: "Synchronizable", value: .flag(object.isSynchronizable)))
        if object.objectClass == .privateKey || object.objectClass == .secretKey {
            fields.append(Field(key: "sensitive", name: "Sensitive", value: .flag(object.bool(.sensitive))))
            fields.append(Field(key: "extractable", name: "Extractable", value: .flag(object.bool(.extractable))))
            fields.append(Field(key: "perUsePIN", name: "Per-use PIN", value: .flag(object.bool(.alwaysAuthenticate))))
            if object.objectClass == .privateKey {
                fields.append(Field(key: "tpm", name: "In the TPM", value: .flag(object.bool(.tpm))))
            }
            let usages: [(AttributeType, String)] = [(.sign, "sign"), (.verify, "verify"), (.encrypt, "encrypt"), (.decrypt, "decrypt"),
                                                     (.wrap, "wrap"), (.unwrap, "unwrap"), (.derive, "derive"), (.decapsulate, "decapsulate")]
            fields.append(Field(key: "usage", name: "Usage", value: .list(usages.filter { object.bool($0.0) }.map(\.1))))
        }
        add("created", "Created", Self.date(object[.creationTime]))
        add("modified", "Modified", Self.date(object[.modificationTime]))
        if let unique = object[.uniqueID], !unique.isEmpty { add("uniqueID", "Unique ID", String(decoding: unique, as: UTF8.self)) }
        add("uri", "URI", uri.text)
        return fields
    }

    /// A certificate serial (CKA_SERIAL_NUMBER: the DER INTEGER, tag and length included) as
    /// `openssl x509 -serial` prints it: upper-case hex of the value, no leading zero bytes.
    static func serialHex(_ der: [UInt8]) -> String {
        var bytes = der[...]
        if bytes.first == 0x02, bytes.count >= 2 {
            let first = Int(bytes[bytes.startIndex + 1])
            let headerLength = first < 0x80 ? 2 : 2 + (first & 0x7F)
            if bytes.count >= headerLength { bytes = bytes.dropFirst(headerLength) }
        }
        var digits = Array(bytes.drop { $0 == 0 })
        if digits.isEmpty { digits = [0] }
        return Hex.string(digits).uppercased()
    }

    static func date(seconds: Int64) -> String? {
        guard seconds > 0 else { return nil }
        return date(AttributeValue.ulong(UInt(seconds)))
    }

    /// Prints the item as aligned name/value lines (control characters shown escaped), or as JSON.
    func print(json: Bool) {
        if json {
            Swift.print(self.json)
            return
        }
        let rows = fields.compactMap { field -> (String, String)? in
            switch field.value {
            case .text(let text): return (field.name, printable(text))
            case .flag(let flag): return (field.name, flag ? "yes" : "no")
            case .number(let number): return (field.name, String(number))
            case .list(let list): return list.isEmpty ? nil : (field.name, list.joined(separator: ","))
            }
        }
        let width = rows.map(\.0.count).max() ?? 0
        for (name, value) in rows { Swift.print(name.padding(toLength: width + 2, withPad: " ", startingAt: 0) + value) }
    }

    private func fourCharacterCode(_ type: AttributeType) -> String? {
        guard let raw = object[type].flatMap(AttributeValue.decodeULong), raw != 0 else { return nil }
        let bytes = (0..<4).map { UInt8(truncatingIfNeeded: raw >> (24 - 8 * UInt($0))) }
        return bytes.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) ? String(decoding: bytes, as: UTF8.self) : String(raw)
    }

    /// One JSON object: the fields of `fields`, keys as Docs/cli-reference.md "JSON output" lists them.
    var json: String {
        "{" + fields.map { field in
            let value: String
            switch field.value {
            case .text(let text): value = JSON.string(text)
            case .flag(let flag): value = flag ? "true" : "false"
            case .number(let number): value = String(number)
            case .list(let list): value = "[" + list.map(JSON.string).joined(separator: ",") + "]"
            }
            return JSON.string(field.key) + ":" + value
        }.joined(separator: ",") + "}"
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

/// Prints rows as aligned columns (cells made printable first).
func printTable(_ rows: [[String]]) {
    let rows = rows.map { $0.map(printable) }
    guard let first = rows.first else { return }
    let widths = first.indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
    for row in rows {
        let line = row.enumerated().map { $0.offset == row.count - 1 ? $0.element : $0.element.padding(toLength: widths[$0.offset] + 2, withPad: " ", startingAt: 0) }
        print(line.joined())
    }
}
