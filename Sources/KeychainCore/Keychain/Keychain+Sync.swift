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
    public func applySynchronized(uid: [UInt8], record: SecureBytes, modified: Int64, master: MasterKey) throws(KeychainError) -> [UInt8] {
        // Made again when the keychain's keys changed between the two steps (another process).
        for _ in 0..<2 {
            if let seal = try applySynchronized(try prepareSynchronized(uid: uid, record: record, modified: modified, master: master), master: master) {
                return seal
            }
        }
        throw KeychainError(.storageFailure, "the keychain's keys changed while a synchronized item was stored: sync again")
    }

    /// The first step of `applySynchronized`: the record decoded and checked, and everything its
    /// row holds but the seal (search entries, primary-key digest, the plaintext), which needs
    /// the write's epoch.
    public func prepareSynchronized(uid: [UInt8], record: SecureBytes, modified: Int64, master: MasterKey) throws(KeychainError) -> PreparedSynchronizedItem {
        guard let result = prepareSynchronized([SynchronizedRecord(uid: uid, record: record, modified: modified)], master: master).first else {
            throw KeychainError(.recordCorrupted, "a synchronized item was not prepared")
        }
        return try result.get()
    }

    /// `prepareSynchronized` of many items (a sync's batch), the records decoded and their rows
    /// made on every processor. One result per item, in order.
    public func prepareSynchronized(_ items: [SynchronizedRecord], master: MasterKey) -> [Result<PreparedSynchronizedItem, KeychainError>] {
        prepareSynchronized(items, context: synchronizedContext(master: master))
    }

    /// What preparing synchronized items needs of this keychain, read once under the lock: the
    /// record keys of every class an item that syncs may have, and the locked-lookup key.
    public func synchronizedContext(master: MasterKey) -> SynchronizedContext {
        readDeviceKeyAhead { alwaysKeys == nil }
        return lock.withLock { () -> SynchronizedContext in
            var classKeys: [Protection: Result<RecordKeys, KeychainError>] = [:]
            for protection in Protection.allCases where !protection.isDeviceBound {
                // Nothing made here (an Always key a keychain lacks): an item that needs it goes the long way.
                classKeys[protection] = Result { () throws(KeychainError) in try keys(for: protection, master: master) }
            }
            let lookup = Result { () throws(KeychainError) -> (base: RecordKeys, index: BlindIndex)? in
                try translatingErrors { try lockedLookupKey(master: master) }
            }
            return SynchronizedContext(keys: classKeys, lookup: lookup)
        }
    }

    /// `prepareSynchronized` with the keychain's part read before (`synchronizedContext`): takes
    /// no lock, so it may run while another thread stores (the store finds out when the keys
    /// changed in between, and the item is prepared again).
    public func prepareSynchronized(_ items: [SynchronizedRecord], context: SynchronizedContext) -> [Result<PreparedSynchronizedItem, KeychainError>] {
        Parallel.map(items) { item -> Result<PreparedSynchronizedItem, KeychainError> in
            Result { () throws(KeychainError) -> PreparedSynchronizedItem in
                var object = try Self.checkedSynchronizedObject(item)
                defer { object.wipeValues() }
                let protection = try Protection(for: object)
                guard let keys = try context.keys[protection]?.get() else { throw KeychainError(.recordCorrupted, "a synchronized item names no protection") }
                let lookupKey = object.mayHaveLockedLookupEntries ? try context.lookup.get() : nil
                let content = try translatingErrors { try rowContent(object, protection: protection, keys: keys, lookupIndex: lookupKey?.index) }
                let changesSealedSecret = object.hasSealedSecrets
                    && object.values.keys.contains(where: { AttributeTable.rule($0)?.flags.contains(.sensitive) == true })
                return PreparedSynchronizedItem(uid: item.uid, modified: item.modified, content: content, keys: keys, lookupBase: lookupKey?.base,
                                                mayHaveLockedLookupEntries: object.mayHaveLockedLookupEntries, changesSealedSecret: changesSealedSecret)
            }
        }
    }

    /// A synchronized item's object, checked: a synchronizable token object of its own uid, not
    /// bound to a device (the caller wipes it).
    private static func checkedSynchronizedObject(_ item: SynchronizedRecord) throws(KeychainError) -> ObjectAttributes {
        var (object, protection) = try item.record.withUnsafeBytes { bytes throws(KeychainError) in try Self.synchronizedObject(bytes) }
        guard item.uid.count == UniqueID.byteCount, object.isToken, object.objectClass != nil, object.bool(.synchronizable), object.syncRefusal == nil,
              !protection.isDeviceBound, object[.uniqueID] == Hex.digits(item.uid) else {
            object.wipeValues()
            throw KeychainError(.recordCorrupted, "a synchronized item is not a synchronizable token object of its own id")
        }
        // Never written by a device: a write-only attribute.
        if object[.applicationPassword] != nil {
            object.wipeValues()
            throw KeychainError(.recordCorrupted, "a synchronized item carries an application password")
        }
        return object
    }

    /// The second step of `applySynchronized`: the prepared row sealed and written (inside the
    /// caller's transaction, if any). nil, with nothing written, when the keys or the locked-lookup
    /// index it was made with are no longer this keychain's (prepare it again).
    public func applySynchronized(_ item: PreparedSynchronizedItem, master: MasterKey) throws(KeychainError) -> [UInt8]? {
        // The checks and the write in one write transaction (the caller's, in a sync): no other
        // process changes the keys or the locked-lookup setting in between.
        try transaction { () throws(KeychainError) -> [UInt8]? in
            let protection = item.content.protection
            guard try keys(for: protection, master: master) === item.keys else { return nil }
            if item.mayHaveLockedLookupEntries {
                guard try translatingErrors({ try lockedLookupKey(master: master) })?.base === item.lookupBase else { return nil }
            }
            let uid = item.uid
            guard let id = try translatingErrors({ try store.objectID(uid: uid) }) else {
                return try writeRow(master: master) { epoch in
                    let sealed = try Self.seal(item.content, uid: uid, keys: item.keys, epoch: epoch)
                    _ = try store.insertObject(uid: uid, objectClass: item.content.objectClass, protection: protection.rawValue, record: sealed.record,
                                               primaryKey: sealed.primaryKey, index: sealed.index, now: Self.now(), epoch: epoch,
                                               indexCommit: sealed.state.indexCommit, modified: item.modified)
                    return (Self.rowSeal(sealed.record), nil, sealed.state)
                }
            }
            if item.changesSealedSecret {
                throw KeychainError(.attributeReadOnly, "the secret of an item with an application password changes only by deleting and adding it again")
            }
            return try writeRow(master: master) { epoch in
                let before = try store.fetchObject(id: id)
                let sealed = try Self.seal(item.content, uid: before.uid, keys: item.keys, epoch: epoch)
                try store.updateObject(id: id, protection: protection.rawValue, record: sealed.record, primaryKey: sealed.primaryKey,
                                       index: sealed.index, now: item.modified, epoch: epoch, indexCommit: sealed.state.indexCommit,
                                       keysUnchanged: before.protection == protection.rawValue && before.primaryKey == sealed.primaryKey)
                return (Self.rowSeal(sealed.record), Self.state(of: before), sealed.state)
            }
        }
    }

    /// The uid of the item here that has the same keychain primary key as `record` (the same
    /// account and service, say) — the item an apply of `record` collides with — if there is one.
    public func synchronizedCollision(record: SecureBytes, master: MasterKey) throws(KeychainError) -> [UInt8]? {
        var (object, protection) = try record.withUnsafeBytes { bytes throws(KeychainError) in try Self.synchronizedObject(bytes) }
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
    private static func synchronizedObject(_ record: UnsafeRawBufferPointer) throws(KeychainError) -> (ObjectAttributes, Protection) {
        var attributes: [(type: UInt64, value: [UInt8])]
        do { attributes = try AttributeRecord.decode(record) } catch {
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

/// An item from another device to store: its uid, its record (`AttributeRecord`) and the
/// writer's modification time (seconds since 1970).
public struct SynchronizedRecord: Sendable {
    public let uid: [UInt8]
    public let record: SecureBytes
    public let modified: Int64

    public init(uid: [UInt8], record: SecureBytes, modified: Int64) {
        self.uid = uid
        self.record = record
        self.modified = modified
    }
}

/// See `Keychain.synchronizedContext`.
public final class SynchronizedContext: @unchecked Sendable {
    let keys: [Protection: Result<RecordKeys, KeychainError>]
    let lookup: Result<(base: RecordKeys, index: BlindIndex)?, KeychainError>

    init(keys: [Protection: Result<RecordKeys, KeychainError>], lookup: Result<(base: RecordKeys, index: BlindIndex)?, KeychainError>) {
        self.keys = keys
        self.lookup = lookup
    }
}

/// A synchronized item ready to store (`Keychain.prepareSynchronized`). Its plaintext stays on
/// secure pages, wiped when the last copy goes.
public struct PreparedSynchronizedItem: @unchecked Sendable {
    let uid: [UInt8]
    let modified: Int64
    let content: RowContent
    /// What it was made with: a keychain whose keys are others now makes it again.
    let keys: RecordKeys
    let lookupBase: RecordKeys?
    let mayHaveLockedLookupEntries: Bool
    /// It would replace the secret of an item sealed under an application password.
    let changesSealedSecret: Bool
}
