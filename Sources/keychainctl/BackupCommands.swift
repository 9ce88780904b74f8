import ArgumentParser
import Glibc
import KeychainCore
import KeychainCrypto

struct Backup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "backup",
        abstract: "Write a whole keychain into one passphrase-encrypted file.",
        discussion: """
        Items bound to this device (…-this-device-only) are left out, by design, and counted. The \
        file is sealed with AES-256-GCM under a key derived from the passphrase with scrypt.

        Examples:
          keychainctl backup -o login-2026-11.kcbackup
          keychainctl backup --keychain work -o work.kcbackup \\
              --passphrase-file backup.pass
        """
    )

    @OptionGroup var selection: KeychainOptions

    @Option(name: [.customShort("o"), .long], help: "The backup file to write (created 0600).")
    var output: String

    @Option(help: ArgumentHelp("Read the backup passphrase from this file ('-' = standard input).", valueName: "file"))
    var passphraseFile: String?

    func run() throws {
        let open = try selection.open()
        let master = try open.unlock()
        let passphrase = try readSecret(file: passphraseFile, environment: "KEYCHAIN_PKCS11_BACKUP_PASSPHRASE", prompt: "Backup passphrase", confirm: true,
                                        status: ExitStatus.badInput, nonEmpty: true, option: "--passphrase-file")
        let kdf = Configuration.current().kdf
        let result = try open.run { () throws(KeychainError) in
            try passphrase.withBytes { bytes throws(KeychainError) in try open.keychain.backup(master: master, passphrase: bytes, kdf: kdf) }
        }
        try writeOutput(result.file, to: output, secret: true)
        print("Wrote \(result.summary.written) items of '\(open.label)' to \(output).")
        if result.summary.skippedDeviceBound > 0 {
            print("Left out \(result.summary.skippedDeviceBound) item(s) bound to this device (…-this-device-only): they never leave it.")
        }
    }
}

struct Restore: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "restore",
        abstract: "Restore a backup into a keychain (all items or none).",
        discussion: """
        With --create a new keychain is made for it (asking for its SO and user PINs); otherwise \
        the items are added to an existing keychain. Items already present stop the restore, unless \
        --skip-duplicates.

        Examples:
          keychainctl restore login-2026-11.kcbackup --create \\
              --keychain login-restored
          keychainctl restore work.kcbackup --keychain work --skip-duplicates
        """
    )

    @OptionGroup var selection: KeychainOptions

    @Argument(help: "The backup file.")
    var file: String

    @Flag(help: "Create a new keychain (label: --keychain, else the backup's).")
    var create = false

    @Flag(help: "Skip items the keychain already has instead of failing.")
    var skipDuplicates = false

    @Option(help: ArgumentHelp("Read the backup passphrase from this file ('-' = standard input).", valueName: "file"))
    var passphraseFile: String?

    @Option(help: ArgumentHelp("With --create: read the new SO PIN from this file.", valueName: "file"))
    var soPinFile: String?

    func run() throws {
        let data = try readInput(file)
        let sourceLabel: String
        do { sourceLabel = try Keychain.backupLabel(data) } catch {
            throw fail("\(file) is not a keychain backup (\(error.reason)).", status: ExitStatus.badInput)
        }
        let passphrase = try readSecret(file: passphraseFile, environment: "KEYCHAIN_PKCS11_BACKUP_PASSPHRASE", prompt: "Backup passphrase", confirm: false,
                                        status: ExitStatus.badInput, option: "--passphrase-file")
        let open: OpenKeychain
        if create {
            // The passphrase first: a wrong one must not leave a new, empty keychain behind or
            // have asked for PINs in vain.
            do { try passphrase.withBytes { bytes throws(KeychainError) in try Keychain.checkBackup(data, passphrase: bytes) } } catch {
                if error.code == .pinIncorrect || error.code == .recordCorrupted {
                    throw fail("wrong passphrase, or the backup file is damaged; nothing was created or restored.", status: ExitStatus.badInput)
                }
                throw failure(for: error)
            }
            var options = selection
            let label = selection.keychain ?? sourceLabel
            try Create.make(label: label, soPinFile: soPinFile, pinFile: selection.pinFile)
            options.keychain = label
            open = try options.open()
        } else {
            open = try selection.open()
        }
        let summary: RestoreSummary
        do {
            let master = try open.unlock()
            summary = try passphrase.withBytes { bytes throws(KeychainError) in
                try open.keychain.restore(data, passphrase: bytes, master: master, skipDuplicates: skipDuplicates)
            }
        } catch {
            // A keychain made for this restore goes again when the restore fails.
            if create {
                try? KeychainDirectory(path: Configuration.current().directory).delete(at: open.keychain.path, label: open.label)
            }
            guard let error = error as? KeychainError else { throw error }
            if error.code == .pinIncorrect || error.code == .recordCorrupted {
                throw fail("wrong passphrase, or the backup file is damaged; nothing was restored.", status: ExitStatus.badInput)
            }
            throw failure(for: error)
        }
        print("Restored \(summary.restored) items from '\(sourceLabel)' into '\(open.label)'" +
              (summary.duplicates > 0 ? "; skipped \(summary.duplicates) already present." : "."))
    }
}
