import Glibc
import KeychainCrypto
import KeychainStore

/// Stored objects: sealing, index entries, adding, reading, replacing, removing and searching.
extension Keychain {
    func indexEntries(_ object: ObjectAttributes, keys: RecordKeys) throws -> [IndexEntry] {
        try object.values.compactMap { type, value in
            guard AttributeTable.rule(type)?.flags.contains(.indexed) == true else { return nil }
            return IndexEntry(attribute: UInt64(type.rawValue), digest: try keys.index.digest(attribute: UInt64(type.rawValue), value: value))
        }
    }

    /// The keyed digest of a keychain item's primary key (UNIQUE in the objects table), so that
    /// uniqueness is checked by SQLite without revealing the values.
    func primaryKey(_ object: ObjectAttributes, keys: RecordKeys) throws -> [UInt8]? {
        guard let tuple = object.primaryKeyTuple else { return nil }
        return try keys.index.digest(attribute: UInt64.max, value: tuple)
    }

    func seal(_ object: ObjectAttributes, uid: [UInt8], protection: Protection, keys: RecordKeys) throws -> [UInt8] {
        // Records that may hold a secret are padded to a size class (Docs/security.md).
        var plaintext = AttributeRecord.encode(object.recordAttributes, padded: protection != .public)
        defer { wipe(&plaintext) }
        let secure = SecureBytes(plaintext)
        return try SealedRecord.seal(secure, base: keys.recordBase, uid: uid, objectClass: UInt64(object.objectClass?.rawValue ?? 0), protection: protection.rawValue)
    }

    /// Stores a new token object; private objects need the master key. Returns its row id.
    public func add(_ object: ObjectAttributes, uid: [UInt8], master: MasterKey?) throws(KeychainError) -> Int64 {
        var object = object
        if let password = object[.applicationPassword] {
            // Write-only: it seals the secret and is never stored.
            object[.applicationPassword] = nil
            if object.objectClass == .privateKey, !object.bool(.alwaysAuthenticate) {
                throw KeychainError(.templateInconsistent, "a key with an application password needs CKA_ALWAYS_AUTHENTICATE = TRUE (the password is its context-specific PIN)")
            }
            if !object.accessControlFlags.isDisjoint(with: .presence) {
                // One per-use secret per item: the password seals it, so the PIN cannot stand beside it.
                throw KeychainError(.templateInconsistent, "an application password cannot be combined with user presence on one item")
            }
            let kdf = try translatingErrors { try storedKDF(Meta.verifier(.user)) } ?? .interactive
            try ApplicationPasswordSeal.seal(&object, password: password, kdf: kdf)
        }
        let protection = try Protection(for: object)
        let keys = try keysForStoring(protection, object: object, master: master)
        do {
            let record = try seal(object, uid: uid, protection: protection, keys: keys)
            return try store.insertObject(uid: uid, objectClass: UInt64(object.objectClass?.rawValue ?? 0), protection: protection.rawValue,
                                          record: record, primaryKey: try primaryKey(object, keys: keys),
                                          index: try indexEntries(object, keys: keys), now: Self.now())
        } catch let error as StoreError where error.code == .duplicate {
            throw KeychainError(.duplicateItem, "an item with the same primary key exists")
        } catch {
            throw KeychainError(error)
        }
    }

    /// Reads a token object. Altered or damaged records fail with `.recordCorrupted`;
    /// private objects without the master key fail with `.objectNotFound`.
    public func object(id: Int64, master: MasterKey?) throws(KeychainError) -> ObjectAttributes {
        let row = try translatingErrors { try store.fetchObject(id: id) }
        return try open(row, master: master)
    }

    func open(_ row: ObjectRow, master: MasterKey?) throws(KeychainError) -> ObjectAttributes {
        guard let protection = Protection(rawValue: row.protection) else {
            throw KeychainError(.recordCorrupted, "object \(row.id) has an unknown protection class")
        }
        let keys = try keys(for: protection, master: master)
        var object = try translatingErrors {
            let plaintext = try SealedRecord.open(row.record, base: keys.recordBase, uid: row.uid, objectClass: row.objectClass,
                                                  protection: row.protection, version: row.recordVersion)
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
        let row = try translatingErrors { try store.fetchObject(id: id) }
        guard let current = Protection(rawValue: row.protection), current.isPrivate == object.isPrivate || allowingPrivateChange else {
            throw KeychainError(.attributeReadOnly, "CKA_PRIVATE cannot change in place")
        }
        if object.hasSealedSecrets, object.values.keys.contains(where: { AttributeTable.rule($0)?.flags.contains(.sensitive) == true }) {
            throw KeychainError(.attributeReadOnly, "the secret of an item with an application password changes only by deleting and adding it again")
        }
        let protection = try Protection(for: object)
        let keys = protection == current ? try keys(for: protection, master: master) : try keysForStoring(protection, object: object, master: master)
        do {
            let record = try seal(object, uid: row.uid, protection: protection, keys: keys)
            try store.updateObject(id: id, protection: protection.rawValue, record: record, primaryKey: try primaryKey(object, keys: keys),
                                   index: try indexEntries(object, keys: keys), now: Self.now())
        } catch let error as StoreError where error.code == .duplicate {
            throw KeychainError(.duplicateItem, "an item with the same primary key exists")
        } catch {
            throw KeychainError(error)
        }
    }

    public func remove(id: Int64) throws(KeychainError) {
        try translatingErrors { try store.deleteObject(id: id) }
    }

    /// Size of an object's stored record.
    public func storedSize(id: Int64) throws(KeychainError) -> Int {
        try translatingErrors { try store.fetchObject(id: id).record.count }
    }

    /// Token objects matching `template`, by indexed SQL where possible, decrypting only the
    /// candidates that an index cannot decide. Private objects are searched only with `master`.
    public func find(_ template: Template, master: MasterKey?) throws(KeychainError) -> [FoundObject] {
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
                if rule.flags.contains(.indexed) {
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
        let rows = try translatingErrors {
            try store.findObjects(protections: protections.map(\.rawValue), objectClass: objectClass, terms: terms, withRecords: needsRecord)
        }
        let matching = needsRecord ? rows.filter { row in (try? open(row, master: master))?.matches(template) == true } : rows
        return matching.map { FoundObject(id: $0.id, isPrivate: Protection(rawValue: $0.protection)?.isPrivate ?? true) }
    }
}
