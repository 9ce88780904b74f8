import Glibc
import KeychainCore
import KeychainCrypto

/// A PIN read from a file, the environment or a no-echo prompt, kept in a wiping buffer.
struct SecretInput {
    struct Failure: Error {
        let message: String
        /// The named file could not be read (exit 7), rather than no secret being available (exit 3).
        var isFile = false
    }

    private let secret: SecureBytes

    var isEmpty: Bool { secret.count == 0 }

    /// The longest secret read: PINs stop at 256 bytes, passwords and passphrases at 64 KiB.
    static let maximumLength = 65536

    func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try secret.withUnsafeBytes(body)
    }

    /// File first ('-' is standard input), then the environment variable, then the terminal
    /// (asking twice when `confirm`), then the configured prompt program (KEYCHAIN_PKCS11_PROMPT)
    /// when there is no terminal. `option` names the file option for the message given when
    /// none of them can answer.
    static func read(file: String?, environment: String?, prompt: String, confirm: Bool, option: String? = nil) throws -> SecretInput {
        if file == "-" {
            guard let input = fdopen(dup(STDIN_FILENO), "r") else { throw Failure(message: "cannot read standard input", isFile: true) }
            defer { fclose(input) }
            setvbuf(input, nil, _IONBF, 0)
            var line = readLine(input)
            defer { wipe(&line) }
            return SecretInput(secret: SecureBytes(line))
        }
        if let file {
            guard let handle = fopen(file, "r") else {
                throw Failure(message: "cannot read \(file)\(option.map { " (\($0))" } ?? ""): \(String(cString: strerror(errno)))", isFile: true)
            }
            defer { fclose(handle) }
            var line = readLine(handle)
            defer { wipe(&line) }
            return SecretInput(secret: SecureBytes(line))
        }
        if let environment, let value = getenv(environment) {
            return SecretInput(secret: SecureBytes(Array(String(cString: value).utf8)))
        }
        let hasTerminal = controllingTerminal()
        if !hasTerminal, let program = Configuration.current().promptProgram {
            return try ask(program: program, prompt: prompt, confirm: confirm)
        }
        guard hasTerminal else {
            var ways: [String] = []
            if let option { ways.append("\(option) FILE ('-' reads standard input)") }
            if let environment { ways.append("the variable \(environment)") }
            ways.append("a prompt program (KEYCHAIN_PKCS11_PROMPT or prompt_program, an askpass-style program)")
            let list = ways.count > 1 ? ways.dropLast().joined(separator: ", ") + " or " + (ways.last ?? "") : ways.joined()
            throw Failure(message: "no terminal to ask for the \(prompt); give it with \(list)")
        }
        var first = try promptWithoutEcho(prompt + ": ")
        defer { wipe(&first) }
        if confirm {
            var second = try promptWithoutEcho("Again: ")
            defer { wipe(&second) }
            guard ConstantTime.equals(first, second) else { throw Failure(message: "the two entries differ") }
        }
        return SecretInput(secret: SecureBytes(first))
    }

    /// Whether this process has a terminal to ask on: /dev/tty opens (its permission bits say
    /// nothing; without a controlling terminal the open fails with ENXIO).
    static func controllingTerminal() -> Bool {
        guard let fd = try? System.open("/dev/tty", O_RDWR | O_NOCTTY) else { return false }
        System.close(fd)
        return true
    }

    /// The prompt program's answer (asked twice when `confirm`).
    private static func ask(program: String, prompt: String, confirm: Bool) throws -> SecretInput {
        do {
            let first = try PromptProgram.run(program, text: prompt)
            if confirm {
                let second = try PromptProgram.run(program, text: prompt + " (again)")
                guard first.constantTimeEquals(second) else { throw Failure(message: "the two answers of the prompt program differ") }
            }
            return SecretInput(secret: first)
        } catch let error as PromptProgram.Failure {
            switch error {
            case .canceled(let why): throw Failure(message: "the prompt program \(program) gave no \(prompt) (\(why))")
            case .tooLong: throw Failure(message: "the prompt program's answer is too long")
            }
        }
    }

    /// One line without its newline, at most `maximumLength` bytes (the rest of a longer line is
    /// dropped: a secret that long is a wrong file, refused by the length checks after).
    private static func readLine(_ handle: UnsafeMutablePointer<FILE>) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(256)
        while true {
            let c = fgetc(handle)
            if c == EOF || c == 0x0A { break }
            if bytes.count == maximumLength + 1 { continue }
            if bytes.count == bytes.capacity {
                // Grow by hand so the old buffer is wiped, not left behind by the array's own growth.
                var larger: [UInt8] = []
                larger.reserveCapacity(bytes.capacity * 2)
                larger += bytes
                wipe(&bytes)
                bytes = larger
            }
            bytes.append(UInt8(truncatingIfNeeded: c))
        }
        if bytes.last == 0x0D { bytes.removeLast() }
        return bytes
    }

    private static func promptWithoutEcho(_ prompt: String) throws -> [UInt8] {
        guard let tty = fopen("/dev/tty", "r+") else { throw Failure(message: "cannot open the terminal") }
        defer { fclose(tty) }
        let fd = fileno(tty)
        var saved = termios()
        tcgetattr(fd, &saved)
        var silent = saved
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(fd, TCSAFLUSH, &silent)
        defer { tcsetattr(fd, TCSAFLUSH, &saved) }
        fputs(prompt, tty)
        fflush(tty)
        let line = readLine(tty)
        fputs("\n", tty)
        return line
    }
}

/// Runs `body` (a PIN check or a new PIN's key derivation) and, when the scrypt cost takes
/// seconds (N ≥ 2^17) and standard error is a terminal, shows a progress line while it runs.
func withKDFNotice<R, E: Error>(_ parameters: ScryptParameters?, _ body: () throws(E) -> R) throws(E) -> R {
    guard let parameters, parameters.logN >= 17, isatty(STDERR_FILENO) == 1 else { return try body() }
    let mebibytes = (128 * UInt64(parameters.blockSize) * (UInt64(1) << UInt64(parameters.logN))) >> 20
    var standardError = StandardError()
    print("keychainctl: deriving the key from the PIN (scrypt N = 2^\(parameters.logN), \(mebibytes) MiB)…", terminator: "", to: &standardError)
    var start = timespec()
    clock_gettime(CLOCK_MONOTONIC, &start)
    defer {
        var end = timespec()
        clock_gettime(CLOCK_MONOTONIC, &end)
        let tenths = (Int(end.tv_sec - start.tv_sec) * 1_000_000_000 + Int(end.tv_nsec - start.tv_nsec)) / 100_000_000
        print(" \(tenths / 10).\(tenths % 10) s", to: &standardError)
    }
    return try body()
}
