import Glibc
import XCTest
import KeychainCrypto
@testable import KeychainCore
@testable import KeychainStore

/// Whole-keychain backup and restore: what goes into the file, what comes back, and that a
/// wrong passphrase or a damaged file changes nothing.
final class BackupTests: XCTestCase {
    private var root = ""
    private var deviceKey: DeviceKeyFile { DeviceKeyFile(path: root + "/state/device-key") }
    private let kdf = ScryptParameters(logN: 8, blockSize: 8, parallelism: 1)
    private let soPIN = Array("so-secret".utf8)
    private let userPIN = Array("1234".utf8)
    private let passphrase = Array("correct horse battery staple".utf8)
    private let applicationPassword = Array("app-secret".utf8)
    private let p256 = Array<UInt8>([0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07])
    /// The labels `populate` stores, except the device-bound item's.
    private let portableLabels: Set<String> = ["private data", "public data", "signing key", "signing key (public)", "after first unlock",
                                               "always", "sealed"]

    override func setUp() {
        var template = Array("/tmp/kc-backup.XXXXXX".utf8CString)
        root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }

    override func tearDown() { _ = system("rm -rf '\(root)'") }

    // MARK: helpers

    private func makeKeychain(_ name: String, userPIN: [UInt8]) throws -> (Keychain, MasterKey) {
        let keychain = try soPIN.withUnsafeBytes { so in
            try userPIN.withUnsafeBytes {
                try Keychain.create(at: root + "/" + name + ".keychain", slotID: 1, label: name, soPIN: so, userPIN: $0, kdf: kdf, deviceKey: deviceKey)
            }
        }
        return (keychain, try userPIN.withUnsafeBytes { try keychain.unlock(.user, pin: $0) })
    }

    private func code(_ body: () throws -> Void) -> KeychainError.Code? {
        do { try body(); return nil } catch { return (error as? KeychainError)?.code }
    }

    /// A fresh row uid and the CKA_UNIQUE_ID text the PKCS#11 layer gives it.
    private func newID() throws -> (uid: [UInt8], text: [UInt8]) {
        let uid = try Random.bytes(16)
        return (uid, Array(uid.map { String(format2: $0) }.joined().utf8))
    }

    private func item(_ label: String, _ protection: ProtectionClass? = nil, isPrivate: Bool? = nil, extra: Template = [], uniqueID: [UInt8]) throws -> ObjectAttributes {
        var template: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue)), (.token, [1]),
                                  (.label, Array(label.utf8)), (.value, Array("secret of \(label)".utf8))]
        if let protection { template.append((.accessible, AttributeValue.ulong(protection.rawValue))) }
        if let isPrivate { template.append((.isPrivate, [isPrivate ? 1 : 0])) }
        return try ObjectTemplate.create(template + extra, uniqueID: uniqueID, policy: .compatible)
    }

    /// One object of each kind a backup handles; returns the row uid of each, by label.
    @discardableResult
    private func populate(_ keychain: Keychain, master: MasterKey) throws -> [String: [UInt8]] {
        var uids: [String: [UInt8]] = [:]
        func store(_ label: String, _ object: (ObjectAttributes, [UInt8])) throws {
            _ = try keychain.add(object.0, uid: object.1, master: master)
            uids[label] = object.1
        }
        var id = try newID()
        try store("private data", (try item("private data", isPrivate: true, uniqueID: id.text), id.uid))
        id = try newID()
        try store("public data", (try item("public data", isPrivate: false, uniqueID: id.text), id.uid))
        id = try newID()
        try store("after first unlock", (try item("after first unlock", .afterFirstUnlock, uniqueID: id.text), id.uid))
        id = try newID()
        try store("always", (try item("always", .always, uniqueID: id.text), id.uid))
        id = try newID()
        try store("device", (try item("device", .whenUnlockedThisDeviceOnly, uniqueID: id.text), id.uid))
        id = try newID()
        let sealed: Template = [(.itemClass, AttributeValue.ulong(ItemClass.genericPassword.rawValue)), (.account, Array("alice".utf8)),
                                (.application, Array("example.com".utf8)), (.applicationPassword, applicationPassword)]
        try store("sealed", (try item("sealed", extra: sealed, uniqueID: id.text), id.uid))

        let publicTemplate: Template = [(.token, [1]), (.ecParams, p256), (.verify, [1]), (.label, Array("signing key (public)".utf8))]
        let privateTemplate: Template = [(.token, [1]), (.isPrivate, [1]), (.sign, [1]), (.label, Array("signing key".utf8))]
        let request = try KeyGeneration.request(keyType: .ec, publicTemplate: publicTemplate, privateTemplate: privateTemplate, policy: .compatible)
        let (publicID, privateID) = (try newID(), try newID())
        let pair = try KeyGeneration.objects(for: try AsymmetricKey.generate(.ec(.p256)), request: request, mechanism: 0x1040,
                                             publicTemplate: publicTemplate, privateTemplate: privateTemplate,
                                             uniqueIDs: (publicID.text, privateID.text), bySecurityOfficer: false)
        try store("signing key (public)", (pair.publicKey, publicID.uid))
        try store("signing key", (pair.privateKey, privateID.uid))
        return uids
    }

    /// Every object `master` opens, by label, without the attributes taken from the row, with
    /// its row uid.
    private func contents(_ keychain: Keychain, master: MasterKey) throws -> [String: (uid: [UInt8], object: ObjectAttributes)] {
        let database = try KeychainDatabase(path: keychain.path, create: false)
        var result: [String: (uid: [UInt8], object: ObjectAttributes)] = [:]
        for found in try keychain.find([], master: master) {
            var object = try keychain.object(id: found.id, master: master)
            object[.creationTime] = nil
            object[.modificationTime] = nil
            result[String(decoding: object[.label] ?? [], as: UTF8.self)] = (try database.fetchObject(id: found.id).uid, object)
        }
        return result
    }

    private func storedCount(_ keychain: Keychain) throws -> Int {
        let info = try keychain.info()
        return info.publicObjects + info.privateObjects
    }

    private func backup(_ keychain: Keychain, master: MasterKey) throws -> (file: [UInt8], summary: BackupSummary) {
        try passphrase.withUnsafeBytes { try keychain.backup(master: master, passphrase: $0, kdf: kdf) }
    }

    private func restore(_ file: [UInt8], into keychain: Keychain, master: MasterKey, passphrase: [UInt8]? = nil, skipDuplicates: Bool = false) throws -> RestoreSummary {
        try (passphrase ?? self.passphrase).withUnsafeBytes { try keychain.restore(file, passphrase: $0, master: master, skipDuplicates: skipDuplicates) }
    }

    // MARK: tests

    func test_backup_restores_every_portable_object_with_equal_attributes_and_unique_ids() throws {
        let (source, sourceMaster) = try makeKeychain("source", userPIN: userPIN)
        let uids = try populate(source, master: sourceMaster)
        let (file, summary) = try backup(source, master: sourceMaster)
        XCTAssertEqual(summary.written, portableLabels.count)
        XCTAssertEqual(summary.label, "source")

        let (target, targetMaster) = try makeKeychain("target", userPIN: Array("98765".utf8))
        let restored = try restore(file, into: target, master: targetMaster)
        XCTAssertEqual(restored.restored, portableLabels.count)
        XCTAssertEqual(restored.duplicates, 0)

        let before = try contents(source, master: sourceMaster)
        let after = try contents(target, master: targetMaster)
        XCTAssertEqual(Set(after.keys), portableLabels)
        for label in portableLabels {
            XCTAssertEqual(after[label]?.object, before[label]?.object, label)
            XCTAssertEqual(after[label]?.uid, uids[label], label)
        }
        // Index entries are rebuilt under the new keychain's keys: indexed searches find them.
        XCTAssertEqual(try target.find([(.label, Array("private data".utf8))], master: targetMaster).count, 1)
        XCTAssertEqual(try target.find([(.label, Array("public data".utf8))], master: nil).count, 1)
        // A fresh process (a new instance) opens them with the new PIN.
        let reopened = try Keychain.open(at: target.path, deviceKey: deviceKey)
        let master = try Array("98765".utf8).withUnsafeBytes { try reopened.unlock(.user, pin: $0) }
        XCTAssertEqual(Set(try contents(reopened, master: master).keys), portableLabels)
    }

    func test_backup_skips_device_bound_items() throws {
        let (source, sourceMaster) = try makeKeychain("source", userPIN: userPIN)
        try populate(source, master: sourceMaster)
        let (file, summary) = try backup(source, master: sourceMaster)
        XCTAssertEqual(summary.skippedDeviceBound, 1)
        let (target, targetMaster) = try makeKeychain("target", userPIN: Array("98765".utf8))
        _ = try restore(file, into: target, master: targetMaster)
        XCTAssertNil(try contents(target, master: targetMaster)["device"])
        XCTAssertEqual(try target.info().deviceBoundObjects, 0)
    }

    func test_backup_file_holds_no_label_or_secret_in_clear_but_the_keychain_label() throws {
        let (source, master) = try makeKeychain("source", userPIN: userPIN)
        try populate(source, master: master)
        let file = try backup(source, master: master).file
        let text = String(decoding: file.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self)
        for needle in ["secret of", "private data", "alice", "example.com"] {
            XCTAssertFalse(text.contains(needle), needle)
        }
        XCTAssertEqual(try Keychain.backupLabel(file), "source")
        XCTAssertEqual(Array(file.prefix(8)), Array("KCBACKUP".utf8))
    }

    func test_application_password_item_opens_with_its_password_after_restore() throws {
        let (source, sourceMaster) = try makeKeychain("source", userPIN: userPIN)
        try populate(source, master: sourceMaster)
        let (target, targetMaster) = try makeKeychain("target", userPIN: Array("98765".utf8))
        _ = try restore(try backup(source, master: sourceMaster).file, into: target, master: targetMaster)
        let sealed = try XCTUnwrap(try contents(target, master: targetMaster)["sealed"]?.object)
        XCTAssertTrue(sealed.hasSealedSecrets)
        XCTAssertNil(sealed[.value])
        let revealed = try applicationPassword.withUnsafeBytes { try target.reveal(sealed, applicationPassword: $0) }
        XCTAssertEqual(revealed[.value], Array("secret of sealed".utf8))
        XCTAssertEqual(code { _ = try Array("wrong".utf8).withUnsafeBytes { try target.reveal(sealed, applicationPassword: $0) } }, .pinIncorrect)
    }

    func test_wrong_passphrase_is_pin_incorrect_and_adds_nothing() throws {
        let (source, sourceMaster) = try makeKeychain("source", userPIN: userPIN)
        try populate(source, master: sourceMaster)
        let file = try backup(source, master: sourceMaster).file
        let (target, targetMaster) = try makeKeychain("target", userPIN: userPIN)
        for wrong in [Array("correct horse battery stapler".utf8), [], Array(repeating: 0x41, count: 2000)] {
            XCTAssertEqual(code { _ = try self.restore(file, into: target, master: targetMaster, passphrase: wrong) }, .pinIncorrect)
        }
        XCTAssertEqual(try storedCount(target), 0)
    }

    func test_a_flipped_byte_anywhere_fails_and_adds_nothing() throws {
        let (source, sourceMaster) = try makeKeychain("source", userPIN: userPIN)
        try populate(source, master: sourceMaster)
        let file = try backup(source, master: sourceMaster).file
        let (target, targetMaster) = try makeKeychain("target", userPIN: userPIN)
        let allowed: Set<KeychainError.Code> = [.keychainUnrecognized, .recordCorrupted, .pinIncorrect]
        for index in file.indices {
            var altered = file
            altered[index] ^= 0x01
            let result = code { _ = try self.restore(altered, into: target, master: targetMaster) }
            XCTAssertTrue(result.map(allowed.contains) ?? false, "byte \(index): \(String(describing: result))")
        }
        XCTAssertEqual(try storedCount(target), 0)
        // The payload itself: any change is found by its tag.
        var altered = file
        altered[file.count - 40] ^= 0x80
        XCTAssertEqual(code { _ = try self.restore(altered, into: target, master: targetMaster) }, .recordCorrupted)
        XCTAssertEqual(try restore(file, into: target, master: targetMaster).restored, portableLabels.count)
    }

    func test_truncated_or_extended_files_fail_without_crashing() throws {
        let (source, sourceMaster) = try makeKeychain("source", userPIN: userPIN)
        try populate(source, master: sourceMaster)
        let file = try backup(source, master: sourceMaster).file
        let (target, targetMaster) = try makeKeychain("target", userPIN: userPIN)
        for length in 0..<max(file.count, 201) {
            let prefix = Array(file.prefix(length))
            XCTAssertNotNil(code { _ = try self.restore(prefix, into: target, master: targetMaster) }, "length \(length)")
            _ = try? Keychain.backupLabel(prefix)
        }
        XCTAssertEqual(code { _ = try self.restore(file + [0], into: target, master: targetMaster) }, .recordCorrupted)
        XCTAssertEqual(code { _ = try Keychain.backupLabel(Array("SQLite format 3".utf8)) }, .keychainUnrecognized)
        XCTAssertEqual(try storedCount(target), 0)
    }

    func test_restoring_twice_counts_duplicates_when_skipping() throws {
        let (source, sourceMaster) = try makeKeychain("source", userPIN: userPIN)
        try populate(source, master: sourceMaster)
        let file = try backup(source, master: sourceMaster).file
        let (target, targetMaster) = try makeKeychain("target", userPIN: userPIN)
        XCTAssertEqual(try restore(file, into: target, master: targetMaster, skipDuplicates: true).restored, portableLabels.count)
        let again = try restore(file, into: target, master: targetMaster, skipDuplicates: true)
        XCTAssertEqual(again.restored, 0)
        XCTAssertEqual(again.duplicates, portableLabels.count)
        XCTAssertEqual(try storedCount(target), portableLabels.count)
        // Into the keychain it came from: every object is there already.
        XCTAssertEqual(try restore(file, into: source, master: sourceMaster, skipDuplicates: true).duplicates, portableLabels.count)
    }

    func test_restoring_a_duplicate_strictly_fails_with_duplicate_item_and_adds_nothing() throws {
        let (source, sourceMaster) = try makeKeychain("source", userPIN: userPIN)
        try populate(source, master: sourceMaster)
        let file = try backup(source, master: sourceMaster).file
        // The target has one generic password with the same primary key (another uid): the
        // restore stops at it and takes back what it added before.
        let (target, targetMaster) = try makeKeychain("target", userPIN: userPIN)
        let id = try newID()
        let clash: Template = [(.itemClass, AttributeValue.ulong(ItemClass.genericPassword.rawValue)), (.account, Array("alice".utf8)),
                               (.application, Array("example.com".utf8))]
        _ = try target.add(try item("clash", extra: clash, uniqueID: id.text), uid: id.uid, master: targetMaster)
        XCTAssertEqual(code { _ = try self.restore(file, into: target, master: targetMaster) }, .duplicateItem)
        XCTAssertEqual(try storedCount(target), 1)
        XCTAssertEqual(Set(try contents(target, master: targetMaster).keys), ["clash"])

        let skipping = try restore(file, into: target, master: targetMaster, skipDuplicates: true)
        XCTAssertEqual(skipping.restored, portableLabels.count - 1)
        XCTAssertEqual(skipping.duplicates, 1)
        XCTAssertEqual(code { _ = try self.restore(file, into: target, master: targetMaster) }, .duplicateItem)
        XCTAssertEqual(try storedCount(target), portableLabels.count)
    }

    func test_a_failed_restore_leaves_the_always_key_unchanged() throws {
        // The backup holds an Always item and the target has none (so no Always key): the failed
        // restore must not leave a key that was never stored in use.
        let (source, sourceMaster) = try makeKeychain("source", userPIN: userPIN)
        try populate(source, master: sourceMaster)
        let file = try backup(source, master: sourceMaster).file
        let (target, targetMaster) = try makeKeychain("target", userPIN: userPIN)
        let clashID = try newID()
        let clash: Template = [(.itemClass, AttributeValue.ulong(ItemClass.genericPassword.rawValue)), (.account, Array("alice".utf8)),
                               (.application, Array("example.com".utf8))]
        _ = try target.add(try item("clash", extra: clash, uniqueID: clashID.text), uid: clashID.uid, master: targetMaster)
        XCTAssertEqual(code { _ = try self.restore(file, into: target, master: targetMaster) }, .duplicateItem)
        let id = try newID()
        let added = try target.add(try item("later", .always, uniqueID: id.text), uid: id.uid, master: targetMaster)
        let reopened = try Keychain.open(at: target.path, deviceKey: deviceKey)
        XCTAssertEqual(try reopened.object(id: added, master: nil)[.value], Array("secret of later".utf8))
    }

    func test_backup_refuses_an_empty_passphrase_and_out_of_bounds_kdf() throws {
        let (source, master) = try makeKeychain("source", userPIN: userPIN)
        XCTAssertEqual(code { _ = try [UInt8]().withUnsafeBytes { try source.backup(master: master, passphrase: $0, kdf: self.kdf) } }, .pinLengthRange)
        XCTAssertEqual(code { _ = try self.passphrase.withUnsafeBytes {
            try source.backup(master: master, passphrase: $0, kdf: ScryptParameters(logN: 30, blockSize: 8, parallelism: 1))
        } }, .argumentsBad)
        // An empty keychain gives a valid, empty backup.
        let (file, summary) = try backup(source, master: master)
        XCTAssertEqual(summary.written, 0)
        let (target, targetMaster) = try makeKeychain("target", userPIN: userPIN)
        XCTAssertEqual(try restore(file, into: target, master: targetMaster).restored, 0)
    }
}
