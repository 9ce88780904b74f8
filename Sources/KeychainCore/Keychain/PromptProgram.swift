import Glibc
import KeychainCrypto

/// The program the user configured to ask for a password (`prompt_program`,
/// `KEYCHAIN_PKCS11_PROMPT`): it is run with the text to show as its one argument and prints the
/// password on its standard output, as an SSH_ASKPASS program does. Both doors use it: the
/// PKCS#11 module for C_Login with a NULL PIN (the protected authentication path), and
/// KeychainServices when an item needs the keychain unlocked or a per-use password and the query
/// allows a prompt (kSecUseAuthenticationUI, LAContext).
public enum PromptProgram {
    /// Why no password came back.
    public enum Failure: Error, Equatable {
        /// The program could not start, failed, or printed nothing: the user declined.
        case canceled(String)
        /// The answer is longer than any valid password.
        case tooLong
    }

    /// Runs `program text`, with the host's standard input and error and a pipe for standard
    /// output; returns the first line it printed (at most `PINPolicy.maximumLength` bytes). Call
    /// without holding locks: a person may take a while to answer.
    public static func run(_ program: String, text: String) throws(Failure) -> SecureBytes {
        // Both ends close-on-exec: not inherited by other children of the host.
        let ends: (read: Int32, write: Int32)
        do { ends = try System.pipe() } catch { throw .canceled("no pipe (errno \(error.code))") }
        var fds = [ends.read, ends.write]
        defer { if fds[0] >= 0 { System.close(fds[0]) } }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO)
        var pid: pid_t = 0
        let spawned: Int32 = program.withCString { path in
            text.withCString { argument in
                var argv: [UnsafeMutablePointer<CChar>?] = [UnsafeMutablePointer(mutating: path), UnsafeMutablePointer(mutating: argument), nil]
                return posix_spawn(&pid, path, &actions, nil, &argv, environ)
            }
        }
        System.close(fds[1])
        guard spawned == 0 else { throw .canceled("prompt program \(program) could not start (error \(spawned))") }
        // Read at most one byte more than the longest password; the rest is discarded unread.
        let answer = SecureBytes(count: PINPolicy.maximumLength + 2)
        var filled = 0
        answer.withUnsafeMutableBytes { buffer in
            while filled < buffer.count {
                let n = (try? System.read(fds[0], into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]))) ?? 0
                if n > 0 { filled += n } else { break }
            }
        }
        System.close(fds[0])
        fds[0] = -1
        var status: Int32 = 0
        var waited: pid_t
        repeat { waited = waitpid(pid, &status, 0) } while waited < 0 && errno == EINTR
        // A host that ignores SIGCHLD reaps its children itself (ECHILD): judge by the output.
        let exitedCleanly = waited < 0 ? errno == ECHILD : (status & 0x7f) == 0 && (status >> 8) & 0xff == 0
        let length: Int = answer.withUnsafeBytes { bytes in
            bytes.prefix(filled).firstIndex(of: UInt8(ascii: "\n")) ?? filled
        }
        guard exitedCleanly, length > 0 else { throw .canceled("the prompt program gave no password") }
        guard length <= PINPolicy.maximumLength else { throw .tooLong }
        return answer.withUnsafeBytes { SecureBytes($0.prefix(length)) }
    }
}
