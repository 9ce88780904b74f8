import Glibc
import KeychainCore
import KeychainCrypto
import SecretService

// keychaind: the per-user unlock session (Docs/security.md, "The unlock session"). It listens on
// $XDG_RUNTIME_DIR/keychain-pkcs11/agent.sock (folder 0700; KEYCHAIN_PKCS11_AGENT overrides),
// answers only peers of its own uid (SO_PEERCRED), checks PINs itself, and keeps the master keys
// of the keychains unlocked through it in secure memory (never on disk, not in core dumps),
// until they are locked, their idle timeout passes, or it stops (SIGTERM, SIGINT, or Stop over
// the session bus with --secret-service: everything is locked, the socket removed, the bus name
// released).
//
//   keychaind --foreground [--socket PATH]   run here (tests, systemd's Type=simple)
//   keychaind [--socket PATH]                start in the background (a new session) and return
//   --secret-service                         also serve org.freedesktop.secrets on the session bus
//                                            (the SecretService library); refused when another provider
//                                            owns the name

/// What the daemon holds for one keychain.
final class Held {
    let key: SecureBytes
    let since: Int64
    let idleTimeout: Int64
    let lockOnSleep: Bool
    var lastUse: Int64

    init(key: SecureBytes, idleTimeout: Int64, lockOnSleep: Bool) {
        self.key = key
        since = Int64(time(nil))
        self.idleTimeout = idleTimeout
        self.lockOnSleep = lockOnSleep
        lastUse = since
    }
}

final class Daemon: @unchecked Sendable {
    private let lock = PThreadMutex()
    private var held: [String: Held] = [:]
    /// The AfterFirstUnlock keys of the keychains unlocked since the daemon started: kept after
    /// they are locked, until the daemon stops ("after first unlock, until restart").
    private var firstUnlocks: [String: SecureBytes] = [:]

    func unlock(path: String, pin: [UInt8], idleTimeout: Int64) -> (UnlockSession.Status, [[UInt8]]) {
        // The PIN is checked by the keychain (scrypt, counted like any login), without our lock.
        do {
            let keychain = try Keychain.open(at: path)
            let master = try pin.withUnsafeBytes { bytes throws(KeychainError) in try keychain.unlock(.user, pin: bytes) }
            // The keychain's own policy, unless the unlock asked for its own timeout.
            let policy = (try? keychain.sessionPolicy()) ?? SessionPolicy()
            let entry = Held(key: keychain.exportedMasterKey(master), idleTimeout: idleTimeout > 0 ? idleTimeout : Int64(policy.idleTimeout),
                             lockOnSleep: policy.lockOnSleep)
            let firstUnlock = try keychain.exportedFirstUnlockKey(master)
            lock.withLock {
                held[path] = entry
                firstUnlocks[path] = firstUnlock
            }
            // A keychain from before the locked-lookup index gets it now, once (Docs/security.md).
            do { try keychain.refreshLockedLookup(master: master) } catch {
                complain("keychaind: the locked-lookup index of \(path) was not built: \(error.reason) (it is tried again at the next unlock)")
            }
            return (.ok, [])
        } catch let error as KeychainError {
            let reason: String
            switch error.code {
            case .pinIncorrect: reason = "pin: wrong user PIN"
            case .pinLocked: reason = "pin-locked: the user PIN is locked"
            case .userPINNotInitialized: reason = "pin: the keychain has no user PIN"
            default: reason = "keychain: \(error.reason)"
            }
            return (.refused, [Array(reason.utf8)])
        } catch {
            return (.refused, [Array("keychain: \(error)".utf8)])
        }
    }

    func key(path: String) -> (UnlockSession.Status, [[UInt8]]) {
        lock.withLock {
            guard let entry = held[path] else { return (.locked, []) }
            entry.lastUse = Int64(time(nil))
            return (.ok, [entry.key.withUnsafeBytes { Array($0) }])
        }
    }

    /// The held key as secure bytes for the Secret Service (a use: restarts the idle timer).
    func sessionKey(path: String) -> SecureBytes? {
        lock.withLock {
            guard let entry = held[path] else { return nil }
            entry.lastUse = Int64(time(nil))
            return entry.key.withUnsafeBytes { SecureBytes($0) }
        }
    }

    /// The paths of the keychains held (for the sync scheduler).
    func heldPaths() -> [String] { lock.withLock { Array(held.keys) } }

    /// The held key without counting as a use: a scheduled sync does not keep a keychain from
    /// its idle timeout.
    func sessionKeyWithoutUse(path: String) -> SecureBytes? {
        lock.withLock { held[path].map { entry in entry.key.withUnsafeBytes { SecureBytes($0) } } }
    }

    /// Whether the keychain is held, without using it.
    func isHeld(path: String) -> Bool { lock.withLock { held[path] != nil } }

    func firstUnlockKey(path: String) -> (UnlockSession.Status, [[UInt8]]) {
        lock.withLock {
            guard let key = firstUnlocks[path] else { return (.locked, []) }
            return (.ok, [key.withUnsafeBytes { Array($0) }])
        }
    }

    /// At the end: nothing is kept.
    func forgetEverything() {
        lock.withLock {
            held.removeAll()
            firstUnlocks.removeAll()
        }
    }

    func lockKeychain(path: String) {
        lock.withLock {
            if path.isEmpty { held.removeAll() } else { held[path] = nil }
        }
    }

    func status() -> [[UInt8]] {
        lock.withLock {
            held.sorted { $0.key < $1.key }.map { path, entry in
                Array("\(path)\t\(entry.since)\t\(entry.idleTimeout)\t\(entry.lastUse)\t\(entry.lockOnSleep ? 1 : 0)".utf8)
            }
        }
    }

    /// The machine is going to sleep or the login session was locked: the keychains whose
    /// policy says so are locked (their AfterFirstUnlock keys stay).
    func lockForEvent(_ reason: String) {
        let locked = lock.withLock { () -> Int in
            let chosen = held.filter { $0.value.lockOnSleep }.map(\.key)
            for path in chosen { held[path] = nil }
            return chosen.count
        }
        if locked > 0 { complain("keychaind: \(reason): locked \(locked) keychain(s)") }
    }

    /// Locks what has been idle longer than its timeout.
    func expire() {
        let now = Int64(time(nil))
        lock.withLock {
            for (path, entry) in held where entry.idleTimeout > 0 && now - entry.lastUse >= entry.idleTimeout { held[path] = nil }
        }
    }

    func handle(_ request: [UInt8]) -> (UnlockSession.Status, [[UInt8]]) {
        guard let code = request.first, let operation = UnlockSession.Operation(rawValue: code),
              let fields = UnlockSession.parseFields(request[1...]) else {
            return (.refused, [Array("bad request".utf8)])
        }
        let text = { (index: Int) -> String? in index < fields.count ? String(decoding: fields[index], as: UTF8.self) : nil }
        switch operation {
        case .ping: return (.ok, [])
        case .status: return (.ok, status())
        case .key:
            guard let path = text(0) else { return (.refused, [Array("no path".utf8)]) }
            return key(path: path)
        case .lock:
            lockKeychain(path: text(0) ?? "")
            return (.ok, [])
        case .firstUnlock:
            guard let path = text(0) else { return (.refused, [Array("no path".utf8)]) }
            return firstUnlockKey(path: path)
        case .unlock:
            guard fields.count == 3, let path = text(0), let timeout = text(2).flatMap({ Int64($0) }) else {
                return (.refused, [Array("unlock needs a path, a PIN and a timeout".utf8)])
            }
            var pin = fields[1]
            defer { wipe(&pin) }
            return unlock(path: path, pin: pin, idleTimeout: timeout)
        }
    }
}

nonisolated(unsafe) var stopRequested: sig_atomic_t = 0

/// The uid of the process at the other end of `fd` (SO_PEERCRED: pid, uid, gid).
func peerUID(_ fd: Int32) -> uid_t? {
    var credentials = [Int32](repeating: -1, count: 3)
    let length = credentials.withUnsafeMutableBytes { try? System.getsockopt(fd, SOL_SOCKET, SO_PEERCRED, into: $0) }
    guard length == MemoryLayout<Int32>.size * 3 else { return nil }
    return uid_t(bitPattern: credentials[1])
}

/// The socket systemd passed (LISTEN_PID is us, LISTEN_FDS ≥ 1: fd 3), if any.
func activatedSocket() -> Int32? {
    guard let pid = getenv("LISTEN_PID").flatMap({ Int32(String(cString: $0)) }), pid == getpid(),
          let count = getenv("LISTEN_FDS").flatMap({ Int(String(cString: $0)) }), count >= 1 else { return nil }
    unsetenv("LISTEN_PID")
    unsetenv("LISTEN_FDS")
    _ = try? System.fcntl(3, F_SETFD, FD_CLOEXEC)
    return 3
}

func serve(socketPath: String, withSecretService: Bool) -> Int32 {
    var standardError = StandardError()
    let activated = activatedSocket()
    if activated == nil {
        // The folder: ours and closed (made if missing); a socket left by a dead daemon is replaced.
        guard let slash = socketPath.lastIndex(of: "/") else {
            print("keychaind: the socket path must name a folder", to: &standardError)
            return 64
        }
        let folder = String(socketPath[..<slash])
        do {
            try System.mkdir(folder, mode: 0o700)
        } catch where error.code != EEXIST {
            print("keychaind: cannot make \(folder): \(error.reason)", to: &standardError)
            return 1
        } catch {}
        guard let info = try? System.lstat(folder), (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == getuid() else {
            print("keychaind: \(folder) is not a folder of this user", to: &standardError)
            return 1
        }
        if info.st_mode & 0o077 != 0 { try? System.chmod(folder, mode: 0o700) }
    }
    let listener: Int32
    if let activated {
        // systemd's socket activation (keychaind.socket): the listening socket is fd 3.
        listener = activated
    } else {
        if UnlockSession.isRunning {
            if withSecretService { return serveSecretServiceOnly() }
            print("keychaind: another keychaind already answers on \(socketPath)", to: &standardError)
            return 1
        }
        try? System.removeIfPresent(socketPath)
        guard let opened = try? System.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue)) else { return 1 }
        listener = opened
        // Bound under umask 077: the socket file is its user's alone.
        let previous = System.umask(0o077)
        let bound = UnlockSession.withUnixAddress(socketPath) { address, length in
            Result { () throws(SystemError) in try System.bind(listener, address, length) }
        } ?? .failure(SystemError(ENAMETOOLONG, call: "bind", path: socketPath))
        System.umask(previous)
        do {
            try bound.get()
            try System.listen(listener, backlog: 16)
        } catch {
            print("keychaind: cannot listen on \(socketPath): \(error.reason)", to: &standardError)
            return 1
        }
    }
    signal(SIGTERM) { _ in stopRequested = 1 }
    signal(SIGINT) { _ in stopRequested = 1 }
    signal(SIGPIPE, SIG_IGN)
    // tpm2-tss's own error lines would go to the journal beside ours; TSS2_LOG set by the user is kept.
    setenv("TSS2_LOG", "all+none", 0)
    let daemon = Daemon()
    var service: SecretServiceServer?
    if withSecretService {
        // The Secret Service over this daemon's own unlock session; when the name has another
        // owner, say so and stop rather than take it.
        let server = SecretServiceServer(keys: daemon, report: complain)
        if let problem = server.start(whenBusEnds: { stopRequested = 1 }, whenAskedToStop: { stopRequested = 1 }) {
            print("keychaind: \(problem)", to: &standardError)
            if activated == nil { try? System.removeIfPresent(socketPath) }
            System.close(listener)
            return 1
        }
        service = server
        print("keychaind: serving the Secret Service (\(SecretServiceServer.busName)) on the session bus", to: &standardError)
    }
    let watcher = SystemBusWatcher { [daemon] reason in daemon.lockForEvent(reason) }
    _ = watcher.start()
    SyncScheduler(daemon: daemon).start()
    let me = getuid()
    print("keychaind: listening on \(socketPath)", to: &standardError)
    while stopRequested == 0 {
        daemon.expire()
        var poller = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0)]
        guard let ready = try? System.poll(&poller, timeout: 500), ready > 0 else { continue }
        guard let client = try? System.accept(listener) else { continue }
        let timeout = timeval(tv_sec: 5, tv_usec: 0)
        _ = withUnsafeBytes(of: timeout) { try? System.setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, $0) }
        guard peerUID(client) == me else {
            // Another user's process: nothing, not even an error frame.
            System.close(client)
            continue
        }
        // One request per connection. Unlocks run scrypt: each connection has its own thread so
        // that a slow unlock does not hold up key requests.
        let worker = DetachedThread { [daemon] in
            defer { System.close(client) }
            guard var request = UnlockSession.readFrame(client) else { return }
            defer { wipe(&request) }
            var (status, fields) = daemon.handle(request)
            var payload = [status.rawValue]
            for field in fields { payload += UnlockSession.bigEndian(UInt32(field.count)) + field }
            for index in fields.indices { wipe(&fields[index]) }
            defer { wipe(&payload) }
            _ = UnlockSession.writeFrame(client, payload)
        }
        worker.start()
    }
    daemon.forgetEverything()
    System.close(listener)
    // systemd's socket stays for the next activation; our own goes with us.
    if activated == nil { try? System.removeIfPresent(socketPath) }
    // The bus name last: whoever waits for it to be released finds the keys and socket gone.
    service?.stop()
    print("keychaind: stopped; every keychain locked", to: &standardError)
    return 0
}

/// Another keychaind already holds the unlock session (started by 'keychainctl unlock' before
/// D-Bus activation asked for the Secret Service): serve the Secret Service alone, with that
/// daemon's keys, until stopped.
func serveSecretServiceOnly() -> Int32 {
    signal(SIGTERM) { _ in stopRequested = 1 }
    signal(SIGINT) { _ in stopRequested = 1 }
    let service = SecretServiceServer(keys: SocketKeySource(), report: complain)
    if let problem = service.start(whenBusEnds: { stopRequested = 1 }, whenAskedToStop: { stopRequested = 1 }) {
        complain("keychaind: \(problem)")
        return 1
    }
    complain("keychaind: serving the Secret Service (\(SecretServiceServer.busName)) with the running keychaind's unlock session")
    while stopRequested == 0 { usleep(200_000) }
    service.stop()
    complain("keychaind: stopped serving the Secret Service (the unlock session's keychaind keeps running)")
    return 0
}

/// Standard error as a stream (fd 2 directly: the C `stderr` global is not concurrency-safe).
struct StandardError: TextOutputStream {
    mutating func write(_ string: String) {
        let bytes = Array(string.utf8)
        _ = bytes.withUnsafeBytes { try? System.writeAll(2, $0) }
    }
}

func complain(_ message: String) {
    var standardError = StandardError()
    print(message, to: &standardError)
}

// MARK: main

var arguments = Array(CommandLine.arguments.dropFirst())
var foreground = false
var withSecretService = false
var socketPath = UnlockSession.socketPath
var index = 0
while index < arguments.count {
    switch arguments[index] {
    case "--foreground": foreground = true
    case "--secret-service": withSecretService = true
    case "--socket" where index + 1 < arguments.count:
        index += 1
        socketPath = arguments[index]
        setenv("KEYCHAIN_PKCS11_AGENT", arguments[index], 1)
    case "--help", "-h":
        print("usage: keychaind [--foreground] [--secret-service] [--socket PATH]")
        exit(0)
    default:
        complain("keychaind: unknown argument \(arguments[index]) (keychaind --help)")
        exit(64)
    }
    index += 1
}
// Secrets live here: no core dumps, ever.
var noCore = rlimit(rlim_cur: 0, rlim_max: 0)
_ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &noCore)
// Socket-activated (systemd passes the listening socket), the path is systemd's business.
guard let socketPath = socketPath ?? (getenv("LISTEN_FDS") != nil ? "(socket activation)" : nil) else {
    complain("keychaind: no XDG_RUNTIME_DIR: give --socket PATH (a folder of yours, mode 0700)")
    exit(64)
}
if foreground { exit(serve(socketPath: socketPath, withSecretService: withSecretService)) }
// In the background: the same program in a new session, its standard streams on /dev/null.
var attributes = posix_spawnattr_t()
posix_spawnattr_init(&attributes)
posix_spawnattr_setflags(&attributes, 0x80)  // POSIX_SPAWN_SETSID (glibc): a new session
var actions = posix_spawn_file_actions_t()
posix_spawn_file_actions_init(&actions)
for fd in [Int32(0), 1, 2] { posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0) }
var pid: pid_t = 0
// This program's own path (as ps shows it), from /proc/self/exe.
var pathBuffer = [CChar](repeating: 0, count: 4096)
let pathLength = readlink("/proc/self/exe", &pathBuffer, pathBuffer.count - 1)
let program = pathLength > 0 ? String(decoding: pathBuffer.prefix(pathLength).map { UInt8(bitPattern: $0) }, as: UTF8.self) : "/proc/self/exe"
let spawned = ([program, "--foreground", "--socket", socketPath] + (withSecretService ? ["--secret-service"] : [])).withCStrings { argv in
    posix_spawn(&pid, program, &actions, &attributes, argv, environ)
}
guard spawned == 0 else {
    complain("keychaind: cannot start in the background (error \(spawned))")
    exit(1)
}
// Ready when it answers (at most 5 s).
for _ in 0..<50 where !UnlockSession.isRunning { usleep(100_000) }
exit(UnlockSession.isRunning ? 0 : 1)

extension Array where Element == String {
    func withCStrings<R>(_ body: ([UnsafeMutablePointer<CChar>?]) -> R) -> R {
        var pointers = map { strdup($0) }
        defer { pointers.forEach { free($0) } }
        pointers.append(nil)
        return body(pointers)
    }
}
