import KeychainCrypto
import KeychainStore

/// One synchronizable item of this keychain as a sync reads it (Docs/sync.md).
public struct SynchronizableItem: Sendable {
    /// The item's uid, the same on every device of the circle.
    public let uid: [UInt8]
    /// The row's modification time, in seconds since 1970.
    public let modified: Int64
    /// Its attributes as an `AttributeRecord` (unpadded): the caller wipes it. Empty when
    /// `unchanged`.
    public var record: [UInt8]
    /// The row's seal (`Keychain.rowSeal`): it changes with every write of the row.
    public let seal: [UInt8]
    /// The row still has the seal the caller gave for it (`synchronizableItems(unchangedSince:)`):
    /// not opened, its record left out.
    public let unchanged: Bool
}

/// What the sync engine (KeychainSync, keychainctl, keychaind) reads and writes of a keychain: its
/// synchronizable items, items applied from other devices with their own uid and time, and the
/// sync's own state in the `meta` table under `sync.` — secrets sealed under the master key, so
/// a locked keychain cannot sync.
extension Keychain {
    static let syncMetaPrefix = "sync."
    private static let syncSealInfo = Array("keychain-pkcs11 sync state".utf8)

    /// Every token object marked synchronizable that SyncRule lets leave this device, in one snapshot.
    /// A row whose uid `unchangedSince` maps to the row's current seal was not written since the
    /// caller read it synchronizable (the sync's record of what it last knew): it is listed
    /// `unchanged`, without being opened.
    public func synchronizableItems(master: MasterKey, unchangedSince known: [[UInt8]: [UInt8]] = [:]) throws(KeychainError) -> [SynchronizableItem] {
        try lock.withLock { () throws(KeychainError) -> [SynchronizableItem] in
            var items: [SynchronizableItem] = []
            let portable = Protection.allCases.filter { !$0.isDeviceBound }.map(\.rawValue)
            try translatingErrors {
                try store.read {
                    for row in try store.findObjects(protections: portable, objectClass: nil, terms: [], withRecords: true) {
                        let seal = Self.rowSeal(row.record)
                        if seal.count == AESGCM.tagSize, known[row.uid] == seal {
                            items.append(SynchronizableItem(uid: row.uid, modified: row.modified, record: [], seal: seal, unchanged: true))
                            continue
                        }
                        var object = try object(id: row.id, master: master)
                        defer { object.wipeValues() }
                        // The one rule of every door (SyncRule): device-bound items never leave.
                        guard object.bool(.synchronizable), object.syncRefusal == nil else { continue }
                        items.append(SynchronizableItem(uid: row.uid, modified: row.modified, record: AttributeRecord.encode(object.recordAttributes),
                                                        seal: seal, unchanged: false))
                    }
                }
            }
            return items
        }
    }

    /// Stores an item that came from another device: a new row with its uid, or the row with that
    /// uid replaced; the row keeps the writer's modification time. The record must describe a
    /// synchronizable token object that is not bound to a device (anything else is
    /// `.recordCorrupted`: no device writes one). A different item with the same keychain primary
    /// key is `.duplicateItem`, as for any add. Returns the row's seal (`rowSeal`).
    @discardableResult
    public func applySynchronized(uid: [UInt8], record: [UInt8], modified: Int64, master: MasterKey) throws(KeychainError) -> [UInt8] {
        var (object, protection) = try Self.synchronizedObject(record)
        defer { object.wipeValues() }
        guard uid.count == UniqueID.byteCount, object.isToken, object.objectClass != nil, object.bool(.synchronizable), object.syncRefusal == nil,
              !protection.isDeviceBound, object[.uniqueID] == Hex.digits(uid) else {
            throw KeychainError(.recordCorrupted, "a synchronized item is not a synchronizable token object of its own id")
        }
        // The writer's modification time goes into the row with the write itself.
        if let existing = try translatingErrors({ try store.objectID(uid: uid) }) {
            return try replace(id: existing, with: object, master: master, allowingPrivateChange: true, modified: modified)
        }
        return try add(object, uid: uid, master: master, modified: modified).seal
    }

    /// The uid of the item here that has the same keychain primary key as `record` (the same
    /// account and service, say) — the item an apply of `record` collides with — if there is one.
    public func synchronizedCollision(record: [UInt8], master: MasterKey) throws(KeychainError) -> [UInt8]? {
        var (object, protection) = try Self.synchronizedObject(record)
        defer { object.wipeValues() }
        return try lock.withLock { () throws(KeychainError) -> [UInt8]? in
            let keys = try keysForStoring(protection, object: object, master: master)
            return try translatingErrors {
                guard let digest = try primaryKey(object, keys: keys) else { return nil }
                return try store.objectUID(primaryKey: digest)
            }
        }
    }

    /// The object a synchronized record holds and its protection (the caller wipes the object);
    /// `.recordCorrupted` for a record that does not decode or names no protection.
    private static func synchronizedObject(_ record: [UInt8]) throws(KeychainError) -> (ObjectAttributes, Protection) {
        var attributes: [(type: UInt64, value: [UInt8])]
        do { attributes = try record.withUnsafeBytes { try AttributeRecord.decode($0) } } catch {
            throw KeychainError(.recordCorrupted, "a synchronized item's record does not decode")
        }
        var object = ObjectAttributes(recordAttributes: attributes)
        for index in attributes.indices { wipe(&attributes[index].value) }
        do throws(KeychainError) { return (object, try Protection(for: object)) } catch {
            object.wipeValues()
            throw KeychainError(.recordCorrupted, "a synchronized item: \(error.reason)")
        }
    }

    /// Removes the item with `uid` (another device deleted it); nothing when there is none.
    public func removeSynchronized(uid: [UInt8], master: MasterKey) throws(KeychainError) {
        guard let id = try translatingErrors({ try store.objectID(uid: uid) }) else { return }
        try remove(id: id, master: master)
    }

    /// What changes whenever anything a sync reads of this keychain may have changed, readable
    /// without the master key: the integrity manifest's check value (every row write moves the
    /// manifest's epoch, so its HMAC) and whether Secret Service items sync. A sync with nothing
    /// new on either side compares it with the value its last sync recorded (Docs/sync.md).
    public func syncFingerprint() throws(KeychainError) -> [UInt8] {
        try lock.withLock { () throws(KeychainError) -> [UInt8] in
            try translatingErrors {
                try store.read { () throws -> [UInt8] in
                    // Inside a transaction, with the manifest its writes left (as it will commit).
                    try storeDeferredManifest()
                    let manifest = try store.metaBlob(Self.manifestMeta) ?? []
                    let secretService = try store.metaInteger(Self.secretServiceSyncMeta) ?? 0
                    return Array(manifest.suffix(32)) + [UInt8(manifest.count & 0xff), secretService != 0 ? 1 : 0]
                }
            }
        }
    }

    /// A value of the sync's state (`sync.<key>` in the meta table), as stored.
    public func syncValue(_ key: String) throws(KeychainError) -> [UInt8]? {
        try translatingErrors { try store.metaBlob(Self.syncMetaPrefix + key) }
    }

    /// Sets (or with nil removes) a value of the sync's state.
    public func setSyncValue(_ key: String, _ value: [UInt8]?) throws(KeychainError) {
        try lock.withLock { () throws(KeychainError) in try translatingErrors { try store.setMeta(Self.syncMetaPrefix + key, blob: value) } }
    }

    /// A secret of the sync's state (the circle keys, the device's identity key), sealed under a
    /// key derived from the master key, bound to its name.
    public func syncSecret(_ key: String, master: MasterKey) throws(KeychainError) -> SecureBytes? {
        guard let sealed = try syncValue(key) else { return nil }
        do { return try AESGCM.open(sealed, key: try syncSealKey(master), associatedData: Self.syncSealInfo + Array(key.utf8)) } catch {
            throw KeychainError(.recordCorrupted, "the sync state \(key) does not open under this keychain's master key")
        }
    }

    public func setSyncSecret(_ key: String, _ value: SecureBytes?, master: MasterKey) throws(KeychainError) {
        guard let value else { return try setSyncValue(key, nil) }
        let sealed: [UInt8]
        do { sealed = try AESGCM.seal(value, key: try syncSealKey(master), associatedData: Self.syncSealInfo + Array(key.utf8)) } catch {
            throw KeychainError(.storageFailure, "sealing the sync state: \(error)")
        }
        try setSyncValue(key, sealed)
    }

    /// Forgets every value of the sync's state (leaving the circle; a re-initialised keychain).
    public func clearSyncState() throws(KeychainError) {
        try lock.withLock { () throws(KeychainError) in try translatingErrors { try store.deleteMeta(prefix: Self.syncMetaPrefix) } }
    }

    private func syncSealKey(_ master: MasterKey) throws(KeychainError) -> SecureBytes {
        do { return try KeyDerivation.hkdf(key: master.key, salt: [], info: Self.syncSealInfo) } catch {
            throw KeychainError(.storageFailure, "HKDF: \(error)")
        }
    }
}
