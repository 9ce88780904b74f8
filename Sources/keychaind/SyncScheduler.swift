import Glibc
import KeychainCore
import KeychainCrypto
import KeychainSync
import SecretService

/// keychaind's syncs (Docs/sync.md, "A sync"): for each keychain unlocked in the session that
/// belongs to a circle, a sync a few seconds after a change here (the keychain's version moved),
/// one every `session-policy --sync-interval` (default 15 min), and, while syncs fail (the remote
/// unreachable), waits that double from 30 s up to the interval. A locked keychain is not synced:
/// its key is not held. Syncs run on this thread, one at a time; the daemon's socket and the
/// other doors go on meanwhile. Why a sync failed is kept in the keychain (`sync status`).
final class SyncScheduler: @unchecked Sendable {
    /// After a change, wait this long for more before syncing (a burst of writes syncs once).
    static let settle: Int64 = 3
    static let firstBackoff: Int64 = 30

    private struct State {
        var keychain: Keychain?
        var lastVersion: KeychainVersion?
        var changedAt: Int64?
        var lastAttempt: Int64 = 0
        var failures = 0
        var notBefore: Int64 = 0
    }

    private let daemon: Daemon
    private var states: [String: State] = [:]

    init(daemon: Daemon) { self.daemon = daemon }

    func start() {
        let thread = DetachedThread { [self] in
            while stopRequested == 0 {
                sleep(1)
                tick(now: Int64(time(nil)))
            }
        }
        thread.start()
    }

    private func tick(now: Int64) {
        let held = Set(daemon.heldPaths())
        for path in states.keys where !held.contains(path) { states[path] = nil }  // locked: forgotten
        for path in held.sorted() {
            guard stopRequested == 0, let key = daemon.sessionKeyWithoutUse(path: path) else { continue }
            var state = states[path] ?? State()
            defer { states[path] = state }
            if state.keychain == nil { state.keychain = try? Keychain.open(at: path) }
            guard let keychain = state.keychain, (try? keychain.syncValue("remote")) != nil else { continue }
            let version = try? keychain.version()
            if state.lastVersion == nil {
                state.changedAt = now  // unlocked: sync once
            } else if let version, version != state.lastVersion, state.changedAt == nil {
                state.changedAt = now
            }
            let interval = Int64((try? keychain.sessionPolicy())?.syncInterval ?? SessionPolicy.defaultSyncInterval)
            let changeDue = state.changedAt.map { now - $0 >= Self.settle } ?? false
            let periodicDue = interval > 0 && now - state.lastAttempt >= interval
            guard changeDue || periodicDue, now >= state.notBefore else {
                if state.lastVersion == nil { state.lastVersion = version }
                continue
            }
            state.lastAttempt = now
            do {
                let master = try keychain.masterKey(fromSession: key)
                let serial = try keychain.info(countingObjects: false).serial
                let engine = SyncEngine(keychain: keychain, master: master, workTree: try SyncEngine.defaultWorkTree(serial: serial))
                _ = try engine.sync()
                state.failures = 0
                state.notBefore = 0
            } catch {
                state.failures += 1
                let cap = interval > 0 ? interval : Int64(SessionPolicy.defaultSyncInterval)
                state.notBefore = now + min(cap, Self.firstBackoff << Int64(min(state.failures - 1, 20)))
                complain("keychaind: sync of \(path) failed (\(state.failures) in a row; next try in \(state.notBefore - now) s): \(error)")
            }
            // What the sync itself wrote is not a change to send again.
            state.lastVersion = try? keychain.version()
            state.changedAt = nil
        }
    }
}
