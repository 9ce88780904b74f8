import Glibc
import KeychainCrypto

/// A PIN read from a file, the environment or a no-echo prompt, kept in a wiping buffer.
struct SecretInput {
    struct Failure: Error {
        let message: String
    }

    private let secret: SecureBytes

    var isEmpty: Bool { secret.count == 0 }

    /// The longest secret read: PINs stop at 256 bytes, passwords and passphrases at 64 KiB.
    static let maximumLength = 65536

    func withBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try secret.withUnsafeBytes(body)
    }

    /// File first ('-' is standard input), then the environment variable, then the terminal
    /// (asking twice when `confirm`).
    static func read(file: String?, environment: String?, prompt: String, confirm: Bool) throws -> SecretInput {
        if file == "-" {
            guard let input = fdopen(dup(STDIN_FILENO), "r") else { throw Failure(message: "cannot read standard input") }
            defer { fclose(input) }
            setvbuf(input, nil, _IONBF, 0)
            var line = readLine(input)
            defer { wipe(&line) }
            return SecretInput(secret: SecureBytes(line))
        }
        if let file {
            guard let handle = fopen(file, "r") else {
                throw Failure(message: "cannot read \(file): \(String(cString: strerror(errno)))")
            }
            defer { fclose(handle) }
            var line = readLine(handle)
            defer { wipe(&line) }
            return SecretInput(secret: SecureBytes(line))
        }
        if let environment, let value = getenv(environment) {
            return SecretInput(secret: SecureBytes(Array(String(cString: value).utf8)))
        }
        guard isatty(STDIN_FILENO) == 1 || access("/dev/tty", R_OK | W_OK) == 0 else {
            throw Failure(message: "no terminal to ask for the \(prompt); give a file (or '-' for standard input)\(environment.map { " or set \($0)" } ?? "")")
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
