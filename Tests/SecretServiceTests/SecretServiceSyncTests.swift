import Foundation
import KeychainCore
import XCTest

/// Items created over D-Bus follow the keychain's choice whether Secret Service items sync
/// (`keychainctl secret-service sync`): off by default; on, new items are synchronizable and the
/// existing ones become so; off again, they all stop being synchronizable.
extension SecretServiceBehaviourTests {
    /// The keychain object behind an item path (its unique ID is the path's last part).
    private func storedItem(_ path: String) throws -> ObjectAttributes {
        let keychain = try Keychain.open(at: keychainFile)
        let master = try Array(Self.userPIN.utf8).withUnsafeBytes { try keychain.unlock(.user, pin: $0) }
        let uniqueID = Array((path.split(separator: "/").last ?? "").utf8)
        guard let row = try keychain.find([(.uniqueID, uniqueID)], master: master).first else { throw TestFailure("no item \(path)") }
        return try keychain.object(id: row.id, master: master)
    }

    private func setChoice(_ on: Bool) throws -> SecretServiceSyncReport {
        let keychain = try Keychain.open(at: keychainFile)
        let master = try Array(Self.userPIN.utf8).withUnsafeBytes { try keychain.unlock(.user, pin: $0) }
        return try keychain.setSecretServiceItemsSync(on, master: master)
    }

    func test_items_created_over_d_bus_follow_the_keychains_sync_choice() throws {
        let session = try openPlainSession()
        let first = try createItem(session: session, label: "first", attributes: ["service": "one.example"])
        XCTAssertFalse(try storedItem(first).isSynchronizable, "off by default")

        let report = try setChoice(true)
        XCTAssertEqual(report.changed, 1)
        XCTAssertTrue(try storedItem(first).isSynchronizable, "an existing item becomes synchronizable")
        let second = try createItem(session: session, label: "second", attributes: ["service": "two.example"])
        XCTAssertTrue(try storedItem(second).isSynchronizable, "an item created afterwards is synchronizable")
        XCTAssertEqual(try getSecret(second, session: session).value, Self.secret, "and served as before")

        XCTAssertEqual(try setChoice(false).changed, 2)
        XCTAssertFalse(try storedItem(first).isSynchronizable)
        XCTAssertFalse(try storedItem(second).isSynchronizable)
        let third = try createItem(session: session, label: "third", attributes: ["service": "three.example"])
        XCTAssertFalse(try storedItem(third).isSynchronizable)
        XCTAssertEqual(try searchService(["service": "one.example"]).unlocked, [first], "found by its attributes whatever the flag")
    }
}
