import ArgumentParser
import Glibc
import KeychainCore
import KeychainCrypto

/// `keychainctl pam-helper unlock|change-pin`: what pam_keychain runs, as the user logging in,
/// with the login password (and for change-pin the new one, on the next line) on standard input.
/// It acts on the login keychains only (`login_keychains`, default "login"): unlock gives them to
/// keychaind (started if needed); change-pin sets the new password as their user PIN where the
/// old one opens them. It never fails a login: problems are reported on standard error and the
/// exit status, which the module logs and ignores.
struct PAMHelper: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pam-helper",
        abstract: "Used by pam_keychain.so: unlock or re-PIN the login keychains with the login password (read from standard input).",
        shouldDisplay: false
    )

    @Argument(help: "unlock or change-pin")
    var mode: String

    func run() throws {
        var input = readAllStandardInput()
        defer { wipe(&input) }
        var lines = input.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).map { Array($0) }
        defer { for index in lines.indices { wipe(&lines[index]) } }
        let configuration = Configuration.current()
        let directory = KeychainDirectory(path: configuration.directory)
        // The login keychains, in the order configured ("login" first by default).
        var chosen: [(path: String, label: String)] = []
        for path in directory.keychainFiles() {
            guard let label = try? Keychain.open(at: path).info(countingObjects: false).label, configuration.loginKeychains.contains(label) else { continue }
            chosen.append((path, label))
        }
        chosen.sort { (configuration.loginKeychains.firstIndex(of: $0.label) ?? 0) < (configuration.loginKeychains.firstIndex(of: $1.label) ?? 0) }
        var problems = 0
        switch mode {
        case "unlock":
            guard let password = lines.first, !password.isEmpty else { throw fail("no password on standard input.", status: ExitStatus.usage) }
            try startDaemonIfNeeded()
            for (path, label) in chosen {
                switch password.withUnsafeBytes({ UnlockSession.unlock(path: path, pin: $0, idleTimeout: 0) }) {
                case .success?: print("pam-helper: unlocked '\(label)'")
                case .failure(let error)?:
                    problems += 1
                    var standardError = StandardError()
                    print("pam-helper: '\(label)' not unlocked: \(error.reason)", to: &standardError)
                case nil:
                    throw fail("keychaind does not answer.", status: ExitStatus.failure)
                }
            }
        case "change-pin":
            guard lines.count >= 2, !lines[0].isEmpty, !lines[1].isEmpty else { throw fail("the old and new passwords, one per line, on standard input.", status: ExitStatus.usage) }
            for (path, label) in chosen {
                do {
                    let keychain = try Keychain.open(at: path)
                    let old = lines[0], new = lines[1]
                    try old.withUnsafeBytes { oldBytes in
                        try new.withUnsafeBytes { newBytes in try keychain.changePIN(.user, old: oldBytes, new: newBytes, kdf: configuration.kdf) }
                    }
                    print("pam-helper: changed the user PIN of '\(label)'")
                } catch {
                    problems += 1
                    var standardError = StandardError()
                    print("pam-helper: '\(label)' keeps its PIN: \((error as? KeychainError)?.reason ?? "\(error)")", to: &standardError)
                }
            }
        default:
            throw fail("mode must be unlock or change-pin.", status: ExitStatus.usage)
        }
        if problems > 0 { throw ExitCode(ExitStatus.failure) }
    }

    private func readAllStandardInput() -> [UInt8] {
        var result: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1024)
        while result.count < 4096 {
            // End of input or an error ends it (EINTR is retried).
            guard let n = buffer.withUnsafeMutableBytes({ try? System.read(0, into: $0) }), n > 0 else { break }
            result += buffer[0..<n]
        }
        wipe(&buffer)
        // A trailing newline ends the last line.
        if result.last == UInt8(ascii: "\n") { result.removeLast() }
        return result
    }
}
