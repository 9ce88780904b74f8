import ArgumentParser
import Glibc
import KeychainCore

@main
struct Keychainctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "keychainctl",
        abstract: "Manage Keychain PKCS#11 keychains.",
        discussion: """
        Keychains live in $KEYCHAIN_PKCS11_DIR, or the 'directory' of the file named by
        $KEYCHAIN_PKCS11_CONF, or $XDG_DATA_HOME/keychain-pkcs11 (~/.local/share/keychain-pkcs11).
        PINs are read from a no-echo prompt, a file (--pin-file, --so-pin-file) or the environment
        (KEYCHAIN_PKCS11_PIN, KEYCHAIN_PKCS11_SO_PIN); never from the command line.
        """,
        subcommands: [Create.self, List.self, RaiseKDF.self, ModulePath.self]
    )
}

/// Exit codes, distinct per kind of failure so scripts can tell them apart.
enum ExitStatus {
    static let failure: Int32 = 1
    static let pin: Int32 = 3
    static let exists: Int32 = 4
    static let storage: Int32 = 5
}

/// Prints a one-line error with what to do, and exits with its status.
func fail(_ message: String, status: Int32) -> ExitCode {
    var standardError = StandardError()
    print("keychainctl: \(message)", to: &standardError)
    return ExitCode(status)
}

func failure(for error: KeychainError) -> ExitCode {
    switch error.code {
    case .pinLengthRange:
        return fail("\(error.reason).", status: ExitStatus.pin)
    case .pinIncorrect, .pinLocked:
        return fail("\(error.reason).", status: ExitStatus.pin)
    case .argumentsBad:
        return fail("\(error.reason).", status: ExitStatus.exists)
    case .readOnly:
        return fail("the keychain directory is read-only: \(error.reason).", status: ExitStatus.storage)
    case .storageFull:
        return fail("the disk is full: \(error.reason). Free some space and try again.", status: ExitStatus.storage)
    default:
        return fail("\(error.reason).", status: ExitStatus.storage)
    }
}

/// Standard error as a TextOutputStream.
struct StandardError: TextOutputStream {
    mutating func write(_ string: String) { _ = string.withCString { Glibc.write(STDERR_FILENO, $0, strlen($0)) } }
}
