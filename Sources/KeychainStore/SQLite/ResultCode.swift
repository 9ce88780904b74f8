internal import CSQLite

/// Why a store operation failed, in terms the layers above can act on.
public struct StoreError: Error, Equatable, CustomStringConvertible {
    public enum Code: Equatable, Sendable {
        /// Another connection held the database longer than the busy timeout.
        case busy
        /// The file is not a database, or its pages are damaged.
        case corrupt
        /// The file or its directory is read-only.
        case readOnly
        /// The disk (or a quota) is full.
        case full
        /// An I/O error, or the file could not be opened.
        case io
        /// A UNIQUE constraint: the item already exists.
        case duplicate
        /// A row that was expected is gone (for example deleted by another process).
        case notFound
        /// The file was written by a newer version of this software.
        case schemaTooNew
        /// A stored record or value does not have the expected shape.
        case malformed
        /// Anything else SQLite reports.
        case other
    }

    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    /// Maps an SQLite primary result code (`SQLITE_*`) to a store error code.
    init(sqliteCode: Int32, message: String) {
        switch sqliteCode & 0xFF {
        case SQLITE_BUSY, SQLITE_LOCKED: code = .busy
        case SQLITE_CORRUPT, SQLITE_NOTADB: code = .corrupt
        case SQLITE_READONLY: code = .readOnly
        case SQLITE_FULL: code = .full
        case SQLITE_IOERR, SQLITE_CANTOPEN, SQLITE_PERM: code = .io
        case SQLITE_CONSTRAINT: code = .duplicate
        default: code = .other
        }
        reason = message
    }

    public static func == (lhs: StoreError, rhs: StoreError) -> Bool { lhs.code == rhs.code }
    public var description: String { "\(code): \(reason)" }
}
