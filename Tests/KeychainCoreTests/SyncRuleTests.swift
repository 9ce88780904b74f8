import Glibc
import XCTest
import KeychainCrypto
@testable import KeychainCore
@testable import KeychainStore

/// The one rule of which items may be synchronizable (`SyncRule`), the keychain's own check of
/// what reaches the store, and the per-keychain choice for Secret Service items.
final class SyncRuleTests: XCTestCase {
    private var directory = ""
    private let kdf = ScryptParameters(logN: 8, blockSize: 8, parallelism: 1)
    private let userPIN = Array("1234".utf8)
    private let yes = AttributeValue.bool(true), no = AttributeValue.bool(false)

    override func setUp() {
        var template = Array("/tmp/kc-syncrule.XXXXXX".utf8CString)
        directory = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        setenv("KEYCHAIN_PKCS11_DEVICE_KEY", directory + "/state/device-key", 1)
    }

    override func tearDown() { _ = system("rm -rf '\(directory)'") }

    // MARK: helpers

    private func makeKeychain() throws -> (Keychain, MasterKey) {
        let keychain = try Array("so-secret".utf8).withUnsafeBytes { so in
            try userPIN.withUnsafeBytes { try KeychainDirectory(path: directory + "/keychains").createKeychain(slotID: nil, label: "t", soPIN: so, userPIN: $0, kdf: kdf) }
        }
        return (keychain, try userPIN.withUnsafeBytes { try keychain.unlock(.user, pin: $0) })
    }

    private func code(_ body: () throws -> Void) -> KeychainError.Code? {
        do { try body(); return nil } catch { return (error as? KeychainError)?.code }
    }

    /// A password data object with a fresh unique ID; its row uid.
    private func password(_ label: String, _ extra: Template = []) throws -> (object: ObjectAttributes, uid: [UInt8]) {
        let id = try UniqueID.random()
        let template: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue)), (.token, yes), (.label, Array(label.utf8)),
                                  (.value, Array("secret of \(label)".utf8))] + extra
        return (try ObjectTemplate.create(template, uniqueID: id.text, policy: .compatible), id.bytes)
    }

    private func accessible(_ protection: ProtectionClass) -> (type: AttributeType, value: [UInt8]) {
        (.accessible, AttributeValue.ulong(protection.rawValue))
    }

    private func stored(_ keychain: Keychain, _ master: MasterKey, label: String) throws -> [ObjectAttributes] {
        try keychain.find([(.label, Array(label.utf8))], master: master).map { try keychain.object(id: $0.id, master: master) }
    }

    /// Stores `object` as a build before the rule could (`Keychain.add` without its check), so that
    /// a synchronizable ThisDeviceOnly item exists as one may in an older keychain.
    private func storeAsBefore(_ keychain: Keychain, _ object: ObjectAttributes, uid: [UInt8], master: MasterKey) throws -> Int64 {
        let protection = try Protection(for: object)
        _ = keychain.readDeviceKeyAhead { true }
        return try keychain.lock.withLock { () throws -> Int64 in
            let keys = try keychain.keysForStoring(protection, object: object, master: master)
            return try keychain.writeRow(master: master) { epoch in
                let sealed = try keychain.seal(object, uid: uid, protection: protection, keys: keys, epoch: epoch, master: master)
                let id = try keychain.store.insertObject(uid: uid, objectClass: UInt64(object.objectClass?.rawValue ?? 0), protection: protection.rawValue,
                                                         record: sealed.record, primaryKey: sealed.primaryKey, index: sealed.index, now: 1_000_000,
                                                         epoch: epoch, indexCommit: sealed.state.indexCommit)
                return (id, nil, sealed.state)
            }
        }
    }

    // MARK: the rule

    func test_the_rule_names_the_first_obstacle_and_lets_portable_items_sync() {
        for protection in ProtectionClass.allCases {
            let refusal = SyncRule.refusal(token: true, protection: protection, accessControl: [], inTPM: false)
            XCTAssertEqual(refusal, protection.isDeviceBound ? .thisDeviceOnly(protection) : nil, "\(protection)")
        }
        XCTAssertNil(SyncRule.refusal(token: true, protection: nil, accessControl: [], inTPM: false), "no class given (a PKCS#11 object)")
        XCTAssertEqual(SyncRule.refusal(token: false, protection: .whenUnlockedThisDeviceOnly, accessControl: [], inTPM: true), .sessionObject)
        XCTAssertEqual(SyncRule.refusal(token: true, protection: .whenUnlocked, accessControl: [], inTPM: true), .inTPM)
        for flag in [AccessControlFlags.userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode, .watch, .privateKeyUsage] {
            XCTAssertEqual(SyncRule.refusal(token: true, protection: .whenUnlocked, accessControl: flag, inTPM: false), .boundAccessControl(flag), "\(flag.rawValue)")
        }
        XCTAssertNil(SyncRule.refusal(token: true, protection: .afterFirstUnlock, accessControl: .applicationPassword, inTPM: false),
                     "an application password alone travels with the item")
        XCTAssertEqual(SyncRule.refusal(token: true, protection: .always, accessControl: [.applicationPassword, .userPresence, .or], inTPM: false),
                       .boundAccessControl(.userPresence), "only the binding flags are named")

        XCTAssertEqual(SyncRule.Refusal.thisDeviceOnly(.alwaysThisDeviceOnly).reason, "a ThisDeviceOnly item cannot sync")
        XCTAssertEqual(SyncRule.Refusal.sessionObject.reason, "a session object cannot sync")
        XCTAssertEqual(SyncRule.Refusal.inTPM.reason, "a key in the TPM cannot sync")
        XCTAssertEqual(SyncRule.Refusal.boundAccessControl([.userPresence, .biometryAny, .biometryCurrentSet]).reason,
                       "an item bound to this device by user presence and biometry cannot sync")
    }

    func test_an_object_is_judged_by_its_own_attributes_and_only_when_marked() throws {
        let marked = try password("marked", [(.synchronizable, yes), accessible(.afterFirstUnlockThisDeviceOnly)]).object
        XCTAssertEqual(marked.syncRefusal, .thisDeviceOnly(.afterFirstUnlockThisDeviceOnly))
        let unmarked = try password("unmarked", [accessible(.afterFirstUnlockThisDeviceOnly)]).object
        XCTAssertNil(unmarked.syncRefusal, "not marked: nothing to refuse")
        XCTAssertEqual(SyncRule.refusal(for: unmarked), .thisDeviceOnly(.afterFirstUnlockThisDeviceOnly))
        var inTPM = try password("portable", [(.synchronizable, yes)]).object
        XCTAssertNil(inTPM.syncRefusal)
        inTPM[.tpm] = yes
        XCTAssertEqual(inTPM.syncRefusal, .inTPM)
    }

    // MARK: the keychain's own check

    func test_add_refuses_a_marked_item_that_cannot_sync_and_stores_nothing() throws {
        let (keychain, master) = try makeKeychain()
        for protection in ProtectionClass.allCases where protection.isDeviceBound {
            let item = try password("device", [(.synchronizable, yes), accessible(protection), (.isPrivate, AttributeValue.bool(protection.needsLogin))])
            XCTAssertEqual(code { _ = try keychain.add(item.object, uid: item.uid, master: master) }, .templateInconsistent, "\(protection)")
        }
        let presence = try password("presence", [(.synchronizable, yes), (.isPrivate, yes), (.accessControl, AttributeValue.ulong(AccessControlFlags.userPresence.rawValue))])
        XCTAssertEqual(code { _ = try keychain.add(presence.object, uid: presence.uid, master: master) }, .templateInconsistent)
        XCTAssertEqual(try stored(keychain, master, label: "device") + stored(keychain, master, label: "presence"), [])
        let portable = try password("portable", [(.synchronizable, yes)])
        _ = try keychain.add(portable.object, uid: portable.uid, master: master)
        XCTAssertEqual(try stored(keychain, master, label: "portable").map(\.isSynchronizable), [true])
    }

    func test_replace_refuses_making_the_combination_and_changes_nothing() throws {
        let (keychain, master) = try makeKeychain()
        let local = try password("local", [accessible(.whenUnlockedThisDeviceOnly), (.isPrivate, yes)])
        let localID = try keychain.add(local.object, uid: local.uid, master: master)
        let marked = try ObjectTemplate.set([(.synchronizable, yes)], on: try keychain.object(id: localID, master: master))
        XCTAssertEqual(code { try keychain.replace(id: localID, with: marked, master: master) }, .templateInconsistent)
        XCTAssertEqual(try keychain.object(id: localID, master: master).isSynchronizable, false)

        let shared = try password("shared", [(.synchronizable, yes)])
        let sharedID = try keychain.add(shared.object, uid: shared.uid, master: master)
        var moved = try keychain.object(id: sharedID, master: master)
        moved[.accessible] = AttributeValue.ulong(ProtectionClass.alwaysThisDeviceOnly.rawValue)
        moved[.isPrivate] = no
        XCTAssertEqual(code { try keychain.replace(id: sharedID, with: moved, master: master, allowingPrivateChange: true) }, .templateInconsistent)
        XCTAssertEqual(try keychain.object(id: sharedID, master: master)[.accessible], AttributeValue.ulong(0), "still the class it had")
        moved[.synchronizable] = no
        try keychain.replace(id: sharedID, with: moved, master: master, allowingPrivateChange: true)
        XCTAssertEqual(try keychain.object(id: sharedID, master: master).isSynchronizable, false)
    }

    func test_an_item_stored_so_before_the_rule_keeps_its_flags_through_other_changes() throws {
        let (keychain, master) = try makeKeychain()
        let legacy = try password("legacy", [(.synchronizable, yes), accessible(.whenUnlockedThisDeviceOnly), (.isPrivate, yes)])
        let id = try storeAsBefore(keychain, legacy.object, uid: legacy.uid, master: master)
        let before = try keychain.object(id: id, master: master)
        let renamed = try ObjectTemplate.set([(.label, Array("renamed".utf8))], on: before)
        XCTAssertNil(renamed.syncRefusal(changing: before))
        try keychain.replace(id: id, with: renamed, master: master)
        XCTAssertEqual(try keychain.object(id: id, master: master)[.label], Array("renamed".utf8))
        let off = try ObjectTemplate.set([(.synchronizable, no)], on: try keychain.object(id: id, master: master))
        try keychain.replace(id: id, with: off, master: master)
        let on = try ObjectTemplate.set([(.synchronizable, yes)], on: try keychain.object(id: id, master: master))
        XCTAssertEqual(code { try keychain.replace(id: id, with: on, master: master) }, .templateInconsistent, "once off, it stays off")
    }

    func test_a_public_key_made_for_a_private_key_syncs_with_it() throws {
        let key = try AsymmetricKey.generate(.ec(.p256), bits: 0)
        let material = try KeyFactory.generatedMaterial(key)
        var template: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.privateKey.rawValue)), (.keyType, AttributeValue.ulong(KeyType.ec.rawValue)),
                                  (.token, yes), (.synchronizable, yes)]
        template += material.privateKey.map { ($0.key, $0.value) }
        let privateKey = try ObjectTemplate.create(template, uniqueID: try UniqueID.random().text, policy: .compatible)
        XCTAssertTrue(try KeyFactory.publicObject(for: privateKey, uniqueID: try UniqueID.random().text, policy: .compatible).isSynchronizable)
    }

    // MARK: Secret Service items

    func test_the_secret_service_choice_marks_existing_and_new_items() throws {
        let (keychain, master) = try makeKeychain()
        XCTAssertFalse(try keychain.secretServiceItemsSync(), "off by default")
        _ = try SecretServiceItems.add(["service": "mail", "account": "ann"], label: "mail", contentType: "text/plain", secret: Array("m".utf8),
                                       to: keychain, master: master)
        // A Secret Service item kept on this device, and a password of another door.
        let bound = try password("bound", [accessible(.whenUnlockedThisDeviceOnly), (.isPrivate, yes),
                                           (.lookupAttributes, LookupAttributes(["service": "vpn"]).encoded)])
        _ = try keychain.add(bound.object, uid: bound.uid, master: master)
        let other = try password("other")
        _ = try keychain.add(other.object, uid: other.uid, master: master)
        XCTAssertFalse(try stored(keychain, master, label: "mail")[0].isSynchronizable)

        var report = try keychain.setSecretServiceItemsSync(true, master: master)
        XCTAssertEqual(report.changed, 1)
        XCTAssertEqual(report.unchanged, 0)
        XCTAssertEqual(report.skipped, [.init(label: "bound", reason: "a ThisDeviceOnly item cannot sync")])
        XCTAssertTrue(try keychain.secretServiceItemsSync())
        XCTAssertTrue(try stored(keychain, master, label: "mail")[0].isSynchronizable)
        XCTAssertFalse(try stored(keychain, master, label: "bound")[0].isSynchronizable)
        XCTAssertFalse(try stored(keychain, master, label: "other")[0].isSynchronizable, "other doors' passwords keep their own choice")
        _ = try SecretServiceItems.add(["service": "chat"], label: "chat", contentType: "text/plain", secret: Array("c".utf8), to: keychain, master: master)
        XCTAssertTrue(try stored(keychain, master, label: "chat")[0].isSynchronizable, "made after the choice: synchronizable")
        XCTAssertEqual(try keychain.setSecretServiceItemsSync(true, master: master).unchanged, 2, "a second run changes nothing")

        report = try keychain.setSecretServiceItemsSync(false, master: master)
        XCTAssertEqual(report.changed, 2)
        XCTAssertEqual(report.skipped, [])
        XCTAssertFalse(try keychain.secretServiceItemsSync())
        for label in ["mail", "chat", "bound", "other"] { XCTAssertFalse(try stored(keychain, master, label: label)[0].isSynchronizable, label) }
        _ = try SecretServiceItems.add(["service": "news"], label: "news", contentType: "text/plain", secret: Array("n".utf8), to: keychain, master: master)
        XCTAssertFalse(try stored(keychain, master, label: "news")[0].isSynchronizable)
        // The choice is the keychain's: another process opening the file sees it.
        _ = try keychain.setSecretServiceItemsSync(true, master: master)
        XCTAssertTrue(try Keychain.open(at: keychain.path).secretServiceItemsSync())
    }
}
