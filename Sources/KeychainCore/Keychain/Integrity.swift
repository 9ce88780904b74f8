import Glibc
import KeychainCrypto
import KeychainStore

/// The keychain's integrity manifest: what every current-format row must be, so that rows rolled
/// back, removed or added outside this software are detected (Docs/security.md, "the file").
///
/// Each row contributes a 128-bit keyed digest of (uid, class, protection, epoch, index
/// commitment) to
/// one of 64 buckets (by the top six bits of the uid's first byte): a bucket holds the XOR of its
/// rows' digests. The manifest holds the keychain's epoch (one more at every write) and the 64
/// sums (about 1 KiB: it fits in the meta row's page, so a write adds no overflow page), under an
/// HMAC whose key comes from the Always key (the device key or the master key opens it; the file
/// alone does not). Checking an object re-reads only its bucket; a row older than the manifest
/// says, or missing, or foreign, changes its bucket's sum.
///
/// Layout: "KCM2" ‖ epoch (8, big-endian) ‖ 64 × 16 bucket sums ‖ HMAC-SHA-256 (32).
struct Manifest: Equatable {
    static let magic = Array("KCM2".utf8)
    static let bucketSize = 16
    static let bucketCount = 64

    /// The bucket of a row: the top six bits of its uid's first byte.
    static func bucket(of uid: [UInt8]) -> UInt8 { (uid.first ?? 0) >> 2 }

    /// The uid first bytes of a bucket.
    static func firstBytes(of bucket: UInt8) -> ClosedRange<UInt8> { (bucket << 2)...(bucket << 2 | 3) }
    static let encodedSize = 4 + 8 + bucketCount * bucketSize + 32

    var epoch: UInt64
    var sums: [UInt8]

    static func empty(epoch: UInt64) -> Manifest { Manifest(epoch: epoch, sums: [UInt8](repeating: 0, count: bucketCount * bucketSize)) }

    func body() -> [UInt8] { Self.magic + withUnsafeBytes(of: epoch.bigEndian) { Array($0) } + sums }

    func encoded(mac: KeyedMAC) throws -> [UInt8] {
        let body = body()
        return body + (try body.withUnsafeBytes { try mac.mac($0) })
    }

    /// The stored manifest, if its HMAC verifies.
    static func decode(_ bytes: [UInt8], mac: KeyedMAC) throws -> Manifest? {
        guard bytes.count == encodedSize, Array(bytes.prefix(4)) == magic else { return nil }
        let body = Array(bytes.prefix(encodedSize - 32))
        let expected = try body.withUnsafeBytes { try mac.mac($0) }
        guard ConstantTime.equals(expected, Array(bytes.suffix(32))) else { return nil }
        let epoch = bytes[4..<12].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Manifest(epoch: epoch, sums: Array(bytes[12..<(12 + bucketCount * bucketSize)]))
    }

    func sum(_ bucket: UInt8) -> ArraySlice<UInt8> {
        sums[Int(bucket) * Self.bucketSize..<(Int(bucket) + 1) * Self.bucketSize]
    }

    mutating func toggle(_ state: RowState, mac: KeyedMAC) throws {
        let digest = try Self.digest(state, mac: mac)
        let start = Int(Self.bucket(of: state.uid)) * Self.bucketSize
        for i in 0..<Self.bucketSize { sums[start + i] ^= digest[i] }
    }

    static func digest(_ state: RowState, mac: KeyedMAC) throws -> [UInt8] {
        var message = Array("row".utf8)
        message.append(UInt8(truncatingIfNeeded: state.uid.count))
        message += state.uid
        message += withUnsafeBytes(of: state.objectClass.bigEndian) { Array($0) }
        message.append(state.protection)
        message += withUnsafeBytes(of: state.epoch.bigEndian) { Array($0) }
        // Not the record itself: its AES-GCM tag already binds it to uid, class, protection, epoch
        // and commitment, so a damaged record fails alone, and an older one cannot carry the new epoch.
        message += state.indexCommit
        return Array(try message.withUnsafeBytes { try mac.mac($0) }.prefix(bucketSize))
    }

    static func sum(of states: [RowState], mac: KeyedMAC) throws -> [UInt8] {
        var sum = [UInt8](repeating: 0, count: bucketSize)
        for state in states {
            let digest = try digest(state, mac: mac)
            for i in 0..<bucketSize { sum[i] ^= digest[i] }
        }
        return sum
    }
}

/// Whether the device's epoch record was read before a snapshot (and what it said).
enum EpochReading {
    case notNeeded
    case read(UInt64?)
}

/// What this process has checked of one keychain's manifest, valid while the file is unchanged.
struct IntegrityCache {
    var stamp: ChangeStamp
    var manifest: Manifest?
    var verified: Set<UInt8>
}

extension Keychain {
    static let manifestMeta = "integrity.manifest"

    /// The manifest's HMAC key: from the Always key, which the device key or the master key opens.
    func integrityMAC(master: MasterKey?, creating: Bool) throws(KeychainError) -> KeyedMAC {
        let always: RecordKeys
        do { always = try alwaysRecordKeys(master: master, creating: false) } catch where creating && error.code == .objectNotFound {
            // A keychain of an earlier build without an Always key: its first write makes one.
            always = try alwaysRecordKeys(master: master, creating: true)
        }
        if let cached = integrityMACCache, cached.base === always { return cached.mac }
        let mac = try translatingErrors {
            try KeyedMAC(key: try KeyDerivation.hkdf(key: always.recordBase, salt: [], info: Array("keychain-pkcs11 manifest".utf8)), algorithm: .sha256)
        }
        integrityMACCache = (always, mac)
        return mac
    }

    /// The stored manifest, its HMAC checked; nil for a keychain that never had one (no
    /// current-format row), or when there is no `mac` to check it with. A manifest altered, or
    /// missing while current-format rows need it, is damage.
    func storedManifest(mac: KeyedMAC?) throws -> Manifest? {
        if let deferred = deferredManifest {
            if let mac, deferred.mac === mac { return deferred.manifest }
            // Inside a transaction whose writes left it in memory, under a key object made again
            // since (a failed nested transaction drops the cached keys): stored first, so that
            // what is read below is what the rows now are.
            try storeDeferredManifest()
        }
        guard let stored = try store.metaBlob(Self.manifestMeta) else {
            guard try !store.hasCurrentFormatRows() else {
                throw KeychainError(.recordCorrupted, "the keychain's integrity manifest is missing while its records need one: the file was altered")
            }
            return nil
        }
        guard let mac else { return nil }
        if let verified = verifiedManifest, verified.mac === mac, verified.bytes == stored { return verified.manifest }
        guard let manifest = try Manifest.decode(stored, mac: mac) else {
            throw KeychainError(.recordCorrupted, "the keychain's integrity manifest was altered or damaged: 'keychainctl verify' checks the keychain")
        }
        verifiedManifest = (mac, stored, manifest)
        return manifest
    }

    /// Inside a write transaction: the stored manifest; a keychain without one gets a new one
    /// (a new keychain, or one from an earlier build, whose rows are then covered from their next
    /// write on), starting at the epoch this device has recorded.
    func manifestForWrite(mac: KeyedMAC) throws -> Manifest {
        let seen = epochCounter.read()
        guard let manifest = try storedManifest(mac: mac) else { return Manifest.empty(epoch: seen ?? 0) }
        try checkNotRolledBack(manifest, seen: seen)
        return manifest
    }

    /// Stores `manifest` after a write that moved the keychain to `manifest.epoch`.
    func storeManifest(_ manifest: Manifest, mac: KeyedMAC) throws {
        let encoded = try manifest.encoded(mac: mac)
        try store.setMeta(Self.manifestMeta, blob: encoded)
        verifiedManifest = (mac, encoded, manifest)
    }

    /// Stores the manifest the writes of the open transaction left in memory, if any.
    func storeDeferredManifest() throws {
        guard let deferred = deferredManifest else { return }
        deferredManifest = nil
        try storeManifest(deferred.manifest, mac: deferred.mac)
    }

    /// After a committed write: the device's record of this keychain's epoch moves on. What this
    /// process had checked is checked again (another process may have written in between).
    func didCommitWrite(_ manifest: Manifest) {
        epochCounter.raise(to: manifest.epoch)
        integrityCache = nil
    }

    /// Checks the manifest against the device's record of this keychain's epoch. `seen` must be
    /// read before the snapshot the manifest comes from began (the record is raised after each
    /// commit, so it never runs ahead of a snapshot taken after it was read); a write transaction
    /// sees the newest state and may read it inside.
    func checkNotRolledBack(_ manifest: Manifest, seen: UInt64?) throws {
        if let seen, manifest.epoch < seen {
            throw KeychainError(.recordCorrupted, "this keychain file is older than one this device has seen (epoch \(manifest.epoch) < \(seen)): it was replaced by an older copy. If you restored it on purpose, run 'keychainctl verify --accept-older-copy'")
        }
    }

    /// The device's epoch record, read before a snapshot begins — only when this process's view
    /// of the manifest is stale (a fresh view needs no new rollback check).
    func epochBeforeSnapshot() -> EpochReading {
        if let cache = integrityCache, let stamp = try? store.changeStamp(), cache.stamp == stamp { return .notNeeded }
        return .read(epochCounter.read())
    }

    /// Checks that `rows` are what the manifest says: their buckets' rows sum to the stored sums.
    /// `allBuckets` checks every bucket (listings: a row removed from a bucket with no other
    /// reader would otherwise go unnoticed).
    func checkIntegrity(of rows: [ObjectRow], master: MasterKey?, allBuckets: Bool = false, seenEpoch reading: EpochReading) throws(KeychainError) {
        // Every row's bucket, old-format rows included: a current row turned into an old-format
        // one on disk drops out of its bucket's sum.
        let current = rows.filter { $0.recordVersion >= SealedRecord.currentVersion }
        guard !rows.isEmpty || allBuckets else { return }
        try translatingErrors {
            let stamp = try store.changeStamp()
            if let cache = integrityCache, cache.stamp == stamp {
                integrityCache = try verifyBuckets(rows, current: current, allBuckets: allBuckets, cache: cache, master: master)
                return
            }
            // Without the device key or a login there is no manifest key, and no record that
            // could be checked opens either (nothing is cached then).
            let mac = try? integrityMAC(master: master, creating: false)
            let manifest = try storedManifest(mac: mac)
            guard mac != nil else { return }
            let fresh = IntegrityCache(stamp: stamp, manifest: manifest, verified: [])
            guard case .read(let seen) = reading else {
                // The file changed since this call looked: check the buckets, but leave the
                // rollback check (and the cache) to the next call, which reads first.
                try verifyBuckets(rows, current: current, allBuckets: allBuckets, cache: fresh, master: master)
                return
            }
            if let manifest { try checkNotRolledBack(manifest, seen: seen) }
            integrityCache = try verifyBuckets(rows, current: current, allBuckets: allBuckets, cache: fresh, master: master)
        }
    }

    /// Re-sums the buckets of `rows` (all buckets for a listing) not yet verified in `cache`.
    @discardableResult
    private func verifyBuckets(_ rows: [ObjectRow], current: [ObjectRow], allBuckets: Bool, cache: IntegrityCache, master: MasterKey?) throws -> IntegrityCache {
        var checked = cache
        guard let manifest = checked.manifest else { return checked }
        let buckets: [UInt8] = allBuckets ? Array(0..<UInt8(Manifest.bucketCount)) : Array(Set(rows.map { Manifest.bucket(of: $0.uid) }))
        guard let mac = try? integrityMAC(master: master, creating: false) else { return checked }
        for row in current where row.epoch > manifest.epoch {
            throw KeychainError(.recordCorrupted, "object \(row.id) claims a later write than the keychain has seen: the file was altered")
        }
        for bucket in buckets where !checked.verified.contains(bucket) {
            let sum = try Manifest.sum(of: try store.rowStates(firstBytes: Manifest.firstBytes(of: bucket)), mac: mac)
            guard ConstantTime.equals(sum, Array(manifest.sum(bucket))) else {
                throw KeychainError(.recordCorrupted, "records of this keychain (uid bucket \(bucket)) were rolled back, removed or added outside this software")
            }
            checked.verified.insert(bucket)
        }
        return checked
    }

    /// `keychainctl verify`: every bucket against the manifest, then every object opened.
    public func verifyIntegrity(master: MasterKey?) throws(KeychainError) -> Int {
        try lock.withLock { () throws(KeychainError) -> Int in
            integrityCache = nil
            let seen = epochBeforeSnapshot()
            let rows = try translatingErrors {
                try store.read { () throws -> [ObjectRow] in
                    let rows = try store.findObjects(protections: Protection.allCases.map(\.rawValue), objectClass: nil, terms: [], withRecords: true)
                    try checkIntegrity(of: rows, master: master, allBuckets: true, seenEpoch: seen)
                    return rows
                }
            }
            var opened = 0
            for row in rows {
                do throws(KeychainError) {
                    _ = try open(row, master: master)
                    opened += 1
                } catch where error.code == .objectNotFound || error.code == .protectionUnavailable || error.code == .deviceKeyUnavailable {
                    continue
                }
            }
            return opened
        }
    }

    /// Accepts this file as it is now, older than the device remembers (a backup restored on
    /// purpose): the device's record goes back to the file's epoch.
    public func acceptOlderCopy(master: MasterKey?) throws(KeychainError) {
        try lock.withLock { () throws(KeychainError) -> Void in
            let mac = try integrityMAC(master: master, creating: false)
            guard let manifest = try translatingErrors({ try storedManifest(mac: mac) }) else { return }
            epochCounter.reset(to: manifest.epoch)
            integrityCache = nil
        }
    }
}

/// The device's record of a keychain's epoch: a small file beside the device key (outside the
/// keychain folder), raised after every write. A keychain file whose manifest is older was
/// replaced by an older copy. Written without fsync: a lost update makes the record lag, which
/// can only hide a rollback to a very recent state, never flag a good file. The file stays open
/// while the keychain is (one pread per check, flock + pread + pwrite per write).
///
/// One record per keychain salt *and* file location: a copy of a keychain beside it (same salt,
/// another path) keeps its own record, so writes to the copy never make the original look
/// rolled back. A record of the salt alone (written by earlier builds) is read as the starting
/// point until the location has a record of its own.
final class EpochCounter {
    let path: String?
    private let legacyPath: String?
    private var fd: Int32 = -1

    init(deviceKeyPath: String, keychainSalt: [UInt8], keychainPath: String) {
        let folder = deviceKeyPath.lastIndex(of: "/").map { String(deviceKeyPath[..<$0]) } ?? "."
        let location = realpath(keychainPath, nil).map { resolved in defer { free(resolved) }; return String(cString: resolved) } ?? keychainPath
        func record(_ name: [UInt8]) -> String? {
            (try? Digest.hash(.sha256, Array("keychain-pkcs11 epoch".utf8) + name)).map { folder + "/epochs/" + String(decoding: Hex.digits($0.prefix(16)), as: UTF8.self) }
        }
        path = record(keychainSalt + [0] + Array(location.utf8))
        legacyPath = record(keychainSalt)
    }

    deinit { if fd >= 0 { System.close(fd) } }

    private func descriptor(create: Bool) -> Int32? {
        if fd >= 0 { return fd }
        guard let path else { return nil }
        if create {
            let folder = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])
            let parent = String(folder[..<(folder.lastIndex(of: "/") ?? folder.endIndex)])
            try? System.mkdir(parent, mode: 0o700)
            try? System.mkdir(folder, mode: 0o700)
        }
        guard let opened = try? System.open(path, O_RDWR | O_NOFOLLOW | (create ? O_CREAT : 0), mode: 0o600) else { return nil }
        fd = opened
        return opened
    }

    private func value(_ fd: Int32) -> UInt64? {
        let buffer = (try? System.pread(fd, count: 32, at: 0)) ?? []
        let length = buffer.count
        guard length > 0 else { return nil }
        return UInt64(String(decoding: buffer.prefix(length).prefix { $0 != 0x0A && $0 != 0x20 }, as: UTF8.self))
    }

    func read() -> UInt64? {
        if let fd = descriptor(create: false) { return value(fd) }
        guard let legacyPath else { return nil }
        guard let legacy = try? System.open(legacyPath, O_RDONLY | O_NOFOLLOW) else { return nil }
        defer { System.close(legacy) }
        return value(legacy)
    }

    func raise(to epoch: UInt64) { write(epoch, onlyUp: true) }
    func reset(to epoch: UInt64) { write(epoch, onlyUp: false) }

    private func write(_ epoch: UInt64, onlyUp: Bool) {
        guard let fd = descriptor(create: true) else { return }
        guard (try? System.flock(fd, LOCK_EX)) != nil else { return }
        defer { try? System.flock(fd, LOCK_UN) }
        if onlyUp, let current = value(fd), current >= epoch { return }
        // Fixed width: a shorter number never leaves digits of a longer one behind.
        var text = Array(String(epoch).utf8)
        while text.count < 20 { text.append(0x20) }
        text.append(0x0A)
        try? System.pwriteAll(fd, text, at: 0)
    }
}
