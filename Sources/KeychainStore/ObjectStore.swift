/// A stored object row as the store sees it: no attribute knowledge, just sealed bytes.
public struct ObjectRow: Sendable {
    public let id: Int64
    public let uid: [UInt8]
    public let objectClass: UInt64
    public let protection: UInt8
    public let record: [UInt8]
    public let recordVersion: UInt32
    public let created: Int64
    public let modified: Int64
    /// The keyed digest of the item's primary key (keychain items), as the UNIQUE column holds it.
    public let primaryKey: [UInt8]?
    /// The keychain epoch of the row's last write (0 for rows of earlier builds).
    public let epoch: UInt64
    /// The row's index commitment as written (nil for rows of earlier builds).
    public let indexCommit: [UInt8]?
}

/// What the integrity manifest covers of one row: its columns, not its record (the record's
/// AES-GCM tag already binds it to these).
public struct RowState: Sendable, Equatable {
    public let uid: [UInt8]
    public let objectClass: UInt64
    public let protection: UInt8
    public let epoch: UInt64
    public let indexCommit: [UInt8]

    public init(uid: [UInt8], objectClass: UInt64, protection: UInt8, epoch: UInt64, indexCommit: [UInt8]) {
        self.uid = uid
        self.objectClass = objectClass
        self.protection = protection
        self.epoch = epoch
        self.indexCommit = indexCommit
    }
}

/// One searchable attribute of an object, as a blind-index digest.
public struct IndexEntry: Sendable {
    public let attribute: UInt64
    public let digest: [UInt8]

    /// The canonical order of a row's entries (by attribute, then digest): what the index
    /// commitment hashes and what compares two sets of entries.
    public static func precedes(_ one: IndexEntry, _ other: IndexEntry) -> Bool {
        one.attribute != other.attribute ? one.attribute < other.attribute : one.digest.lexicographicallyPrecedes(other.digest)
    }

    public init(attribute: UInt64, digest: [UInt8]) {
        self.attribute = attribute
        self.digest = digest
    }
}

/// A search term: the object must have an index entry for `attribute` equal to one of `digests`
/// (one digest per protection class that may match).
public struct IndexTerm: Sendable {
    public let attribute: UInt64
    public let digests: [[UInt8]]

    public init(attribute: UInt64, digests: [[UInt8]]) {
        self.attribute = attribute
        self.digests = digests
    }
}

/// SQL over the `objects` and `object_index` tables.
extension KeychainDatabase {
    private enum SQL {
        static let insert = "INSERT INTO objects (uid, class, protection, record, record_version, primary_key, created, modified, epoch, index_commit) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
        static let insertIndex = "INSERT INTO object_index (object_id, attribute, digest) VALUES (?, ?, ?)"
        static let deleteIndex = "DELETE FROM object_index WHERE object_id = ?"
        static let update = "UPDATE objects SET protection = ?, record = ?, record_version = ?, primary_key = ?, modified = ?, epoch = ?, index_commit = ? WHERE id = ?"
        static let updateRecord = "UPDATE objects SET record = ?, record_version = ?, modified = ?, epoch = ?, index_commit = ? WHERE id = ?"
        static let delete = "DELETE FROM objects WHERE id = ?"
        static let columns = "id, uid, class, protection, record, record_version, created, modified, primary_key, epoch, index_commit"
        static let states = "SELECT uid, class, protection, epoch, index_commit FROM objects WHERE record_version >= 2"
        static let indexOf = "SELECT attribute, digest FROM object_index WHERE object_id = ?"
        static let fetch = "SELECT \(columns) FROM objects WHERE id = ?"
        static let count = "SELECT protection, count(*) FROM objects GROUP BY protection"
    }

    /// Adds an object and its index entries in one transaction; returns its row id.
    /// `modified`: the modification time when it is not `now` (an item another device wrote).
    public func insertObject(uid: [UInt8], objectClass: UInt64, protection: UInt8, record: [UInt8], primaryKey: [UInt8]?, index: [IndexEntry], now: Int64,
                             epoch: UInt64 = 0, indexCommit: [UInt8]? = nil, recordVersion: UInt32 = SealedRecord.currentVersion,
                             modified: Int64? = nil) throws -> Int64 {
        try database.write {
            try database.run(SQL.insert, [.blob(uid), .integer(Int64(bitPattern: objectClass)), .integer(Int64(protection)), .blob(record),
                                          .integer(Int64(recordVersion)), primaryKey.map { .blob($0) } ?? .null, .integer(now), .integer(modified ?? now),
                                          .integer(Int64(bitPattern: epoch)), indexCommit.map { .blob($0) } ?? .null])
            let id = database.lastInsertRowID
            for entry in index {
                try database.run(SQL.insertIndex, [.integer(id), .integer(Int64(bitPattern: entry.attribute)), .blob(entry.digest)])
            }
            return id
        }
    }

    /// Replaces an object's record, protection and index entries. `keysUnchanged`: the caller
    /// knows the row's protection and primary key stay as they are, so their indexes are left alone;
    /// index entries equal to the stored ones (an edit of a secret, say) are not rewritten either.
    public func updateObject(id: Int64, protection: UInt8, record: [UInt8], primaryKey: [UInt8]?, index: [IndexEntry], now: Int64,
                             epoch: UInt64 = 0, indexCommit: [UInt8]? = nil, keysUnchanged: Bool = false) throws {
        try database.write {
            if keysUnchanged {
                try database.run(SQL.updateRecord, [.blob(record), .integer(Int64(SealedRecord.currentVersion)), .integer(now), .integer(Int64(bitPattern: epoch)),
                                                    indexCommit.map { .blob($0) } ?? .null, .integer(id)])
            } else {
                try database.run(SQL.update, [.integer(Int64(protection)), .blob(record), .integer(Int64(SealedRecord.currentVersion)), primaryKey.map { .blob($0) } ?? .null,
                                              .integer(now), .integer(Int64(bitPattern: epoch)), indexCommit.map { .blob($0) } ?? .null, .integer(id)])
            }
            guard database.changes == 1 else { throw StoreError(.notFound, "object \(id) no longer exists") }
            let stored = try indexEntries(objectID: id)
            guard !Self.sameEntries(stored, index) else { return }
            try database.run(SQL.deleteIndex, [.integer(id)])
            for entry in index {
                try database.run(SQL.insertIndex, [.integer(id), .integer(Int64(bitPattern: entry.attribute)), .blob(entry.digest)])
            }
        }
    }

    /// The same entries, in any order.
    static func sameEntries(_ one: [IndexEntry], _ other: [IndexEntry]) -> Bool {
        guard one.count == other.count else { return false }
        return zip(one.sorted(by: IndexEntry.precedes), other.sorted(by: IndexEntry.precedes)).allSatisfy { $0.attribute == $1.attribute && $0.digest == $1.digest }
    }

    /// The row id of the object with `uid`, if there is one (the unique index on uid answers).
    public func objectID(uid: [UInt8]) throws -> Int64? {
        try database.read {
            var found: Int64?
            try database.query("SELECT id FROM objects WHERE uid = ?", [.blob(uid)]) { found = $0.int64(0) }
            return found
        }
    }

    /// The uid of the object whose keychain primary key has this digest, if there is one.
    public func objectUID(primaryKey: [UInt8]) throws -> [UInt8]? {
        try database.read {
            var found: [UInt8]?
            try database.query("SELECT uid FROM objects WHERE primary_key = ?", [.blob(primaryKey)]) { found = $0.blob(0) }
            return found
        }
    }

    public func deleteObject(id: Int64) throws {
        try database.write {
            try database.run(SQL.delete, [.integer(id)])
            guard database.changes == 1 else { throw StoreError(.notFound, "object \(id) no longer exists") }
        }
    }

    /// What the integrity manifest covers of every current-format row, optionally only of the
    /// rows whose uid's first byte is in `firstBytes` (the unique index on uid answers the range).
    public func rowStates(firstBytes: ClosedRange<UInt8>? = nil) throws -> [RowState] {
        var sql = SQL.states
        var values: [SQLValue] = []
        if let firstBytes {
            sql += " AND uid >= ? AND uid < ?"
            let upper = firstBytes.upperBound
            values = [.blob([firstBytes.lowerBound]), upper == 0xFF ? .blob([0xFF] + [UInt8](repeating: 0xFF, count: 64)) : .blob([upper + 1])]
        }
        var states: [RowState] = []
        try database.query(sql, values) { s in
            states.append(RowState(uid: s.blob(0), objectClass: UInt64(bitPattern: s.int64(1)), protection: UInt8(truncatingIfNeeded: s.int64(2)),
                                   epoch: UInt64(bitPattern: s.int64(3)), indexCommit: s.isNull(4) ? [] : s.blob(4)))
        }
        return states
    }

    /// Whether any row is in the current record format (then the keychain must have a manifest).
    public func hasCurrentFormatRows() throws -> Bool {
        var found = false
        try database.query("SELECT 1 FROM objects WHERE record_version >= 2 LIMIT 1") { _ in found = true }
        return found
    }

    /// The index entries stored for an object, as the table holds them now.
    public func indexEntries(objectID: Int64) throws -> [IndexEntry] {
        var entries: [IndexEntry] = []
        try database.query(SQL.indexOf, [.integer(objectID)]) { entries.append(IndexEntry(attribute: UInt64(bitPattern: $0.int64(0)), digest: $0.blob(1))) }
        return entries
    }

    public func fetchObject(id: Int64) throws -> ObjectRow {
        var row: ObjectRow?
        try database.query(SQL.fetch, [.integer(id)]) { row = Self.row($0) }
        guard let row else { throw StoreError(.notFound, "object \(id) not found") }
        return row
    }

    /// Objects whose protection is in `protections`, optionally of one class, that have an index
    /// entry matching every term. With `withRecords` false the record column is left empty.
    public func findObjects(protections: [UInt8], objectClass: UInt64?, terms: [IndexTerm], withRecords: Bool) throws -> [ObjectRow] {
        guard !protections.isEmpty else { return [] }
        var sql = "SELECT \(withRecords ? SQL.columns : "id, uid, class, protection, x'', record_version, created, modified, primary_key, epoch, index_commit") FROM objects WHERE protection IN (\(protections.map { _ in "?" }.joined(separator: ",")))"
        var values: [SQLValue] = protections.map { .integer(Int64($0)) }
        if let objectClass {
            sql += " AND class = ?"
            values.append(.integer(Int64(bitPattern: objectClass)))
        }
        for term in terms where !term.digests.isEmpty {
            sql += " AND id IN (SELECT object_id FROM object_index WHERE attribute = ? AND digest IN (\(term.digests.map { _ in "?" }.joined(separator: ","))))"
            values.append(.integer(Int64(bitPattern: term.attribute)))
            values += term.digests.map { .blob($0) }
        }
        sql += " ORDER BY id"
        var rows: [ObjectRow] = []
        try database.query(sql, values) { rows.append(Self.row($0)) }
        return rows
    }

    /// Number of stored objects whose protection is one of `protections`.
    public func countObjects(protections: [UInt8]) throws -> Int {
        guard !protections.isEmpty else { return 0 }
        var count = 0
        try database.query("SELECT count(*) FROM objects WHERE protection IN (\(protections.map { _ in "?" }.joined(separator: ",")))",
                           protections.map { .integer(Int64($0)) }) { count = Int($0.int64(0)) }
        return count
    }

    /// Number of stored objects per protection class.
    public func objectCounts() throws -> [UInt8: Int] {
        var counts: [UInt8: Int] = [:]
        try database.query(SQL.count) { counts[UInt8(truncatingIfNeeded: $0.int64(0))] = Int($0.int64(1)) }
        return counts
    }

    private static func row(_ s: Statement) -> ObjectRow {
        ObjectRow(id: s.int64(0), uid: s.blob(1), objectClass: UInt64(bitPattern: s.int64(2)),
                  protection: UInt8(truncatingIfNeeded: s.int64(3)), record: s.blob(4),
                  recordVersion: UInt32(truncatingIfNeeded: s.int64(5)), created: s.int64(6), modified: s.int64(7),
                  primaryKey: s.isNull(8) ? nil : s.blob(8), epoch: UInt64(bitPattern: s.int64(9)), indexCommit: s.isNull(10) ? nil : s.blob(10))
    }
}
