internal import CSQLite

/// A prepared statement, finalised when its owner lets it go.
final class Statement {
    private let handle: OpaquePointer
    private unowned let database: Database

    init(database: Database, sql: String) throws {
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(database.handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else {
            throw database.error(rc, "prepare")
        }
        self.handle = statement
        self.database = database
    }

    deinit { sqlite3_finalize(handle) }

    /// SQLite copies the bytes before the call returns (SQLITE_TRANSIENT, a cast macro Swift cannot import).
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    func reset() {
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }

    func bind(_ values: [SQLValue]) throws {
        reset()
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let rc: Int32
            switch value {
            case .integer(let v): rc = sqlite3_bind_int64(handle, index, v)
            case .text(let v): rc = sqlite3_bind_text(handle, index, v, -1, Self.transient)
            case .blob(let v):
                rc = v.withUnsafeBytes { sqlite3_bind_blob64(handle, index, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), sqlite3_uint64($0.count), Self.transient) }
            case .null: rc = sqlite3_bind_null(handle, index)
            }
            guard rc == SQLITE_OK else { throw database.error(rc, "bind") }
        }
    }

    /// Advances one row; false when done.
    func step() throws -> Bool {
        let rc = sqlite3_step(handle)
        switch rc {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let failure = database.error(rc, "step")
            sqlite3_reset(handle)
            throw failure
        }
    }

    func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(handle, column) }

    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(handle, column) == SQLITE_NULL }

    func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let base = sqlite3_column_blob(handle, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: base, count: count))
    }

    func text(_ column: Int32) -> String {
        guard let base = sqlite3_column_text(handle, column) else { return "" }
        return String(cString: base)
    }
}

/// A value bound to a statement parameter.
enum SQLValue {
    case integer(Int64)
    case text(String)
    case blob([UInt8])
    case null
}
