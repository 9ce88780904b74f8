import Glibc
import XCTest
import KeychainCrypto
@testable import KeychainCore
@testable import KeychainStore

/// Attacks with write access to the keychain file but no PIN (security issue, items 2 and 3),
/// each performed with SQL on the real file, and shown detected with `.recordCorrupted`
/// (CKR_DEVICE_ERROR / errSecDecode), never answered with another object's data.
final class TamperingTests: XCTestCase {
    private var directory = ""
    private let kdf = ScryptParameters(logN: 8, blockSize: 8, parallelism: 1)
    private let userPIN = Array("1234".utf8)

    override func setUp() {
        var template = Array("/tmp/kc-tamper.XXXXXX".utf8CString)
        directory = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        setenv("KEYCHAIN_PKCS11_DEVICE_KEY", directory + "/state/device-key", 1)
    }

    override func tearDown() { _ = system("rm -rf '\(directory)'") }

    private func makeKeychain() throws -> (Keychain, MasterKey) {
        let keychain = try Array("so-secret".utf8).withUnsafeBytes { so in
            try userPIN.withUnsafeBytes { try KeychainDirectory(path: directory + "/keychains").createKeychain(slotID: nil, label: "t", soPIN: so, userPIN: $0, kdf: kdf) }
        }
        let master = try userPIN.withUnsafeBytes { try keychain.unlock(.user, pin: $0) }
        return (keychain, master)
    }

    private func add(_ keychain: Keychain, _ master: MasterKey, label: String, value: String, isPrivate: Bool = true) throws -> Int64 {
        let uid = Array(UUIDText.random().utf8)
        let object = try ObjectTemplate.create([(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue)), (.token, [1]), (.isPrivate, [isPrivate ? 1 : 0]),
                                                (.label, Array(label.utf8)), (.value, Array(value.utf8))], uniqueID: uid, policy: .compatible)
        return try keychain.add(object, uid: Array(uid.prefix(16)), master: master)
    }

    private func byLabel(_ label: String) -> Template {
        [(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue)), (.label, Array(label.utf8))]
    }

    private func code(_ body: () throws -> Void) -> KeychainError.Code? {
        do { try body(); return nil } catch { return (error as? KeychainError)?.code }
    }

    /// Attack: swap the search entries of two objects, so that a search for one finds the other.
    func test_swapped_index_rows_are_detected_not_answered() throws {
        let (keychain, master) = try makeKeychain()
        let alpha = try add(keychain, master, label: "alpha", value: "value of alpha")
        let beta = try add(keychain, master, label: "beta", value: "value of beta")
        XCTAssertEqual(try keychain.find(byLabel("alpha"), master: master).map(\.id), [alpha])
        try keychain.store.database.run("UPDATE object_index SET object_id = CASE object_id WHEN ? THEN ? ELSE ? END WHERE object_id IN (?, ?)",
                                        [.integer(alpha), .integer(beta), .integer(alpha), .integer(alpha), .integer(beta)])
        XCTAssertEqual(code { _ = try keychain.find(self.byLabel("alpha"), master: master) }, .recordCorrupted, "the search for alpha")
        XCTAssertEqual(code { _ = try keychain.object(id: beta, master: master) }, .recordCorrupted, "beta, read with alpha's entries")
        XCTAssertEqual(code { _ = try keychain.object(id: alpha, master: master) }, .recordCorrupted)
    }

    /// Attack: delete an object's search entries so that it silently disappears. A search by its
    /// label no longer finds it (the entries are gone), but every listing and every read of it
    /// reports the damage.
    func test_deleted_index_rows_are_reported_when_the_object_is_listed_or_read() throws {
        let (keychain, master) = try makeKeychain()
        let alpha = try add(keychain, master, label: "alpha", value: "value of alpha")
        _ = try add(keychain, master, label: "beta", value: "value of beta")
        try keychain.store.database.run("DELETE FROM object_index WHERE object_id = ?", [.integer(alpha)])
        XCTAssertEqual(try keychain.find(byLabel("beta"), master: master).count, 1, "other objects are unaffected")
        XCTAssertEqual(try keychain.find(byLabel("alpha"), master: master).count, 0, "a search by its label cannot find it")
        XCTAssertEqual(try keychain.find([(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue))], master: master).count, 2,
                       "a listing still shows it")
        XCTAssertEqual(code { _ = try keychain.object(id: alpha, master: master) }, .recordCorrupted, "and reading it reports the damage")
        XCTAssertEqual(code { _ = try keychain.verifyIntegrity(master: master) }, .recordCorrupted, "keychainctl verify")
    }

    /// Attack: rewrite a public record. Before, public records were sealed under a key stored in
    /// the file itself; now they need the Always key (the device key or the master key).
    func test_public_records_cannot_be_forged_with_what_the_file_holds() throws {
        let (keychain, master) = try makeKeychain()
        let id = try add(keychain, master, label: "cert-like", value: "genuine public value", isPrivate: false)
        let reader = try Keychain.open(at: keychain.path)
        XCTAssertEqual(try reader.object(id: id, master: nil)[.value], Array("genuine public value".utf8), "readable without a login")

        let row = try keychain.store.fetchObject(id: id)
        guard let fileKey = try keychain.store.metaBlob(Keychain.Meta.publicKey) else { return XCTFail("no file key") }
        var forged = try reader.object(id: id, master: nil)
        forged[.value] = Array("forged value".utf8)
        forged[.creationTime] = nil
        forged[.modificationTime] = nil
        let plaintext = SecureBytes(AttributeRecord.encode(forged.recordAttributes))
        let index = try IndexCommitment(entries: try keychain.store.indexEntries(objectID: id), primaryKey: nil)
        // The current format under the file key…
        let current = try SealedRecord.seal(plaintext, base: fileKey.secure, uid: row.uid, objectClass: row.objectClass, protection: row.protection, index: index)
        try keychain.store.database.run("UPDATE objects SET record = ? WHERE id = ?", [.blob(current), .integer(id)])
        XCTAssertEqual(code { _ = try reader.object(id: id, master: nil) }, .recordCorrupted, "a v2 record sealed with the file key")
        XCTAssertEqual(code { _ = try reader.object(id: id, master: master) }, .recordCorrupted, "…also when logged in")
        // …and the old format, which the file key did open.
        let key = try SealedRecord.objectKey(base: fileKey.secure, uid: row.uid)
        let legacy = try AESGCM.seal(plaintext, key: key, associatedData: SealedRecord.associatedData(uid: row.uid, objectClass: row.objectClass,
                                                                                                     protection: row.protection, version: 1, index: nil))
        try keychain.store.database.run("UPDATE objects SET record = ?, record_version = 1 WHERE id = ?", [.blob(legacy), .integer(id)])
        XCTAssertEqual(code { _ = try reader.object(id: id, master: nil) }, .recordCorrupted, "a v1 record sealed with the file key")
        XCTAssertEqual(code { _ = try reader.find(self.byLabel("cert-like"), master: nil) }, .recordCorrupted,
                       "the search reports it (the row left the manifest's sums when it was turned into the old format)")
    }

    /// Attack: move a record onto another object's row.
    func test_a_record_moved_to_another_row_is_refused() throws {
        let (keychain, master) = try makeKeychain()
        let alpha = try add(keychain, master, label: "alpha", value: "value of alpha")
        let beta = try add(keychain, master, label: "beta", value: "value of beta")
        try keychain.store.database.run("UPDATE objects SET record = (SELECT record FROM objects WHERE id = ?) WHERE id = ?", [.integer(alpha), .integer(beta)])
        XCTAssertEqual(code { _ = try keychain.object(id: beta, master: master) }, .recordCorrupted)
        XCTAssertEqual(try keychain.object(id: alpha, master: master)[.value], Array("value of alpha".utf8))
    }
}

extension TamperingTests {
    private func secretKey(sensitive: Bool) throws -> ObjectAttributes {
        try ObjectTemplate.create([(.objectClass, AttributeValue.ulong(ObjectClass.secretKey.rawValue)), (.keyType, AttributeValue.ulong(KeyType.aes.rawValue)),
                                   (.token, [1]), (.isPrivate, [1]), (.label, Array("latched".utf8)), (.value, [UInt8](repeating: 0x5A, count: 16)),
                                   (.sensitive, [sensitive ? 1 : 0]), (.extractable, [1])], uniqueID: Array(UUIDText.random().utf8), policy: .compatible)
    }

    private struct Snapshot {
        let row: [SQLValue]
        let index: [[SQLValue]]
    }

    private func snapshot(_ keychain: Keychain, _ id: Int64) throws -> Snapshot {
        var row: [SQLValue] = []
        try keychain.store.database.query("SELECT record, record_version, epoch, index_commit, protection FROM objects WHERE id = ?", [.integer(id)]) { s in
            row = [.blob(s.blob(0)), .integer(s.int64(1)), .integer(s.int64(2)), s.isNull(3) ? .null : .blob(s.blob(3)), .integer(s.int64(4))]
        }
        var index: [[SQLValue]] = []
        try keychain.store.database.query("SELECT attribute, digest FROM object_index WHERE object_id = ?", [.integer(id)]) { s in
            index.append([.integer(s.int64(0)), .blob(s.blob(1))])
        }
        return Snapshot(row: row, index: index)
    }

    /// Puts an old copy of one row back: its record, epoch, commitment and index entries.
    private func restore(_ keychain: Keychain, _ id: Int64, _ old: Snapshot) throws {
        try keychain.store.database.run("UPDATE objects SET record = ?, record_version = ?, epoch = ?, index_commit = ?, protection = ? WHERE id = ?", old.row + [.integer(id)])
        try keychain.store.database.run("DELETE FROM object_index WHERE object_id = ?", [.integer(id)])
        for entry in old.index { try keychain.store.database.run("INSERT INTO object_index (object_id, attribute, digest) VALUES (?, ?, ?)", [.integer(id)] + entry) }
    }

    /// Attack (item 4): restore the old copy of one row — a key's CKA_SENSITIVE = FALSE from before
    /// it was latched to TRUE — with its old search entries. The manifest's bucket sum no longer
    /// matches: reads and searches report it.
    func test_one_row_rolled_back_is_detected() throws {
        let (keychain, master) = try makeKeychain()
        let id = try keychain.add(try secretKey(sensitive: false), uid: Array(UUIDText.random().utf8.prefix(16)), master: master)
        let before = try snapshot(keychain, id)
        let latched = try ObjectTemplate.set([(.sensitive, [1])], on: try keychain.object(id: id, master: master))
        try keychain.replace(id: id, with: latched, master: master)
        XCTAssertEqual(try keychain.object(id: id, master: master)[.sensitive], [1])
        try restore(keychain, id, before)
        let reader = try Keychain.open(at: keychain.path)
        let unlocked = try userPIN.withUnsafeBytes { try reader.unlock(.user, pin: $0) }
        XCTAssertEqual(code { _ = try reader.object(id: id, master: unlocked) }, .recordCorrupted, "the rolled-back row")
        XCTAssertEqual(code { _ = try reader.find([(.label, Array("latched".utf8))], master: unlocked) }, .recordCorrupted, "a search that finds it")
        XCTAssertEqual(code { _ = try reader.verifyIntegrity(master: unlocked) }, .recordCorrupted, "keychainctl verify")
    }

    /// Attack: remove a whole row (and its search entries) so the object silently vanishes.
    func test_a_removed_row_is_detected_by_a_listing() throws {
        let (keychain, master) = try makeKeychain()
        _ = try add(keychain, master, label: "alpha", value: "value of alpha")
        let beta = try add(keychain, master, label: "beta", value: "value of beta")
        try keychain.store.database.run("DELETE FROM objects WHERE id = ?", [.integer(beta)])
        let reader = try Keychain.open(at: keychain.path)
        let unlocked = try userPIN.withUnsafeBytes { try reader.unlock(.user, pin: $0) }
        XCTAssertEqual(code { _ = try reader.find([(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue))], master: unlocked) }, .recordCorrupted)
        XCTAssertEqual(code { _ = try reader.verifyIntegrity(master: unlocked) }, .recordCorrupted)
    }

    /// Attack: delete the manifest, so that nothing is checked.
    func test_a_deleted_manifest_is_detected() throws {
        let (keychain, master) = try makeKeychain()
        let alpha = try add(keychain, master, label: "alpha", value: "value of alpha")
        try keychain.store.database.run("DELETE FROM meta WHERE key = ?", [.text(Keychain.manifestMeta)])
        let reader = try Keychain.open(at: keychain.path)
        let unlocked = try userPIN.withUnsafeBytes { try reader.unlock(.user, pin: $0) }
        XCTAssertEqual(code { _ = try reader.object(id: alpha, master: unlocked) }, .recordCorrupted)
        XCTAssertEqual(code { _ = try reader.add(try self.dataObjectTemplate("gamma"), uid: Array(UUIDText.random().utf8.prefix(16)), master: unlocked) },
                       .recordCorrupted, "no write on top of it")
    }

    /// Writes in one transaction keep the manifest in memory and store it once, before the
    /// commit: reads inside are checked against the rows as they now are, the keychain's
    /// fingerprint inside is the one it has after, a reader afterwards finds every row covered,
    /// and a transaction that rolls back leaves the stored manifest as it was.
    func test_writes_in_one_transaction_store_the_manifest_once_with_them() throws {
        let (keychain, master) = try makeKeychain()
        _ = try add(keychain, master, label: "kept", value: "value of kept")
        let before = try keychain.store.metaBlob(Keychain.manifestMeta)
        let objects = try (0..<6).map { try dataObjectTemplate("item \($0)") }
        var ids: [Int64] = []
        var storedInside: [[UInt8]?] = []
        var fingerprintInside: [UInt8] = []
        try keychain.transaction { () throws(KeychainError) in
            for object in objects { ids.append(try keychain.add(object, uid: try translatingErrors { try Random.bytes(16) }, master: master)) }
            try keychain.replace(id: ids[1], with: try ObjectTemplate.set([(.label, Array("renamed".utf8))], on: try keychain.object(id: ids[1], master: master)), master: master)
            try keychain.remove(id: ids[2], master: master)
            storedInside.append(try? keychain.store.metaBlob(Keychain.manifestMeta))
            XCTAssertEqual(try keychain.object(id: ids[1], master: master)[.label], Array("renamed".utf8), "read inside, checked against the rows' new sums")
            XCTAssertEqual(try keychain.find([(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue))], master: master).count, 6)
            fingerprintInside = try keychain.syncFingerprint()
        }
        XCTAssertTrue(storedInside == [before], "nine row writes, no manifest stored before the commit")
        XCTAssertEqual(try keychain.syncFingerprint(), fingerprintInside)
        let after = try keychain.store.metaBlob(Keychain.manifestMeta)
        XCTAssertNotEqual(after, before)
        var reader = try Keychain.open(at: keychain.path)
        var unlocked = try userPIN.withUnsafeBytes { try reader.unlock(.user, pin: $0) }
        XCTAssertEqual(try reader.verifyIntegrity(master: unlocked), 6)

        let more = try (0..<2).map { try dataObjectTemplate("rolled back \($0)") }
        XCTAssertEqual(code {
            try keychain.transaction { () throws(KeychainError) in
                for object in more { _ = try keychain.add(object, uid: try translatingErrors { try Random.bytes(16) }, master: master) }
                throw KeychainError(.argumentsBad, "abort")
            }
        }, .argumentsBad)
        XCTAssertTrue(try keychain.store.metaBlob(Keychain.manifestMeta) == after, "a rolled-back transaction stores no manifest")
        _ = try add(keychain, master, label: "after", value: "value after")
        reader = try Keychain.open(at: keychain.path)
        unlocked = try userPIN.withUnsafeBytes { try reader.unlock(.user, pin: $0) }
        XCTAssertEqual(try reader.verifyIntegrity(master: unlocked), 7, "the write after the rollback starts from the stored manifest")
    }

    /// A nested write that fails inside a transaction (here a second row with the same uid) drops
    /// the cached keys; reads after it in the same transaction still see the manifest the
    /// transaction's writes left, not the older one stored before it.
    func test_a_failed_nested_write_leaves_the_transactions_manifest_to_its_reads() throws {
        let (keychain, master) = try makeKeychain()
        let objects = try (0..<2).map { try dataObjectTemplate("item \($0)") }
        let uid = try Random.bytes(16)
        var label: [UInt8]?
        try keychain.transaction { () throws(KeychainError) in
            let id = try keychain.add(objects[0], uid: uid, master: master)
            XCTAssertEqual(code { _ = try keychain.add(objects[1], uid: uid, master: master) }, .duplicateItem)
            label = try keychain.object(id: id, master: master)[.label]
        }
        XCTAssertEqual(label, Array("item 0".utf8))
        let reader = try Keychain.open(at: keychain.path)
        let unlocked = try userPIN.withUnsafeBytes { try reader.unlock(.user, pin: $0) }
        XCTAssertEqual(try reader.verifyIntegrity(master: unlocked), 1)
    }

    private func dataObjectTemplate(_ label: String) throws -> ObjectAttributes {
        try ObjectTemplate.create([(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue)), (.token, [1]), (.isPrivate, [1]),
                                   (.label, Array(label.utf8)), (.value, [1])], uniqueID: Array(UUIDText.random().utf8), policy: .compatible)
    }

    /// Attack: replace the whole file with an older copy of itself. Nothing inside the file can
    /// tell; the device's record of the keychain's epoch (beside the device key) can.
    func test_the_whole_file_rolled_back_is_detected_and_can_be_accepted() throws {
        var (keychain, master) = try makeKeychain()
        let path = keychain.path
        let alpha = try add(keychain, master, label: "alpha", value: "value of alpha")
        let copy = directory + "/older.keychain-db"
        try keychain.store.database.execute("VACUUM INTO '\(copy)'")
        _ = try add(keychain, master, label: "beta", value: "value of beta")
        keychain = try Keychain.open(at: copy)
        for suffix in ["", "-wal", "-shm"] { unlink(path + suffix) }
        XCTAssertEqual(rename(copy, path), 0)
        let reader = try Keychain.open(at: path)
        master = try userPIN.withUnsafeBytes { try reader.unlock(.user, pin: $0) }
        XCTAssertEqual(code { _ = try reader.object(id: alpha, master: master) }, .recordCorrupted, "an older copy of the file")
        XCTAssertNoThrow(try reader.acceptOlderCopy(master: master))
        XCTAssertEqual(try reader.object(id: alpha, master: master)[.value], Array("value of alpha".utf8), "accepted on purpose")
        XCTAssertEqual(try reader.find([(.label, Array("beta".utf8))], master: master).count, 0)
    }
}

private extension Array where Element == UInt8 {
    var secure: SecureBytes { SecureBytes(self) }
}
