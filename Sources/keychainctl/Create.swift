import ArgumentParser
import KeychainCore

struct Create: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "create",
        abstract: "Create a keychain in the keychain directory.",
        discussion: """
        Asks for the SO PIN (administers the keychain, resets a forgotten user PIN) and the user PIN \
        (the keychain password), each twice.

        Examples:
          keychainctl create --label login
          keychainctl create --label ci --so-pin-file so.pin --pin-file user.pin
          KEYCHAIN_PKCS11_SO_PIN=... KEYCHAIN_PKCS11_PIN=... \\
              keychainctl create --label build
        """
    )

    @Option(help: "The keychain's label (its PKCS#11 token label, at most 32 bytes).")
    var label: String

    @Option(help: ArgumentHelp("Read the SO PIN from this file ('-' = standard input).", valueName: "file"))
    var soPinFile: String?

    @Option(help: ArgumentHelp("Read the user PIN from this file ('-' = standard input).", valueName: "file"))
    var pinFile: String?

    @Flag(help: "Also make it the default keychain.")
    var setDefault = false

    func validate() throws {
        guard KeychainDirectory.isValidLabel(label) else {
            throw ValidationError("the label must have 1 to 32 bytes")
        }
    }

    func run() throws {
        try Self.make(label: label, soPinFile: soPinFile, pinFile: pinFile)
        if setDefault {
            do { try KeychainDirectory(path: Configuration.current().directory).setDefaultKeychain(label) } catch { throw failure(for: error) }
            print("Default keychain: \(label)")
        }
    }

    /// Creates the keychain `label`, asking for its PINs.
    static func make(label: String, soPinFile: String?, pinFile: String?) throws {
        guard KeychainDirectory.isValidLabel(label) else { throw fail("the label must have 1 to 32 bytes.", status: ExitStatus.usage) }
        let configuration = Configuration.current()
        let directory = KeychainDirectory(path: configuration.directory)
        // Asked before the PINs are typed; `create` checks again under its lock.
        if directory.keychainFile(labelled: label) != nil { throw Self.taken(label) }
        let soPIN = try readSecret(file: soPinFile, environment: "KEYCHAIN_PKCS11_SO_PIN", prompt: "SO PIN for '\(label)'", confirm: true, option: "--so-pin-file")
        let userPIN = try readSecret(file: pinFile, environment: "KEYCHAIN_PKCS11_PIN", prompt: "User PIN for '\(label)'", confirm: true, option: "--pin-file")
        do {
            let keychain = try withKDFNotice(configuration.kdf) { try soPIN.withBytes { so in
                try userPIN.withBytes { user in
                    try directory.create(label: label, soPIN: so, userPIN: user, kdf: configuration.kdf, policy: configuration.pinPolicy)
                }
            } }
            let info = try keychain.info()
            print("Created keychain '\(printable(info.label))' in slot \(info.slotID.map(String.init) ?? "?"), serial \(info.serial)")
            print("File: \(keychain.path)")
        } catch let error as KeychainError where error.code == .duplicateItem {
            throw Self.taken(label)
        } catch let error as KeychainError {
            throw failure(for: error)
        }
    }

    private static func taken(_ label: String) -> Error {
        fail("a keychain labelled '\(label)' already exists; choose another label (see 'keychainctl list').", status: ExitStatus.exists)
    }
}
