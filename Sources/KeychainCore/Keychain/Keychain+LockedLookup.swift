import KeychainCrypto
import KeychainStore

/// The locked-lookup index: finding a keychain's passwords by their Secret Service attributes
/// while the keychain is locked, so that a client asking for one is told it exists (and then asks
/// to unlock) instead of being told nothing (Docs/security.md, "Searching a locked keychain").
///
/// Each password the Secret Service serves gets, beside its ordinary blind-index entries (keyed
/// from the master key), one entry per attribute pair and one "is a password" entry under the
/// *lookup key*: an HMAC key derived from the keychain's Always key, which this device's key opens
/// without the PIN. The entries are part of the row's index commitment, so the record's AES-GCM
/// tag and the integrity manifest cover them: entries added or moved in the file are detected.
/// A per-keychain setting turns the index off (the entries are then removed from every row).
extension Keychain {
    /// The index attribute number of locked-lookup entries (outside PKCS#11's attribute numbers;
    /// `UInt64.max` is the primary-key digest's).
    static let lockedLookupAttribute = UInt64.max - 1

    /// The term of the entry every served password has (a search with no attributes lists them).
    static let lockedLookupMarker: [UInt8] = Array("keychain-pkcs11 served password".utf8)

    /// Whether the index is kept: on (1), off (0); absent in keychains made before the index
    /// existed, which keep it (on) from their next unlock in keychaind on.
    static let lockedLookupMeta = "lookup.locked"

    /// The key the locked-lookup entries are made with: from the Always key (the device key opens
    /// it without the PIN; on another device, only the master key does). Nil when this keychain has
    /// no Always key yet, or neither the device key nor `master` opens it.
    func lockedLookupIndex(master: MasterKey?) -> BlindIndex? {
        guard let always = try? alwaysRecordKeys(master: master, creating: false) else { return nil }
        if let cached = lockedLookupCache, cached.base === always { return cached.index }
        guard let key = try? KeyDerivation.hkdf(key: always.recordBase, salt: [], info: Array("keychain-pkcs11 locked lookup".utf8)),
              let index = try? BlindIndex(key: key) else { return nil }
        lockedLookupCache = (always, index)
        return index
    }

    /// Whether rows written now carry locked-lookup entries (read inside the caller's transaction).
    func keepsLockedLookup() throws -> Bool {
        (try store.metaInteger(Self.lockedLookupMeta) ?? 1) != 0
    }

    /// The locked-lookup entries `object` gets: none unless it is a password the Secret Service
    /// serves (a data object whose secret needs nothing beyond the unlocked keychain).
    func lockedLookupEntries(_ object: ObjectAttributes, master: MasterKey?) throws -> [IndexEntry] {
        guard object.mayHaveLockedLookupEntries else { return [] }
        return try Self.lockedLookupEntries(object, index: lockedLookupKey(master: master)?.index)
    }

    /// The key rows written now get their locked-lookup entries under, with the Always key it
    /// comes from; nil when the index is off or its key unavailable (read inside the caller's
    /// transaction, or under the lock).
    func lockedLookupKey(master: MasterKey?) throws -> (base: RecordKeys, index: BlindIndex)? {
        guard try keepsLockedLookup(), let index = lockedLookupIndex(master: master), let base = lockedLookupCache?.base else { return nil }
        return (base, index)
    }

    /// `object`'s locked-lookup entries under `index` (none without one, or when it is no
    /// password the Secret Service serves).
    static func lockedLookupEntries(_ object: ObjectAttributes, index: BlindIndex?) throws -> [IndexEntry] {
        guard object.mayHaveLockedLookupEntries, let index else { return [] }
        var entries = [IndexEntry(attribute: Self.lockedLookupAttribute, digest: try index.digest(attribute: Self.lockedLookupAttribute, value: Self.lockedLookupMarker))]
        for (name, value) in SecretServiceItems.attributes(of: object).sorted(by: { $0.key < $1.key }) {
            let term = LookupAttributes.term((name, value))
            entries.append(IndexEntry(attribute: Self.lockedLookupAttribute, digest: try index.digest(attribute: Self.lockedLookupAttribute, value: term)))
        }
        return entries
    }

    /// Whether the locked-lookup index is on (the default) for this keychain.
    public func lockedLookupIsOn() throws(KeychainError) -> Bool {
        try lock.withLock { () throws(KeychainError) -> Bool in try translatingErrors { try keepsLockedLookup() } }
    }

    /// The unique IDs (16 bytes, the row uids) of the served passwords showing every pair of
    /// `wanted`, found without the master key; nil when the index is off or its key unavailable
    /// here (no device key: the caller then knows nothing, as before the index existed).
    /// Entries are checked against the rows' commitments and the manifest, as `find` does.
    public func lockedSearch(_ wanted: [String: String]) throws(KeychainError) -> [[UInt8]]? {
        try lock.withLock { () throws(KeychainError) -> [[UInt8]]? in
            guard try translatingErrors({ try keepsLockedLookup() }), let index = lockedLookupIndex(master: nil) else { return nil }
            let attribute = Self.lockedLookupAttribute
            var terms = [IndexTerm(attribute: attribute, digests: [try translatingErrors { try index.digest(attribute: attribute, value: Self.lockedLookupMarker) }])]
            for pair in wanted {
                let digest = try translatingErrors { try index.digest(attribute: attribute, value: LookupAttributes.term((pair.key, pair.value))) }
                terms.append(IndexTerm(attribute: attribute, digests: [digest]))
            }
            let seen = epochBeforeSnapshot()
            let rows = try translatingErrors {
                try store.read { () throws -> [ObjectRow] in
                    let rows = try store.findObjects(protections: Protection.allCases.map(\.rawValue), objectClass: UInt64(ObjectClass.data.rawValue),
                                                     terms: terms, withRecords: false)
                    try checkIntegrity(of: rows, master: nil, allBuckets: false, seenEpoch: seen)
                    // Every row, whatever its format: only current records carry these entries.
                    for row in rows { try requireCommittedEntries(row) }
                    return rows
                }
            }
            return rows.map(\.uid)
        }
    }

    /// Brings every password's locked-lookup entries in line with the setting (adding them when
    /// on, removing them when off), re-sealing only rows whose entries differ; their modification
    /// times stay. Without `force`, does nothing once a keychain's index was completed. Returns
    /// the number of rows re-sealed. Needs the master key (the records are opened).
    @discardableResult
    public func refreshLockedLookup(master: MasterKey, force: Bool = false) throws(KeychainError) -> Int {
        let pending = try lock.withLock { () throws(KeychainError) -> Bool in
            try translatingErrors { try store.metaInteger(Self.lockedLookupMeta) == nil }
        }
        guard pending || force else { return 0 }
        var resealed = 0
        for found in try find([(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue))], master: master) {
            // Looked at first without writing: most rows are in line already.
            let outOfDate = try lock.withLock { () throws(KeychainError) -> Bool in
                try translatingErrors { try store.read { try outOfDateObject(try store.fetchObject(id: found.id), master: master) != nil } }
            }
            guard outOfDate else { continue }
            let changed = try lock.withLock { () throws(KeychainError) -> Bool in
                try writeRow(master: master) { epoch in
                    // Again inside the transaction: another process may have re-sealed it.
                    let before = try store.fetchObject(id: found.id)
                    guard let object = try outOfDateObject(before, master: master), let protection = Protection(rawValue: before.protection) else {
                        return (false, Self.state(of: before), Self.state(of: before))
                    }
                    let keys = try keys(for: protection, master: master)
                    let sealed = try seal(object, uid: before.uid, protection: protection, keys: keys, epoch: epoch, master: master)
                    try store.updateObject(id: found.id, protection: protection.rawValue, record: sealed.record, primaryKey: sealed.primaryKey,
                                           index: sealed.index, now: before.modified, epoch: epoch, indexCommit: sealed.state.indexCommit)
                    return (true, Self.state(of: before), sealed.state)
                }
            }
            if changed { resealed += 1 }
        }
        try lock.withLock { () throws(KeychainError) in
            try translatingErrors { try store.write { if try store.metaInteger(Self.lockedLookupMeta) == nil { try store.setMeta(Self.lockedLookupMeta, integer: 1) } } }
        }
        return resealed
    }

    /// Turns the locked-lookup index on or off and brings every row in line.
    @discardableResult
    public func setLockedLookup(_ on: Bool, master: MasterKey) throws(KeychainError) -> Int {
        try lock.withLock { () throws(KeychainError) in
            try translatingErrors { try store.write { try store.setMeta(Self.lockedLookupMeta, integer: on ? 1 : 0) } }
        }
        return try refreshLockedLookup(master: master, force: true)
    }

    /// The row's object when its stored entries differ from those it gets now (opened once, for
    /// the caller to seal again); nil when they agree.
    func outOfDateObject(_ row: ObjectRow, master: MasterKey) throws -> ObjectAttributes? {
        // A row this process cannot open (its device key is missing here) is left as it is.
        guard let protection = Protection(rawValue: row.protection), let object = try? open(row, master: master) else { return nil }
        let wanted = try indexEntries(object, keys: try keys(for: protection, master: master)) + lockedLookupEntries(object, master: master)
        return Self.sameEntries(wanted, try store.indexEntries(objectID: row.id)) ? nil : object
    }

    static func sameEntries(_ a: [IndexEntry], _ b: [IndexEntry]) -> Bool {
        func key(_ entry: IndexEntry) -> [UInt8] { withUnsafeBytes(of: entry.attribute.bigEndian) { Array($0) } + entry.digest }
        return a.map(key).sorted { $0.lexicographicallyPrecedes($1) } == b.map(key).sorted { $0.lexicographicallyPrecedes($1) }
    }
}

/// What the Secret Service shows of a keychain beside its token label: a display name that
/// clients may change (Collection.Label). The token label — the slot's identity in PKCS#11 URIs,
/// `keychainctl -k` and the collection's object path — never changes with it.
extension Keychain {
    static let displayNameMeta = "collection.display_name"
    /// Display names longer than this are refused (a label, not a document).
    public static let maximumDisplayNameBytes = 256

    /// The display name, or nil when none was set (the token label is shown).
    public func displayName() throws(KeychainError) -> String? {
        try lock.withLock { () throws(KeychainError) -> String? in
            try translatingErrors { try store.metaBlob(Self.displayNameMeta).map { String(decoding: $0, as: UTF8.self) } }
        }
    }

    /// Sets the display name; nil or the token label itself removes it.
    public func setDisplayName(_ name: String?) throws(KeychainError) {
        if let name, name.utf8.count > Self.maximumDisplayNameBytes {
            throw KeychainError(.argumentsBad, "a display name has at most \(Self.maximumDisplayNameBytes) bytes (this one has \(name.utf8.count))")
        }
        if let name, name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            throw KeychainError(.argumentsBad, "a display name cannot hold control characters")
        }
        try lock.withLock { () throws(KeychainError) in
            try translatingErrors {
                try store.write {
                    let label = String(decoding: try store.metaBlob(Meta.label) ?? [], as: UTF8.self)
                    try store.setMeta(Self.displayNameMeta, blob: name.flatMap { $0 == label ? nil : Array($0.utf8) })
                }
            }
        }
    }
}

extension ObjectAttributes {
    /// Whether the object is a password the Secret Service serves (a data object whose secret needs
    /// nothing beyond the unlocked keychain): only those get locked-lookup entries.
    var mayHaveLockedLookupEntries: Bool { objectClass == .data && requiredCredential == .none }
}
