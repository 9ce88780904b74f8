import Glibc
import KeychainCore
import KeychainCrypto

/// What one sync did, for `keychainctl sync now` and `sync status`.
public struct SyncReport: Sendable, Equatable {
    /// Items written to the remote (new versions and tombstones of this device).
    public var sent = 0
    /// Items applied here from other devices (added, changed or removed).
    public var received = 0
    /// Items changed here and elsewhere since the last sync, settled by the merge rule.
    public var settled = 0
    /// Items another device sent that could not be stored here (another local item has the same
    /// keychain primary key), named by their file.
    public var skipped: [String] = []
    /// Pushes git refused because another device pushed first (each followed by a new round).
    public var retries = 0
    /// Devices that had asked to leave, removed by this sync (their items vouched for, the key rotated).
    public var devicesRemoved = 0
}

/// The sync of one keychain with its circle (Docs/sync.md): setup, joining, approval and the sync
/// itself, over the circle's git work tree. The keychain must be unlocked (its master key opens
/// the circle's keys and the device's identity), except for `quickSync`, which finds out without
/// the key whether there is anything to do.
public final class SyncEngine {
    public let keychain: Keychain
    private let master: MasterKey?
    public let workTree: String

    public static let maximumRetries = 5
    /// Items from other devices stored per keychain transaction (one commit each): few commits for
    /// a large sync, and the keychain's lock never held for long.
    public static let applyBatch = 256

    /// Where a keychain's circle work tree lives: beside the device key (the machine's own
    /// state, not the keychain folder that backups copy), one per keychain serial.
    public static func defaultWorkTree(serial: String) throws(SyncError) -> String {
        let state = Configuration.current().deviceKeyPath.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let folder = (state.isEmpty ? "." : state) + "/sync"
        try WorkTreeFiles.makeDirectory(folder)
        return folder + "/" + serial
    }

    /// `master` nil: a locked keychain, for `quickSync` (and `status` of what needs no key).
    public init(keychain: Keychain, master: MasterKey?, workTree: String) {
        self.keychain = keychain
        self.master = master
        self.workTree = workTree
    }

    // MARK: one at a time

    private var lockDepth = 0
    /// `quickSync` fetched `origin/main` and found something to do: the full sync that follows
    /// merges it without fetching again.
    public private(set) var fetchedByQuickSync = false

    /// Runs `body` holding the work tree's lock (flock on `<work tree>.lock`): keychaind's
    /// scheduled syncs and a `keychainctl sync now` take turns, never two git processes of ours
    /// in one work tree. Nested calls (setup's first sync) hold it once. `recovering`: first put
    /// the work tree back at its last commit (what a killed sync left); the quick check, which
    /// only fetches, does without.
    private func exclusive<R>(recovering: Bool = true, _ body: () throws(SyncError) -> R) throws(SyncError) -> R {
        if lockDepth > 0 { return try body() }
        let fd = open(workTree + ".lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SyncError(.malformed, "cannot open \(workTree).lock: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        while flock(fd, LOCK_EX) != 0 {
            guard errno == EINTR else { throw SyncError(.malformed, "cannot lock \(workTree).lock: \(String(cString: strerror(errno)))") }
        }
        lockDepth += 1
        defer { lockDepth -= 1 }
        // Whatever runs next, a git killed here before (the quick check's fetch too) may have left
        // a lock file that would fail it: those go first, always (a few unlinks).
        var repository: GitRepository?
        if let remote = try remote(), let device = try deviceID() { repository = GitRepository(directory: workTree, remote: remote, device: Hex.string(device)) }
        repository?.removeStaleLocks()
        guard recovering else { return try body() }
        // The marker stands while a sync may leave the work tree changed: made (and made durable)
        // before, removed only after one that completed. Only then is the recovery (a reset of the
        // index and a clean of 1,000 files: tens of ms) run.
        let marker = workTree + ".unfinished"
        if access(marker, F_OK) == 0, let repository {
            try repository.recover()
        }
        try WorkTreeFiles.makeDurableMarker(marker)
        let result = try body()
        unlink(marker)
        return result
    }

    // MARK: state

    func value(_ key: String) throws(SyncError) -> [UInt8]? {
        do { return try keychain.syncValue(key) } catch { throw SyncError(.malformed, "the keychain's sync state: \(error.reason)") }
    }

    func setValue(_ key: String, _ bytes: [UInt8]?) throws(SyncError) {
        do { try keychain.setSyncValue(key, bytes) } catch { throw SyncError(.malformed, "the keychain's sync state: \(error.reason)") }
    }

    func secret(_ key: String) throws(SyncError) -> SecureBytes? {
        let master = try unlocked()
        do { return try keychain.syncSecret(key, master: master) } catch { throw SyncError(.tampered, error.reason) }
    }

    func setSecret(_ key: String, _ bytes: SecureBytes?) throws(SyncError) {
        let master = try unlocked()
        do { try keychain.setSyncSecret(key, bytes, master: master) } catch { throw SyncError(.crypto, error.reason) }
    }

    /// The master key (`master` is nil for an engine over a locked keychain, which only
    /// `quickSync` and the state that needs no key can use).
    func unlocked() throws(SyncError) -> MasterKey {
        guard let master else { throw SyncError(.malformed, "the keychain is locked: unlock it to sync") }
        return master
    }

    /// Runs `body`'s writes of the sync's state as one keychain transaction (one commit, one flush).
    private func inOneTransaction(_ body: () throws(SyncError) -> Void) throws(SyncError) {
        var failure: SyncError?
        do {
            try keychain.transaction { () throws(KeychainError) in
                do throws(SyncError) { try body() } catch {
                    failure = error
                    throw KeychainError(.storageFailure, error.reason)
                }
            }
        } catch {
            throw failure ?? SyncError(.malformed, "the keychain's sync state: \(error.reason)")
        }
    }

    private func integer(_ key: String) throws(SyncError) -> UInt64? {
        try value(key).flatMap { bytes in bytes.count == 8 ? bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } : nil }
    }

    private func setInteger(_ key: String, _ number: UInt64) throws(SyncError) {
        try setValue(key, withUnsafeBytes(of: number.bigEndian) { Array($0) })
    }

    /// This device's id, once it has set up or asked to join a circle.
    public func deviceID() throws(SyncError) -> [UInt8]? { try value("device") }

    public func remote() throws(SyncError) -> String? { try value("remote").map { String(decoding: $0, as: UTF8.self) } }


    private func repository() throws(SyncError) -> GitRepository {
        guard let remote = try remote(), let device = try deviceID() else { throw SyncError(.malformed, "this keychain is in no circle") }
        return GitRepository(directory: workTree, remote: remote, device: Hex.string(device))
    }

    private func circleKeys(_ generation: UInt32) throws(SyncError) -> CircleKeys? {
        guard let key = try secret("key.\(generation)") else { return nil }
        return try CircleKeys(generation: generation, key: key)
    }

    private func names() throws(SyncError) -> ItemNames {
        guard let first = try secret("key.1") else { throw SyncError(.malformed, "this device holds no circle key yet (not approved?)") }
        return try ItemNames(firstGenerationKey: first)
    }

    /// Whether this keychain belongs to a circle (set up, or joined and approved).
    public func isMember() throws(SyncError) -> Bool { try secret("key.1") != nil }

    // MARK: setting up and joining

    /// Starts a circle on this device with `remote` (an empty repository, or one without a circle),
    /// its identity key where `identityKey` says (SyncIdentity.swift).
    public func setup(remote: String, deviceName: String, identityKey: IdentityKeyChoice = .auto) throws(SyncError) -> SyncReport {
        try exclusive { () throws(SyncError) -> SyncReport in try setupLocked(remote: remote, deviceName: deviceName, identityKey: identityKey) }
    }

    private func setupLocked(remote: String, deviceName: String, identityKey: IdentityKeyChoice) throws(SyncError) -> SyncReport {
        guard try value("genesis") == nil else { throw SyncError(.malformed, "this keychain is already in a circle (sync leave first)") }
        let device = try random(16), circle = try random(16)
        let identity = try makeIdentity(identityKey)
        let repository = GitRepository(directory: workTree, remote: remote, device: Hex.string(device))
        try repository.prepare()
        if try repository.fetch() {
            _ = try repository.mergeFetched()
            if WorkTreeFiles.read(repository.path("circle/log/0")) != nil {
                throw SyncError(.malformed, "\(remote) already holds a circle: join it (keychainctl sync join) instead")
            }
        }
        let key = try SecureBytes(random(CircleKeys.keySize))
        let genesis = CircleEvent(kind: .genesis, index: 0, previous: [UInt8](repeating: 0, count: 32), circle: circle, generation: 1,
                                  subject: device, subjectKey: identity.publicKeyInfo, signer: device)
        let genesisFile = try genesis.signed(by: identity)
        try WorkTreeFiles.makeDirectory(repository.path("circle/log"))
        try WorkTreeFiles.write(genesisFile, to: repository.path("circle/log/0"))
        try WorkTreeFiles.makeDirectory(repository.path("circle/keys/1"))
        try WorkTreeFiles.write(try CircleKeyWrap.wrap(key, generation: 1, circle: circle, to: device, publicKeyInfo: identity.publicKeyInfo,
                                                       by: device, signer: identity),
                                to: repository.path("circle/keys/1/\(Hex.string(device))"))
        try setValue("device", device)
        try setValue("remote", Array(remote.utf8))
        try setValue("circle", circle)
        try setValue("genesis", try CircleLog.hash(genesisFile))
        try keepIdentity(identity)
        try setSecret("key.1", key)
        try setValue("name", Array(deviceName.utf8))
        return try sync()
    }

    /// Asks to join the circle at `remote`: writes this device's request and returns the pairing
    /// code to compare with the one `approve` computes on a member.
    public func requestJoin(remote: String, deviceName: String, identityKey: IdentityKeyChoice = .auto) throws(SyncError) -> String {
        try exclusive { () throws(SyncError) -> String in try requestJoinLocked(remote: remote, deviceName: deviceName, identityKey: identityKey) }
    }

    private func requestJoinLocked(remote: String, deviceName: String, identityKey: IdentityKeyChoice) throws(SyncError) -> String {
        guard try value("genesis") == nil else { throw SyncError(.malformed, "this keychain is already in a circle (sync leave first)") }
        let device = try random(16)
        let identity = try makeIdentity(identityKey)
        let repository = GitRepository(directory: workTree, remote: remote, device: Hex.string(device))
        try repository.prepare()
        guard try repository.fetch() else { throw SyncError(.withheld, "\(remote) holds no circle yet (sync setup on the first device)") }
        _ = try repository.mergeFetched()
        guard let genesisFile = WorkTreeFiles.read(repository.path("circle/log/0")) else {
            throw SyncError(.withheld, "\(remote) holds no circle yet (sync setup on the first device)")
        }
        let genesis = try CircleLog.hash(genesisFile)
        _ = try CircleLog.verify(try logFiles(repository), genesis: genesis)
        try WorkTreeFiles.makeDirectory(repository.path("circle/requests"))
        try WorkTreeFiles.write(identity.publicKeyInfo, to: repository.path("circle/requests/\(Hex.string(device))"))
        try setValue("device", device)
        try setValue("remote", Array(remote.utf8))
        try setValue("genesis", genesis)
        try keepIdentity(identity)
        try setValue("name", Array(deviceName.utf8))
        try publish(repository, message: "join request")
        return try CircleLog.pairingCode(genesis: genesis, device: device, publicKeyInfo: identity.publicKeyInfo)
    }

    /// On a member: admits the device whose request gives `code`, and wraps the circle key to it.
    /// Returns the admitted device's id (hex).
    public func approve(code: String) throws(SyncError) -> String {
        try exclusive { () throws(SyncError) -> String in try approveLocked(code: code) }
    }

    private func approveLocked(code: String) throws(SyncError) -> String {
        let wanted = code.uppercased().filter { $0 != "-" && $0 != " " }
        let repository = try repository()
        let identity = try identity()
        guard let me = try deviceID(), let genesis = try value("genesis"), try isMember() else { throw SyncError(.malformed, "this device is not a member of a circle") }
        for attempt in 0...Self.maximumRetries {
            try fetchAndMerge(repository)
            let log = try logFiles(repository)
            let members = try CircleLog.verify(log, genesis: genesis)
            var found: (device: [UInt8], key: [UInt8])?
            for name in WorkTreeFiles.list(repository.path("circle/requests")) {
                guard let device = Hex.bytes(Array(name.utf8)), device.count == 16,
                      let key = WorkTreeFiles.read(repository.path("circle/requests/\(name)")) else { continue }
                if try CircleLog.pairingCode(genesis: genesis, device: device, publicKeyInfo: key) == wanted { found = (device, key) }
            }
            guard let (device, key) = found else { throw SyncError(.notFound, "no device asks to join with code \(code)") }
            guard members.members[Hex.string(device)] == nil else { throw SyncError(.malformed, "that device is already a member") }
            let event = CircleEvent(kind: .add, index: members.count, previous: members.head, circle: members.circle, generation: members.generation,
                                    subject: device, subjectKey: key, signer: me)
            try WorkTreeFiles.write(try event.signed(by: identity), to: repository.path("circle/log/\(members.count)"))
            // Every generation's key: files written before a rotation stay sealed under theirs.
            for generation in UInt32(1)...members.generation {
                guard let circleKey = try secret("key.\(generation)") else { throw SyncError(.unknownGeneration, "this device lacks generation \(generation) of the circle key") }
                try WorkTreeFiles.makeDirectory(repository.path("circle/keys/\(generation)"))
                try WorkTreeFiles.write(try CircleKeyWrap.wrap(circleKey, generation: generation, circle: members.circle, to: device, publicKeyInfo: key,
                                                               by: me, signer: identity),
                                        to: repository.path("circle/keys/\(generation)/\(Hex.string(device))"))
            }
            unlink(repository.path("circle/requests/\(Hex.string(device))"))
            try repository.commitAll("approve \(Hex.string(device))")
            switch try repository.push() {
            case .pushed: return Hex.string(device)
            case .rejected where attempt < Self.maximumRetries: continue
            case .rejected: throw SyncError(.malformed, "the remote kept changing: try again")
            case .failed(let reason): throw SyncError(.malformed, "git push: \(reason)")
            }
        }
        throw SyncError(.malformed, "the remote kept changing: try again")
    }

    // MARK: status

    public struct Status: Sendable {
        public let remote: String?
        public let device: String?
        public let deviceName: String?
        /// Set up or approved (holds the circle's key); false while a join waits for approval.
        public let isMember: Bool
        /// Milliseconds since 1970 of the last completed sync.
        public let lastSync: UInt64?
        /// Items changed here since the last sync (edits, additions, deletes).
        public let pending: Int
        /// Conflicts settled by the merge rule, over all syncs.
        public let settled: UInt64
        /// Why the last sync failed, if it did (cleared by the next that completes).
        public let lastError: String?
        /// Where this device's identity key lives (nil in no circle).
        public let identityKey: IdentityKeyKind?
    }

    /// What `sync status` shows, without touching the remote.
    public func status() throws(SyncError) -> Status {
        // Membership is one decryption of a sealed key: read once.
        let member = try isMember()
        let known = member ? try knownStates() : [:]
        var pending = 0
        if member {
            var seen = Set<[UInt8]>()
            let items: [SynchronizableItem]
            let master = try unlocked()
            do { items = try keychain.synchronizableItems(master: master) } catch { throw SyncError(.malformed, "reading the keychain: \(error.reason)") }
            for var item in items {
                seen.insert(item.uid)
                let digest = try SyncManifest.digest(of: item.record)
                if let before = known[item.uid], !before.state.deleted, before.digest == digest {} else { pending += 1 }
                item.record.withUnsafeMutableBytes { wipe($0) }
            }
            pending += known.values.filter { !$0.state.deleted && !seen.contains($0.state.uid) }.count
        }
        return Status(remote: try remote(), device: try deviceID().map(Hex.string), deviceName: try value("name").map { String(decoding: $0, as: UTF8.self) },
                      isMember: member, lastSync: try lastSync(), pending: pending, settled: try integer("settled") ?? 0,
                      lastError: try value("error").map { String(decoding: $0, as: UTF8.self) }, identityKey: try identityKind())
    }

    // MARK: devices

    public struct Device: Sendable, Equatable {
        public let id: String
        /// The name it gave itself (sealed on the remote); nil until its first sync.
        public let name: String?
        public let isThisDevice: Bool
    }

    /// The circle's members as the checked log says, with their names (after a fetch).
    public func devices() throws(SyncError) -> [Device] {
        try exclusive { () throws(SyncError) -> [Device] in try devicesLocked() }
    }

    private func devicesLocked() throws(SyncError) -> [Device] {
        let repository = try repository()
        guard let me = try deviceID(), let genesis = try value("genesis") else { throw SyncError(.malformed, "this keychain is in no circle") }
        try fetchAndMerge(repository)
        let members = try CircleLog.verify(try logFiles(repository), genesis: genesis)
        let names = try? names()
        return members.members.keys.sorted().map { id in
            let device = Hex.bytes(Array(id.utf8)) ?? []
            let name = names.flatMap { names in WorkTreeFiles.read(repository.path("circle/names/\(id)")).flatMap { try? DeviceNames.open($0, device: device, names: names) } }
            return Device(id: id, name: name, isThisDevice: device == me)
        }
    }

    /// Removes a member (by name or id) and rotates the circle's key: a new generation, wrapped to
    /// the remaining members only, so nothing written afterwards can be read by the removed device.
    /// Returns the removed device's id (hex).
    public func removeDevice(_ nameOrID: String) throws(SyncError) -> String {
        try exclusive { () throws(SyncError) -> String in try removeDeviceLocked(nameOrID) }
    }

    private func removeDeviceLocked(_ nameOrID: String, syncingFirst: Bool = true) throws(SyncError) -> String {
        let repository = try repository()
        guard let me = try deviceID(), let genesis = try value("genesis") else { throw SyncError(.malformed, "this keychain is in no circle") }
        let identity = try identity()
        for attempt in 0...Self.maximumRetries {
            let devices = try devices()
            let matches = devices.filter { $0.id == nameOrID.lowercased() || $0.name == nameOrID }
            if syncingFirst, matches.count == 1, let target = matches.first, target.id != Hex.string(me) {
                // A sync first: the items the removed device wrote last are listed only by its
                // manifest, which goes with it — this device's manifest, written by the sync over
                // every file it checked, vouches for them in the removal's commit.
                _ = try syncLocked(forcingManifest: true)
            }
            guard matches.count == 1, let target = matches.first, let subject = Hex.bytes(Array(target.id.utf8)) else {
                throw SyncError(matches.isEmpty ? .notFound : .malformed, matches.isEmpty ? "no device of the circle is called \(nameOrID)" : "several devices are called \(nameOrID): give its id")
            }
            let members = try CircleLog.verify(try logFiles(repository), genesis: genesis)
            // The sync may have removed it already (it had asked to leave).
            guard members.members[target.id] != nil else { return target.id }
            let generation = members.generation + 1
            let event = CircleEvent(kind: .remove, index: members.count, previous: members.head, circle: members.circle, generation: generation,
                                    subject: subject, subjectKey: members.members[target.id] ?? [], signer: me)
            try WorkTreeFiles.write(try event.signed(by: identity), to: repository.path("circle/log/\(members.count)"))
            let key = try SecureBytes(random(CircleKeys.keySize))
            try WorkTreeFiles.makeDirectory(repository.path("circle/keys/\(generation)"))
            for (id, publicKey) in members.members where id != target.id {
                guard let device = Hex.bytes(Array(id.utf8)) else { continue }
                try WorkTreeFiles.write(try CircleKeyWrap.wrap(key, generation: generation, circle: members.circle, to: device, publicKeyInfo: publicKey,
                                                               by: me, signer: identity),
                                        to: repository.path("circle/keys/\(generation)/\(id)"))
            }
            unlink(repository.path("circle/names/\(target.id)"))
            unlink(repository.path("manifests/\(target.id)"))
            unlink(repository.path("circle/leaving/\(target.id)"))
            try repository.commitAll("remove \(target.id)")
            switch try repository.push() {
            case .pushed:
                if subject != me { try setSecret("key.\(generation)", key) }
                try setValue("seen.\(target.id)", nil)
                return target.id
            case .rejected where attempt < Self.maximumRetries:
                _ = try repository.git(["reset", "-q", "--hard", "origin/main"], allowFailure: true)
                continue
            case .rejected: throw SyncError(.malformed, "the remote kept changing: try again")
            case .failed(let reason): throw SyncError(.malformed, "git push: \(reason)")
            }
        }
        throw SyncError(.malformed, "the remote kept changing: try again")
    }

    /// This device leaves its circle: removed from the log (the others rotate to a key it never
    /// keeps), its sync state forgotten and its work tree deleted. Its items stay in the keychain.
    /// With `local` the remote is not touched (a circle gone or unreachable).
    public func leave(local: Bool = false) throws(SyncError) {
        try exclusive { () throws(SyncError) in try leaveLocked(local: local) }
    }

    private func leaveLocked(local: Bool) throws(SyncError) {
        if !local, let me = try deviceID(), try isMember() {
            try askToLeave(me)
        }
        do { try keychain.clearSyncState() } catch { throw SyncError(.malformed, "forgetting the sync state: \(error.reason)") }
        _ = try? Subprocess.run(["rm", "-rf", "--", workTree])
        unlink(workTree + ".checked")
    }

    /// What a device that leaves signs: its request to the circle's members to remove it.
    static func leaveStatement(circle: [UInt8], device: [UInt8]) -> [UInt8] {
        Array("keychain-pkcs11 sync leave".utf8) + [0] + circle + device
    }

    /// Leaving: a last sync (this device's changes reach the circle), then a signed request,
    /// `circle/leaving/<device>`, which the next member to sync carries out — a removal with its
    /// rotation, by a device that vouches for the items this one wrote last (which only this
    /// device's manifest may list; a device cannot vouch for its own after it has gone). The last
    /// member of a circle removes itself. A device already removed has nothing to ask.
    private func askToLeave(_ me: [UInt8]) throws(SyncError) {
        let repository = try repository()
        guard let genesis = try value("genesis") else { return }
        try fetchAndMerge(repository)
        let members = try CircleLog.verify(try logFiles(repository), genesis: genesis)
        guard members.members[Hex.string(me)] != nil else { return }
        guard members.members.count > 1 else {
            do { _ = try removeDeviceLocked(Hex.string(me)) } catch where error.kind == .notFound {}
            return
        }
        _ = try syncLocked()
        let signature = try identity().sign(Self.leaveStatement(circle: members.circle, device: me))
        try WorkTreeFiles.makeDirectory(repository.path("circle/leaving"))
        try WorkTreeFiles.write(signature, to: repository.path("circle/leaving/\(Hex.string(me))"))
        try publish(repository, message: "leave \(Hex.string(me))")
    }

    /// The members (hex ids) that asked to leave with a request signed by their key as the log
    /// has it; anything else under `circle/leaving` is passed over.
    private func leavingRequests(_ repository: GitRepository, members: CircleMembers, me: [UInt8]) -> [String] {
        WorkTreeFiles.list(repository.path("circle/leaving")).filter { name in
            guard name != Hex.string(me), let key = members.members[name], let device = Hex.bytes(Array(name.utf8)),
                  let signature = WorkTreeFiles.read(repository.path("circle/leaving/\(name)")) else { return false }
            return DeviceSignature.verify(signature, of: Self.leaveStatement(circle: members.circle, device: device), publicKeyInfo: key)
        }
    }

    /// After a sync (whose manifest, forced when there were requests, vouches for their items):
    /// removes each member that asked to leave. Returns how many.
    private func removeLeavingDevices() throws(SyncError) -> Int {
        let repository = try repository()
        // Nearly always none: the log, which the sync has just verified, is verified again only
        // when a request is there.
        guard !WorkTreeFiles.list(repository.path("circle/leaving")).isEmpty,
              let me = try deviceID(), let genesis = try value("genesis") else { return 0 }
        let members = try CircleLog.verify(try logFiles(repository), genesis: genesis)
        var removed = 0
        for name in leavingRequests(repository, members: members, me: me) {
            _ = try removeDeviceLocked(name, syncingFirst: false)
            removed += 1
        }
        return removed
    }

    // MARK: the sync

    /// Fetches, checks and merges the remote, applies other devices' changes here, sends this
    /// device's, and pushes (Docs/sync.md, "A sync"). Nothing is applied when a check fails.
    /// With `tryingQuick`, `quickSync` answers first when there is nothing to do. `fetched`: a
    /// `quickSync` of another engine over this keychain fetched a moment ago (keychainctl's, before
    /// it asked for the PIN): the remote is not fetched again.
    public func sync(tryingQuick: Bool = true, fetched: Bool = false) throws(SyncError) -> SyncReport {
        if fetched { fetchedByQuickSync = true }
        if tryingQuick, let report = try quickSync() { return report }
        return try exclusive { () throws(SyncError) -> SyncReport in try syncLocked() }
    }

    /// A sync with nothing to do, found out without the master key: the remote's `main` (fetched)
    /// and the work tree's are still the commit the last completed sync left, and the keychain's
    /// fingerprint is the one it recorded (no item written since, here or by another process). Then
    /// the sync is done — an empty report, the time of this sync noted — after one `git fetch`.
    /// nil: anything else (a change on either side, no sync completed yet, a fetch that failed), for
    /// `sync` to do in full.
    public func quickSync() throws(SyncError) -> SyncReport? {
        try exclusive(recovering: false) { () throws(SyncError) -> SyncReport? in
            guard let recorded = try value("quick"), let repository = try? repository() else { return nil }
            guard let fingerprint = try? keychain.syncFingerprint(), (try? repository.fetch()) == true else { return nil }
            fetchedByQuickSync = true
            guard let revisions = try? repository.revisions(), let head = revisions.head, revisions.remote == head,
                  ConstantTime.equals(recorded, Array(head.utf8) + fingerprint) else { return nil }
            fetchedByQuickSync = false
            // The time goes to a file beside the work tree: no keychain write (and its fsync) for
            // a sync that changed nothing. `status` shows the later of the two.
            let stamp = open(workTree + ".checked", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            if stamp >= 0 { close(stamp) }
            if try value("error") != nil { try setValue("error", nil) }
            return SyncReport()
        }
    }

    /// When the last sync completed (ms since 1970): the keychain's record of the last full sync,
    /// or the time a quick one last found nothing to do, whichever is later.
    private func lastSync() throws(SyncError) -> UInt64? {
        let full = try integer("last")
        var info = stat()
        guard stat(workTree + ".checked", &info) == 0 else { return full }
        let checked = UInt64(max(info.st_mtim.tv_sec, 0)) * 1000 + UInt64(max(info.st_mtim.tv_nsec, 0) / 1_000_000)
        return max(full ?? 0, checked)
    }

    /// What `quickSync` compares, recorded after a sync that completed: the work tree's commit when
    /// it is the remote's, and the keychain's fingerprint when only this sync wrote to it (nil
    /// forgets the record: the next sync runs in full).
    private func quickRecord(_ repository: GitRepository, fingerprint: [UInt8]?) -> [UInt8]? {
        guard let fingerprint, let revisions = try? repository.revisions(), let head = revisions.head, revisions.remote == head else { return nil }
        return Array(head.utf8) + fingerprint
    }

    private func syncLocked(forcingManifest: Bool = false) throws(SyncError) -> SyncReport {
        do {
            var report = try syncRound(forcingManifest: forcingManifest)
            report.devicesRemoved = try removeLeavingDevices()
            if report.settled > 0 { try setInteger("settled", (try integer("settled") ?? 0) + UInt64(report.settled)) }
            if try value("error") != nil { try setValue("error", nil) }
            return report
        } catch {
            try? setValue("error", Array(error.reason.utf8))
            try? setInteger("failed", Self.nowMilliseconds())
            throw error
        }
    }

    /// `forcingManifest`: write this device's manifest over every file it checked even when it
    /// sends nothing (a removal, whose commit must vouch for the removed device's last items).
    private func syncRound(forcingManifest: Bool) throws(SyncError) -> SyncReport {
        let repository = try repository()
        guard let me = try deviceID(), let genesis = try value("genesis") else { throw SyncError(.malformed, "this keychain is in no circle") }
        let identity = try identity()
        var report = SyncReport()
        for attempt in 0...Self.maximumRetries {
            try fetchAndMerge(repository, fetching: attempt > 0 || !fetchedByQuickSync)
            fetchedByQuickSync = false
            let members = try CircleLog.verify(try logFiles(repository), genesis: genesis)
            guard let myKey = members.members[Hex.string(me)] else {
                if members.removed.contains(Hex.string(me)) {
                    throw SyncError(.withheld, "this device was removed from the circle: 'keychainctl sync leave --local' forgets the circle here")
                }
                throw SyncError(.withheld, "this device is not a member of the circle (yet): a member approves it with the pairing code")
            }
            guard myKey == identity.publicKeyInfo else { throw SyncError(.tampered, "the circle lists another key for this device") }
            let forceManifest = forcingManifest || !leavingRequests(repository, members: members, me: me).isEmpty
            if try value("circle") != members.circle { try setValue("circle", members.circle) }
            // Every generation's key wrapped to this device that it does not hold yet.
            for generation in UInt32(1)...max(1, members.generation) where try secret("key.\(generation)") == nil {
                if let wrapped = WorkTreeFiles.read(repository.path("circle/keys/\(generation)/\(Hex.string(me))")) {
                    try setSecret("key.\(generation)", try CircleKeyWrap.unwrap(wrapped, generation: generation, circle: members.circle, device: me,
                                                                                identity: identity, wrappers: members.wrappers(of: generation)))
                }
            }
            guard let currentKeys = try circleKeys(members.generation) else {
                throw SyncError(.unknownGeneration, "the circle's current key is not wrapped to this device (not approved yet?)")
            }
            var keyCache: [UInt32: CircleKeys] = [members.generation: currentKeys]
            for generation in UInt32(1)..<members.generation { if let keys = try circleKeys(generation) { keyCache[generation] = keys } }
            let lookup: (UInt32) -> CircleKeys? = { keyCache[$0] }
            let names = try names()

            // The remote's manifests and files, checked before anything is applied.
            var manifests: [SyncManifest] = []
            for name in WorkTreeFiles.list(repository.path("manifests")) {
                guard let device = Hex.bytes(Array(name.utf8)), let key = members.members[name],
                      let file = WorkTreeFiles.read(repository.path("manifests/\(name)")) else { continue }  // a removed device's manifest
                manifests.append(try SyncManifest.open(file, device: device, publicKeyInfo: key, keys: lookup))
            }
            // The item files, read and hashed on every processor.
            var files: [String: [UInt8]] = [:]
            var fileDigests: [String: [UInt8]] = [:]
            let itemNames = WorkTreeFiles.list(repository.path("items"))
            let read = Parallel.map(itemNames) { name -> (file: [UInt8]?, digest: [UInt8]?) in
                let file = WorkTreeFiles.read(repository.path("items/\(name)"))
                return (file, file.flatMap { try? SyncManifest.digest(of: $0) })
            }
            for (name, (file, digest)) in zip(itemNames, read) {
                files[name] = file
                fileDigests[name] = digest
            }
            var remembered: [String: UInt64] = [:]
            for device in members.members.keys where device != Hex.string(me) { if let seen = try integer("seen.\(device)") { remembered[device] = seen } }
            if let own = try integer("counter") { remembered[Hex.string(me)] = own }
            let checked = try RemoteCheck.check(manifests: manifests, remembered: remembered, files: files, digests: fileDigests)
            // Opened on every processor, with the digest of each record (what this device then knows of it).
            let listed = checked.listed.filter { files[$0.key] != nil }.sorted { $0.key < $1.key }
            let opened = Parallel.map(listed) { name, entry -> Result<(item: SyncItem, digest: [UInt8]), SyncError> in
                do throws(SyncError) {
                    guard let file = files[name] else { throw SyncError(.withheld, "items/\(name) is gone") }
                    let item = try SyncItemFile.open(file, name: name, listedVersion: entry.version, names: names, keys: lookup)
                    return .success((item, item.state.deleted ? [] : try SyncManifest.digest(of: item.record)))
                } catch {
                    return .failure(error)
                }
            }
            var remote: [[UInt8]: (name: String, item: SyncItem, digest: [UInt8])] = [:]
            for ((name, _), result) in zip(listed, opened) {
                let (item, digest) = try result.get()
                remote[item.state.uid] = (name, item, digest)
            }

            // What this device knew at its last sync, and what it holds now.
            var known = try knownStates()
            // What was applied here is remembered at once (a sync killed before its push must not
            // take those items for changes of this device next time); this device's own changes
            // only once pushed (else they would never be sent).
            var appliedKnown = known
            var local: [[UInt8]: SynchronizableItem] = [:]
            let localItems: [SynchronizableItem]
            let master = try unlocked()
            // Read before the items: a write after it shows as a changed fingerprint.
            let startFingerprint: [UInt8]
            do { startFingerprint = try keychain.syncFingerprint() } catch { throw SyncError(.malformed, "reading the keychain: \(error.reason)") }
            // Rows not written since the last sync (the seal it recorded) are not opened again.
            var knownSeals: [[UInt8]: [UInt8]] = [:]
            for (uid, state) in known where !state.state.deleted { if let seal = state.seal { knownSeals[uid] = seal } }
            do { localItems = try keychain.synchronizableItems(master: master, unchangedSince: knownSeals) } catch {
                throw SyncError(.malformed, "reading the keychain: \(error.reason)")
            }
            for item in localItems { local[item.uid] = item }
            defer { for uid in Array(local.keys) { local[uid]?.record.withUnsafeMutableBytes { wipe($0) } } }

            // First what this device changed and how each item settles, then the stores.
            var outgoing: [[UInt8]: (state: SyncItemState, record: SecureBytes)] = [:]
            var incoming: [[UInt8]] = []
            let uids = Set(remote.keys).union(local.keys).union(known.keys)
            for uid in uids.sorted(by: { $0.lexicographicallyPrecedes($1) }) {
                let before = known[uid]
                let remoteState = remote[uid]?.item.state
                let base = max(before?.state.version ?? 0, remoteState?.version ?? 0)
                // A change here since the last sync: an edit (the record differs) or a delete.
                var change: (state: SyncItemState, record: SecureBytes)?
                if let item = local[uid], item.unchanged {
                    // The row the last sync knew, not written since: no change here.
                } else if let item = local[uid] {
                    let digest = try SyncManifest.digest(of: item.record)
                    if let before, before.digest == digest, !before.state.deleted {
                        known[uid]?.seal = item.seal  // unchanged: the next sync need not open it
                    }
                    if before == nil || before?.digest != digest || before?.state.deleted == true {
                        let modified = max(UInt64(max(item.modified, 0)) * 1000, (before?.state.modified ?? 0) + 1)
                        change = (SyncItemState(uid: uid, version: base + 1, modified: modified, writer: me, deleted: false), SecureBytes(item.record))
                    }
                } else if let before, !before.state.deleted {
                    change = (SyncItemState(uid: uid, version: base + 1, modified: max(Self.nowMilliseconds(), before.state.modified + 1), writer: me,
                                            deleted: true), SecureBytes(count: 0))
                }
                if let proposed = change, let remoteState, remoteState != before?.state {
                    // Both changed it since this device's last sync: the merge rule settles it.
                    report.settled += 1
                    if !SyncMerge.wins(proposed.state, over: remoteState) { change = nil }
                }
                if let change {
                    outgoing[uid] = change
                } else if let remoteState, remoteState != before?.state {
                    incoming.append(uid)
                }
            }

            // Another device's versions, stored here. One that collides with another item here
            // (the same account and service, say, added on two devices) settles by the merge
            // rule between the two items' states: the loser is deleted, on every device alike.
            func state(of uid: [UInt8]) -> SyncItemState? { outgoing[uid]?.state ?? known[uid]?.state }
            func tombstone(_ uid: [UInt8], after state: SyncItemState) -> (state: SyncItemState, record: SecureBytes) {
                (SyncItemState(uid: uid, version: state.version + 1, modified: max(Self.nowMilliseconds(), state.modified + 1), writer: me, deleted: true),
                 SecureBytes(count: 0))
            }
            // One uid from `incoming`: stored, removed, or settled against the item it collides with.
            // Items prepared to store (`Keychain.prepareSynchronized`), a batch at a time.
            var prepared: [[UInt8]: PreparedSynchronizedItem] = [:]
            var contextIsStale = false
            func apply(_ uid: [UInt8]) throws(SyncError) {
                guard let (name, item, digest) = remote[uid] else { return }
                var applied = false
                for _ in 0..<2 where !applied {
                    let failure: KeychainError?
                    var seal: [UInt8]?
                    do throws(KeychainError) {
                        if item.state.deleted {
                            try keychain.removeSynchronized(uid: uid, master: master)
                        } else {
                            if let ready = prepared.removeValue(forKey: uid) {
                                seal = try keychain.applySynchronized(ready, master: master)
                                // The keychain's keys were made again (a failed write drops them):
                                // the next batches are prepared with the new ones.
                                if seal == nil { contextIsStale = true }
                            }
                            if seal == nil {
                                seal = try keychain.applySynchronized(uid: uid, record: item.record, modified: item.state.modifiedSeconds, master: master)
                            }
                        }
                        failure = nil
                    } catch {
                        failure = error
                    }
                    guard let failure else {
                        applied = true
                        report.received += 1
                        known[uid] = KnownState(state: item.state, digest: digest, seal: seal)
                        appliedKnown[uid] = KnownState(state: item.state, digest: digest, seal: seal)
                        break
                    }
                    guard failure.code == .duplicateItem else { throw SyncError(.malformed, "storing an item from the circle: \(failure.reason)") }
                    let other: [UInt8]?
                    do { other = try keychain.synchronizedCollision(record: item.record, master: master) } catch {
                        throw SyncError(.malformed, "storing an item from the circle: \(error.reason)")
                    }
                    guard let other, other != uid, let otherState = state(of: other) else {
                        report.skipped.append(name)  // another item here that does not sync has its name
                        break
                    }
                    report.settled += 1
                    if SyncMerge.wins(item.state, over: otherState) {
                        do { try keychain.removeSynchronized(uid: other, master: master) } catch {
                            throw SyncError(.malformed, "storing an item from the circle: \(error.reason)")
                        }
                        outgoing[other] = tombstone(other, after: otherState)
                        continue  // and store the winner
                    }
                    outgoing[uid] = tombstone(uid, after: item.state)
                    break
                }
            }
            // In batches of `applyBatch`, each one keychain transaction with the record of what was
            // applied: a batch is stored whole or not at all. The keychain's fingerprint is followed
            // from batch to batch: when no other writer came in between, the fingerprint after the
            // last batch is this sync's own, and a later sync with nothing new can say so at once.
            var fingerprint = startFingerprint
            var onlyOurs = true
            // Each batch's items are decoded and their rows made (`Keychain.prepareSynchronized`)
            // on the other processors while the batch before is stored; one that fails there is
            // stored the long way, which reports why.
            // Changed only while no other thread prepares (between batches).
            var context = incoming.isEmpty ? nil : keychain.synchronizedContext(master: master)
            let received = remote  // what the other thread reads: a copy no one changes
            func prepare(_ batch: ArraySlice<[UInt8]>) -> [[UInt8]: PreparedSynchronizedItem] {
                guard let context, !batch.isEmpty else { return [:] }
                let records = batch.compactMap { uid in
                    received[uid].flatMap { $0.item.state.deleted ? nil : SynchronizedRecord(uid: uid, record: $0.item.record, modified: $0.item.state.modifiedSeconds) }
                }
                var ready: [[UInt8]: PreparedSynchronizedItem] = [:]
                for (record, result) in zip(records, keychain.prepareSynchronized(records, context: context)) {
                    if case .success(let item) = result { ready[record.uid] = item }
                }
                return ready
            }
            var next = 0
            var preparedAhead = prepare(incoming[0..<min(Self.applyBatch, incoming.count)])
            while next < incoming.count {
                let batch = incoming[next..<min(next + Self.applyBatch, incoming.count)]
                next = batch.endIndex
                if contextIsStale {
                    // No other thread runs here: the context is read again, the batch prepared again.
                    contextIsStale = false
                    context = keychain.synchronizedContext(master: master)
                    preparedAhead = prepare(batch)
                }
                prepared = preparedAhead
                let following = incoming[next..<min(next + Self.applyBatch, incoming.count)]
                let ahead = Parallel.start { prepare(following) }
                defer { preparedAhead = ahead.join() ?? [:] }
                var failure: SyncError?
                do {
                    try keychain.transaction { () throws(KeychainError) in
                        if try keychain.syncFingerprint() != fingerprint { onlyOurs = false }
                        do throws(SyncError) {
                            let before = report.received
                            for uid in batch { try apply(uid) }
                            if report.received > before { try storeKnownStates(appliedKnown) }
                        } catch {
                            failure = error
                            throw KeychainError(.storageFailure, error.reason)
                        }
                        fingerprint = try keychain.syncFingerprint()
                    }
                } catch {
                    throw failure ?? SyncError(.malformed, "storing items from the circle: \(error.reason)")
                }
            }
            for (uid, change) in outgoing {
                // A change of a row read here keeps that row's seal (written again before the next
                // sync, the row has another and is opened); a tombstone none.
                let seal = change.state.deleted ? nil : local[uid].flatMap { $0.unchanged ? nil : $0.seal }
                known[uid] = KnownState(state: change.state, digest: change.state.deleted ? [] : try SyncManifest.digest(of: change.record), seal: seal)
            }

            // Whether this sync writes anything to the work tree (else nothing to add or commit).
            var wrote = !outgoing.isEmpty
            // This device's name, sealed (members read it in `sync status`, the remote does not).
            if let name = try value("name") {
                let path = repository.path("circle/names/\(Hex.string(me))")
                let stored = WorkTreeFiles.read(path).flatMap { try? DeviceNames.open($0, device: me, names: names) }
                if stored != String(decoding: name, as: UTF8.self) {
                    wrote = true
                    try WorkTreeFiles.makeDirectory(repository.path("circle/names"))
                    try WorkTreeFiles.write(try DeviceNames.seal(String(decoding: name, as: UTF8.self), device: me, names: names), to: path)
                }
            }

            // This device's new versions, then its manifest over every file it now holds (`files`:
            // what the check read, with this sync's files in place of the ones they replace).
            try WorkTreeFiles.makeDirectory(repository.path("items"))
            for change in outgoing.values {
                let name = try names.name(for: change.state.uid)
                let file = try SyncItemFile.seal(SyncItem(state: change.state, record: change.record), name: name, keys: currentKeys)
                try WorkTreeFiles.writeForCommit(file, to: repository.path("items/\(name)"))
                files[name] = file
            }
            // A new manifest when this device sends something, when the generation moved, or when
            // forced (a removal): a sync that only receives writes none, commits nothing and pushes
            // nothing — the writers' manifests list what it received — and neither does a sync with
            // nothing new. (Its own manifest then lists older versions of others' files: the check
            // takes the newest version any manifest lists.)
            var counter = try integer("counter") ?? 0
            let current = manifests.first { $0.device == me }
            let newManifest = !outgoing.isEmpty || current == nil || current?.generation != members.generation
            if newManifest || forceManifest {
                for change in outgoing.values { fileDigests[try names.name(for: change.state.uid)] = nil }
                var entries: [SyncManifest.Entry] = []
                for (name, file) in files {
                    let digest: [UInt8]
                    if let read = fileDigests[name] { digest = read } else { digest = try SyncManifest.digest(of: file) }
                    entries.append(SyncManifest.Entry(name: name, version: try SyncItemFile.header(file, name: name).version, digest: digest))
                }
                if newManifest || current?.entries != entries {
                    let manifest = SyncManifest(device: me, counter: counter + 1, generation: members.generation, entries: entries)
                    counter = manifest.counter
                    try WorkTreeFiles.makeDirectory(repository.path("manifests"))
                    try WorkTreeFiles.writeForCommit(try manifest.sealed(keys: currentKeys, signer: identity), to: repository.path("manifests/\(Hex.string(me))"))
                    wrote = true
                }
            }
            if wrote { try repository.commitAll("sync") }
            let pushed: GitRepository.PushResult = try repository.hasUnpushedCommits() ? try repository.push() : .pushed
            switch pushed {
            case .pushed:
                // What this sync leaves for the next, in one keychain transaction (the refs read
                // before it: no git runs while it holds the keychain).
                let quick = quickRecord(repository, fingerprint: onlyOurs ? fingerprint : nil)
                try inOneTransaction { () throws(SyncError) in
                    if try integer("counter") != counter { try setInteger("counter", counter) }
                    for (device, seen) in checked.counters where device != Hex.string(me) {
                        if try integer("seen.\(device)") != seen { try setInteger("seen.\(device)", seen) }
                    }
                    try storeKnownStates(known)
                    try setInteger("last", Self.nowMilliseconds())
                    try setValue("quick", quick)
                }
                report.sent = outgoing.count
                return report
            case .rejected where attempt < Self.maximumRetries:
                report.retries += 1
                // Undo this round's commit: the next round starts from the remote's state.
                _ = try repository.git(["reset", "-q", "--hard", "origin/main"], allowFailure: true)
                continue
            case .rejected:
                throw SyncError(.malformed, "the remote kept changing: try again")
            case .failed(let reason):
                throw SyncError(.malformed, "git push: \(reason)")
            }
        }
        throw SyncError(.malformed, "the remote kept changing: try again")
    }

    // MARK: helpers

    /// Fetches and merges; paths both sides changed are settled: an item file by the merge rule,
    /// this device's own manifest by this device, anything else by the remote's side.
    /// `fetching` false: `origin/main` was fetched a moment ago (by `quickSync`); merge it.
    private func fetchAndMerge(_ repository: GitRepository, fetching: Bool = true) throws(SyncError) {
        if fetching {
            try repository.prepare()
            guard try repository.fetch() else { return }
        }
        let conflicts = try repository.mergeFetched()
        guard !conflicts.isEmpty else { return }
        for path in conflicts {
            let sides = try repository.conflictSides(path)
            var chosen = sides.theirs
            if path.hasPrefix("items/"), let ours = sides.ours, let theirs = sides.theirs {
                let name = String(path.dropFirst("items/".count))
                if let ourHeader = try? SyncItemFile.header(ours, name: name), let theirHeader = try? SyncItemFile.header(theirs, name: name) {
                    // Both sides are checked fully after the merge; here only which to keep.
                    chosen = ourHeader.version > theirHeader.version ? ours : theirs
                }
            } else if let me = try deviceID(), path == "manifests/\(Hex.string(me))" {
                chosen = sides.ours
            }
            if let chosen { try WorkTreeFiles.write(chosen, to: repository.path(path)) } else { unlink(repository.path(path)) }
        }
        try repository.commitAll("merge")
    }

    private func logFiles(_ repository: GitRepository) throws(SyncError) -> [[UInt8]] {
        var files: [[UInt8]] = []
        while let file = WorkTreeFiles.read(repository.path("circle/log/\(files.count)")) { files.append(file) }
        return files
    }

    private func publish(_ repository: GitRepository, message: String) throws(SyncError) {
        for _ in 0...Self.maximumRetries {
            try repository.commitAll(message)
            switch try repository.push() {
            case .pushed: return
            case .rejected: try fetchAndMerge(repository)
            case .failed(let reason): throw SyncError(.malformed, "git push: \(reason)")
            }
        }
        throw SyncError(.malformed, "the remote kept changing: try again")
    }

    private func random(_ count: Int) throws(SyncError) -> [UInt8] {
        do { return try Random.bytes(count) } catch { throw SyncError(.crypto, "the random generator failed") }
    }

    static func nowMilliseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return UInt64(max(now.tv_sec, 0)) * 1000 + UInt64(max(now.tv_nsec, 0) / 1_000_000)
    }

    // What this device knew of each item at its last sync: its state, the SHA-256 of its record
    // (so a local edit shows as a different digest) and, where known, the seal of the row that
    // held that record (`Keychain.rowSeal`: a row that still has it is not opened again), sealed in
    // the keychain. Each entry: uid (16) ‖ version (u64) ‖ modified (u64) ‖ writer (16) ‖ flags
    // (1: deleted; 2: a seal follows the digest) ‖ digest length (1) ‖ digest ‖ [seal (16)].
    struct KnownState {
        let state: SyncItemState
        let digest: [UInt8]
        var seal: [UInt8]? = nil
    }

    private func knownStates() throws(SyncError) -> [[UInt8]: KnownState] {
        guard let sealed = try secret("known") else { return [:] }
        return sealed.withUnsafeBytes { raw in
            var reader = ByteReader(Array(raw))
            var states: [[UInt8]: KnownState] = [:]
            while reader.remaining > 0 {
                guard let uid = reader.take(16), let version = reader.uint64(), let modified = reader.uint64(), let writer = reader.take(16),
                      let flags = reader.uint8(), let length = reader.uint8(), let digest = reader.take(Int(length)) else { break }
                var seal: [UInt8]?
                if flags & 2 != 0 {
                    guard let stored = reader.take(16) else { break }
                    seal = stored
                }
                states[uid] = KnownState(state: SyncItemState(uid: uid, version: version, modified: modified, writer: writer, deleted: flags & 1 != 0),
                                         digest: digest, seal: seal)
            }
            return states
        }
    }

    private func storeKnownStates(_ states: [[UInt8]: KnownState]) throws(SyncError) {
        var writer = ByteWriter()
        for (uid, known) in states.sorted(by: { $0.key.lexicographicallyPrecedes($1.key) }) {
            writer.append(uid)
            writer.append(known.state.version)
            writer.append(known.state.modified)
            writer.append(known.state.writer)
            let seal = known.seal.flatMap { $0.count == 16 ? $0 : nil }
            writer.append((known.state.deleted ? UInt8(1) : 0) | (seal != nil ? 2 : 0))
            writer.append(UInt8(known.digest.count))
            writer.append(known.digest)
            if let seal { writer.append(seal) }
        }
        try setSecret("known", SecureBytes(writer.bytes))
    }
}
