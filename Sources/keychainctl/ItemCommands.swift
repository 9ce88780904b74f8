import ArgumentParser
import Glibc
import KeychainCore
import KeychainCrypto

/// The kinds of item a selection can name.
enum ItemKind: String, ExpressibleByArgument, CaseIterable {
    case genericPassword = "generic-password", internetPassword = "internet-password", data, certificate
    case publicKey = "public-key", privateKey = "private-key", secretKey = "secret-key"

    var objectClass: ObjectClass {
        switch self {
        case .genericPassword, .internetPassword, .data: return .data
        case .certificate: return .certificate
        case .publicKey: return .publicKey
        case .privateKey: return .privateKey
        case .secretKey: return .secretKey
        }
    }
}

/// Which items a command acts on: a PKCS#11 URI, or attributes.
struct ItemSelector: ParsableArguments {
    @Argument(help: ArgumentHelp("A PKCS#11 URI as 'keychainctl items' prints it (pkcs11:token=…;id=…;object=…;type=…).", valueName: "uri"))
    var uri: String?

    @Option(help: "Items with this label (CKA_LABEL).")
    var label: String?

    @Option(help: ArgumentHelp("Items with this CKA_ID, in hex.", valueName: "hex"))
    var id: String?

    @Option(help: ArgumentHelp("Items of this kind: \(ItemKind.allCases.map(\.rawValue).joined(separator: ", ")).", valueName: "kind"))
    var type: ItemKind?

    var isEmpty: Bool { uri == nil && label == nil && id == nil && type == nil }

    /// The parsed URI, checked.
    func parsedURI() throws -> PKCS11URI? {
        guard let uri else { return nil }
        let parsed: PKCS11URI
        do { parsed = try PKCS11URI(parsing: uri) } catch {
            let why: String
            switch error {
            case .notAURI: why = "it is not a PKCS#11 URI (RFC 7512), e.g. pkcs11:token=login;object=github;type=private"
            case .malformed(let part): why = "'\(part)' is not name=value with %-escapes"
            case .unknownAttribute(let name): why = "'\(name)' is not a PKCS#11 URI attribute (token, object, id, type, serial, manufacturer, model)"
            case .repeated(let name): why = "'\(name)' is given twice"
            case .containsPIN: why = "it carries a PIN; give PINs with --pin-file or the prompt instead"
            }
            throw fail("cannot use the URI: \(why).", status: ExitStatus.usage)
        }
        if let manufacturer = parsed.string("manufacturer"), manufacturer != PKCS11URI.manufacturer {
            throw fail("the URI names another manufacturer's token (\(manufacturer)).", status: ExitStatus.notFound)
        }
        if let model = parsed.string("model"), model != PKCS11URI.model {
            throw fail("the URI names another model of token (\(model)).", status: ExitStatus.notFound)
        }
        return parsed
    }

    /// The keychain the selection names (the URI's token), unless --keychain does.
    func keychain(_ options: KeychainOptions) throws -> OpenKeychain {
        var options = options
        if let token = try parsedURI()?.string("token") {
            if let named = options.keychain, named != token {
                throw fail("--keychain '\(named)' and the URI's token '\(token)' disagree.", status: ExitStatus.usage)
            }
            options.keychain = token
        }
        let open = try options.open()
        if let serial = try parsedURI()?.string("serial") {
            guard try open.tokenIdentity().serial == serial else { throw fail("no keychain with serial \(serial) labelled '\(open.label)'.", status: ExitStatus.notFound) }
        }
        return open
    }

    /// The search template, a kind to check after reading, and the `id=` / `--id` bytes, which
    /// match an item's CKA_ID or its unique ID (the form keychainctl prints when a label, class
    /// and CKA_ID do not tell an item apart), so they are compared after reading.
    func template() throws -> (template: Template, kind: ItemKind?, id: [UInt8]?) {
        var template: Template = []
        var kind = type
        var wantedID: [UInt8]?
        if let uri = try parsedURI() {
            if let object = uri["object"] { template.append((.label, object)) }
            if let id = uri["id"] { wantedID = id }
            if let typeName = uri.string("type") {
                guard let objectClass = PKCS11URI.objectClass(typeName: typeName) else {
                    throw fail("unknown object type '\(typeName)' in the URI (cert, data, private, public, secret-key).", status: ExitStatus.usage)
                }
                if let type, type.objectClass != objectClass {
                    throw fail("--type \(type.rawValue) and the URI's type=\(typeName) disagree.", status: ExitStatus.usage)
                }
                if kind == nil {
                    template.append((.objectClass, AttributeValue.ulong(objectClass.rawValue)))
                }
            }
        }
        if let label { template.append((.label, Array(label.utf8))) }
        if let id {
            guard let bytes = Hex.bytes(option: id) else { throw fail("--id takes hex digits, e.g. --id 01ab.", status: ExitStatus.usage) }
            if let wantedID, wantedID != bytes { throw fail("--id and the URI's id= disagree.", status: ExitStatus.usage) }
            wantedID = bytes
        }
        if let type { template.append((.objectClass, AttributeValue.ulong(type.objectClass.rawValue))) }
        if kind == .data { kind = nil }
        return (template, kind, wantedID)
    }

    /// The matching items of `open` (private ones only when it is unlocked).
    func items(in open: OpenKeychain) throws -> [ItemDescription] {
        let (template, kind, wantedID) = try template()
        let rows = try open.run { () throws(KeychainError) in try open.keychain.find(template, master: open.master) }
        var found: [ItemDescription] = []
        for row in rows {
            guard let object = try? open.keychain.object(id: row.id, master: open.master), object.objectClass != .credential else { continue }
            if let wantedID, object[.id] ?? [] != wantedID, object[.uniqueID].flatMap({ Hex.bytes($0) }) != wantedID { continue }
            let item = try open.describe(object, rowID: row.id)
            if let kind, kind.rawValue != item.kind { continue }
            found.append(item)
        }
        return found
    }

    /// Whether the selection names no particular item (no label, object or ID): only a type.
    var namesNoItem: Bool {
        guard label == nil, id == nil else { return false }
        guard let uri, let parsed = try? PKCS11URI(parsing: uri) else { return true }
        return parsed["object"] == nil && parsed["id"] == nil
    }

    /// What the selection asks for, for messages: "label 'x', type private-key".
    func criteria() -> String {
        var parts: [String] = []
        if let uri { parts.append(uri) }
        if let label { parts.append("label '\(label)'") }
        if let id { parts.append("id \(id)") }
        if let type { parts.append("type \(type.rawValue)") }
        return parts.joined(separator: ", ")
    }

    /// Refuses a selection that names no item attribute (a bare token URI would select everything).
    func requireCriteria() throws {
        let (template, _, id) = try template()
        guard !template.isEmpty || id != nil else {
            throw fail("name the item: the selection gives no object, id or type (it would match every item).", status: ExitStatus.usage)
        }
    }

    /// Exactly one item, or a message saying how many matched and naming each by a URI that
    /// selects it alone.
    func single(in open: OpenKeychain) throws -> ItemDescription {
        try requireCriteria()
        let found = try items(in: open)
        guard let first = found.first else {
            throw fail("no item matches \(criteria()) in keychain '\(open.label)'" + (open.master == nil ? " (private items need the PIN)" : "") + ".",
                       status: ExitStatus.notFound)
        }
        guard found.count == 1 else { throw ambiguous(found) }
        return first
    }
}

/// "N items match": each candidate with the URI that names it alone, to copy.
func ambiguous(_ found: [ItemDescription], hint: String = "") -> ExitCode {
    let shown = found.prefix(10).map { "  \($0.kind): \($0.shortURI.text)" }.joined(separator: "\n")
    let more = found.count > 10 ? "\n  … and \(found.count - 10) more (see 'keychainctl items')" : ""
    return fail("\(found.count) items match\(hint); name one by giving its URI, as printed here:\n\(shown)\(more)", status: ExitStatus.usage)
}

struct Items: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "items",
        abstract: "List the items of a keychain with their PKCS#11 URIs.",
        discussion: """
        Private items are listed after the user PIN is given; --public-only lists without it.

        Examples:
          keychainctl items
          keychainctl items --wide   # full URIs (model, manufacturer, serial)
          keychainctl items --type private-key --json
          keychainctl items 'pkcs11:token=login;type=cert' --public-only
        """
    )

    @OptionGroup var selection: KeychainOptions
    @OptionGroup var selector: ItemSelector

    @Flag(help: "Print a JSON array instead of a table.")
    var json = false

    @Flag(help: "Do not ask for the PIN: list only what is visible without login.")
    var publicOnly = false

    @Flag(help: "Print each item's full URI (with model, manufacturer and serial) instead of the short form.")
    var wide = false

    func run() throws {
        let open = try selector.keychain(selection)
        if !publicOnly { try open.unlock() }
        let found = try selector.items(in: open)
        if json {
            print("[" + found.map(\.json).joined(separator: ",\n ") + "]")
            return
        }
        guard !found.isEmpty else {
            let filter = selector.criteria()
            let visibility = publicOnly ? " visible without login" : ""
            print(filter.isEmpty ? "No items in '\(printable(open.label))'\(visibility)."
                : "No items in '\(printable(open.label))'\(visibility) match \(printable(filter)).")
            return
        }
        let rows = [["KIND", "LABEL", "DETAILS", "PROTECTION", "SYNC", "URI"]]
            + found.map { [$0.kind, $0.label, $0.summary, $0.protection, $0.object.isSynchronizable ? "yes" : "no", (wide ? $0.uri : $0.shortURI).text] }
        printTable(rows)
    }
}

struct Show: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show one item's attributes (never its secret).",
        discussion: """
        Examples:
          keychainctl show 'pkcs11:token=login;object=github;type=private'
          keychainctl show --label github --type private-key
        """
    )

    @OptionGroup var selection: KeychainOptions
    @OptionGroup var selector: ItemSelector

    @Flag(help: "Print JSON.")
    var json = false

    @Flag(help: "Do not ask for the PIN: only items visible without login.")
    var publicOnly = false

    func validate() throws {
        guard !selector.isEmpty else { throw ValidationError("name the item by URI, --label, --id or --type") }
    }

    func run() throws {
        let open = try selector.keychain(selection)
        if !publicOnly { try open.unlock() }
        try selector.single(in: open).print(json: json)
    }
}

struct Delete: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete items named by a PKCS#11 URI or by attributes.",
        discussion: """
        Deletes one item; when several match, --all deletes every one of them. A selection that \
        names no label, object or ID (only a type) asks for confirmation on a terminal and needs \
        --yes otherwise.

        Examples:
          keychainctl delete 'pkcs11:token=login;id=%01;type=private'
          keychainctl delete --label old-key --all
          keychainctl delete --type certificate --all --yes
        """
    )

    @OptionGroup var selection: KeychainOptions
    @OptionGroup var selector: ItemSelector

    @Flag(help: "Delete every matching item.")
    var all = false

    @Flag(help: "Do not ask for confirmation (needed without a terminal when only a type selects).")
    var yes = false

    func validate() throws {
        guard !selector.isEmpty else { throw ValidationError("name the item by URI, --label, --id or --type") }
    }

    func run() throws {
        let open = try selector.keychain(selection)
        let master = try open.unlock()
        try selector.requireCriteria()
        let found = all ? try selector.items(in: open) : [try selector.single(in: open)]
        guard !found.isEmpty else { throw fail("no item matches \(selector.criteria()) in keychain '\(open.label)'.", status: ExitStatus.notFound) }
        if selector.namesNoItem, !yes {
            let what = found.count == 1 ? "the \(found[0].kind) '\(printable(found[0].label))'" : "\(found.count) items"
            guard isatty(STDIN_FILENO) == 1 else {
                throw fail("\(selector.criteria()) names no item but selects \(what); add --yes to delete without a question.", status: ExitStatus.usage)
            }
            for item in found.prefix(20) { print("  \(item.kind): \(item.shortURI.text)") }
            print("Delete \(what) from '\(printable(open.label))'? [y/N] ", terminator: "")
            fflush(nil)
            let answer = readLine() ?? ""
            guard answer == "y" || answer == "Y" || answer.lowercased() == "yes" else {
                print("Nothing deleted.")
                return
            }
        }
        try open.run { () throws(KeychainError) in
            try open.keychain.transaction { () throws(KeychainError) in
                for item in found { try open.keychain.remove(id: item.rowID, master: master) }
            }
        }
        for item in found { print("Deleted \(item.kind) \(item.uri.text)") }
    }
}
