import Glibc
import KeychainCrypto

/// The unlock session: `keychaind`, a per-user daemon that keeps the master keys of the
/// keychains unlocked with their PIN, and answers the processes of the same user (checked with
/// SO_PEERCRED) so that each of them — the PKCS#11 module, KeychainServices, keychainctl — finds
/// the keychain unlocked without a PIN and without scrypt. This is the client side and the wire
/// format, shared with the daemon.
///
/// Wire format, over a Unix stream socket: a frame is a 4-byte big-endian length (at most
/// `maximumFrame`) and that many bytes. A request frame is an operation byte and fields; a reply
/// frame is a status byte and fields; a field is a 4-byte big-endian length and its bytes.
/// Every call opens its own connection, sends one request and reads one reply, with a short
/// timeout: a daemon that does not answer is treated as absent, never waited for.
public enum UnlockSession {
    public enum Operation: UInt8, Sendable {
        /// path, PIN, idle timeout in seconds ("0": none) → ok | refused(reason)
        case unlock = 1
        /// path ("" for all) → ok
        case lock = 2
        /// → ok, one field per unlocked keychain: "path\tsince\tidleTimeout\tlastUse\tlockOnSleep" (seconds; 1/0)
        case status = 3
        /// path → ok(master key) | locked
        case key = 4
        /// → ok
        case ping = 5
        /// path → ok(AfterFirstUnlock key) | locked: kept from the first unlock until the daemon stops
        case firstUnlock = 6
    }

    public enum Status: UInt8, Sendable {
        case ok = 0
        case locked = 1
        case refused = 2
    }

    /// One unlocked keychain, as `status` reports it.
    public struct Entry: Sendable, Equatable {
        public let path: String
        public let since: Int64
        /// Seconds without use after which the daemon locks it; 0: never.
        public let idleTimeout: Int64
        public let lastUse: Int64
        /// Locked when the machine sleeps or the login session is locked.
        public let lockOnSleep: Bool
    }

    public static let maximumFrame = 1 << 16
    /// How long a client waits for the daemon's answer (an unlock runs scrypt: allow for it).
    static let replyTimeout = timeval(tv_sec: 10, tv_usec: 0)

    /// The daemon's socket: KEYCHAIN_PKCS11_AGENT, else $XDG_RUNTIME_DIR/keychain-pkcs11/agent.sock;
    /// nil without either (no session then: every door behaves as before).
    public static var socketPath: String? {
        if let explicit = getenv("KEYCHAIN_PKCS11_AGENT").map({ String(cString: $0) }), !explicit.isEmpty {
            return explicit == "off" ? nil : explicit
        }
        guard let runtime = getenv("XDG_RUNTIME_DIR").map({ String(cString: $0) }), !runtime.isEmpty else { return nil }
        return runtime + "/keychain-pkcs11/agent.sock"
    }

    /// Whether the socket's folder is this user's and closed to others (0700): a client never
    /// sends a PIN to, or takes a key from, a socket another user could have put there.
    static func folderIsSafe(_ socket: String) -> Bool {
        guard let slash = socket.lastIndex(of: "/") else { return false }
        let folder = String(socket[..<slash])
        guard let info = try? System.lstat(folder.isEmpty ? "/" : folder) else { return false }
        return (info.st_mode & S_IFMT) == S_IFDIR && info.st_uid == getuid() && info.st_mode & 0o077 == 0
    }

    /// Sends one request; the reply, or nil when there is no daemon (or it did not answer).
    public static func request(_ operation: Operation, _ fields: [[UInt8]]) -> (status: Status, fields: [[UInt8]])? {
        guard let path = socketPath, folderIsSafe(path) else { return nil }
        guard let fd = try? System.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue)) else { return nil }
        defer { System.close(fd) }
        var timeout = replyTimeout
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard connectUnix(fd, path) else { return nil }
        var payload = [operation.rawValue]
        for field in fields { payload += bigEndian(UInt32(field.count)) + field }
        defer { wipe(&payload) }
        guard writeFrame(fd, payload), var reply = readFrame(fd), let first = reply.first, let status = Status(rawValue: first) else { return nil }
        defer { wipe(&reply) }
        guard let parsed = parseFields(reply[1...]) else { return nil }
        return (status, parsed)
    }

    /// The master key of `keychain` from the session, checked against the keychain; nil when
    /// there is no session, the keychain is not unlocked there, or the key is not its own.
    public static func masterKey(for keychain: Keychain) -> MasterKey? {
        guard let key = secret(.key, for: keychain) else { return nil }
        return try? keychain.masterKey(fromSession: key)
    }

    /// The key a `key` or `firstUnlock` request answers for `keychain`, in secure memory (the
    /// reply's own copies wiped); nil when the daemon is absent or does not hold it.
    private static func secret(_ operation: Operation, for keychain: Keychain) -> SecureBytes? {
        guard var reply = request(operation, [Array(keychain.path.utf8)]) else { return nil }
        defer { for index in reply.fields.indices { wipe(&reply.fields[index]) } }
        guard reply.status == .ok, let first = reply.fields.first else { return nil }
        return first.withUnsafeBytes { SecureBytes($0) }
    }

    /// Makes AfterFirstUnlock items of `keychain` readable in this process when the session has
    /// seen the keychain unlocked since it started. Answers whether they are.
    @discardableResult
    public static func applyFirstUnlock(to keychain: Keychain) -> Bool {
        if keychain.isFirstUnlocked { return true }
        guard let key = secret(.firstUnlock, for: keychain) else { return false }
        return (try? keychain.acceptFirstUnlock(fromSession: key)) != nil
    }

    /// Whether the session holds `path` unlocked (without taking its key).
    public static func holds(_ path: String) -> Bool {
        status()?.contains { $0.path == path } ?? false
    }

    /// Asks the daemon to unlock the keychain at `path` with `pin` (it checks the PIN itself,
    /// counted like any login). nil: there is no daemon. The refusal's reason otherwise.
    public static func unlock(path: String, pin: UnsafeRawBufferPointer, idleTimeout: Int) -> Result<Void, KeychainError>? {
        var secret = Array(pin)
        defer { wipe(&secret) }
        guard let reply = request(.unlock, [Array(path.utf8), secret, Array(String(idleTimeout).utf8)]) else { return nil }
        if reply.status == .ok { return .success(()) }
        let reason = reply.fields.first.map { String(decoding: $0, as: UTF8.self) } ?? "refused"
        return .failure(KeychainError(reason.hasPrefix("pin-locked") ? .pinLocked : reason.hasPrefix("pin") ? .pinIncorrect : .storageFailure, reason))
    }

    /// Locks one keychain (or, with nil, all) in the session. False: no daemon.
    @discardableResult
    public static func lock(path: String?) -> Bool {
        request(.lock, [Array((path ?? "").utf8)])?.status == .ok
    }

    /// The keychains the session holds unlocked; nil: no daemon.
    public static func status() -> [Entry]? {
        guard let reply = request(.status, []), reply.status == .ok else { return nil }
        return reply.fields.compactMap { field in
            let parts = String(decoding: field, as: UTF8.self).split(separator: "\t", omittingEmptySubsequences: false).map(String.init)
            guard parts.count >= 4, let since = Int64(parts[1]), let idle = Int64(parts[2]), let last = Int64(parts[3]) else { return nil }
            return Entry(path: parts[0], since: since, idleTimeout: idle, lastUse: last, lockOnSleep: parts.count < 5 || parts[4] != "0")
        }
    }

    /// Whether a daemon answers.
    public static var isRunning: Bool { request(.ping, [])?.status == .ok }

    // MARK: framing (shared with the daemon)

    public static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
    }

    /// The big-endian 4-byte length at `index` (`bigEndian`'s inverse); the caller checked there are 4 bytes.
    private static func length<C: RandomAccessCollection>(in bytes: C, at index: C.Index) -> Int where C.Element == UInt8 {
        bytes[index...].prefix(4).reduce(0) { $0 << 8 | Int($1) }
    }

    /// Fields from `bytes`; nil when they do not add up exactly.
    public static func parseFields(_ bytes: ArraySlice<UInt8>) -> [[UInt8]]? {
        var fields: [[UInt8]] = []
        var index = bytes.startIndex
        while index < bytes.endIndex {
            guard bytes.endIndex - index >= 4 else { return nil }
            let length = Self.length(in: bytes, at: index)
            index += 4
            guard length <= bytes.endIndex - index else { return nil }
            fields.append(Array(bytes[index..<index + length]))
            index += length
        }
        return fields
    }

    public static func writeFrame(_ fd: Int32, _ payload: [UInt8]) -> Bool {
        guard payload.count <= maximumFrame else { return false }
        var frame = bigEndian(UInt32(payload.count)) + payload
        defer { wipe(&frame) }
        var sent = 0
        while sent < frame.count {
            let n = frame.withUnsafeBytes { raw -> Int in
                guard let base = raw.baseAddress else { return -1 }
                return send(fd, base + sent, raw.count - sent, Int32(MSG_NOSIGNAL))
            }
            if n > 0 { sent += n } else if n < 0, errno == EINTR { continue } else { return false }
        }
        return true
    }

    /// One frame's payload; nil on a short read, a timeout or an oversized frame.
    public static func readFrame(_ fd: Int32) -> [UInt8]? {
        guard let header = readExactly(fd, 4) else { return nil }
        let length = Self.length(in: header, at: 0)
        guard length > 0, length <= maximumFrame else { return nil }
        return readExactly(fd, length)
    }

    private static func readExactly(_ fd: Int32, _ count: Int) -> [UInt8]? {
        var buffer = [UInt8](repeating: 0, count: count)
        var filled = 0
        while filled < count {
            let n = buffer.withUnsafeMutableBytes { raw -> Int in
                guard let base = raw.baseAddress else { return -1 }
                return recv(fd, base + filled, count - filled, 0)
            }
            if n > 0 { filled += n } else if n < 0, errno == EINTR { continue } else {
                wipe(&buffer)
                return nil
            }
        }
        return buffer
    }

    /// connect(2) to a Unix socket path (at most 107 bytes).
    public static func connectUnix(_ fd: Int32, _ path: String) -> Bool {
        withUnixAddress(path) { address, length in connect(fd, address, length) == 0 } ?? false
    }

    /// Calls `body` with a sockaddr_un for `path`; nil when the path is too long.
    public static func withUnixAddress<R>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R? {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        let capacity = MemoryLayout.size(ofValue: address.sun_path)
        guard bytes.count < capacity else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }
}
