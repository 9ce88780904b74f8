import ArgumentParser
import KeychainCore
import KeychainCrypto

/// The attributes of a password item, named as `security add-generic-password` names them.
struct PasswordAttributes: ParsableArguments {
    @Option(name: .customShort("a"), help: ArgumentHelp("Account name.", valueName: "account"))
    var account: String?

    @Option(name: .customShort("s"), help: ArgumentHelp("Service (generic passwords) or server (internet passwords).", valueName: "service"))
    var service: String?

    @Option(name: .customShort("l"), help: ArgumentHelp("Label (default: the service or server).", valueName: "label"))
    var label: String?

    @Option(name: .customShort("j"), help: ArgumentHelp("Comment.", valueName: "comment"))
    var comment: String?

    @Option(name: .customShort("D"), help: ArgumentHelp("Kind (kSecAttrDescription).", valueName: "kind"))
    var kind: String?

    /// The identifying attributes (for searching) of an item of `itemClass`. Generic passwords
    /// are searched among all data objects (`PasswordItems.find` then leaves internet passwords
    /// out): the data objects PKCS#11 programs write, with no item class, are generic passwords.
    func identity(_ itemClass: ItemClass, extra: Template) -> Template {
        var template: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue))]
        if itemClass != .genericPassword { template.append((.itemClass, AttributeValue.ulong(itemClass.rawValue))) }
        if let account { template.append((.account, Array(account.utf8))) }
        if let service { template.append((.application, Array(service.utf8))) }
        return template + extra
    }

    /// The descriptive attributes given (label, comment, kind).
    var descriptive: Template {
        var template: Template = []
        if let label { template.append((.label, Array(label.utf8))) }
        if let comment { template.append((.comment, Array(comment.utf8))) }
        if let kind { template.append((.itemDescription, Array(kind.utf8))) }
        return template
    }

    /// A four-character code as Apple stores it: the characters big-endian in a CK_ULONG
    /// (space-padded, so "ftp" is "ftp ").
    static func fourCharacterCode(_ text: String, option: String) throws -> [UInt8] {
        var bytes = Array(text.utf8)
        while bytes.count < 4 { bytes.append(0x20) }
        guard bytes.count == 4 else { throw fail("\(option) takes four characters, e.g. htps.", status: ExitStatus.usage) }
        return AttributeValue.ulong(UInt(bytes.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }))
    }
}

/// What only internet passwords have: protocol, port, path, security domain, authentication type.
struct InternetAttributes: ParsableArguments {
    @Option(name: .customShort("r"), help: ArgumentHelp("Protocol, four characters: htps, http, ftp, ssh, smtp, imap…", valueName: "protocol"))
    var `protocol`: String?

    @Option(name: .customShort("P"), help: ArgumentHelp("Port.", valueName: "port"))
    var port: UInt16?

    @Option(name: .customShort("p"), help: ArgumentHelp("Path.", valueName: "path"))
    var path: String?

    @Option(name: .customShort("d"), help: ArgumentHelp("Security domain.", valueName: "domain"))
    var securityDomain: String?

    @Option(name: .customShort("t"), help: ArgumentHelp("Authentication type, four characters: dflt, http, form…", valueName: "type"))
    var authenticationType: String?

    func template() throws -> Template {
        var template: Template = []
        if let code = `protocol` { template.append((.itemProtocol, try PasswordAttributes.fourCharacterCode(code, option: "-r"))) }
        if let port { template.append((.port, AttributeValue.ulong(UInt(port)))) }
        if let path { template.append((.path, Array(path.utf8))) }
        if let securityDomain { template.append((.securityDomain, Array(securityDomain.utf8))) }
        if let code = authenticationType { template.append((.authenticationType, try PasswordAttributes.fourCharacterCode(code, option: "-t"))) }
        return template
    }
}

/// The steps the add/find/update/delete commands share for both password classes.
enum PasswordItems {
    static func newUniqueID() throws -> UniqueID {
        do { return try UniqueID.random() } catch { throw fail("the random generator failed.", status: ExitStatus.failure) }
    }

    static func readPassword(file: String?, confirm: Bool) throws -> [UInt8] {
        let secret = try readSecret(file: file, environment: nil, prompt: "Password to store", confirm: confirm, option: "--password-file")
        return secret.withBytes { Array($0) }
    }

    static func add(_ itemClass: ItemClass, attributes: PasswordAttributes, extra: Template, access: AccessOptions,
                    selection: KeychainOptions, passwordFile: String?, updateExisting: Bool) throws {
        guard attributes.service != nil || itemClass == .genericPassword else { throw fail("give the server with -s.", status: ExitStatus.usage) }
        guard attributes.account != nil || attributes.service != nil else { throw fail("give at least -a ACCOUNT or -s SERVICE.", status: ExitStatus.usage) }
        let open = try selection.open()
        let master = try open.unlock()
        var secret = try readPassword(file: passwordFile, confirm: true)
        defer { wipe(&secret) }
        let identity = attributes.identity(itemClass, extra: extra)
        var template: Template = identity + [(.token, AttributeValue.bool(true)), (.value, secret)]
        if !template.contains(where: { $0.type == .itemClass }) { template.append((.itemClass, AttributeValue.ulong(itemClass.rawValue))) }
        template += try access.template(defaultClass: .whenUnlocked, item: .password)
        template += attributes.descriptive
        if attributes.label == nil, let service = attributes.service { template.append((.label, Array(service.utf8))) }
        let uid = try newUniqueID()
        let object = try open.run { () throws(KeychainError) in try ObjectTemplate.create(template, uniqueID: uid.text, policy: Configuration.current().keyPolicy) }
        // -U: the item this one would duplicate (same primary key, absent fields equal to empty), if any.
        if updateExisting, let existing = try find(identity, in: open).first(where: { $0.object.isSameItem(as: object) }) {
            try update(existing, in: open, with: attributes.descriptive + [(.value, secret)])
            print("Updated \(existing.kind) \(existing.uri.text)")
            return
        }
        _ = try open.run { () throws(KeychainError) in try open.keychain.add(object, uid: uid.bytes, master: master) }
        open.forgetNames()
        print("Added \(try open.describe(object).uri.text)")
    }

    static func find(_ identity: Template, in open: OpenKeychain) throws -> [ItemDescription] {
        let rows = try open.run { () throws(KeychainError) in try open.keychain.find(identity, master: open.master) }
        let internet = identity.contains { $0.type == .itemClass }
        return try rows.compactMap { row in
            guard let object = try? open.keychain.object(id: row.id, master: open.master) else { return nil }
            // A generic-password search reads every data object: internet passwords are left out.
            if !internet, object.itemClass == .internetPassword { return nil }
            return try open.describe(object, rowID: row.id)
        }
    }

    static func single(_ itemClass: ItemClass, attributes: PasswordAttributes, extra: Template, in open: OpenKeychain) throws -> ItemDescription {
        // Like security: every attribute given narrows the search (label, comment and kind too).
        let identity = attributes.identity(itemClass, extra: extra) + attributes.descriptive
        let found = try find(identity, in: open)
        guard let first = found.first else {
            throw fail("the specified item could not be found in keychain '\(open.label)'.", status: ExitStatus.notFound)
        }
        guard found.count == 1 else { throw ambiguous(found, hint: " (add -a, -s or -l to narrow the search, or use 'keychainctl show URI')") }
        return first
    }

    static func update(_ item: ItemDescription, in open: OpenKeychain, with changes: Template) throws {
        guard !changes.isEmpty else { throw fail("nothing to change: give a new password or --new-label, --new-comment, --new-kind, --sync.", status: ExitStatus.usage) }
        if item.object.hasSealedSecrets, changes.contains(where: { $0.type == .value }) {
            throw fail("the password of an item with an application password changes only by deleting and adding it again.", status: ExitStatus.notPermitted)
        }
        let master = try open.unlock()
        var changed = try open.run { () throws(KeychainError) in try ObjectTemplate.set(changes, on: item.object) }
        defer { changed.wipeValues() }
        if let refusal = changed.syncRefusal(changing: item.object) {
            throw fail("\(refusal.reason) (--sync yes on \(syncObstacle(refusal))).", status: ExitStatus.usage)
        }
        try open.run { () throws(KeychainError) in try open.keychain.replace(id: item.rowID, with: changed, master: master) }
    }

    /// What makes an item unable to sync, in the words of the options that made it so.
    static func syncObstacle(_ refusal: SyncRule.Refusal) -> String {
        switch refusal {
        case .thisDeviceOnly(let protection): return "an item accessible \(ProtectionChoice.name(of: protection))"
        case .boundAccessControl(let flags): return "an item with access control \(AccessOptions.names(of: flags))"
        case .inTPM: return "a key in the TPM"
        case .sessionObject: return "a session object"
        }
    }

    /// The item's secret, asking for its application password or the PIN again as its access control requires.
    static func secret(of item: ItemDescription, in open: OpenKeychain, applicationPasswordFile: String?) throws -> [UInt8] {
        var object = item.object
        if object.hasSealedSecrets {
            let password = try readSecret(file: applicationPasswordFile, environment: "KEYCHAIN_PKCS11_APPLICATION_PASSWORD",
                                          prompt: "Application password of '\(item.label)'", confirm: false,
                                          option: "--application-password-file")
            object = try open.run { () throws(KeychainError) in
                try password.withBytes { bytes throws(KeychainError) in try open.keychain.reveal(object, applicationPassword: bytes) }
            }
        }
        return object[.value] ?? []
    }
}

/// A password class as the commands name it, with the options only that class has.
protocol PasswordClass {
    associatedtype Extra: ParsableArguments
    static var itemClass: ItemClass { get }
    /// "generic-password" or "internet-password", as in the command names.
    static var noun: String { get }
    /// What the class's identity is made of, for the help texts.
    static var identity: String { get }
    static func examples(_ verb: String) -> [String]
    static func template(_ extra: Extra) throws -> Template
}

/// Generic passwords have no options beyond the common ones.
struct NoExtraAttributes: ParsableArguments {}

enum GenericPasswordClass: PasswordClass {
    static let itemClass = ItemClass.genericPassword
    static let noun = "generic-password"
    static let identity = "account + service"
    static func template(_ extra: NoExtraAttributes) -> Template { [] }
    static func examples(_ verb: String) -> [String] {
        switch verb {
        case "add": return ["-a alice -s github.com", "-a ci -s registry \\\n      --password-file token.txt", "-a alice -s vpn -U",
                            "-a alice -s git.example.org --sync"]
        case "find": return ["-s github.com", "-a ci -s registry -w"]
        case "update": return ["-a alice -s github.com \\\n      --new-password", "-s github.com --new-comment rotated", "-a alice -s github.com --sync yes"]
        default: return ["-a alice -s github.com"]
        }
    }
}

enum InternetPasswordClass: PasswordClass {
    static let itemClass = ItemClass.internetPassword
    static let noun = "internet-password"
    static let identity = "account, server, protocol, port, path"
    static func template(_ extra: InternetAttributes) throws -> Template { try extra.template() }
    static func examples(_ verb: String) -> [String] {
        switch verb {
        case "add": return ["-a alice -s example.com \\\n      -r htps -P 443", "-a bob -s ftp.example.org -r ftp"]
        case "find": return ["-s example.com -a alice", "-s example.com -a alice -r htps -w"]
        case "update": return ["-a alice -s example.com \\\n      --password-file new.txt"]
        default: return ["-a alice -s example.com -r htps"]
        }
    }
}

extension PasswordClass {
    static func configuration(_ verb: String, _ abstract: String, _ discussion: String = "") -> CommandConfiguration {
        let examples = Self.examples(verb).map { "  keychainctl \(verb)-\(noun) \($0)" }.joined(separator: "\n")
        return CommandConfiguration(commandName: "\(verb)-\(noun)", abstract: abstract,
                                    discussion: (discussion.isEmpty ? "" : discussion + "\n\n") + "Examples:\n" + examples)
    }
}

struct AddPassword<Class: PasswordClass>: ParsableCommand {
    static var configuration: CommandConfiguration {
        Class.configuration("add", "Add \(Class.noun.replacingDash.withArticle) (\(Class.identity)), as security add-\(Class.noun).",
                            "The password comes from a no-echo prompt (asked twice) or --password-file ('-' = stdin).")
    }
    @OptionGroup var selection: KeychainOptions
    @OptionGroup var attributes: PasswordAttributes
    @OptionGroup var extra: Class.Extra
    @OptionGroup var access: AccessOptions
    @Option(help: ArgumentHelp("Read the password from this file ('-' = standard input).", valueName: "file")) var passwordFile: String?
    @Flag(name: .customShort("U"), help: "Update the item if it already exists.") var updateExisting = false

    func run() throws {
        try PasswordItems.add(Class.itemClass, attributes: attributes, extra: try Class.template(extra), access: access, selection: selection,
                              passwordFile: passwordFile, updateExisting: updateExisting)
    }
}

struct FindPassword<Class: PasswordClass>: ParsableCommand {
    static var configuration: CommandConfiguration {
        Class.configuration("find", "Find \(Class.noun.replacingDash.withArticle); -w prints only the password, for scripts.")
    }
    @OptionGroup var selection: KeychainOptions
    @OptionGroup var attributes: PasswordAttributes
    @OptionGroup var extra: Class.Extra
    @Flag(name: .customShort("w"), help: "Print only the password.") var onlyPassword = false
    @Flag(help: "Print the attributes as JSON.") var json = false
    @Option(help: ArgumentHelp("For an item with an application password: read it from this file.", valueName: "file")) var applicationPasswordFile: String?

    func run() throws {
        let open = try selection.open()
        try open.unlock()
        let item = try PasswordItems.single(Class.itemClass, attributes: attributes, extra: try Class.template(extra), in: open)
        if onlyPassword {
            var secret = try PasswordItems.secret(of: item, in: open, applicationPasswordFile: applicationPasswordFile)
            defer { wipe(&secret) }
            try writeOutput(secret, to: nil, secret: true)
            try writeOutput([0x0A], to: nil, secret: false)
        } else {
            item.print(json: json)
        }
    }
}

struct UpdatePassword<Class: PasswordClass>: ParsableCommand {
    static var configuration: CommandConfiguration {
        Class.configuration("update", "Change \(Class.noun.replacingDash.withArticle)'s password, label, comment or kind.")
    }
    @OptionGroup var selection: KeychainOptions
    @OptionGroup var attributes: PasswordAttributes
    @OptionGroup var extra: Class.Extra
    @Flag(help: "Ask for a new password.") var newPassword = false
    @Option(help: ArgumentHelp("Read the new password from this file ('-' = standard input).", valueName: "file")) var passwordFile: String?
    @Option(help: "New label.") var newLabel: String?
    @Option(help: "New comment.") var newComment: String?
    @Option(help: "New kind.") var newKind: String?
    @Option(help: ArgumentHelp("yes: make the item synchronizable (it syncs to your other devices through 'keychainctl sync'); no: keep it on this device only.",
                               valueName: "yes|no"))
    var sync: SyncChoice?

    func run() throws {
        let open = try selection.open()
        try open.unlock()
        let item = try PasswordItems.single(Class.itemClass, attributes: attributes, extra: try Class.template(extra), in: open)
        var changes: Template = []
        if let newLabel { changes.append((.label, Array(newLabel.utf8))) }
        if let newComment { changes.append((.comment, Array(newComment.utf8))) }
        if let newKind { changes.append((.itemDescription, Array(newKind.utf8))) }
        if let sync { changes.append((.synchronizable, AttributeValue.bool(sync.flag))) }
        var secret: [UInt8] = []
        defer { wipe(&secret) }
        if newPassword || passwordFile != nil {
            secret = try PasswordItems.readPassword(file: passwordFile, confirm: true)
            changes.append((.value, secret))
        }
        try PasswordItems.update(item, in: open, with: changes)
        print("Updated \(item.kind) \(item.uri.text)")
    }
}

struct DeletePassword<Class: PasswordClass>: ParsableCommand {
    static var configuration: CommandConfiguration { Class.configuration("delete", "Delete \(Class.noun.replacingDash.withArticle).") }
    @OptionGroup var selection: KeychainOptions
    @OptionGroup var attributes: PasswordAttributes
    @OptionGroup var extra: Class.Extra

    func run() throws {
        let open = try selection.open()
        let master = try open.unlock()
        let item = try PasswordItems.single(Class.itemClass, attributes: attributes, extra: try Class.template(extra), in: open)
        try open.run { () throws(KeychainError) in try open.keychain.remove(id: item.rowID, master: master) }
        print("Deleted \(item.kind) \(item.uri.text)")
    }
}

extension String {
    /// "generic-password" → "generic password".
    var replacingDash: String { String(map { $0 == "-" ? " " : $0 }) }

    /// "an internet password", "a generic password".
    var withArticle: String { (first.map { "aeiou".contains($0) } == true ? "an " : "a ") + self }
}
