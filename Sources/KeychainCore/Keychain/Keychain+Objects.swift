import Glibc
import KeychainCrypto
import KeychainStore

/// A sealed record with what its row stores beside it.
struct SealedRow {
    let record: [UInt8]
    let index: [IndexEntry]
    let primaryKey: [UInt8]?
    /// The row's columns as the manifest counts them (its `indexCommit` is stored beside the record).
    let state: RowState
}

/// A row before its seal (`Keychain.rowContent`): the seal adds the write's epoch.
struct RowContent {
    let objectClass: UInt64
    let protection: Protection
    let index: [IndexEntry]
    let primaryKey: [UInt8]?
    let commitment: IndexCommitment
    /// The record's attributes, encoded and padded: secret, on secure pages.
    let plaintext: SecureBytes
}

/// Stored objects: sealing, index entries, adding, reading, replacing, removing and searching.
extension Keychain {
    func indexEntries(_ object: ObjectAttributes, keys: RecordKeys) throws -> [IndexEntry] {
        var entries: [IndexEntry] = []
        for type in AttributeTable.indexedTypes {
            guard let value = object[type] else { continue }
            let raw = UInt64(type.rawValue)
            if type == .lookupAttributes {
                // One entry per name/value pair, so that a search for some of them finds the item.
                for pair in LookupAttributes(encoded: value)?.pairs ?? [] {
                    entries.append(IndexEntry(attribute: raw, digest: try keys.index.digest(attribute: raw, value: LookupAttributes.term(pair))))
                }
                continue
            }
            entries.append(IndexEntry(attribute: raw, digest: try keys.index.digest(attribute: raw, value: value)))
        }
        return entries
    }

    /// The keyed digest of a keychain item's primary key (UNIQUE in the objects table), so that
    /// uniqueness is checked by SQLite without revealing the values.
    func primaryKey(_ object: ObjectAttributes, keys: RecordKeys) throws -> [UInt8]? {
        guard let tuple = object.primaryKeyTuple else { return nil }
        return try keys.index.digest(attribute: UInt64.max, value: tuple)
    }

    /// The sealed record of `object` with its index entries and primary-key digest, which the
    /// record's associated data commits to.
    func seal(_ object: ObjectAttributes, uid: [UInt8], protection: Protection, keys: RecordKeys, epoch: UInt64, master: MasterKey?) throws -> SealedRow {
        let lookup = object.mayHaveLockedLookupEntries ? try lockedLookupKey(master: master)?.index : nil
        return try Self.seal(try rowContent(object, protection: protection, keys: keys, lookupIndex: lookup), uid: uid, keys: keys, epoch: epoch)
    }

    /// Everything a row of `object` holds but its seal: search entries (with its locked-lookup
    /// entries under `lookupIndex`), primary-key digest, their commitment and the record's
    /// plaintext. Uses no keychain state: any thread may make one.
    func rowContent(_ object: ObjectAttributes, protection: Protection, keys: RecordKeys, lookupIndex: BlindIndex?) throws -> RowContent {
        let index = try indexEntries(object, keys: keys) + Self.lockedLookupEntries(object, index: lookupIndex)
        let primaryKey = try primaryKey(object, keys: keys)
        // Records that may hold a secret are padded to a size class (Docs/security.md).
        var plaintext = AttributeRecord.encode(object.recordAttributes, padded: protection != .public)
        defer { wipe(&plaintext) }
        return RowContent(objectClass: UInt64(object.objectClass?.rawValue ?? 0), protection: protection, index: index, primaryKey: primaryKey,
                          commitment: try IndexCommitment(entries: index, primaryKey: primaryKey), plaintext: SecureBytes(plaintext))
    }

    /// The sealed record of a row's content, written at `epoch`.
    static func seal(_ content: RowContent, uid: [UInt8], keys: RecordKeys, epoch: UInt64) throws -> SealedRow {
        let record = try SealedRecord.seal(content.plaintext, base: keys.recordBase, uid: uid, objectClass: content.objectClass,
                                           protection: content.protection.rawValue, index: content.commitment, epoch: epoch)
        return SealedRow(record: record, index: content.index, primaryKey: content.primaryKey,
                         state: RowState(uid: uid, objectClass: content.objectClass, protection: content.protection.rawValue, epoch: epoch,
                                         indexCommit: content.commitment.bytes))
    }

    /// What tells one write of a row from any other: its sealed record's AES-GCM tag (a random
    /// nonce per seal, the epoch in the associated data). Not secret: it is in the file.
    public static func rowSeal(_ record: [UInt8]) -> [UInt8] { Array(record.suffix(AESGCM.tagSize)) }

    /// A row's state before a write, as the manifest counts it (rows of earlier builds are not in it).
    static func state(of row: ObjectRow) -> RowState? {
        guard row.recordVersion >= SealedRecord.currentVersion else { return nil }
        return RowState(uid: row.uid, objectClass: row.objectClass, protection: row.protection, epoch: row.epoch, indexCommit: row.indexCommit ?? [])
    }

    /// Runs a write of one row in a transaction with the manifest: `body` gets the new epoch and
    /// returns the row's old and new states; the manifest moves on with them. Inside a caller's
    /// `transaction` the manifest is kept in memory and stored once, before that one commits.
    func writeRow<R>(master: MasterKey?, _ body: (UInt64) throws -> (result: R, old: RowState?, new: RowState?)) throws(KeychainError) -> R {
        var written: Manifest?
        let deferring = transactionDepth > 0
        let result = try transaction { () throws(KeychainError) -> R in
            try translatingErrors {
                let mac = try integrityMAC(master: master, creating: master != nil)
                var manifest: Manifest
                if let deferred = deferredManifest, deferred.mac === mac {
                    manifest = deferred.manifest
                } else {
                    try storeDeferredManifest()
                    manifest = try manifestForWrite(mac: mac)
                }
                let epoch = manifest.epoch + 1
                let (result, old, new): (R, RowState?, RowState?)
                do { (result, old, new) = try body(epoch) } catch let error as StoreError where error.code == .duplicate {
                    throw KeychainError(.duplicateItem, "an item with the same primary key exists")
                }
                if let old { try manifest.toggle(old, mac: mac) }
                if let new { try manifest.toggle(new, mac: mac) }
                manifest.epoch = epoch
                if deferring {
                    deferredManifest = (mac, manifest)
                    // What this process had checked is checked again against the new sums.
                    integrityCache = nil
                } else {
                    try storeManifest(manifest, mac: mac)
                }
                written = manifest
                return result
            }
        }
        if let written {
            // Inside a caller's transaction the write is not durable yet: the device's record
            // of the epoch moves when that transaction commits (Keychain.transaction).
            if store.inTransaction { pendingManifest = written } else { didCommitWrite(written) }
        }
        return result
    }

    /// Seals the secret of an object whose template carries CKA_KC_APPLICATION_PASSWORD (which is
    /// write-only: it leaves the object here). Only the KDF parameters are read under the lock; the
    /// scrypt of the password runs without it. `add` and `replace` call this themselves; a caller
    /// that stores inside its own transaction calls it first, so that no lock or write
    /// transaction is held across scrypt.
    public func sealingApplicationPassword(_ object: ObjectAttributes) throws(KeychainError) -> ObjectAttributes {
        guard let password = object[.applicationPassword] else { return object }
        var object = object
        object[.applicationPassword] = nil
        if object.objectClass == .privateKey, !object.bool(.alwaysAuthenticate) {
            throw KeychainError(.templateInconsistent, "a key with an application password needs CKA_ALWAYS_AUTHENTICATE = TRUE (the password is its context-specific PIN)")
        }
        let kdf = try lock.withLock { () throws(KeychainError) -> ScryptParameters in
            try translatingErrors { try storedKDF(Meta.verifier(.user)) } ?? .interactive
        }
        let flags = object.accessControlFlags
        if flags.contains(.or), !flags.isDisjoint(with: .presence) {
            // Either one opens the item: the record keeps the secret (read after user presence),
            // and a fixed token sealed under the password proves the password (no copy of the
            // secret: a new secret needs no new seal).
            var probe = ObjectAttributes()
            probe[.objectClass] = object[.objectClass]
            probe[.token] = object[.token]
            probe[.uniqueID] = object[.uniqueID]
            probe[.value] = Array("keychain-pkcs11 application password check".utf8)
            try ApplicationPasswordSeal.seal(&probe, password: password, kdf: kdf)
            object[.alternativeSeal] = probe[.sealedSecrets]
            object[.alternativeSealKDF] = probe[.applicationPasswordKDF]
        } else {
            // The password seals the secret; user presence stands beside it only with `.and`
            // (the SecItem door then asks for both at each read).
            if !flags.isDisjoint(with: .presence), !flags.contains(.and) {
                throw KeychainError(.templateInconsistent, "an application password with user presence needs .and or .or")
            }
            object[.sealedSecrets] = nil
            object[.applicationPasswordKDF] = nil
            try ApplicationPasswordSeal.seal(&object, password: password, kdf: kdf)
        }
        return object
    }

    /// Stores a new token object; private objects need the master key. Returns its row id.
    public func add(_ object: ObjectAttributes, uid: [UInt8], master: MasterKey?) throws(KeychainError) -> Int64 {
        // Every door checks this first with its own code; here for whatever reaches the store.
        if let refusal = object.syncRefusal { throw KeychainError(.templateInconsistent, refusal.reason) }
        let object = try sealingApplicationPassword(object)
        let protection = try Protection(for: object)
        // The integrity check needs the Always key, which this device's key opens.
        readDeviceKeyAhead { alwaysKeys == nil || protection.isDeviceBound }
        return try lock.withLock { () throws(KeychainError) -> Int64 in
            let keys = try keysForStoring(protection, object: object, master: master)
            return try writeRow(master: master) { epoch in
                    let sealed = try seal(object, uid: uid, protection: protection, keys: keys, epoch: epoch, master: master)
                    let id = try store.insertObject(uid: uid, objectClass: UInt64(object.objectClass?.rawValue ?? 0), protection: protection.rawValue,
                                                    record: sealed.record, primaryKey: sealed.primaryKey, index: sealed.index, now: Self.now(),
                                                    epoch: epoch, indexCommit: sealed.state.indexCommit)
                    return (id, nil, sealed.state)
            }
        }
    }

    /// Reads a token object. Altered or damaged records fail with `.recordCorrupted`;
    /// private objects without the master key fail with `.objectNotFound`.
    public func object(id: Int64, master: MasterKey?) throws(KeychainError) -> ObjectAttributes {
        // The row's class is not known before it is read: any may need the device key.
        readDeviceKeyAhead()
        return try lock.withLock { () throws(KeychainError) -> ObjectAttributes in
            // One snapshot: the row, its index entries and the manifest, as one commit left them.
            let seen = epochBeforeSnapshot()
            return try translatingErrors {
                try store.read { () throws -> ObjectAttributes in
                    let row = try store.fetchObject(id: id)
                    let object = try open(row, master: master)
                    try checkIntegrity(of: [row], master: master, seenEpoch: seen)
                    return object
                }
            }
        }
    }

    func open(_ row: ObjectRow, master: MasterKey?) throws(KeychainError) -> ObjectAttributes {
        guard let protection = Protection(rawValue: row.protection) else {
            throw KeychainError(.recordCorrupted, "object \(row.id) has an unknown protection class")
        }
        if row.recordVersion < SealedRecord.currentVersion, protection == .public {
            // Earlier builds sealed public records under a key kept in the file: anyone who can
            // write the file can forge those, so they are not believed.
            throw KeychainError(.recordCorrupted, "object \(row.id) is a public record of an earlier format, which cannot be authenticated: import it again")
        }
        let keys = try keys(for: protection, master: master)
        var object = try translatingErrors {
            let index = try IndexCommitment(entries: try store.indexEntries(objectID: row.id), primaryKey: row.primaryKey)
            let plaintext: SecureBytes
            do {
                plaintext = try SealedRecord.open(row.record, base: keys.recordBase, uid: row.uid, objectClass: row.objectClass,
                                                  protection: row.protection, version: row.recordVersion, index: index, epoch: row.epoch)
            } catch let error as CryptoError where error.code == .authenticationFailed {
                throw KeychainError(.recordCorrupted, "object \(row.id) was altered or damaged on disk (its record, or the search entries it commits to, do not verify)")
            }
            return ObjectAttributes(recordAttributes: try plaintext.withUnsafeBytes { try AttributeRecord.decode($0) })
        }
        guard object.objectClass?.rawValue == UInt(truncatingIfNeeded: row.objectClass), object.isPrivate == protection.isPrivate else {
            throw KeychainError(.recordCorrupted, "object \(row.id) does not match its row")
        }
        object[.creationTime] = AttributeValue.ulong(UInt(truncatingIfNeeded: row.created))
        object[.modificationTime] = AttributeValue.ulong(UInt(truncatingIfNeeded: row.modified))
        return object
    }

    /// Replaces a token object's attributes (C_SetAttributeValue, SecItemUpdate). A new protection
    /// class re-seals the record under its keys; CKA_PRIVATE changes only with a new protection
    /// class (SecItemUpdate of kSecAttrAccessible).
    public func replace(id: Int64, with object: ObjectAttributes, master: MasterKey?, allowingPrivateChange: Bool = false) throws(KeychainError) {
        // A new secret for an item with an application password (the caller checked the password
        // against the old seal) is sealed again under it, never stored.
        let object = try sealingApplicationPassword(object)
        let deviceBound = (try? Protection(for: object))?.isDeviceBound ?? false
        readDeviceKeyAhead { alwaysKeys == nil || deviceBound }
        try lock.withLock { () throws(KeychainError) -> Void in
            let row = try translatingErrors { try store.fetchObject(id: id) }
            guard let current = Protection(rawValue: row.protection), current.isPrivate == object.isPrivate || allowingPrivateChange else {
                throw KeychainError(.attributeReadOnly, "CKA_PRIVATE cannot change in place")
            }
            if let refusal = object.syncRefusal {
                // Refused unless the item was stored so before the rule (`syncRefusal(changing:)`):
                // only then is the old record opened.
                var before = try? open(row, master: master)
                defer { before?.wipeValues() }
                guard let old = before, object.syncRefusal(changing: old) == nil else { throw KeychainError(.templateInconsistent, refusal.reason) }
            }
            if object.hasSealedSecrets, object.values.keys.contains(where: { AttributeTable.rule($0)?.flags.contains(.sensitive) == true }) {
                throw KeychainError(.attributeReadOnly, "the secret of an item with an application password changes only by deleting and adding it again")
            }
            let protection = try Protection(for: object)
            let keys = protection == current ? try keys(for: protection, master: master) : try keysForStoring(protection, object: object, master: master)
            try writeRow(master: master) { epoch in
                    // The row as it is inside this transaction (another process may have changed it).
                    let before = try store.fetchObject(id: id)
                    let sealed = try seal(object, uid: before.uid, protection: protection, keys: keys, epoch: epoch, master: master)
                    try store.updateObject(id: id, protection: protection.rawValue, record: sealed.record, primaryKey: sealed.primaryKey,
                                           index: sealed.index, now: Self.now(), epoch: epoch, indexCommit: sealed.state.indexCommit,
                                           keysUnchanged: before.protection == protection.rawValue && before.primaryKey == sealed.primaryKey)
                    return ((), Self.state(of: before), sealed.state)
            }
        }
    }

    /// Deletes a stored object; the manifest forgets its row (`master` opens the manifest key
    /// where the device key cannot).
    public func remove(id: Int64, master: MasterKey?) throws(KeychainError) {
        readDeviceKeyAhead { alwaysKeys == nil }
        try lock.withLock { () throws(KeychainError) -> Void in
            try writeRow(master: master) { _ in
                let before = try store.fetchObject(id: id)
                try store.deleteObject(id: id)
                return ((), Self.state(of: before), nil)
            }
        }
    }

    /// Size of an object's stored record.
    public func storedSize(id: Int64) throws(KeychainError) -> Int {
        try lock.withLock { () throws(KeychainError) -> Int in
            try translatingErrors { try store.fetchObject(id: id).record.count }
        }
    }

    /// A row found through index entries must have exactly the entries its record commits to
    /// (inside the caller's read transaction); otherwise the index was altered.
    func requireCommittedEntries(_ row: ObjectRow) throws {
        let actual = try IndexCommitment(entries: try store.indexEntries(objectID: row.id), primaryKey: row.primaryKey).bytes
        guard let stored = row.indexCommit, ConstantTime.equals(actual, stored) else {
            throw KeychainError(.recordCorrupted, "object \(row.id) is listed by search entries its record does not commit to: the index was altered")
        }
    }

    /// Token objects matching `template`, by indexed SQL where possible, decrypting only the
    /// candidates that an index cannot decide. Private objects are searched only with `master`.
    public func find(_ template: Template, master: MasterKey?) throws(KeychainError) -> [FoundObject] {
        // Every class is probed (`availableKeys`), the device-bound ones and the Always key with
        // the device key.
        readDeviceKeyAhead()
        return try lock.withLock { () throws(KeychainError) -> [FoundObject] in
            let available = availableKeys(master: master)
            var protections = available.map(\.protection)
            var objectClass: UInt64?
            var terms: [IndexTerm] = []
            var needsRecord = false
            for (type, value) in template {
                switch type {
                case .token:
                    if AttributeValue.decodeBool(value) != true { return [] }
                case .isPrivate:
                    guard let wanted = AttributeValue.decodeBool(value) else { return [] }
                    protections = protections.filter { $0.isPrivate == wanted }
                case .objectClass:
                    guard let raw = AttributeValue.decodeULong(value) else { return [] }
                    if let objectClass, objectClass != UInt64(raw) { return [] }
                    objectClass = UInt64(raw)
                default:
                    guard let rule = AttributeTable.rule(type) else { return [] }
                    if type == .lookupAttributes {
                        // Every pair asked for is one more index term (all must be present).
                        guard let wanted = LookupAttributes(encoded: value) else { return [] }
                        let raw = UInt64(type.rawValue)
                        for pair in wanted.pairs {
                            var digests: [[UInt8]] = []
                            var seen: [ObjectIdentifier] = []
                            for keys in available.map(\.keys) where !seen.contains(ObjectIdentifier(keys)) {
                                seen.append(ObjectIdentifier(keys))
                                digests.append(try translatingErrors { try keys.index.digest(attribute: raw, value: LookupAttributes.term(pair)) })
                            }
                            terms.append(IndexTerm(attribute: raw, digests: digests))
                        }
                    } else if rule.flags.contains(.indexed) {
                        let raw = UInt64(type.rawValue)
                        var digests: [[UInt8]] = []
                        var seen: [ObjectIdentifier] = []
                        for keys in available.map(\.keys) where !seen.contains(ObjectIdentifier(keys)) {
                            seen.append(ObjectIdentifier(keys))
                            digests.append(try translatingErrors { try keys.index.digest(attribute: raw, value: value) })
                        }
                        terms.append(IndexTerm(attribute: raw, digests: digests))
                    } else {
                        needsRecord = true
                    }
                }
            }
            // One snapshot for the rows, their index entries and the manifest: another process's
            // commit in between would otherwise look like tampering.
            let seen = epochBeforeSnapshot()
            let matching = try translatingErrors {
                try store.read { () throws -> [ObjectRow] in
                    let rows = try store.findObjects(protections: protections.map(\.rawValue), objectClass: objectClass, terms: terms, withRecords: needsRecord)
                    // Every answer is checked against what it claims. The manifest authenticates each
                    // row's class, protection, epoch and index commitment (its bucket sums are re-read);
                    // a row found through index entries must have exactly the entries its commitment
                    // names; attributes without an index are matched on the opened record. An answer
                    // the index gives but the row denies is damage, reported, not left out. A listing
                    // checks every bucket, so that a row removed from the file shows.
                    try checkIntegrity(of: rows, master: master, allBuckets: terms.isEmpty, seenEpoch: seen)
                    var matching: [ObjectRow] = []
                    for row in rows {
                        if !terms.isEmpty, row.recordVersion >= SealedRecord.currentVersion { try requireCommittedEntries(row) }
                        if needsRecord {
                            let object: ObjectAttributes
                            do { object = try open(row, master: master) } catch let error as KeychainError where error.code == .recordCorrupted { throw error } catch { continue }
                            guard object.matches(template) else { continue }
                        }
                        matching.append(row)
                    }
                    return matching
                }
            }
            return matching.map { FoundObject(id: $0.id, isPrivate: Protection(rawValue: $0.protection)?.isPrivate ?? true) }
        }
    }
}
