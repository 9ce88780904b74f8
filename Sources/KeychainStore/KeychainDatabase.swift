/// A point in a keychain file's history, for caches (see `changeStamp()`).
public struct ChangeStamp: Equatable, Sendable {
    /// SQLite's data_version, or -1 when the stamp was read from the wal-index header.
    let dataVersion: Int64
    /// The wal-index header's transaction counter, frame count and salts (0 with data_version).
    let walIndex: UInt64
    let walSalts: UInt64
    let localWrites: UInt64
}

/// One keychain file: the SQLite database with its schema applied.
///
/// This type knows tables and bytes, not PKCS#11: the meta table holds named values, the
/// objects table holds sealed records. Callers serialise access to one instance.
public final class KeychainDatabase {
    let database: Database

    public var path: String { database.path }

    /// Opens an existing keychain file; `create` makes a new one (mode 0600).
    public init(path: String, create: Bool) throws {
        if !create { try FileHeader.check(path) }
        database = try Database(path: path, create: create)
        try Migrations.migrate(database)
    }

    public static var schemaVersion: Int64 { Migrations.currentVersion }

    /// Runs `body` as one write transaction: all of it is stored, or none.
    public func write<R>(_ body: () throws -> R) throws -> R {
        defer { localWrites &+= 1 }
        return try database.write(body)
    }

    private var localWrites: UInt64 = 0

    /// Changes whenever this file may have changed: a write through this connection, or a commit
    /// by any other connection (SQLite's data_version, which inside a read transaction belongs to
    /// that transaction's snapshot: what the integrity and epoch checks need). Equal values mean
    /// nothing changed.
    public func changeStamp() throws -> ChangeStamp {
        var version: Int64 = 0
        try database.query("PRAGMA data_version") { version = $0.int64(0) }
        return ChangeStamp(dataVersion: version, walIndex: 0, walSalts: 0, localWrites: localWrites)
    }

    /// Like `changeStamp`, but the file's state now, not a snapshot's, and without a system call:
    /// read from the wal-index header in the -shm file's shared memory when it can be (else
    /// `changeStamp`: a read transaction, two fcntl locks, about 6 µs). For caches filled after
    /// the stamp is taken (each C_SignInit checks one). Stamps of the two kinds never compare equal.
    public func currentStamp() throws -> ChangeStamp {
        if !database.inTransaction, let stamp = database.walIndexStamp() {
            return ChangeStamp(dataVersion: -1, walIndex: UInt64(stamp.0) << 32 | UInt64(stamp.1),
                               walSalts: UInt64(stamp.2) << 32 | UInt64(stamp.3), localWrites: localWrites)
        }
        return try changeStamp()
    }

    /// Whether a transaction is open on this connection (a write now would be part of it).
    public var inTransaction: Bool { database.transactionDepth > 0 }

    /// Runs `body` over one consistent snapshot.
    public func read<R>(_ body: () throws -> R) throws -> R { try database.read(body) }

    // MARK: meta

    public func metaBlob(_ key: String) throws -> [UInt8]? {
        var value: [UInt8]?
        try database.query("SELECT value FROM meta WHERE key = ?", [.text(key)]) { s in
            value = s.isNull(0) ? nil : s.blob(0)
        }
        return value
    }

    public func metaInteger(_ key: String) throws -> Int64? {
        var value: Int64?
        try database.query("SELECT value FROM meta WHERE key = ?", [.text(key)]) { s in
            value = s.isNull(0) ? nil : s.int64(0)
        }
        return value
    }

    public func setMeta(_ key: String, blob: [UInt8]?) throws {
        try database.run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [.text(key), blob.map { .blob($0) } ?? .null])
    }

    public func setMeta(_ key: String, integer: Int64) throws {
        try database.run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", [.text(key), .integer(integer)])
    }

    /// Adds `delta` to an integer meta value in one statement (safe against other processes).
    public func incrementMeta(_ key: String, by delta: Int64) throws {
        try database.run("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = value + excluded.value", [.text(key), .integer(delta)])
    }

    /// Every meta value whose key starts with `prefix`, with its key (blobs; integers as nil).
    public func metaBlobs(prefix: String) throws -> [(key: String, value: [UInt8]?)] {
        var rows: [(key: String, value: [UInt8]?)] = []
        try database.query("SELECT key, value FROM meta WHERE substr(key, 1, ?) = ?", [.integer(Int64(prefix.utf8.count)), .text(prefix)]) { s in
            rows.append((s.text(0), s.isNull(1) ? nil : s.blob(1)))
        }
        return rows
    }

    /// Removes the meta value `key`; whether there was one.
    @discardableResult
    public func deleteMeta(_ key: String) throws -> Bool {
        try database.run("DELETE FROM meta WHERE key = ?", [.text(key)])
        return database.changes > 0
    }

    /// Removes every meta value whose key starts with `prefix`.
    public func deleteMeta(prefix: String) throws {
        try database.run("DELETE FROM meta WHERE substr(key, 1, ?) = ?", [.integer(Int64(prefix.utf8.count)), .text(prefix)])
    }

    /// Removes every object (used when a token is re-initialised).
    public func deleteAllObjects() throws {
        try database.run("DELETE FROM object_index")
        try database.run("DELETE FROM objects")
    }

    /// SQLite's own consistency check; "ok" when the file is sound.
    public func integrityCheck() throws -> String {
        var lines: [String] = []
        try database.query("PRAGMA integrity_check") { lines.append($0.text(0)) }
        return lines.joined(separator: "\n")
    }
}
