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
}

/// One searchable attribute of an object, as a blind-index digest.
public struct IndexEntry: Sendable {
    public let attribute: UInt64
    public let digest: [UInt8]

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
        static let insert = "INSERT INTO objects (uid, class, protection, record, record_version, primary_key, created, modified) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
        static let insertIndex = "INSERT INTO object_index (object_id, attribute, digest) VALUES (?, ?, ?)"
        static let deleteIndex = "DELETE FROM object_index WHERE object_id = ?"
        static let update = "UPDATE objects SET protection = ?, record = ?, record_version = ?, primary_key = ?, modified = ? WHERE id = ?"
        static let delete = "DELETE FROM objects WHERE id = ?"
        static let columns = "id, uid, class, protection, record, record_version, created, modified"
        static let fetch = "SELECT \(columns) FROM objects WHERE id = ?"
        static let count = "SELECT protection, count(*) FROM objects GROUP BY protection"
    }

    /// Adds an object and its index entries in one transaction; returns its row id.
    public func insertObject(uid: [UInt8], objectClass: UInt64, protection: UInt8, record: [UInt8], primaryKey: [UInt8]?, index: [IndexEntry], now: Int64) throws -> Int64 {
        try database.write {
            try database.run(SQL.insert, [.blob(uid), .integer(Int64(bitPattern: objectClass)), .integer(Int64(protection)), .blob(record),
                                          .integer(Int64(SealedRecord.currentVersion)), primaryKey.map { .blob($0) } ?? .null, .integer(now), .integer(now)])
            let id = database.lastInsertRowID
            for entry in index {
                try database.run(SQL.insertIndex, [.integer(id), .integer(Int64(bitPattern: entry.attribute)), .blob(entry.digest)])
            }
            return id
        }
    }

    /// Replaces an object's record, protection and index entries.
    public func updateObject(id: Int64, protection: UInt8, record: [UInt8], primaryKey: [UInt8]?, index: [IndexEntry], now: Int64) throws {
        try database.write {
            try database.run(SQL.update, [.integer(Int64(protection)), .blob(record), .integer(Int64(SealedRecord.currentVersion)), primaryKey.map { .blob($0) } ?? .null, .integer(now), .integer(id)])
            guard database.changes == 1 else { throw StoreError(.notFound, "object \(id) no longer exists") }
            try database.run(SQL.deleteIndex, [.integer(id)])
            for entry in index {
                try database.run(SQL.insertIndex, [.integer(id), .integer(Int64(bitPattern: entry.attribute)), .blob(entry.digest)])
            }
        }
    }

    public func deleteObject(id: Int64) throws {
        try database.write {
            try database.run(SQL.delete, [.integer(id)])
            guard database.changes == 1 else { throw StoreError(.notFound, "object \(id) no longer exists") }
        }
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
        var sql = "SELECT \(withRecords ? SQL.columns : "id, uid, class, protection, x'', record_version, created, modified") FROM objects WHERE protection IN (\(protections.map { _ in "?" }.joined(separator: ",")))"
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
                  recordVersion: UInt32(truncatingIfNeeded: s.int64(5)), created: s.int64(6), modified: s.int64(7))
    }
}
