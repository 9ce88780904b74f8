import Glibc
import KeychainCrypto
import KeychainStore

/// Counted PIN (and application password) evaluations that any number of threads and processes
/// may run at once, with the guess limit held exactly.
///
/// A counter keeps the failures that are known; every evaluation in flight holds a marker beside
/// it, written before the secret is evaluated. An evaluation may start only while
/// `failures + markers < maximum` (and fewer than `concurrentEvaluations` run), so at most
/// `maximum` wrong guesses are ever evaluated between two right ones, however many run at once.
/// Finishing removes the marker: a wrong guess adds one failure, a right one clears the failures
/// known so far — never the markers of evaluations still in flight, which count when they finish.
/// A marker whose process has died (SIGKILL mid-login) counts as a failure, so killing a process
/// after seeing its answer gains an attacker nothing. A login that finds no room waits for one
/// (`waitLimit`): right PINs are delayed, never refused, unless the PIN really is locked.
struct PINAttempt {
    let counter: String
    let marker: String
}

extension Keychain {
    /// Evaluations of one PIN that may run at once (each holds scrypt's memory: 32 MiB by default).
    static let concurrentEvaluations = 4
    /// How long a login waits for room to evaluate before it gives up (`.storageFailure`).
    static let attemptWaitLimit: Double = 90
    /// A marker older than this (seconds) counts as a failure even when its process cannot be
    /// checked (another PID namespace, no /proc): no evaluation takes that long.
    static let attemptLease: Int64 = 60

    private static func markerPrefix(_ counter: String) -> String { counter + ".attempt." }

    /// Starts one counted evaluation against `counter`: waits while the limit leaves no room,
    /// refuses with `.pinLocked` (message `locked`) at the limit. The marker is durable before
    /// this returns; nothing is evaluated that is not already counted.
    func beginAttempt(_ counter: String, locked: String) throws(KeychainError) -> PINAttempt {
        let attempt = PINAttempt(counter: counter, marker: Self.markerPrefix(counter) + String(decoding: Hex.digits((try? Random.bytes(8)) ?? []), as: UTF8.self))
        guard attempt.marker.count > Self.markerPrefix(counter).count else { throw KeychainError(.storageFailure, "no random bytes for a PIN attempt") }
        let me = ProcessIdentity.current()
        let deadline = ProcessIdentity.monotonicSeconds() + Self.attemptWaitLimit
        while true {
            let outcome = try counted { () throws -> AttemptRoom in
                // A read first, so that waiting logins do not queue for the write lock.
                if try store.read({ try room(counter, recording: false) }) == .full { return .full }
                return try store.write {
                    let room = try room(counter, recording: true)
                    if room == .free { try store.setMeta(attempt.marker, blob: me.marker(started: Int64(time(nil)))) }
                    return room
                }
            }
            switch outcome {
            case .free: return attempt
            case .locked: throw KeychainError(.pinLocked, locked)
            case .full:
                guard ProcessIdentity.monotonicSeconds() < deadline else {
                    throw KeychainError(.storageFailure, "more PIN checks were in flight for this keychain than could finish in \(Int(Self.attemptWaitLimit)) s: try again")
                }
                lock.released { _ = usleep(UInt32(10_000 + Int.random(in: 0..<20_000))) }
            }
        }
    }

    /// Ends an evaluation: a right secret clears the known failures, anything else counts one
    /// (unless the marker was already counted as abandoned). A record that cannot be written
    /// leaves the marker, which then counts as a failure: that errs toward locking.
    func finishAttempt(_ attempt: PINAttempt, right: Bool) {
        _ = try? store.write {
            let pending = try store.deleteMeta(attempt.marker)
            if right {
                try store.setMeta(attempt.counter, integer: 0)
            } else if pending {
                try store.incrementMeta(attempt.counter, by: 1)
            }
        }
    }

    private enum AttemptRoom { case free, full, locked }

    /// Whether an evaluation may start now. `recording` (inside a write transaction): abandoned
    /// markers are counted as failures and removed first.
    private func room(_ counter: String, recording: Bool) throws -> AttemptRoom {
        var failures = try store.metaInteger(counter) ?? 0
        let maximum = try store.metaInteger(Meta.maximumFailures) ?? PINPolicy.defaultMaximumFailures
        let now = Int64(time(nil))
        var live = 0
        var abandoned: [String] = []
        for (key, value) in try store.metaBlobs(prefix: Self.markerPrefix(counter)) {
            if ProcessIdentity.isLive(marker: value, now: now, lease: Self.attemptLease) { live += 1 } else { abandoned.append(key) }
        }
        if recording, !abandoned.isEmpty {
            for key in abandoned { try store.deleteMeta(key) }
            failures += Int64(abandoned.count)
            try store.setMeta(counter, integer: failures)
        } else {
            failures += Int64(abandoned.count)
        }
        if failures >= maximum { return .locked }
        return failures + Int64(live) < maximum && live < Self.concurrentEvaluations ? .free : .full
    }

    /// Storage errors while counting become "not counted, so not checked": the same answer for a
    /// right and a wrong PIN (a writer holding the file gives no oracle).
    private func counted<R>(_ body: () throws -> R) throws(KeychainError) -> R {
        do {
            return try body()
        } catch let error as KeychainError {
            throw error
        } catch {
            let underlying = KeychainError(error)
            throw KeychainError(underlying.code == .storageFull ? .storageFull : .storageFailure,
                                "this attempt could not be counted, so the PIN was not checked: \(underlying.reason)")
        }
    }
}

/// Who holds a marker: enough to tell, from another process, whether that evaluation can still
/// finish (the process with that PID and start time still exists in the same PID namespace).
struct ProcessIdentity {
    let pid: Int64
    /// Start time in clock ticks after boot (/proc/PID/stat field 22); 0 when unknown.
    let startTime: Int64
    /// The PID namespace's inode number; 0 when unknown.
    let namespace: Int64

    static func current() -> ProcessIdentity {
        let pid = Int64(getpid())
        return ProcessIdentity(pid: pid, startTime: startTime(of: pid) ?? 0, namespace: namespaceInode() ?? 0)
    }

    /// pid ‖ start time ‖ namespace ‖ started (wall-clock seconds), big-endian.
    func marker(started: Int64) -> [UInt8] {
        [pid, startTime, namespace, started].flatMap { value in withUnsafeBytes(of: value.bigEndian) { Array($0) } }
    }

    /// Whether the evaluation behind `marker` may still finish. Unknown owners get `lease`
    /// seconds; a damaged marker is abandoned.
    static func isLive(marker: [UInt8]?, now: Int64, lease: Int64) -> Bool {
        guard let marker, marker.count == 32 else { return false }
        let fields = (0..<4).map { i in marker[(i * 8)..<(i * 8 + 8)].reduce(Int64(0)) { $0 << 8 | Int64($1) } }
        let (pid, start, namespace, started) = (fields[0], fields[1], fields[2], fields[3])
        guard now - started <= lease, started - now <= lease else { return false }
        guard start != 0, namespace != 0, namespace == namespaceInode(), pid > 0, pid <= Int64(Int32.max) else { return true }
        return startTime(of: pid) == start
    }

    static func monotonicSeconds() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    private static func namespaceInode() -> Int64? {
        guard let info = try? System.stat("/proc/self/ns/pid") else { return nil }
        return Int64(bitPattern: UInt64(info.st_ino))
    }

    /// Field 22 of /proc/PID/stat (after the command name, which may hold spaces and parentheses).
    private static func startTime(of pid: Int64) -> Int64? {
        guard let fd = try? System.open("/proc/\(pid)/stat", O_RDONLY) else { return nil }
        defer { System.close(fd) }
        let buffer = (try? System.pread(fd, count: 1024, at: 0)) ?? []
        let count = buffer.count
        guard count > 0, let close = buffer[..<count].lastIndex(of: UInt8(ascii: ")")) else { return nil }
        let fields = buffer[(close + 1)..<count].split(separator: UInt8(ascii: " "))
        // fields[0] is field 3 (state): field 22 is fields[19].
        guard fields.count > 19 else { return nil }
        return Int64(String(decoding: fields[19], as: UTF8.self))
    }
}
