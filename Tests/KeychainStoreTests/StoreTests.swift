import Glibc
import Foundation
import XCTest
import KeychainCrypto
@testable import KeychainStore

/// A fresh directory under /tmp, removed after the test.
func temporaryDirectory() -> String {
    var template = Array("/tmp/kc-test.XXXXXX".utf8CString)
    return template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
}

func removeDirectory(_ path: String) {
    _ = system("rm -rf '\(path)'")
}

final class AttributeRecordTests: XCTestCase {
    func test_encode_then_decode_round_trips() throws {
        let attributes: [(type: UInt64, value: [UInt8])] = [(0, [0, 0, 0, 0, 0, 0, 0, 0]), (3, Array("label".utf8)), (0x11, []), (0x8000_0000_4B43_0001, [1])]
        let decoded = try AttributeRecord.encode(attributes).withUnsafeBytes { try AttributeRecord.decode($0) }
        XCTAssertEqual(decoded.map(\.type), attributes.map(\.type))
        XCTAssertEqual(decoded.map(\.value), attributes.map(\.value))
    }

    func test_every_truncation_is_rejected() throws {
        let encoded = AttributeRecord.encode([(3, Array("a label".utf8)), (0x11, [1, 2, 3])])
        for length in 0..<encoded.count {
            XCTAssertThrowsError(try Array(encoded.prefix(length)).withUnsafeBytes { try AttributeRecord.decode($0) }, "length \(length)")
        }
    }

    func test_random_garbage_never_crashes() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<2000 {
            var bytes = AttributeRecord.magic + (0..<Int.random(in: 0..<64, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            if bytes.count >= 8, Bool.random(using: &generator) { bytes[4] = UInt8.random(in: 0...3, using: &generator); bytes[5...7] = [0, 0, 0] }
            _ = try? bytes.withUnsafeBytes { try AttributeRecord.decode($0) }
        }
    }
}

final class KeychainDatabaseTests: XCTestCase {
    var directory = ""

    override func setUp() { directory = temporaryDirectory() }
    override func tearDown() { removeDirectory(directory) }

    func test_new_file_has_schema_wal_and_mode_0600() throws {
        let path = directory + "/a.keychain-db"
        let database = try KeychainDatabase(path: path, create: true)
        var version: Int64 = 0
        try database.database.query("PRAGMA user_version") { version = $0.int64(0) }
        XCTAssertEqual(version, KeychainDatabase.schemaVersion)
        var mode = ""
        try database.database.query("PRAGMA journal_mode") { mode = $0.text(0) }
        XCTAssertEqual(mode, "wal")
        var status = stat()
        XCTAssertEqual(stat(path, &status), 0)
        XCTAssertEqual(status.st_mode & 0o777, 0o600)
        XCTAssertEqual(try database.integrityCheck(), "ok")
    }

    func test_a_file_from_a_newer_version_is_refused() throws {
        let path = directory + "/b.keychain-db"
        let database = try KeychainDatabase(path: path, create: true)
        try database.database.execute("PRAGMA user_version = 99")
        XCTAssertThrowsError(try KeychainDatabase(path: path, create: false)) { error in
            XCTAssertEqual((error as? StoreError)?.code, .schemaTooNew)
        }
    }

    func test_a_file_that_is_not_a_database_is_refused() throws {
        let path = directory + "/c.keychain-db"
        let file = fopen(path, "w")
        fputs(String(repeating: "not a database ", count: 300), file)
        fclose(file)
        XCTAssertThrowsError(try KeychainDatabase(path: path, create: false)) { error in
            XCTAssertEqual((error as? StoreError)?.code, .corrupt)
        }
    }

    func test_objects_are_found_by_index_digest_and_class() throws {
        let database = try KeychainDatabase(path: directory + "/d.keychain-db", create: true)
        let a = try database.insertObject(uid: [1], objectClass: 0, protection: 0, record: [1], primaryKey: nil,
                                          index: [IndexEntry(attribute: 3, digest: [0xAA])], now: 1)
        _ = try database.insertObject(uid: [2], objectClass: 0, protection: 1, record: [2], primaryKey: nil,
                                      index: [IndexEntry(attribute: 3, digest: [0xBB])], now: 1)
        XCTAssertEqual(try database.findObjects(protections: [0, 1], objectClass: 0, terms: [IndexTerm(attribute: 3, digests: [[0xAA]])], withRecords: true).map(\.id), [a])
        XCTAssertEqual(try database.findObjects(protections: [0], objectClass: nil, terms: [IndexTerm(attribute: 3, digests: [[0xBB]])], withRecords: false).count, 0)
        XCTAssertEqual(try database.findObjects(protections: [0, 1], objectClass: 2, terms: [], withRecords: false).count, 0)
        XCTAssertEqual(try database.objectCounts(), [0: 1, 1: 1])
        try database.deleteObject(id: a)
        XCTAssertThrowsError(try database.fetchObject(id: a)) { XCTAssertEqual(($0 as? StoreError)?.code, .notFound) }
        XCTAssertThrowsError(try database.deleteObject(id: a)) { XCTAssertEqual(($0 as? StoreError)?.code, .notFound) }
    }

    func test_an_update_rewrites_index_entries_only_when_they_change() throws {
        let database = try KeychainDatabase(path: directory + "/u.keychain-db", create: true)
        let entries = [IndexEntry(attribute: 3, digest: [0xAA]), IndexEntry(attribute: 4, digest: [0xCC])]
        let id = try database.insertObject(uid: [1], objectClass: 0, protection: 0, record: [1], primaryKey: [7], index: entries, now: 1)
        let rowids = { () throws -> [Int64] in
            var found: [Int64] = []
            try database.database.query("SELECT rowid FROM object_index WHERE object_id = ? ORDER BY rowid", [.integer(id)]) { found.append($0.int64(0)) }
            return found
        }
        let before = try rowids()
        // The same entries in another order, keys unchanged: the record changes, the entries stay.
        try database.updateObject(id: id, protection: 0, record: [2], primaryKey: [7], index: entries.reversed(), now: 2, keysUnchanged: true)
        XCTAssertEqual(try database.fetchObject(id: id).record, [2])
        XCTAssertEqual(try database.fetchObject(id: id).modified, 2)
        XCTAssertEqual(try rowids(), before)
        // Other entries and another protection and primary key: all of it written.
        try database.updateObject(id: id, protection: 1, record: [3], primaryKey: [8], index: [IndexEntry(attribute: 3, digest: [0xBB])], now: 3)
        let row = try database.fetchObject(id: id)
        XCTAssertEqual([row.record, row.primaryKey ?? []], [[3], [8]])
        XCTAssertEqual(row.protection, 1)
        XCTAssertEqual(try database.indexEntries(objectID: id).map(\.digest), [[0xBB]])
        XCTAssertEqual(try database.findObjects(protections: [1], objectClass: 0, terms: [IndexTerm(attribute: 3, digests: [[0xBB]])], withRecords: false).map(\.id), [id])
        XCTAssertEqual(try database.findObjects(protections: [0, 1], objectClass: 0, terms: [IndexTerm(attribute: 3, digests: [[0xAA]])], withRecords: false).count, 0)
    }

    func test_a_failed_write_transaction_leaves_nothing() throws {
        let database = try KeychainDatabase(path: directory + "/e.keychain-db", create: true)
        struct Abort: Error {}
        XCTAssertThrowsError(try database.write {
            _ = try database.insertObject(uid: [9], objectClass: 0, protection: 0, record: [1], primaryKey: nil, index: [], now: 1)
            throw Abort()
        })
        XCTAssertEqual(try database.objectCounts(), [:])
    }

    func test_a_second_connection_sees_writes_at_once() throws {
        let path = directory + "/f.keychain-db"
        let writer = try KeychainDatabase(path: path, create: true)
        let reader = try KeychainDatabase(path: path, create: false)
        XCTAssertEqual(try reader.objectCounts(), [:])
        _ = try writer.insertObject(uid: [3], objectClass: 0, protection: 0, record: [1], primaryKey: nil, index: [], now: 1)
        XCTAssertEqual(try reader.objectCounts(), [0: 1])
    }

    /// The change stamp comes from the wal-index header in shared memory (no lock, no system
    /// call), stays equal while nothing is written, and changes with every commit, by this
    /// connection or another one, and with a checkpoint that restarts the WAL.
    func test_the_change_stamp_is_read_from_shared_memory_and_sees_every_commit() throws {
        let path = directory + "/f.keychain-db"
        let writer = try KeychainDatabase(path: path, create: true)
        let reader = try KeychainDatabase(path: path, create: false)
        var stamp = try reader.currentStamp()
        XCTAssertEqual(stamp.dataVersion, -1, "read from the wal-index header")
        XCTAssertEqual(try reader.currentStamp(), stamp)
        for round in 0..<20 {
            _ = try writer.insertObject(uid: [UInt8(round)], objectClass: 0, protection: 0, record: [1], primaryKey: nil, index: [], now: 1)
            let next = try reader.currentStamp()
            XCTAssertNotEqual(next, stamp, "commit \(round) by another connection")
            XCTAssertEqual(try reader.currentStamp(), next)
            stamp = next
        }
        try writer.database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        _ = try writer.insertObject(uid: [99], objectClass: 0, protection: 0, record: [1], primaryKey: nil, index: [], now: 1)
        XCTAssertNotEqual(try reader.currentStamp(), stamp, "a commit after the WAL restarted")
        stamp = try reader.currentStamp()
        _ = try reader.insertObject(uid: [100], objectClass: 0, protection: 0, record: [1], primaryKey: nil, index: [], now: 1)
        XCTAssertNotEqual(try reader.currentStamp(), stamp, "a commit by this connection")
    }

    /// Reading the stamp must not cost SQLite its locks on the -shm file. POSIX locks belong to
    /// the process and go with any close of the file: a stamp read through a descriptor of our
    /// own dropped them, and another process (keychainctl beside keychaind) then saw no reader,
    /// re-initialised the wal-index, and keychaind kept reading an old snapshot. /proc/locks
    /// lists this process's locks on the -shm file's inode before and after.
    func test_reading_the_stamp_keeps_sqlites_locks_on_the_shared_memory_file() throws {
        let path = directory + "/locks.keychain-db"
        let writer = try KeychainDatabase(path: path, create: true)
        _ = try writer.insertObject(uid: [1], objectClass: 0, protection: 0, record: [1], primaryKey: nil, index: [], now: 1)
        let reader = try KeychainDatabase(path: path, create: false)
        _ = try reader.countObjects(protections: [0])
        let before = try shmLocks(path)
        XCTAssertGreaterThan(before, 0, "SQLite holds locks on the -shm file while connections are open")
        XCTAssertEqual(try reader.currentStamp().dataVersion, -1, "read from the wal-index header")
        _ = try reader.currentStamp()
        XCTAssertEqual(try shmLocks(path), before, "the stamp read left every lock in place")
        withExtendedLifetime(writer) {}
    }

    /// This process's POSIX locks on the -shm file of `path`, as /proc/locks lists them.
    private func shmLocks(_ path: String) throws -> Int {
        var status = stat()
        guard stat(path + "-shm", &status) == 0 else { throw XCTSkip("no -shm file") }
        let text = try String(contentsOfFile: "/proc/locks", encoding: .utf8)
        let pid = String(getpid())
        return text.split(separator: "\n").filter { line in
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            guard fields.count >= 6, fields[1] == "POSIX", fields[4] == pid else { return false }
            return fields[5].split(separator: ":").last.map { UInt64($0) == UInt64(status.st_ino) } ?? false
        }.count
    }
}

final class SealedRecordTests: XCTestCase {
    private let base = SecureBytes(Array(repeating: 5, count: 32))

    func test_a_record_opens_only_on_its_own_row_with_its_own_index_entries() throws {
        let plaintext = SecureBytes(Array("attributes".utf8))
        let label = IndexEntry(attribute: 3, digest: [UInt8](repeating: 0xAA, count: 16))
        let id = IndexEntry(attribute: 0x102, digest: [UInt8](repeating: 0xBB, count: 16))
        let index = try IndexCommitment(entries: [label, id], primaryKey: nil)
        let box = try SealedRecord.seal(plaintext, base: base, uid: [1, 1], objectClass: 0, protection: 1, index: index)
        let version = SealedRecord.currentVersion
        XCTAssertEqual(try SealedRecord.open(box, base: base, uid: [1, 1], objectClass: 0, protection: 1, version: version, index: index).bytes, plaintext.bytes)
        let reordered = try IndexCommitment(entries: [id, label], primaryKey: nil)
        XCTAssertEqual(try SealedRecord.open(box, base: base, uid: [1, 1], objectClass: 0, protection: 1, version: version, index: reordered).bytes, plaintext.bytes,
                       "the order rows come back in does not matter")
        XCTAssertThrowsError(try SealedRecord.open(box, base: base, uid: [1, 2], objectClass: 0, protection: 1, version: version, index: index))
        XCTAssertThrowsError(try SealedRecord.open(box, base: base, uid: [1, 1], objectClass: 3, protection: 1, version: version, index: index))
        XCTAssertThrowsError(try SealedRecord.open(box, base: base, uid: [1, 1], objectClass: 0, protection: 0, version: version, index: index))
        XCTAssertThrowsError(try SealedRecord.open(box, base: base, uid: [1, 1], objectClass: 0, protection: 1, version: 1, index: index))
        XCTAssertThrowsError(try SealedRecord.open(box, base: base, uid: [1, 1], objectClass: 0, protection: 1, version: 3, index: index))
        // Index entries removed, swapped for another object's, or a primary key added: refused.
        XCTAssertThrowsError(try SealedRecord.open(box, base: base, uid: [1, 1], objectClass: 0, protection: 1, version: version,
                                                   index: try IndexCommitment(entries: [label], primaryKey: nil)))
        XCTAssertThrowsError(try SealedRecord.open(box, base: base, uid: [1, 1], objectClass: 0, protection: 1, version: version,
                                                   index: try IndexCommitment(entries: [IndexEntry(attribute: 3, digest: [UInt8](repeating: 0xCC, count: 16)), id], primaryKey: nil)))
        XCTAssertThrowsError(try SealedRecord.open(box, base: base, uid: [1, 1], objectClass: 0, protection: 1, version: version,
                                                   index: try IndexCommitment(entries: [label, id], primaryKey: [1])))
    }

    func test_blind_index_is_keyed_and_binds_the_attribute() throws {
        let one = try BlindIndex(deriving: base)
        let other = try BlindIndex(deriving: SecureBytes(Array(repeating: 6, count: 32)))
        XCTAssertEqual(try one.digest(attribute: 3, value: [1]), try one.digest(attribute: 3, value: [1]))
        XCTAssertNotEqual(try one.digest(attribute: 3, value: [1]), try other.digest(attribute: 3, value: [1]))
        XCTAssertNotEqual(try one.digest(attribute: 3, value: [1]), try one.digest(attribute: 4, value: [1]))
        XCTAssertEqual(try one.digest(attribute: 3, value: [1]).count, 16)
    }
}

/// Attack (security issue, item 5): the length of a sealed record gives away the length of the
/// secret in it unless records are padded to size classes.
final class RecordPaddingTests: XCTestCase {
    func test_records_of_different_secret_lengths_have_the_same_padded_size() {
        let short = AttributeRecord.encode([(0x11, Array("x".utf8)), (0x3, Array("label".utf8))], padded: true)
        let long = AttributeRecord.encode([(0x11, [UInt8](repeating: 0x41, count: 41)), (0x3, Array("label".utf8))], padded: true)
        XCTAssertEqual(short.count, 1024)
        XCTAssertEqual(long.count, 1024)
        XCTAssertEqual(AttributeRecord.encode([(0x11, [UInt8](repeating: 1, count: 1100))], padded: true).count, 2048)
        XCTAssertEqual(AttributeRecord.encode([(0x11, [UInt8](repeating: 1, count: 1100))], padded: false).count, 8 + 12 + 1100)
        XCTAssertEqual(AttributeRecord.sizeClass(16 << 10), 16 << 10)
        XCTAssertEqual(AttributeRecord.sizeClass((16 << 10) + 1), 32 << 10)
        let decoded = short.withUnsafeBytes { try? AttributeRecord.decode($0) }
        XCTAssertEqual(decoded?.map(\.type), [0x11, 0x3], "the padding entry is dropped")
        XCTAssertEqual(decoded?.first?.value, Array("x".utf8))
        var truncated = short
        truncated.removeLast()
        XCTAssertThrowsError(try truncated.withUnsafeBytes { try AttributeRecord.decode($0) })
    }
}

/// The first look at an existing file, before SQLite opens it (FileHeader).
final class FileHeaderTests: XCTestCase {
    private func write(_ bytes: [UInt8], to path: String) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

    private func reason(_ path: String) -> String? {
        do { try FileHeader.check(path); return nil } catch { return (error as? StoreError)?.reason ?? "\(error)" }
    }

    func test_damaged_files_are_refused_unless_a_write_ahead_log_can_finish_them() throws {
        let folder = temporaryDirectory()
        defer { removeDirectory(folder) }
        let path = folder + "/k.keychain-db"
        do {
            // Closed at the end of this scope: the last connection checkpoints the log into the file.
            let store = try KeychainDatabase(path: path, create: true)
            try store.write { try store.setMeta("x", blob: [UInt8](repeating: 7, count: 20_000)) }
        }
        var info = stat()
        XCTAssertEqual(stat(path, &info), 0)
        XCTAssertNil(reason(path), "a sound keychain file")
        let whole = try XCTUnwrap(FileManager.default.contents(atPath: path).map { Array($0) })
        let copy = folder + "/copy.keychain-db"
        write(Array(whole.prefix(3000)), to: copy)
        XCTAssertEqual(reason(copy), "damaged: 3000 bytes is not a whole number of 4096-byte pages (truncated or cut)")
        write(Array(whole.prefix(4096)), to: copy)
        XCTAssertNotNil(reason(copy), "one page of a longer file: truncated")
        write([], to: copy)
        XCTAssertEqual(reason(copy), "not a keychain: the file is empty")
        write(Array("not sqlite at all".utf8), to: copy)
        XCTAssertEqual(reason(copy), "not a keychain: not an SQLite database (17 bytes of something else)")
        // A checkpoint cut short: the -wal beside it holds the rest, SQLite decides.
        write(Array(whole.prefix(3000)), to: copy)
        write([1, 2, 3], to: copy + "-wal")
        XCTAssertNil(reason(copy))
        write([], to: copy)
        XCTAssertNil(reason(copy), "empty before its first checkpoint, the log beside it")
    }
}
