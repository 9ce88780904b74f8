import ArgumentParser
import Glibc
import KeychainCore
import KeychainCrypto

@main
struct Keychainctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keychainctl",
        abstract: "Manage Keychain PKCS#11 keychains, passwords, keys and certificates.",
        discussion: """
        Keychains live in $KEYCHAIN_PKCS11_DIR, or the 'directory' of the file named by \
        $KEYCHAIN_PKCS11_CONF, or $XDG_DATA_HOME/keychain-pkcs11 (~/.local/share/keychain-pkcs11).

        PINs, passwords and passphrases are read from a no-echo prompt, a file ('-' for standard \
        input), or the environment (KEYCHAIN_PKCS11_PIN, KEYCHAIN_PKCS11_SO_PIN); never from the \
        command line.

        Exit codes: 0 ok, 1 failure, 3 PIN wrong, locked or missing, 4 already exists, 5 storage \
        problem, 6 not found, 7 unreadable input file or wrong file passphrase, 8 not permitted \
        (for example exporting a key that never leaves), 64 usage.

        Shell completions: keychainctl --generate-completion-script bash|zsh|fish
        """,
        version: "keychainctl \(ProductVersion.text)",
        subcommands: [
            Create.self, List.self, Info.self, Verify.self, Unlock.self, Lock.self, Status.self, SessionPolicyCommand.self, SetDefault.self, SetDisplayName.self, DeleteKeychain.self, ChangePIN.self, ResetPIN.self, RaiseKDF.self, SealDeviceKey.self,
            AddPassword<GenericPasswordClass>.self, FindPassword<GenericPasswordClass>.self,
            UpdatePassword<GenericPasswordClass>.self, DeletePassword<GenericPasswordClass>.self,
            AddPassword<InternetPasswordClass>.self, FindPassword<InternetPasswordClass>.self,
            UpdatePassword<InternetPasswordClass>.self, DeletePassword<InternetPasswordClass>.self,
            GenerateKey.self, Import.self, Export.self, Sign.self, VerifySignature.self,
            Items.self, Show.self, Delete.self,
            Backup.self, Restore.self, Migrate.self, SecretServiceCommand.self, ImportSecretService.self,
            TLSConfig.self, CheckPIN.self,
            SyncCommand.self, P11Kit.self, ModulePath.self, PAMHelper.self,
        ]
    )

    /// keychainctl holds PINs, passwords and keys in clear while it works: it never writes a
    /// core dump (RLIMIT_CORE 0, which it cannot raise again), whatever the shell's `ulimit -c`.
    static func main() {
        var none = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &none)
        // tpm2-tss prints its own error lines on stderr; keychainctl says what failed itself.
        // A TSS2_LOG the user set (to debug the TPM) is kept.
        setenv("TSS2_LOG", "all+none", 0)
        if CommandLine.arguments.dropFirst() == ["--version"] {
            printVersion()
            return
        }
        if let command = CommandLine.arguments.dropFirst().first, command.hasSuffix("-password"),
           command.hasPrefix("add-") || command.hasPrefix("update-"), CommandLine.arguments.contains("-w") {
            // security(1) habit: `add-generic-password … -w PASSWORD`.
            var standardError = StandardError()
            print("""
                keychainctl: -w takes no password here: a password on the command line is seen by every user's ps and kept \
                in shell history. Leave -w out and type it at the prompt, or give it with --password-file FILE \
                ('-' reads standard input, e.g. printf %s "$TOKEN" | keychainctl \(command) … --password-file -).
                (find-generic-password -w prints only the password, as in security.)
                """, to: &standardError)
            Glibc.exit(ExitStatus.usage)
        }
        main(nil)
    }

    /// keychainctl's version, the version the module beside it reports (C_GetInfo), and the
    /// keychain file format this build writes.
    static func printVersion() {
        print("keychainctl \(ProductVersion.text)")
        if let path = ModulePath.locate() {
            do {
                let module = try ForeignModule(path: path)
                try module.initialize()
                let info = try module.info()
                print("module \(info.library.major).\(info.library.minor) (\(info.manufacturer), Cryptoki \(info.cryptoki.major).\(info.cryptoki.minor)): \(path)")
            } catch let error as ForeignModule.ModuleLoadError {
                print("module: cannot load \(path): \(error.reason)")
            } catch let error as ForeignModule.Failure {
                print("module: \(path): \(error.text)")
            } catch {
                print("module: \(path): \(error)")
            }
        } else {
            print("module: not found next to keychainctl or in ../lib")
        }
        print("keychain schema \(ProductVersion.schemaVersion), record format \(ProductVersion.recordFormat)")
    }
}

/// Exit codes, distinct per kind of failure so scripts can tell them apart.
enum ExitStatus {
    static let failure: Int32 = 1
    static let pin: Int32 = 3
    static let exists: Int32 = 4
    static let storage: Int32 = 5
    static let notFound: Int32 = 6
    static let badInput: Int32 = 7
    static let notPermitted: Int32 = 8
    static let usage: Int32 = 64
}

/// Prints a one-line error with what to do, and exits with its status.
func fail(_ message: String, status: Int32) -> ExitCode {
    var standardError = StandardError()
    // Labels and file names inside a message are shown escaped (line breaks of the message kept).
    let shown = message.split(separator: "\n", omittingEmptySubsequences: false).map { printable(String($0)) }.joined(separator: "\n")
    print("keychainctl: \(shown)", to: &standardError)
    return ExitCode(status)
}

func failure(for error: KeychainError) -> ExitCode {
    switch error.code {
    case .pinLengthRange:
        return fail("\(error.reason).", status: ExitStatus.pin)
    case .pinIncorrect:
        return fail("\(error.reason); nothing was changed. After too many tries the PIN locks (see 'keychainctl info').", status: ExitStatus.pin)
    case .pinLocked:
        return fail("\(error.reason): the SO can set a new user PIN with 'keychainctl reset-pin'.", status: ExitStatus.pin)
    case .userPINNotInitialized:
        return fail("\(error.reason): set one with 'keychainctl reset-pin' (SO PIN).", status: ExitStatus.pin)
    case .duplicateItem:
        return fail("an item with the same identity already exists (\(error.reason)); update it or delete it first.", status: ExitStatus.exists)
    case .objectNotFound:
        return fail("\(error.reason).", status: ExitStatus.notFound)
    case .argumentsBad, .keySizeRange, .parameterSetNotSupported:
        return fail("\(error.reason).", status: ExitStatus.usage)
    case .readOnly:
        return fail("the keychain is read-only: \(error.reason).", status: ExitStatus.storage)
    case .storageFull:
        return fail("the disk is full: \(error.reason). Free some space and try again.", status: ExitStatus.storage)
    case .keyUnextractable, .attributeSensitive, .actionProhibited, .attributeReadOnly:
        return fail("\(error.reason).", status: ExitStatus.notPermitted)
    case .protectionUnavailable:
        return fail("\(error.reason).", status: ExitStatus.pin)
    case .attributeValueInvalid, .templateInconsistent, .templateIncomplete, .attributeTypeInvalid:
        return fail("\(error.reason).", status: ExitStatus.badInput)
    default:
        return fail("\(error.reason).", status: ExitStatus.storage)
    }
}

/// Standard error as a TextOutputStream.
struct StandardError: TextOutputStream {
    mutating func write(_ string: String) {
        _ = string.withCString { try? System.writeAll(STDERR_FILENO, UnsafeRawBufferPointer(start: $0, count: strlen($0))) }
    }
}
