import ArgumentParser
import KeychainCore

/// `secret-service sync [yes|no] [-k NAME]`: whether a keychain's Secret Service items sync to the
/// user's other devices (KeychainCore's `Keychain.setSecretServiceItemsSync`).
struct SecretServiceSyncCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Choose whether a keychain's Secret Service items sync to your other devices (default: no); without yes or no, print the choice.",
        discussion: """
        Secret Service items are the passwords that libsecret programs (secret-tool, GNOME \
        applications, git's libsecret helper) store over D-Bus, and those that \
        import-secret-service copies. 'yes' makes the existing ones synchronizable, and those \
        stored afterwards are made so; 'no' makes them all non-synchronizable again. Items that \
        cannot sync (a this-device-only class, user presence) stay as they are and are listed. \
        Passwords added by keychainctl or SecItemAdd keep their own choice (--sync). Items marked \
        synchronizable sync between devices through 'keychainctl sync'.

        Examples:
          keychainctl secret-service sync yes
          keychainctl secret-service sync no -k work
          keychainctl secret-service sync -k work
        """
    )

    @OptionGroup var selection: KeychainOptions

    @Argument(help: ArgumentHelp("yes: Secret Service items sync; no: they stay on this device.", valueName: "yes|no"))
    var choice: SyncChoice?

    func run() throws {
        let open = try selection.open()
        let name = printable(open.label)
        guard let choice else {
            let on = try open.run { () throws(KeychainError) in try open.keychain.secretServiceItemsSync() }
            print("Secret Service items of keychain '\(name)' sync: \(on ? "yes" : "no")")
            return
        }
        let master = try open.unlock()
        let report = try open.run { () throws(KeychainError) in try open.keychain.setSecretServiceItemsSync(choice.flag, master: master) }
        let made = choice.flag ? "synchronizable" : "non-synchronizable"
        print("Secret Service items of keychain '\(name)' sync: \(choice.rawValue) (\(report.changed) item(s) made \(made), \(report.unchanged) already so).")
        for skipped in report.skipped { print("  left as it was: '\(printable(skipped.label))': \(skipped.reason)") }
    }

    /// The choice of every keychain in the folder, for `secret-service status` (nil: unreadable).
    static func choices() -> [(label: String, sync: Bool?)] {
        KeychainDirectory(path: Configuration.current().directory).keychainFiles().compactMap { path in
            guard let keychain = try? Keychain.open(at: path), let label = try? keychain.info(countingObjects: false).label else { return nil }
            return (label, try? keychain.secretServiceItemsSync())
        }
    }
}
