internal import CSQLite
import Glibc
import KeychainCrypto

/// One SQLite connection. Not shared between threads: the layer above serialises access.
public final class Database {
    let handle: OpaquePointer
    public let path: String
    private var statements: [String: Statement] = [:]
    private(set) var transactionDepth = 0
    var inTransaction: Bool { transactionDepth > 0 }

    /// How long a writer waits for another process's transaction before giving up.
    static let busyTimeoutMilliseconds: Int32 = 10_000

    /// The write-ahead log SQLite keeps beside a database in WAL mode.
    static func writeAheadLog(of path: String) -> String { path + "-wal" }
    /// The log's shared-memory index, beside it too.
    static func sharedMemoryIndex(of path: String) -> String { path + "-shm" }
    /// Every file a database at `path` consists of: the database and its two side files.
    public static func files(of path: String) -> [String] { [path, writeAheadLog(of: path), sharedMemoryIndex(of: path)] }

    /// Removes the database at `path` and its side files (absent ones are no error); the error
    /// names the first that could not be removed, after trying them all.
    public static func remove(at path: String) throws(StoreError) {
        var failure: StoreError?
        for file in files(of: path) {
            do { try System.removeIfPresent(file) } catch { failure = failure ?? StoreError(.io, "cannot delete \(file): \(error.reason)") }
        }
        if let failure { throw failure }
    }

    /// Opens (and, with `create`, creates with mode 0600) the database at `path`.
    public init(path: String, create: Bool) throws {
        if create {
            do { System.close(try System.open(path, O_CREAT | O_RDWR, mode: 0o600)) } catch {
                throw StoreError(.io, "cannot create \(path): \(error.reason)")
            }
        }
        var connection: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        let rc = sqlite3_open_v2(path, &connection, flags, nil)
        guard rc == SQLITE_OK, let connection else {
            let message = connection.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(connection)
            throw StoreError(sqliteCode: rc, message: "open \(path): \(message)")
        }
        self.handle = connection
        self.path = path
        sqlite3_busy_timeout(connection, Self.busyTimeoutMilliseconds)
        do {
            try execute("PRAGMA foreign_keys = ON")
            try execute("PRAGMA secure_delete = ON")
            try execute("PRAGMA journal_mode = WAL")
            try execute("PRAGMA synchronous = FULL")
            // Keep the -wal (emptied) and -shm files when the last connection closes, so that the
            // next open needs to create nothing: on a full disk the keychain still opens and reads
            // (writes fail with SQLITE_FULL), and on a read-only file system it opens read-only.
            var persist: Int32 = 1
            sqlite3_file_control(connection, "main", SQLITE_FCNTL_PERSIST_WAL, &persist)
            try execute("PRAGMA journal_size_limit = 8388608")
        } catch {
            statements.removeAll()
            sqlite3_close_v2(connection)
            throw error
        }
    }

    deinit {
        statements.removeAll()
        sqlite3_close_v2(handle)
    }

    /// The wal-index header, in SQLite's own mapping of the -shm file (kc_wal_index_region), once
    /// this connection has used it. Never a mapping of our own: opening and closing the -shm file
    /// here would drop this process's locks on it (POSIX locks go with any close of the file), and
    /// another process would re-initialise the wal-index under this connection.
    private var walIndex: UnsafeRawPointer?
    private var walIndexTried = false

    /// {iChange, mxFrame, salt1, salt2} of the wal-index header, or nil (no WAL, no wal-index
    /// yet, or a header being written or not initialised: the caller asks SQLite).
    func walIndexStamp() -> (UInt32, UInt32, UInt32, UInt32)? {
        if walIndex == nil {
            guard !walIndexTried, transactionDepth == 0 else { return nil }
            // SQLite maps the wal-index at the connection's first read.
            guard (try? query("PRAGMA data_version") { _ in }) != nil else { return nil }
            walIndexTried = true
            walIndex = kc_wal_index_region(handle)
        }
        guard let walIndex else { return nil }
        var stamp: (UInt32, UInt32, UInt32, UInt32) = (0, 0, 0, 0)
        let read = withUnsafeMutableBytes(of: &stamp) { kc_wal_index_stamp(walIndex, $0.baseAddress?.assumingMemoryBound(to: UInt32.self)) }
        return read == 1 ? stamp : nil
    }

    func error(_ rc: Int32, _ operation: String) -> StoreError {
        StoreError(sqliteCode: rc, message: "\(operation): \(String(cString: sqlite3_errmsg(handle)))")
    }

    /// Runs SQL that returns no rows of interest (several statements allowed).
    func execute(_ sql: String) throws {
        let rc = sqlite3_exec(handle, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw error(rc, "exec") }
    }

    /// A cached prepared statement for `sql`.
    func statement(_ sql: String) throws -> Statement {
        if let cached = statements[sql] { return cached }
        let statement = try Statement(database: self, sql: sql)
        statements[sql] = statement
        return statement
    }

    /// Runs `sql` with `values`, calling `row` for each result row.
    func query(_ sql: String, _ values: [SQLValue] = [], row: (Statement) throws -> Void) throws {
        let statement = try statement(sql)
        try statement.bind(values)
        defer { statement.reset() }
        while try statement.step() { try row(statement) }
    }

    /// Runs `sql` with `values` for its effect.
    func run(_ sql: String, _ values: [SQLValue] = []) throws {
        try query(sql, values) { _ in }
    }

    var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }
    var changes: Int { Int(sqlite3_changes(handle)) }

    /// Runs `body` in a write transaction (BEGIN IMMEDIATE, so the write lock is taken up front
    /// and a busy database shows up here, not half-way). A throw rolls everything back.
    public func write<R>(_ body: () throws -> R) throws -> R {
        try transaction("BEGIN IMMEDIATE", body)
    }

    /// Runs `body` in a read transaction: one consistent snapshot across several statements.
    public func read<R>(_ body: () throws -> R) throws -> R {
        try transaction("BEGIN DEFERRED", body)
    }

    private func transaction<R>(_ begin: String, _ body: () throws -> R) throws -> R {
        if transactionDepth > 0 {
            transactionDepth += 1
            defer { transactionDepth -= 1 }
            return try body()
        }
        try execute(begin)
        transactionDepth = 1
        defer { transactionDepth = 0 }
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            if sqlite3_get_autocommit(handle) == 0 { _ = sqlite3_exec(handle, "ROLLBACK", nil, nil, nil) }
            throw error
        }
    }
}
