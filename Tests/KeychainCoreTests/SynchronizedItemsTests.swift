import Glibc
import XCTest
import KeychainCrypto
@testable import KeychainCore
@testable import KeychainStore

/// What a sync reads and writes of a keychain (Keychain+Sync): two keychains with their own master
/// and device keys stand for two devices.
final class SynchronizedItemsTests: XCTestCase {
    private var root = ""
    private let kdf = ScryptParameters(logN: 8, blockSize: 8, parallelism: 1)
    private let soPIN = Array("so-secret".utf8), userPIN = Array("1234".utf8)

    override func setUp() {
        var template = Array("/tmp/kc-sync-items.XXXXXX".utf8CString)
        root = template.withUnsafeMutableBufferPointer { buffer -> String in
            guard let base = buffer.baseAddress, mkdtemp(base) != nil else { return "/tmp" }
            return String(cString: base)
        }
    }

    override func tearDown() { _ = system("rm -rf '\(root)'") }

    private func device(_ name: String) throws -> (Keychain, MasterKey) {
        let deviceKey = DeviceKeyFile(path: root + "/\(name)-state/device-key")
        let keychain = try soPIN.withUnsafeBytes { so in
            try userPIN.withUnsafeBytes {
                try Keychain.create(at: root + "/" + name + ".keychain", slotID: 1, label: "login", soPIN: so, userPIN: $0, kdf: kdf, deviceKey: deviceKey)
            }
        }
        return (keychain, try userPIN.withUnsafeBytes { try keychain.unlock(.user, pin: $0) })
    }

    private func password(_ account: String, secret: String, sync: Bool, protection: ProtectionClass = .whenUnlocked) throws -> (ObjectAttributes, [UInt8]) {
        let id = try UniqueID.random()
        let template: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue)), (.token, [1]), (.isPrivate, [1]),
                                  (.itemClass, AttributeValue.ulong(ItemClass.genericPassword.rawValue)), (.label, Array(account.utf8)),
                                  (.account, Array(account.utf8)), (.application, Array("example.com".utf8)), (.value, Array(secret.utf8)),
                                  (.accessible, AttributeValue.ulong(protection.rawValue)), (.synchronizable, AttributeValue.bool(sync))]
        return (try ObjectTemplate.create(template, uniqueID: id.text, policy: .compatible), id.bytes)
    }

    func test_an_item_crosses_with_its_id_value_and_time_and_a_delete_follows() throws {
        let (a, masterA) = try device("a"), (b, masterB) = try device("b")
        let (item, uid) = try password("alice", secret: "s3cret", sync: true)
        let rowA = try a.add(item, uid: uid, master: masterA)
        let (local, localUID) = try password("bob", secret: "local only", sync: false)
        _ = try a.add(local, uid: localUID, master: masterA)

        let items = try a.synchronizableItems(master: masterA)
        XCTAssertEqual(items.map(\.uid), [uid])
        try b.applySynchronized(uid: uid, record: SecureBytes(items[0].record), modified: 1_000_000_000, master: masterB)
        let rowB = try XCTUnwrap(try b.store.objectID(uid: uid))
        XCTAssertEqual(try b.object(id: rowB, master: masterB)[.value], Array("s3cret".utf8))
        XCTAssertEqual(try b.store.fetchObject(id: rowB).modified, 1_000_000_000)
        // The applied item is synchronizable there too, and reads back the same record.
        XCTAssertEqual(try b.synchronizableItems(master: masterB).map(\.record), items.map(\.record))

        // An edit replaces the row with that id; a delete removes it.
        var edited = try a.object(id: rowA, master: masterA)
        edited[.value] = Array("n3w".utf8)
        try a.replace(id: rowA, with: edited, master: masterA)
        try b.applySynchronized(uid: uid, record: SecureBytes(try a.synchronizableItems(master: masterA)[0].record), modified: 1_000_000_100, master: masterB)
        XCTAssertEqual(try b.object(id: rowB, master: masterB)[.value], Array("n3w".utf8))
        XCTAssertEqual(try b.store.fetchObject(id: rowB).modified, 1_000_000_100)  // the writer's time, in the update itself
        try b.removeSynchronized(uid: uid, master: masterB)
        XCTAssertNil(try b.store.objectID(uid: uid))
        try b.removeSynchronized(uid: uid, master: masterB)  // already gone: nothing to do
    }

    /// Items prepared on several threads (`prepareSynchronized`) and stored in one transaction
    /// get the rows the long way gives (the same search and locked-lookup entries); a prepared
    /// item whose keychain changed meanwhile (here: the locked-lookup index turned off) is not
    /// stored but handed back, and the long way then stores it under the new setting.
    func test_prepared_items_store_as_the_long_way_and_are_made_again_after_a_change() throws {
        let (a, masterA) = try device("a"), (b, masterB) = try device("b")
        for index in 0..<80 {
            let (item, uid) = try password("user\(index)", secret: "secret \(index)", sync: true)
            _ = try a.add(item, uid: uid, master: masterA)
        }
        let items = try a.synchronizableItems(master: masterA).sorted { $0.uid.lexicographicallyPrecedes($1.uid) }
        let records = items.map { SynchronizedRecord(uid: $0.uid, record: SecureBytes($0.record), modified: 1_000_000_000) }
        let prepared = try b.prepareSynchronized(records, master: masterB).map { try $0.get() }
        XCTAssertEqual(prepared.map(\.uid), items.map(\.uid), "one result per item, in order")

        var seals: [[UInt8]?] = []
        try b.transaction { () throws(KeychainError) in
            for item in prepared.prefix(40) { seals.append(try b.applySynchronized(item, master: masterB)) }
        }
        XCTAssertEqual(seals.compactMap { $0 }.count, 40)
        XCTAssertEqual(try b.lockedSearch([:])?.count, 40, "locked-lookup entries made on another thread")
        // The long way over the same record leaves the same entries.
        let first = try XCTUnwrap(try b.store.objectID(uid: items[0].uid))
        let entries = try b.store.indexEntries(objectID: first)
        try b.applySynchronized(uid: items[0].uid, record: SecureBytes(items[0].record), modified: 1_000_000_000, master: masterB)
        XCTAssertTrue(KeychainDatabase.sameEntries(try b.store.indexEntries(objectID: first), entries))

        XCTAssertGreaterThan(try b.setLockedLookup(false, master: masterB), 0)
        XCTAssertNil(try b.applySynchronized(prepared[40], master: masterB), "made with the index on: made again")
        XCTAssertNil(try b.store.objectID(uid: items[40].uid), "and nothing written")
        for item in items.dropFirst(40) {
            try b.applySynchronized(uid: item.uid, record: SecureBytes(item.record), modified: 1_000_000_000, master: masterB)
        }
        let reader = try Keychain.open(at: b.path, deviceKey: DeviceKeyFile(path: root + "/b-state/device-key"))
        let unlocked = try userPIN.withUnsafeBytes { try reader.unlock(.user, pin: $0) }
        XCTAssertEqual(try reader.verifyIntegrity(master: unlocked), 80)
        XCTAssertEqual(try reader.synchronizableItems(master: unlocked).map(\.record).sorted { $0.lexicographicallyPrecedes($1) },
                       items.map(\.record).sorted { $0.lexicographicallyPrecedes($1) })
    }

    func test_rows_with_the_seal_a_sync_recorded_are_listed_unchanged_without_being_opened() throws {
        let (a, masterA) = try device("a"), (b, masterB) = try device("b")
        let (item, uid) = try password("alice", secret: "s3cret", sync: true)
        let row = try a.add(item, uid: uid, master: masterA)
        let (other, otherUID) = try password("carol", secret: "2", sync: true)
        _ = try a.add(other, uid: otherUID, master: masterA)
        let first = try a.synchronizableItems(master: masterA)
        XCTAssertEqual(first.count, 2)
        XCTAssertTrue(first.allSatisfy { !$0.unchanged && $0.seal.count == 16 && !$0.record.isEmpty })
        let seals = Dictionary(uniqueKeysWithValues: first.map { ($0.uid, $0.seal) })
        // Nothing written since: both listed unchanged, records left out.
        let again = try a.synchronizableItems(master: masterA, unchangedSince: seals)
        XCTAssertEqual(Set(again.map(\.uid)), [uid, otherUID])
        XCTAssertTrue(again.allSatisfy { $0.unchanged && $0.record.isEmpty })
        // A row written again, even with the same attributes, has another seal and is opened.
        let same = try a.object(id: row, master: masterA)
        try a.replace(id: row, with: same, master: masterA)
        let after = try a.synchronizableItems(master: masterA, unchangedSince: seals)
        let rewritten = try XCTUnwrap(after.first { $0.uid == uid })
        XCTAssertFalse(rewritten.unchanged)
        XCTAssertNotEqual(rewritten.seal, seals[uid])
        XCTAssertEqual(rewritten.record, first.first { $0.uid == uid }?.record)
        XCTAssertTrue(try XCTUnwrap(after.first { $0.uid == otherUID }).unchanged)
        // Seals are per row, not per content: another keychain's copy never matches.
        try b.applySynchronized(uid: uid, record: SecureBytes(rewritten.record), modified: 1, master: masterB)
        XCTAssertFalse(try XCTUnwrap(try b.synchronizableItems(master: masterB, unchangedSince: seals).first).unchanged)
    }

    func test_records_that_no_device_would_send_are_refused() throws {
        let (a, masterA) = try device("a"), (b, masterB) = try device("b")
        let (item, uid) = try password("alice", secret: "s3cret", sync: true)
        _ = try a.add(item, uid: uid, master: masterA)
        let record = try a.synchronizableItems(master: masterA)[0].record
        func code(_ body: () throws -> Void) -> KeychainError.Code? {
            do { try body(); return nil } catch let error as KeychainError { return error.code } catch { return nil }
        }
        // Under another id than its own CKA_UNIQUE_ID.
        XCTAssertEqual(code { try b.applySynchronized(uid: try UniqueID.random().bytes, record: SecureBytes(record), modified: 1, master: masterB) }, .recordCorrupted)
        XCTAssertEqual(code { try b.applySynchronized(uid: uid, record: SecureBytes([1, 2, 3]), modified: 1, master: masterB) }, .recordCorrupted)
        // Not synchronizable.
        let (local, localUID) = try password("bob", secret: "x", sync: false)
        let localRecord = AttributeRecord.encode(local.recordAttributes)
        XCTAssertEqual(code { try b.applySynchronized(uid: localUID, record: SecureBytes(localRecord), modified: 1, master: masterB) }, .recordCorrupted)
        XCTAssertNil(try b.store.objectID(uid: localUID))
    }

    func test_sync_state_secrets_open_only_under_their_keychains_master_key_and_go_with_reinitialisation() throws {
        let (a, masterA) = try device("a"), (_, masterB) = try device("b")
        try a.setSyncSecret("circle.key.1", SecureBytes(Array(repeating: 7, count: 32)), master: masterA)
        try a.setSyncValue("remote", Array("file:///tmp/x.git".utf8))
        XCTAssertEqual(try a.syncSecret("circle.key.1", master: masterA)?.bytes, Array(repeating: 7, count: 32))
        XCTAssertThrowsError(try a.syncSecret("circle.key.1", master: masterB))
        // Sealed bound to its name: moved under another name it does not open.
        try a.setSyncValue("circle.key.2", try a.syncValue("circle.key.1"))
        XCTAssertThrowsError(try a.syncSecret("circle.key.2", master: masterA))
        XCTAssertNil(try a.syncSecret("missing", master: masterA))
        try soPIN.withUnsafeBytes { try a.reinitialize(soPIN: $0, label: "login", kdf: kdf) }
        XCTAssertNil(try a.syncValue("remote"))
        XCTAssertNil(try a.syncValue("circle.key.1"))
    }
}
