import Glibc
import XCTest
import KeychainCrypto
@testable import KeychainCore
@testable import KeychainStore

/// The locked-lookup index: a locked keychain's Secret Service passwords found by their
/// attributes with the device key alone, never with a copied file on another device, not at all
/// when the keychain's setting is off, and tampering with the entries reported, not answered.
/// Also the collection display name beside the token label.
final class LockedLookupTests: KeychainFolderTestCase {
    private let userPIN = Array("1234".utf8)

    override func setUp() {
        super.setUp()
        setenv("KEYCHAIN_PKCS11_DEVICE_KEY", root + "/state/device-key", 1)
    }

    private func makeKeychain() throws -> (Keychain, MasterKey) {
        let keychain = try create("passwords")
        return (keychain, try userPIN.withUnsafeBytes { try keychain.unlock(.user, pin: $0) })
    }

    @discardableResult
    private func store(_ keychain: Keychain, _ master: MasterKey, _ attributes: [String: String]) throws -> String {
        let object = try SecretServiceItems.add(attributes, label: "item", contentType: "text/plain", secret: Array("secret".utf8), to: keychain, master: master)
        return String(decoding: object[.uniqueID] ?? [], as: UTF8.self)
    }

    /// As another process sees the keychain while it is locked: a fresh open, no master key.
    private func locked(_ keychain: Keychain, deviceKey: DeviceKeyFile? = nil) throws -> Keychain {
        try Keychain.open(at: keychain.path, deviceKey: deviceKey ?? .configured())
    }

    private func search(_ keychain: Keychain, _ wanted: [String: String]) throws -> [String]? {
        try keychain.lockedSearch(wanted)?.map { String(decoding: Hex.digits($0), as: UTF8.self) }.sorted()
    }

    private func lockedEntryCount(_ keychain: Keychain) throws -> Int {
        var count = 0
        try keychain.store.database.query("SELECT count(*) FROM object_index WHERE attribute = ?",
                                          [.integer(Int64(bitPattern: Keychain.lockedLookupAttribute))]) { count = Int($0.int64(0)) }
        return count
    }

    private func code(_ body: () throws -> Void) -> KeychainError.Code? {
        do { try body(); return nil } catch { return (error as? KeychainError)?.code }
    }

    func test_a_locked_keychain_finds_its_passwords_by_any_subset_of_their_attributes() throws {
        let (keychain, master) = try makeKeychain()
        let ann = try store(keychain, master, ["application": "mail", "user": "ann"])
        let bob = try store(keychain, master, ["application": "mail", "user": "bob"])
        let git = try store(keychain, master, ["server": "example.org", "protocol": "https", "xdg:schema": SecretServiceItems.networkSchema])
        let other = try locked(keychain)
        XCTAssertEqual(try search(other, ["application": "mail"]), [ann, bob].sorted())
        XCTAssertEqual(try search(other, ["application": "mail", "user": "bob"]), [bob])
        XCTAssertEqual(try search(other, ["server": "example.org"]), [git])
        XCTAssertEqual(try search(other, ["application": "mail", "user": "carol"]), [])
        XCTAssertEqual(try search(other, ["user": "mail"]), [], "a value matches only under its own name")
        XCTAssertEqual(try search(other, [:]), [ann, bob, git].sorted(), "no attributes: every served password")
    }

    func test_passwords_needing_more_than_the_keychain_and_other_objects_have_no_entries() throws {
        let (keychain, master) = try makeKeychain()
        try store(keychain, master, ["application": "mail"])
        var template = SecretServiceItems.creationTemplate(["application": "mail"], label: "presence", contentType: "text/plain", secret: [1], asInternet: false)
        template.append((.accessControl, AttributeValue.ulong(AccessControlFlags.userPresence.rawValue)))
        let uid = try UniqueID.random()
        let object = try ObjectTemplate.create(template, uniqueID: uid.text, policy: .compatible)
        XCTAssertEqual(object.requiredCredential, .userPIN)
        _ = try keychain.add(object, uid: uid.bytes, master: master)
        XCTAssertEqual(try search(try locked(keychain), ["application": "mail"])?.count, 1, "the item that needs user presence is not served, so not listed")
        XCTAssertEqual(try lockedEntryCount(keychain), 2, "one marker and one pair, for the served password only")
    }

    func test_a_copy_on_another_device_finds_nothing() throws {
        let (keychain, master) = try makeKeychain()
        try store(keychain, master, ["application": "mail"])
        let elsewhere = try locked(keychain, deviceKey: DeviceKeyFile(path: root + "/other-machine/device-key"))
        XCTAssertNil(try search(elsewhere, ["application": "mail"]), "without this device's key there is no lookup key")
    }

    func test_turning_the_index_off_removes_every_entry_and_on_brings_them_back() throws {
        let (keychain, master) = try makeKeychain()
        let ann = try store(keychain, master, ["application": "mail", "user": "ann"])
        XCTAssertEqual(try lockedEntryCount(keychain), 3)
        XCTAssertEqual(try keychain.setLockedLookup(false, master: master), 1)
        XCTAssertEqual(try lockedEntryCount(keychain), 0)
        XCTAssertFalse(try keychain.lockedLookupIsOn())
        XCTAssertNil(try search(try locked(keychain), ["application": "mail"]))
        try store(keychain, master, ["application": "news"])
        XCTAssertEqual(try lockedEntryCount(keychain), 0, "new passwords get none while it is off")
        XCTAssertEqual(try keychain.setLockedLookup(true, master: master), 2)
        XCTAssertEqual(try search(try locked(keychain), ["user": "ann"]), [ann])
        XCTAssertEqual(try keychain.setLockedLookup(true, master: master), 0, "rows in line are not written again")
        XCTAssertEqual(try keychain.verifyIntegrity(master: master), 2, "both rows verify")
    }

    func test_a_keychain_from_before_the_index_gets_it_at_its_next_unlock_keeping_modification_times() throws {
        let (keychain, master) = try makeKeychain()
        let ann = try store(keychain, master, ["application": "mail", "user": "ann"])
        _ = try keychain.setLockedLookup(false, master: master)
        try keychain.store.database.run("DELETE FROM meta WHERE key = ?", [.text(Keychain.lockedLookupMeta)])
        let before = try keychain.object(id: try keychain.find([(.uniqueID, Array(ann.utf8))], master: master)[0].id, master: master)[.modificationTime]
        XCTAssertEqual(try search(try locked(keychain), ["user": "ann"]), [], "on by default, but not built yet")
        sleep(1)
        XCTAssertEqual(try keychain.refreshLockedLookup(master: master), 1)
        XCTAssertEqual(try keychain.refreshLockedLookup(master: master), 0, "done once")
        XCTAssertEqual(try search(try locked(keychain), ["user": "ann"]), [ann])
        let after = try keychain.object(id: try keychain.find([(.uniqueID, Array(ann.utf8))], master: master)[0].id, master: master)[.modificationTime]
        XCTAssertEqual(before, after, "re-sealing for the index is not a modification")
    }

    /// Attack: move a password's locked-lookup entries to another row, so that a locked search
    /// points a client at the wrong item. The rows' commitments no longer match: reported.
    func test_moved_entries_are_reported_not_answered() throws {
        let (keychain, master) = try makeKeychain()
        try store(keychain, master, ["application": "mail"])
        try store(keychain, master, ["application": "news"])
        let rows = try keychain.find([(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue))], master: master).map(\.id)
        try keychain.store.database.run("UPDATE object_index SET object_id = ? WHERE object_id = ? AND attribute = ?",
                                        [.integer(rows[1]), .integer(rows[0]), .integer(Int64(bitPattern: Keychain.lockedLookupAttribute))])
        XCTAssertEqual(code { _ = try self.search(try self.locked(keychain), ["application": "mail"]) }, .recordCorrupted)
    }

    func test_the_display_name_changes_and_the_token_label_does_not() throws {
        let (keychain, _) = try makeKeychain()
        XCTAssertNil(try keychain.displayName())
        try keychain.setDisplayName("Mes mots de passe ✓")
        XCTAssertEqual(try locked(keychain).displayName(), "Mes mots de passe ✓")
        XCTAssertEqual(try keychain.info(countingObjects: false).label, "passwords")
        XCTAssertEqual(code { try keychain.setDisplayName(String(repeating: "x", count: 257)) }, .argumentsBad)
        XCTAssertEqual(code { try keychain.setDisplayName("two\nlines") }, .argumentsBad)
        XCTAssertEqual(try keychain.displayName(), "Mes mots de passe ✓", "a refused name changes nothing")
        try keychain.setDisplayName("passwords")
        XCTAssertNil(try keychain.displayName(), "the token label itself is no display name")
    }
}
