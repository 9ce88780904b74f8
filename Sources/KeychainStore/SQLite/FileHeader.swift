import Glibc
import KeychainCrypto

/// What an existing keychain file's first bytes say, read before SQLite opens it: a file that is
/// not a whole SQLite database is refused without SQLite touching it (opening one in WAL mode
/// would create side files beside it, and an empty file would be taken for a new database and
/// written). See "Database File Format", §1.3 (the 100-byte header) at sqlite.org/fileformat.html.
enum FileHeader {
    static let magic = Array("SQLite format 3\0".utf8)

    /// Throws `.corrupt` with a reason a person can act on when `path` cannot be a sound database.
    static func check(_ path: String) throws {
        guard let fd = try? System.open(path, O_RDONLY | O_NOFOLLOW) else { return }  // SQLite reports the reason (missing, permission)
        defer { System.close(fd) }
        guard let info = try? System.fstat(fd) else { return }
        let size = Int64(info.st_size)
        // A checkpoint cut short (power loss, SIGKILL) can leave the file shorter than its header
        // says, or a last page half written (or, before the first checkpoint, empty): the -wal
        // beside it still holds those pages and SQLite finishes the job. Only a file with no
        // write-ahead log to recover from is judged beyond its first bytes.
        let recoverable = ((try? System.stat(Database.writeAheadLog(of: path)))?.st_size ?? 0) > 0
        if size == 0, recoverable { return }
        guard size > 0 else { throw StoreError(.corrupt, "not a keychain: the file is empty") }
        let header = (try? System.pread(fd, count: 100, at: 0)) ?? []
        let count = header.count
        guard count >= magic.count, Array(header.prefix(magic.count)) == magic else {
            throw StoreError(.corrupt, "not a keychain: not an SQLite database (\(size) bytes of something else)")
        }
        if recoverable { return }
        guard count == 100 else { throw StoreError(.corrupt, "damaged: only \(size) bytes, shorter than SQLite's header (truncated)") }
        let field = { (offset: Int, width: Int) in header[offset..<(offset + width)].reduce(Int64(0)) { $0 << 8 | Int64($1) } }
        // Page size: a power of two from 512 to 32768, or 1 for 65536.
        let rawPageSize = field(16, 2)
        let pageSize = rawPageSize == 1 ? 65536 : rawPageSize
        guard pageSize >= 512, pageSize <= 65536, pageSize & (pageSize - 1) == 0 else {
            throw StoreError(.corrupt, "damaged: the SQLite header names no valid page size")
        }
        guard size % pageSize == 0 else {
            throw StoreError(.corrupt, "damaged: \(size) bytes is not a whole number of \(pageSize)-byte pages (truncated or cut)")
        }
        // The header's page count is valid when its change counter equals version-valid-for.
        let pages = field(28, 4)
        if field(24, 4) == field(92, 4), pages > 0, size < pages * pageSize {
            throw StoreError(.corrupt, "damaged: \(size) bytes where the header says \(pages) pages of \(pageSize) (truncated)")
        }
    }
}
