import ArgumentParser
import Glibc
import KeychainCore
import KeychainCrypto

struct Info: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show one keychain: slot, serial, file, flags, item counts, PIN policy and tries, KDF parameters.",
        discussion: """
        Examples:
          keychainctl info
          keychainctl info --keychain work
          keychainctl info --json
        """
    )

    @OptionGroup var selection: KeychainOptions

    @Flag(help: "Print JSON (the object 'list --json' prints for each keychain).")
    var json = false

    func run() throws {
        let open = try selection.open()
        let info = try open.run { () throws(KeychainError) in try open.keychain.info() }
        let configuration = Configuration.current()
        if json {
            let isDefault = (configuration.defaultKeychain ?? "login") == info.label
            print(KeychainJSON.object(info, file: open.keychain.path, isDefault: isDefault))
            return
        }
        func pinLine(_ status: PINStatus) -> String {
            let state = status.locked ? "LOCKED" : status.finalTry ? "final try" : status.countLow ? "count low" : "ok"
            return "\(state), \(status.failures) of \(status.maximumFailures) failed tries"
        }
        let kdf = info.userKDF.map { "scrypt N = 2^\($0.logN), r = \($0.blockSize), p = \($0.parallelism)" } ?? "-"
        var rows: [(String, String)] = [
            ("Label", info.label),
            ("Display name", info.displayName ?? "- (the label)"),
            ("Default", (configuration.defaultKeychain ?? "login") == info.label ? "yes" : "no"),
            ("Slot", info.slotID.map(String.init) ?? "-"),
            ("Serial", info.serial),
            ("File", open.keychain.path),
            ("Items", "\(info.publicObjects) public, \(info.privateObjects) private (\(info.deviceBoundObjects) bound to this device)"),
            ("User PIN", info.userPINInitialized ? pinLine(info.userPIN) : "not set"),
            ("SO PIN", pinLine(info.soPIN)),
            ("PIN length", "\(info.pinPolicy.minimumLength) to \(info.pinPolicy.maximumLength) bytes"),
            ("PIN KDF", kdf),
        ]
        if let target = info.targetKDF, let current = info.userKDF, current.isWeaker(than: target) {
            rows.append(("Pending KDF", "scrypt N = 2^\(target.logN), r = \(target.blockSize) (at each PIN's next login)"))
        }
        rows.append(("Device key", info.deviceKeyProblem ?? deviceKeyDescription(open.keychain.deviceBindingKind(), path: open.keychain.deviceKeyFile.path)))
        rows.append(("Locked search", info.lockedLookup ? "on (the Secret Service finds passwords by attribute while locked)" : "off"))
        rows.append(("PKCS#11 URI", PKCS11URI.token(label: info.label, serial: info.serial).text))
        let width = rows.map(\.0.count).max() ?? 0
        for (name, value) in rows { print(name.padding(toLength: width + 2, withPad: " ", startingAt: 0) + printable(value)) }
    }
}

struct SetDefault: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-default",
        abstract: "Choose the keychain that commands and the Swift API use when none is named.",
        discussion: """
        The choice is kept in the keychain folder (file 'default-keychain'); KEYCHAIN_PKCS11_DEFAULT \
        and 'default_keychain' in the configuration file take precedence.

        Examples:
          keychainctl set-default work
          keychainctl set-default --clear
        """
    )

    @Argument(help: "The label of the keychain.")
    var label: String?

    @Flag(help: "Forget the choice (then 'login', or the only keychain, is used).")
    var clear = false

    func validate() throws {
        guard (label != nil) != clear else { throw ValidationError("give a label or --clear") }
    }

    func run() throws {
        let directory = KeychainDirectory(path: Configuration.current().directory)
        if let label {
            _ = try KeychainOptions.parse(["--keychain", label]).open()
        }
        do { try directory.setDefaultKeychain(label) } catch { throw failure(for: error) }
        print(label.map { "Default keychain: \($0)" } ?? "No default keychain chosen.")
    }
}

struct SetDisplayName: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-display-name",
        abstract: "Name a keychain as the Secret Service shows it (the collection's Label); the token label stays.",
        discussion: """
        Desktop applications show a keychain by this name and may change it (Collection.Label). \
        The token label — the keychain's identity in PKCS#11 URIs (token=…), in --keychain and in \
        the collection's D-Bus object path — does not change. Up to 256 bytes, no control \
        characters; --clear (or the token label itself) shows the token label again. Needs the \
        user PIN (or the keychain unlocked in the session).

        Examples:
          keychainctl set-display-name "Personal passwords"
          keychainctl set-display-name --keychain work --clear
        """
    )

    @OptionGroup var options: KeychainOptions

    @Argument(help: "The name to show.")
    var name: String?

    @Flag(help: "Remove the display name (the token label is shown).")
    var clear = false

    func validate() throws {
        guard (name != nil) != clear else { throw ValidationError("give a name or --clear") }
    }

    func run() throws {
        let opened = try options.open()
        _ = try opened.unlock()
        try opened.run { () throws(KeychainError) in try opened.keychain.setDisplayName(name) }
        let shown = try opened.run { () throws(KeychainError) in try opened.keychain.displayName() } ?? opened.label
        print("Keychain '\(printable(opened.label))' is shown as '\(printable(shown))'.")
    }
}

struct DeleteKeychain: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete-keychain",
        abstract: "Delete a keychain file and everything in it.",
        discussion: """
        Asks for the SO PIN, so that a mistyped label cannot destroy a keychain; --force skips the \
        check (for a keychain whose SO PIN is lost). Make a backup first: 'keychainctl backup'.

        Examples:
          keychainctl delete-keychain --keychain old
          keychainctl delete-keychain --keychain old --so-pin-file so.pin
        """
    )

    @OptionGroup var selection: KeychainOptions

    @Option(help: ArgumentHelp("Read the SO PIN from this file ('-' reads standard input).", valueName: "file"))
    var soPinFile: String?

    @Flag(help: "Delete without checking the SO PIN.")
    var force = false

    func run() throws {
        guard selection.keychain != nil else { throw fail("name the keychain to delete with --keychain.", status: ExitStatus.usage) }
        let open = try selection.open()
        if !force {
            let pin = try readSecret(file: soPinFile, environment: "KEYCHAIN_PKCS11_SO_PIN", prompt: "SO PIN of keychain '\(open.label)'", confirm: false,
                                     option: "--so-pin-file")
            _ = try open.run { () throws(KeychainError) in try pin.withBytes { bytes throws(KeychainError) in try open.keychain.unlock(.securityOfficer, pin: bytes) } }
        }
        let path = open.keychain.path
        do {
            try KeychainDirectory(path: Configuration.current().directory).delete(at: path, label: open.label)
        } catch {
            throw fail(error.reason + ".", status: ExitStatus.storage)
        }
        print("Deleted keychain '\(printable(open.label))' (\(path)).")
    }
}

struct ChangePIN: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "change-pin",
        abstract: "Change the user PIN (the keychain password), or with --so the SO PIN.",
        discussion: """
        Only the wrapping of the master key changes: items are not re-encrypted.

        Examples:
          keychainctl change-pin
          keychainctl change-pin --so --keychain work
          keychainctl change-pin --old-pin-file old.pin --new-pin-file new.pin
        """
    )

    @OptionGroup var selection: KeychainOptions

    @Flag(help: "Change the SO PIN instead of the user PIN.")
    var so = false

    @Option(help: ArgumentHelp("Read the current PIN from this file ('-' = standard input).", valueName: "file"))
    var oldPinFile: String?

    @Option(help: ArgumentHelp("Read the new PIN from this file ('-' = standard input).", valueName: "file"))
    var newPinFile: String?

    func run() throws {
        let open = try selection.open()
        let owner: PINOwner = so ? .securityOfficer : .user
        let name = so ? "SO PIN" : "user PIN"
        let old = try readSecret(file: oldPinFile ?? (so ? nil : selection.pinFile), environment: so ? "KEYCHAIN_PKCS11_SO_PIN" : "KEYCHAIN_PKCS11_PIN",
                                 prompt: "Current \(name) of '\(open.label)'", confirm: false, option: oldPinFile == nil && !so ? "--pin-file or --old-pin-file" : "--old-pin-file")
        let new = try readSecret(file: newPinFile, environment: so ? "KEYCHAIN_PKCS11_NEW_SO_PIN" : "KEYCHAIN_PKCS11_NEW_PIN",
                                 prompt: "New \(name)", confirm: true, option: "--new-pin-file")
        let kdf = Configuration.current().kdf
        try open.run { () throws(KeychainError) in try withKDFNotice(kdf) { () throws(KeychainError) in
            try old.withBytes { oldBytes throws(KeychainError) in
                try new.withBytes { newBytes throws(KeychainError) in
                    try open.keychain.changePIN(owner, old: oldBytes, new: newBytes, kdf: kdf)
                }
            }
        } }
        print("Changed the \(name) of '\(open.label)'.")
    }
}

struct ResetPIN: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reset-pin",
        abstract: "As the SO, set a new user PIN (also unlocks a locked user PIN); the items stay.",
        discussion: """
        Examples:
          keychainctl reset-pin --keychain login
          keychainctl reset-pin --so-pin-file so.pin --new-pin-file user.pin
        """
    )

    @OptionGroup var selection: KeychainOptions

    @Option(help: ArgumentHelp("Read the SO PIN from this file ('-' = standard input).", valueName: "file"))
    var soPinFile: String?

    @Option(help: ArgumentHelp("Read the new user PIN from this file ('-' = standard input).", valueName: "file"))
    var newPinFile: String?

    func run() throws {
        let open = try selection.open()
        let soPIN = try readSecret(file: soPinFile, environment: "KEYCHAIN_PKCS11_SO_PIN", prompt: "SO PIN of '\(open.label)'", confirm: false, option: "--so-pin-file")
        let master = try open.run { () throws(KeychainError) in
            try soPIN.withBytes { bytes throws(KeychainError) in try open.keychain.unlock(.securityOfficer, pin: bytes) }
        }
        let new = try readSecret(file: newPinFile, environment: "KEYCHAIN_PKCS11_NEW_PIN", prompt: "New user PIN", confirm: true, option: "--new-pin-file")
        let kdf = Configuration.current().kdf
        try open.run { () throws(KeychainError) in
            try new.withBytes { bytes throws(KeychainError) in try open.keychain.setUserPIN(bytes, master: master, kdf: kdf) }
        }
        print("Set a new user PIN for '\(open.label)'.")
    }
}

struct Verify: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "verify",
        abstract: "Check a keychain file for damage and for changes made outside this software.",
        discussion: """
        Checks the SQLite file, the integrity manifest (every record's write epoch, record and search \
        entries, so that a record rolled back, removed or added outside this software is found), \
        whether the file is older than one this device has seen, and opens every item the PIN opens. \
        Exit status 0 when all is well, 5 when damage or tampering is found.

        --accept-older-copy: after restoring an older copy of the file on purpose, accept it as the \
        current state (the device's record of this keychain goes back to the file's).

        Examples:
          keychainctl verify
          keychainctl verify --keychain work --accept-older-copy
        """
    )

    @OptionGroup var selection: KeychainOptions

    @Flag(help: "Accept this file although it is older than one this device has seen (a backup restored on purpose).")
    var acceptOlderCopy = false

    func run() throws {
        let open = try selection.open()
        let master = try open.unlock()
        let integrity = try open.run { () throws(KeychainError) in try open.keychain.integrityCheck() }
        guard integrity == "ok" else { throw fail("the SQLite file is damaged: \(integrity)", status: ExitStatus.storage) }
        if acceptOlderCopy {
            try open.run { () throws(KeychainError) in try open.keychain.acceptOlderCopy(master: master) }
        }
        let opened = try open.run { () throws(KeychainError) in try open.keychain.verifyIntegrity(master: master) }
        print("Keychain '\(open.label)': file sound, integrity manifest verified, \(opened) item(s) opened and checked.")
    }
}
