import KeychainCrypto

/// How a freedesktop Secret Service item is a keychain password, and back (Docs/keychain-api.md,
/// "The Secret Service").
///
/// An item made through D-Bus is a data object holding its secret, label, content type and all
/// its lookup attributes (CKA_KC_LOOKUP_ATTRIBUTES, one blind-index entry per pair). The
/// attributes that mean what Apple's do are also stored as those: `service` is kSecAttrService
/// (CKA_APPLICATION), `account` (or `user`, `username`) kSecAttrAccount, so `keychainctl
/// find-generic-password` and `SecItemCopyMatching` find it. Such items carry no item class:
/// like the data objects PKCS#11 programs write, they are generic passwords without Apple's
/// uniqueness rule, since the Secret Service lets two items share a service and account. Items
/// of libsecret's network schema (`server`, `protocol`, `port`, `user`, `object`, `domain`)
/// become internet passwords with those fields, unless one with the same fields exists.
///
/// An item made by another door (no lookup attributes stored) shows the attributes its fields
/// give: `service`/`account` for a generic password, `server`/`user`/`protocol`/`port`/`object`
/// for an internet password.
public enum SecretServiceItems {
    /// libsecret's schema for network passwords (git-credential-libsecret, GNOME apps).
    public static let networkSchema = "org.gnome.keyring.NetworkPassword"

    /// The D-Bus attribute names kept as Apple's fields for a generic password.
    static let accountNames = ["account", "user", "username"]

    /// Secret Service protocol names and Apple's four-character codes (kSecAttrProtocol).
    static let protocols: [(name: String, code: String)] = [
        ("https", "htps"), ("http", "http"), ("ftp", "ftp "), ("ftps", "ftps"), ("sftp", "sftp"), ("ssh", "ssh "),
        ("smtp", "smtp"), ("imap", "imap"), ("imaps", "imps"), ("pop3", "pop3"), ("pop3s", "pop3"), ("ldap", "ldap"),
        ("ldaps", "ldps"), ("smb", "smb "), ("telnet", "teln"), ("irc", "irc "), ("ircs", "ircs"), ("socks", "sox "),
    ]

    static func fourCharacterCode(_ text: String) -> [UInt8] {
        var bytes = Array(text.utf8.prefix(4))
        while bytes.count < 4 { bytes.append(0x20) }
        return AttributeValue.ulong(UInt(bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }))
    }

    static func protocolName(_ raw: UInt) -> String? {
        guard raw != 0 else { return nil }
        let bytes = (0..<4).map { UInt8(truncatingIfNeeded: raw >> (24 - 8 * UInt($0))) }
        let code = String(decoding: bytes, as: UTF8.self)
        if let known = protocols.first(where: { $0.code == code }) { return known.name }
        return code.trimmingSpaces.lowercasedASCII
    }

    /// Whether the attributes describe a network password (libsecret's network schema, or a server).
    public static func isNetwork(_ attributes: [String: String]) -> Bool {
        attributes["xdg:schema"] == networkSchema || (attributes["server"] != nil && attributes["service"] == nil)
    }

    /// The creation template of an item made through D-Bus (without token/class/value, which
    /// `creationTemplate` adds). `asInternet` false gives the generic form.
    public static func fields(_ attributes: [String: String], label: String, contentType: String, asInternet: Bool) -> Template {
        var template: Template = [(.lookupAttributes, LookupAttributes(attributes).encoded), (.label, Array(label.utf8)),
                                  (.contentType, Array(contentType.utf8))]
        if asInternet {
            template.append((.itemClass, AttributeValue.ulong(ItemClass.internetPassword.rawValue)))
            if let server = attributes["server"] { template.append((.application, Array(server.utf8))) }
            if let user = attributes["user"] ?? attributes["username"] { template.append((.account, Array(user.utf8))) }
            if let name = attributes["protocol"] {
                let code = protocols.first { $0.name == name.lowercasedASCII }?.code ?? name
                template.append((.itemProtocol, fourCharacterCode(code)))
            }
            if let port = attributes["port"].flatMap({ UInt($0) }), port <= 65535 { template.append((.port, AttributeValue.ulong(port))) }
            if let object = attributes["object"] { template.append((.path, Array(object.utf8))) }
            if let domain = attributes["domain"] { template.append((.securityDomain, Array(domain.utf8))) }
        } else {
            if let service = attributes["service"] ?? attributes["server"] { template.append((.application, Array(service.utf8))) }
            if let account = accountNames.lazy.compactMap({ attributes[$0] }).first { template.append((.account, Array(account.utf8))) }
        }
        return template
    }

    /// The whole creation template: a private token data object holding `secret`.
    public static func creationTemplate(_ attributes: [String: String], label: String, contentType: String, secret: [UInt8],
                                        asInternet: Bool) -> Template {
        [(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue)), (.token, AttributeValue.bool(true)),
         (.isPrivate, AttributeValue.bool(true)), (.value, secret)]
            + fields(attributes, label: label, contentType: contentType, asInternet: asInternet)
    }

    /// Stores an item made through the Secret Service (keychaind's CreateItem, keychainctl
    /// import-secret-service): the network schema as an internet password, or as a generic
    /// password when an internet password with those fields exists already. It is synchronizable
    /// when the keychain's Secret Service items sync (`Keychain.secretServiceItemsSync`).
    public static func add(_ attributes: [String: String], label: String, contentType: String, secret: [UInt8], to keychain: Keychain,
                           master: MasterKey) throws(KeychainError) -> ObjectAttributes {
        let uid = try UniqueID.random()
        let synchronizable: Template = try keychain.secretServiceItemsSync() ? [(.synchronizable, AttributeValue.bool(true))] : []
        func store(asInternet: Bool) throws(KeychainError) -> ObjectAttributes {
            var template = creationTemplate(attributes, label: label, contentType: contentType, secret: secret, asInternet: asInternet) + synchronizable
            defer { wipeValues(&template) }
            let object = try ObjectTemplate.create(template, uniqueID: uid.text, policy: Configuration.current().keyPolicy)
            _ = try keychain.add(object, uid: uid.bytes, master: master)
            return object
        }
        if isNetwork(attributes) {
            do { return try store(asInternet: true) } catch {
                guard error.code == .duplicateItem else { throw error }
            }
        }
        return try store(asInternet: false)
    }

    /// The lookup attributes an item shows on D-Bus: its stored ones, else those its fields give.
    public static func attributes(of object: ObjectAttributes) -> [String: String] {
        if let stored = object[.lookupAttributes].flatMap({ LookupAttributes(encoded: $0) }), !stored.isEmpty {
            return stored.dictionary
        }
        func text(_ type: AttributeType) -> String? {
            guard let bytes = object[type], !bytes.isEmpty else { return nil }
            return String(decoding: bytes, as: UTF8.self)
        }
        var attributes: [String: String] = [:]
        if object.itemClass == .internetPassword {
            attributes["server"] = text(.application)
            attributes["user"] = text(.account)
            attributes["protocol"] = object[.itemProtocol].flatMap(AttributeValue.decodeULong).flatMap(protocolName)
            if let port = object[.port].flatMap(AttributeValue.decodeULong), port != 0 { attributes["port"] = String(port) }
            attributes["object"] = text(.path)
            attributes["domain"] = text(.securityDomain)
        } else {
            attributes["service"] = text(.application)
            attributes["account"] = text(.account)
        }
        return attributes
    }

    /// Whether an item shows every pair of `wanted` (the Secret Service's search rule).
    public static func matches(_ object: ObjectAttributes, _ wanted: [String: String]) -> Bool {
        let shown = attributes(of: object)
        return wanted.allSatisfy { shown[$0.key] == $0.value }
    }

    /// Search templates whose union holds every item that may match `wanted` (each result is
    /// then checked with `matches`): items made through D-Bus by their indexed lookup attributes,
    /// and items of the other doors by the fields the attributes name (when they name only such
    /// fields).
    public static func searchTemplates(_ wanted: [String: String]) -> [Template] {
        let data: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue))]
        var templates: [Template] = [data + [(.lookupAttributes, LookupAttributes(wanted).encoded)]]
        let genericNames: Set<String> = ["service", "account"]
        let internetNames: Set<String> = ["server", "user", "protocol", "port", "object", "domain"]
        let names = Set(wanted.keys)
        if names.isSubset(of: genericNames) {
            var template = data
            if let service = wanted["service"] { template.append((.application, Array(service.utf8))) }
            if let account = wanted["account"] { template.append((.account, Array(account.utf8))) }
            templates.append(template)
        }
        if names.isSubset(of: internetNames) {
            var template = data + [(.itemClass, AttributeValue.ulong(ItemClass.internetPassword.rawValue))]
            if let server = wanted["server"] { template.append((.application, Array(server.utf8))) }
            if let user = wanted["user"] { template.append((.account, Array(user.utf8))) }
            templates.append(template)
        }
        return templates
    }
}

extension String {
    var lowercasedASCII: String {
        String(decoding: utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }, as: UTF8.self)
    }

    var trimmingSpaces: String {
        String(decoding: Array(utf8.reversed().drop { $0 == 0x20 }.reversed()), as: UTF8.self)
    }
}
