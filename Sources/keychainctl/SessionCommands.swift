import ArgumentParser
import Foundation
import Glibc
import KeychainCore

// `unlock`, `lock`, `status`: the unlock session (`keychaind`). While a keychain is unlocked
// there, every process of the user finds it unlocked: keychainctl asks no user PIN, the PKCS#11
// module logs in with a NULL PIN, KeychainServices needs no unlock call.

struct Unlock: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unlock",
        abstract: "Unlock a keychain for this login session (keychaind keeps it unlocked).",
        discussion: """
        The user PIN comes from --pin-file, KEYCHAIN_PKCS11_PIN or a prompt, and is checked by \
        keychaind (counted like any login). keychaind is started if it is not running. \
        --timeout locks the keychain after that long without use (90s, 30m, 8h; default: never).

        Examples:
          keychainctl unlock
          keychainctl unlock -k work --timeout 30m
        """
    )

    @OptionGroup var options: KeychainOptions

    @Option(help: ArgumentHelp("Lock again after this long without use (e.g. 90s, 30m, 8h).", valueName: "duration"))
    var timeout: String?

    func run() throws {
        let idle = try timeout.map(parseDuration) ?? 0
        let opened = try options.open()
        try startDaemonIfNeeded()
        let pin = try readSecret(file: options.pinFile, environment: "KEYCHAIN_PKCS11_PIN", prompt: "User PIN of keychain '\(opened.label)'", confirm: false,
                                 option: "--pin-file")
        let kdf = (try? opened.keychain.info(countingObjects: false))?.userKDF
        let outcome = withKDFNotice(kdf) { pin.withBytes { UnlockSession.unlock(path: opened.keychain.path, pin: $0, idleTimeout: idle) } }
        switch outcome {
        case nil:
            throw fail("keychaind does not answer on \(UnlockSession.socketPath ?? "(no socket: set XDG_RUNTIME_DIR)").", status: ExitStatus.failure)
        case .failure(let error)?:
            throw failure(for: error)
        case .success?:
            print("Keychain '\(opened.label)' is unlocked for this session" + (idle > 0 ? " (locks after \(idle) s without use)." : "."))
        }
    }
}

struct Lock: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lock",
        abstract: "Lock a keychain (or all) in this login session.",
        discussion: """
        Processes that took the keychain from the session keep what they hold until they log \
        out; new logins, new processes and keychainctl ask for the PIN again.

        Examples:
          keychainctl lock
          keychainctl lock --all
        """
    )

    @OptionGroup var options: KeychainOptions

    @Flag(help: "Lock every keychain.")
    var all = false

    func run() throws {
        if all {
            guard UnlockSession.lock(path: nil) else { throw fail("keychaind is not running: nothing is unlocked.", status: ExitStatus.notFound) }
            print("Every keychain is locked.")
            return
        }
        let opened = try options.open()
        guard UnlockSession.lock(path: opened.keychain.path) else { throw fail("keychaind is not running: nothing is unlocked.", status: ExitStatus.notFound) }
        print("Keychain '\(opened.label)' is locked.")
    }
}

struct SessionPolicyCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "session-policy",
        abstract: "Show or set how keychaind treats a keychain: idle timeout, locking on sleep and session lock, locked search, sync interval.",
        discussion: """
        The idle timeout applies when 'keychainctl unlock' gives none; 'none' turns it off.

        --lock-on-sleep yes (the default) locks the keychain when the machine sleeps or the login \
        session is locked (logind's signals on the system bus; without one, nothing follows them).

        --locked-search yes (the default) lets the Secret Service find this keychain's passwords \
        by their attributes while it is locked, so that an application asking for one is offered \
        an unlock prompt instead of being told it has none. It keeps a lookup index keyed from \
        this device's key: someone with the keychain file and the device key could test guesses \
        of attribute values (never read a secret, a label or a value); 'no' removes the index.

        --sync-interval sets how often keychaind syncs the keychain with its circle (keychainctl \
        sync) while it is unlocked in the session; it also syncs a few seconds after each change \
        here, and waits longer after each failure (up to the interval). 'none' leaves only the \
        syncs after a change; the default is 15m.

        Setting needs the user PIN (or the keychain unlocked in the session).

        Examples:
          keychainctl session-policy
          keychainctl session-policy --idle-timeout 30m --lock-on-sleep yes
          keychainctl session-policy -k work --idle-timeout none \\
              --lock-on-sleep no
          keychainctl session-policy -k work --locked-search no
          keychainctl session-policy --sync-interval 5m
        """
    )

    @OptionGroup var options: KeychainOptions

    @Option(help: ArgumentHelp("Lock after this long without use (90s, 30m, 8h) or 'none'.", valueName: "duration"))
    var idleTimeout: String?

    @Option(help: ArgumentHelp("Lock when the machine sleeps or the session locks: yes or no.", valueName: "yes|no"))
    var lockOnSleep: String?

    @Option(help: ArgumentHelp("Let the Secret Service find passwords by attribute while the keychain is locked: yes or no.", valueName: "yes|no"))
    var lockedSearch: String?

    @Option(help: ArgumentHelp("How often keychaind syncs the keychain with its circle (90s, 30m, 8h) or 'none'.", valueName: "duration"))
    var syncInterval: String?

    func run() throws {
        let opened = try options.open()
        var policy = try opened.run { () throws(KeychainError) in try opened.keychain.sessionPolicy() }
        if let lockedSearch {
            guard ["yes", "no"].contains(lockedSearch) else { throw fail("--locked-search takes yes or no.", status: ExitStatus.usage) }
            let master = try opened.unlock()
            _ = try opened.run { () throws(KeychainError) in try opened.keychain.setLockedLookup(lockedSearch == "yes", master: master) }
        }
        if idleTimeout != nil || lockOnSleep != nil || syncInterval != nil {
            if let idleTimeout { policy.idleTimeout = idleTimeout == "none" ? 0 : try parseDuration(idleTimeout) }
            if let syncInterval { policy.syncInterval = syncInterval == "none" ? 0 : try parseDuration(syncInterval) }
            if let lockOnSleep {
                guard ["yes", "no"].contains(lockOnSleep) else { throw fail("--lock-on-sleep takes yes or no.", status: ExitStatus.usage) }
                policy.lockOnSleep = lockOnSleep == "yes"
            }
            // Changing it proves the keychain is yours: the PIN, or the session.
            try opened.unlock()
            let chosen = policy
            try opened.run { () throws(KeychainError) in try opened.keychain.setSessionPolicy(chosen) }
        }
        let searchable = try opened.run { () throws(KeychainError) in try opened.keychain.lockedLookupIsOn() }
        print("Keychain '\(opened.label)': idle timeout \(policy.idleTimeout == 0 ? "none" : "\(policy.idleTimeout) s"), lock on sleep and session lock: \(policy.lockOnSleep ? "yes" : "no"), locked search: \(searchable ? "yes" : "no"), sync interval: \(policy.syncInterval == 0 ? "none" : "\(policy.syncInterval) s")")
    }
}

struct Status: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show which keychains are unlocked in this login session.",
        discussion: """
        Examples:
          keychainctl status
          keychainctl status --json
        """
    )

    @Flag(help: "Print JSON: keychaind (running or not) and keychains: label, file, unlocked, since (Unix time), idleTimeout, lockOnSleep, secondsLeft.")
    var json = false

    func run() throws {
        let directory = KeychainDirectory(path: Configuration.current().directory)
        let held = UnlockSession.status()
        let now = Int64(time(nil))
        var rows: [[String: Any]] = []
        for path in directory.keychainFiles() {
            let label = (try? Keychain.open(at: path).info(countingObjects: false).label) ?? "?"
            var row: [String: Any] = ["label": label, "file": path, "unlocked": false]
            if let entry = held?.first(where: { $0.path == path }) {
                row["unlocked"] = true
                row["since"] = entry.since
                row["idleTimeout"] = entry.idleTimeout
                row["lockOnSleep"] = entry.lockOnSleep
                if entry.idleTimeout > 0 { row["secondsLeft"] = max(0, entry.lastUse + entry.idleTimeout - now) }
            }
            rows.append(row)
        }
        if json {
            let data = try JSONSerialization.data(withJSONObject: ["keychaind": held != nil, "keychains": rows], options: [.sortedKeys])
            print(String(decoding: data, as: UTF8.self))
            return
        }
        print(held == nil ? "keychaind: not running (every keychain is locked for new processes)" : "keychaind: running on \(UnlockSession.socketPath ?? "?")")
        for row in rows {
            let label = printable(row["label"] as? String ?? "?")
            guard row["unlocked"] as? Bool == true else {
                print("  \(label): locked")
                continue
            }
            let since = (row["since"] as? Int64).map { "since \(Self.clock($0))" } ?? ""
            let left = (row["secondsLeft"] as? Int64).map { ", locks in \($0) s without use" } ?? ""
            print("  \(label): unlocked \(since)\(left)")
        }
    }

    static func clock(_ seconds: Int64) -> String {
        var value = time_t(seconds)
        var parts = tm()
        localtime_r(&value, &parts)
        return String(format: "%02d:%02d:%02d", parts.tm_hour, parts.tm_min, parts.tm_sec)
    }
}

/// "90s", "30m", "8h", "2d" or plain seconds.
func parseDuration(_ text: String) throws -> Int {
    let units: [Character: Int] = ["s": 1, "m": 60, "h": 3600, "d": 86400]
    var digits = text
    var unit = 1
    if let last = text.last, let factor = units[last] {
        unit = factor
        digits = String(text.dropLast())
    }
    guard let value = Int(digits), value >= 0, value <= Int(Int32.max) / unit else {
        throw fail("'\(text)' is not a duration (like 90s, 30m, 8h).", status: ExitStatus.usage)
    }
    return value * unit
}

/// Starts keychaind (the one installed beside keychainctl, else the one on PATH) when none
/// answers; where systemd's socket activation is set up, the socket is already there.
func startDaemonIfNeeded() throws {
    guard UnlockSession.socketPath != nil else {
        throw fail("no XDG_RUNTIME_DIR: the unlock session needs one (or KEYCHAIN_PKCS11_AGENT=PATH to a socket in a folder of yours).", status: ExitStatus.usage)
    }
    if UnlockSession.isRunning { return }
    var buffer = [CChar](repeating: 0, count: 4096)
    let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    let own = length > 0 ? String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
    let beside = (own.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")) + "/keychaind"
    let candidates = [beside] + (getenv("PATH").map { String(cString: $0) } ?? "/usr/bin:/bin").split(separator: ":").map { $0 + "/keychaind" }
    guard let program = candidates.first(where: { access($0, X_OK) == 0 }) else {
        throw fail("keychaind is not installed (beside keychainctl or on PATH).", status: ExitStatus.failure)
    }
    // posix_spawn and waitpid (Foundation's Process needs a run loop to notice the exit).
    var pid: pid_t = 0
    let spawned = program.withCString { path -> Int32 in
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup(path), nil]
        defer { free(argv[0]) }
        return posix_spawn(&pid, path, nil, nil, &argv, environ)
    }
    guard spawned == 0 else { throw fail("cannot start \(program) (error \(spawned)).", status: ExitStatus.failure) }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    guard UnlockSession.isRunning else { throw fail("keychaind did not start.", status: ExitStatus.failure) }
}
