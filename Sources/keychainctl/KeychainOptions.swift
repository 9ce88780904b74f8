import ArgumentParser
import Glibc
import KeychainCore
import KeychainCrypto

/// `--keychain LABEL` and how a command finds and unlocks that keychain.
struct KeychainOptions: ParsableArguments {
    @Option(name: [.customShort("k"), .long], help: "The keychain's label (default: set-default's choice, else 'login', else the only one).")
    var keychain: String?

    @Option(help: ArgumentHelp("Read the user PIN from this file ('-' reads standard input).", valueName: "file"))
    var pinFile: String?

    /// The chosen keychain, opened.
    func open() throws -> OpenKeychain {
        let configuration = Configuration.current()
        let directory = KeychainDirectory(path: configuration.directory)
        var labelled: [(path: String, label: String)] = []
        var unreadable: [String] = []
        for path in directory.keychainFiles() {
            do { labelled.append((path, try Keychain.open(at: path).info(countingObjects: false).label)) } catch {
                unreadable.append("\(path): \(error.reason)")
            }
        }
        let wanted = keychain ?? configuration.defaultKeychain
        let match: (path: String, label: String)?
        if let wanted {
            let matches = labelled.filter { $0.label == wanted }
            guard matches.count <= 1 else {
                throw fail("two keychain files are labelled '\(wanted)': \(matches.map(\.path).joined(separator: ", ")); relabel or move one.", status: ExitStatus.usage)
            }
            match = matches.first
            guard match != nil else {
                if !unreadable.isEmpty {
                    throw fail("no readable keychain labelled '\(wanted)'; unreadable: \(unreadable.joined(separator: "; ")).", status: ExitStatus.storage)
                }
                throw fail("no keychain labelled '\(wanted)' in \(directory.path) (see 'keychainctl list').", status: ExitStatus.notFound)
            }
        } else if let login = labelled.first(where: { $0.label == "login" }) {
            match = login
        } else if labelled.count == 1 {
            match = labelled.first
        } else {
            let reason = labelled.isEmpty ? "there is no keychain yet: create one with 'keychainctl create --label login'"
                : "there are several keychains: name one with --keychain or choose a default with 'keychainctl set-default LABEL'"
            throw fail(reason + ".", status: ExitStatus.notFound)
        }
        guard let match else { throw fail("no keychain found.", status: ExitStatus.notFound) }
        do {
            return OpenKeychain(keychain: try Keychain.open(at: match.path), label: match.label, pinFile: pinFile)
        } catch {
            throw failure(for: error)
        }
    }
}

/// An opened keychain and, once the user PIN was given, its master key.
final class OpenKeychain {
    let keychain: Keychain
    let label: String
    private let pinFile: String?
    private(set) var master: MasterKey?

    init(keychain: Keychain, label: String, pinFile: String?) {
        self.keychain = keychain
        self.label = label
        self.pinFile = pinFile
        // AfterFirstUnlock items: readable when the session saw the keychain unlocked.
        UnlockSession.applyFirstUnlock(to: keychain)
    }

    /// Asks for the user PIN (file, KEYCHAIN_PKCS11_PIN, or the terminal) and unlocks.
    @discardableResult
    func unlock() throws -> MasterKey {
        if let master { return master }
        // Unlocked in the session (keychaind): no PIN asked.
        if let session = UnlockSession.masterKey(for: keychain) {
            master = session
            nameCounts = nil
            return session
        }
        let pin = try readSecret(file: pinFile, environment: "KEYCHAIN_PKCS11_PIN", prompt: "User PIN of keychain '\(label)'", confirm: false,
                                 option: "--pin-file")
        do {
            let kdf = (try? keychain.info(countingObjects: false))?.userKDF
            let unlocked = try withKDFNotice(kdf) { () throws(KeychainError) in
                try pin.withBytes { bytes throws(KeychainError) in try keychain.unlock(.user, pin: bytes) }
            }
            master = unlocked
            nameCounts = nil
            return unlocked
        } catch {
            throw failure(for: error)
        }
    }

    /// The token's label and serial, read once: every item URI names them.
    private var token: (label: String, serial: String)?

    func tokenIdentity() throws -> (label: String, serial: String) {
        if let token { return token }
        let info = try run { () throws(KeychainError) in try keychain.info(countingObjects: false) }
        token = (info.label, info.serial)
        return (info.label, info.serial)
    }

    /// `object` (stored as row `rowID`, or 0 before it is) as this keychain's item, with a URI
    /// that names it alone among the items visible now: when another item has the same label,
    /// class and CKA_ID, `id=` carries the item's unique ID instead.
    func describe(_ object: ObjectAttributes, rowID: Int64 = 0) throws -> ItemDescription {
        let token = try tokenIdentity()
        let plain = ItemDescription(rowID: rowID, object: object, token: token.label, serial: token.serial)
        guard try (names()[plain.uri.text] ?? 0) > 1, plain.uniqueID != nil else { return plain }
        return ItemDescription(rowID: rowID, object: object, token: token.label, serial: token.serial, byUniqueID: true)
    }

    /// How many visible items share each plain URI, counted once per command (after a write,
    /// `forgetNames()` counts again).
    private var nameCounts: [String: Int]?

    func forgetNames() { nameCounts = nil }

    private func names() throws -> [String: Int] {
        if let nameCounts { return nameCounts }
        let token = try tokenIdentity()
        let rows = try run { () throws(KeychainError) in try keychain.find([], master: master) }
        var counts: [String: Int] = [:]
        for row in rows {
            guard let object = try? keychain.object(id: row.id, master: master), object.objectClass != .credential else { continue }
            counts[PKCS11URI.object(object, token: token.label, serial: token.serial).text, default: 0] += 1
        }
        nameCounts = counts
        return counts
    }

    /// Runs a keychain operation, turning its error into a message and exit status.
    func run<R>(_ body: () throws(KeychainError) -> R) throws -> R {
        do { return try body() } catch { throw failure(for: error) }
    }
}

/// Reads a secret (PIN, password, passphrase) from a file ('-' = stdin), an environment
/// variable, or a no-echo prompt; a failure exits with `status` (a PIN's by default; a file
/// passphrase's is the bad-input status). With `nonEmpty`, an empty secret is refused.
func readSecret(file: String?, environment: String?, prompt: String, confirm: Bool, status: Int32 = ExitStatus.pin,
                nonEmpty: Bool = false, option: String? = nil) throws -> SecretInput {
    let secret: SecretInput
    do {
        secret = try SecretInput.read(file: file, environment: environment, prompt: prompt, confirm: confirm, option: option)
    } catch let error as SecretInput.Failure {
        // A file named on the command line that cannot be read is bad input (7), as documented.
        throw fail(error.message + ".", status: error.isFile ? ExitStatus.badInput : status)
    }
    if nonEmpty, secret.isEmpty { throw fail("an empty \(prompt.lowercased()) is refused.", status: ExitStatus.usage) }
    return secret
}

/// `--accessible` and `--access-control`: an item's protection class and constraint flags.
struct AccessOptions: ParsableArguments {
    @Option(help: ArgumentHelp("When the item may be used (default: when-unlocked).", valueName: "class"))
    var accessible: ProtectionChoice?

    @Option(help: ArgumentHelp("""
        Comma-separated constraints: user-presence (the PIN at each use), application-password (a second secret \
        for this item), private-key-usage (the key never leaves). To have both user-presence and \
        application-password, add and (both at each use) or or (either one).
        """, valueName: "flags"))
    var accessControl: String?

    @Option(help: ArgumentHelp("With application-password: read it from this file ('-' = stdin).", valueName: "file"))
    var applicationPasswordFile: String?

    @Flag(help: "Make the item synchronizable: it syncs to your other devices through 'keychainctl sync'. Refused (status 64) for an item that cannot leave this device: a this-device-only class, user-presence, private-key-usage, a key in the TPM.")
    var sync = false

    /// The command-line names of the flags.
    private static let flagNames: [(name: String, flag: AccessControlFlags)] = [
        ("user-presence", .userPresence), ("device-passcode", .devicePasscode), ("application-password", .applicationPassword),
        ("private-key-usage", .privateKeyUsage), ("and", .and), ("or", .or),
    ]

    /// The policy asked for, as KeychainCore's `AccessPolicy` judges it.
    func policy(defaultClass: ProtectionClass) throws -> AccessPolicy {
        var flags: AccessControlFlags = []
        for name in (accessControl ?? "").split(separator: ",").map({ $0.trimmingSpaces }) where !name.isEmpty {
            guard let known = Self.flagNames.first(where: { $0.name == name }) else {
                let names = Self.flagNames.map(\.name)
                throw fail("unknown access-control flag '\(name)'; use \(names.dropLast().joined(separator: ", ")) or \(names.last ?? "").", status: ExitStatus.usage)
            }
            flags.insert(known.flag)
        }
        do {
            return try AccessPolicy(protection: accessible?.protectionClass ?? defaultClass, flags: flags)
        } catch {
            throw fail(error.reason + ".", status: ExitStatus.usage)
        }
    }

    /// The PKCS#11 attributes of these choices for `item` (`AccessPolicy.attributes`), with
    /// CKA_PRIVATE from the protection class and, with --sync, CKA_KC_SYNCHRONIZABLE; the
    /// application password is read when asked for (after every check). `inTPM`: a key made in the TPM.
    func template(defaultClass: ProtectionClass, item: AccessPolicy.Item, inTPM: Bool = false) throws -> Template {
        let policy = try policy(defaultClass: defaultClass)
        do { try policy.check(for: item) } catch { throw fail(error.reason + ".", status: ExitStatus.usage) }
        let synchronizable = try syncTemplate(policy, inTPM: inTPM)
        do {
            let template = try policy.attributes(for: item) {
                let password = try readSecret(file: applicationPasswordFile, environment: "KEYCHAIN_PKCS11_APPLICATION_PASSWORD",
                                              prompt: "Application password for this item", confirm: true, option: "--application-password-file")
                return password.withBytes { Array($0) }
            }
            return template + [(.isPrivate, AttributeValue.bool(policy.protection.needsLogin))] + synchronizable
        } catch let refusal as AccessPolicy.Refusal {
            throw fail(refusal.reason + ".", status: ExitStatus.usage)
        }
    }

    /// CKA_KC_SYNCHRONIZABLE = TRUE with --sync (nothing without), once KeychainCore's `SyncRule`
    /// allows it for `policy`; a refusal is a one-line message naming the options that conflict.
    func syncTemplate(_ policy: AccessPolicy, inTPM: Bool = false) throws -> Template {
        guard sync else { return [] }
        if let refusal = SyncRule.refusal(token: true, protection: policy.protection, accessControl: policy.flags, inTPM: inTPM) {
            let conflict: String
            switch refusal {
            case .thisDeviceOnly(let protection): conflict = "--accessible \(ProtectionChoice.name(of: protection))"
            case .inTPM: conflict = "--tpm"
            case .boundAccessControl(let flags): conflict = "--access-control " + Self.names(of: flags)
            case .sessionObject: conflict = "a session object"
            }
            throw fail("\(refusal.reason) (--sync with \(conflict)).", status: ExitStatus.usage)
        }
        return [(.synchronizable, AttributeValue.bool(true))]
    }

    /// CKA_KC_SYNCHRONIZABLE for the objects that go with the item (a key's public key, its
    /// certificate): they sync when it does.
    var companionSyncTemplate: Template { sync ? [(.synchronizable, AttributeValue.bool(true))] : [] }

    /// The command-line names of `flags` (comma-separated, as --access-control takes them).
    static func names(of flags: AccessControlFlags) -> String {
        var names = flagNames.filter { flags.contains($0.flag) && $0.flag != .and && $0.flag != .or }.map(\.name)
        if !flags.isDisjoint(with: [.biometryAny, .biometryCurrentSet, .watch]) { names.append("biometry") }
        return names.joined(separator: ",")
    }
}

/// `--sync yes|no` of the update commands.
enum SyncChoice: String, ExpressibleByArgument, CaseIterable {
    case yes, no

    var flag: Bool { self == .yes }
}

/// The protection classes by their command-line names.
enum ProtectionChoice: String, ExpressibleByArgument, CaseIterable {
    case whenUnlocked = "when-unlocked"
    case afterFirstUnlock = "after-first-unlock"
    case always
    case whenPasscodeSetThisDeviceOnly = "when-passcode-set-this-device-only"
    case whenUnlockedThisDeviceOnly = "when-unlocked-this-device-only"
    case afterFirstUnlockThisDeviceOnly = "after-first-unlock-this-device-only"
    case alwaysThisDeviceOnly = "always-this-device-only"

    var protectionClass: ProtectionClass {
        switch self {
        case .whenUnlocked: return .whenUnlocked
        case .afterFirstUnlock: return .afterFirstUnlock
        case .always: return .always
        case .whenPasscodeSetThisDeviceOnly: return .whenPasscodeSetThisDeviceOnly
        case .whenUnlockedThisDeviceOnly: return .whenUnlockedThisDeviceOnly
        case .afterFirstUnlockThisDeviceOnly: return .afterFirstUnlockThisDeviceOnly
        case .alwaysThisDeviceOnly: return .alwaysThisDeviceOnly
        }
    }

    static func name(of protection: ProtectionClass) -> String {
        allCases.first { $0.protectionClass == protection }?.rawValue ?? "unknown"
    }
}

extension Substring {
    var trimmingSpaces: String { String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed()) }
}

/// Writes bytes to standard output (`path` nil or "-") or to a file, whole or not at all: a new
/// file beside the target (never following a link; 0600 for secrets) is synced, then renamed
/// over it, so an existing file keeps its contents if anything fails.
func writeOutput(_ bytes: [UInt8], to path: String?, secret: Bool) throws {
    guard let path, path != "-" else {
        do {
            try System.writeAll(STDOUT_FILENO, bytes)
        } catch {
            throw fail("cannot write to standard output: \(error.reason).", status: ExitStatus.failure)
        }
        return
    }
    let temporary = path + ".keychainctl-\(getpid())"
    let fd: Int32
    do {
        fd = try System.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: secret ? 0o600 : 0o644)
    } catch {
        throw fail("cannot write \(path): \(error.reason).", status: ExitStatus.failure)
    }
    do {
        do {
            defer { System.close(fd) }
            try System.writeAll(fd, bytes)
            try System.fsync(fd)
        }
        try System.rename(temporary, to: path)
    } catch {
        try? System.unlink(temporary)
        throw fail("cannot write \(path): \(error.reason).", status: ExitStatus.failure)
    }
}

/// Reads a whole file ('-' = standard input), bounded at 16 MiB.
func readInput(_ path: String) throws -> [UInt8] {
    let limit = 16 << 20
    let fd: Int32
    do {
        fd = path == "-" ? STDIN_FILENO : try System.open(path, O_RDONLY)
    } catch {
        throw fail("cannot read \(path): \(error.reason).", status: ExitStatus.badInput)
    }
    defer { if fd != STDIN_FILENO { System.close(fd) } }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n: Int
        do {
            n = try chunk.withUnsafeMutableBytes { buffer in Result { () throws(SystemError) in try System.read(fd, into: buffer) } }.get()
        } catch {
            throw fail("cannot read \(path): \(error.reason).", status: ExitStatus.badInput)
        }
        if n == 0 { break }
        bytes += chunk[0..<n]
        if bytes.count > limit { throw fail("\(path) is larger than 16 MiB.", status: ExitStatus.badInput) }
    }
    wipe(&chunk)
    return bytes
}
