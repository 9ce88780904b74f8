import BusSupport
import Foundation
import KeychainCore
import XCTest

/// The server driven over a private bus as a client drives it: exact replies and exact error names.
final class SecretServiceBehaviourTests: SecretServiceTestCase {
    static let root = "/org/freedesktop/secrets"
    static let service = "org.freedesktop.Secret.Service"
    static let collection = "org.freedesktop.Secret.Collection"
    static let item = "org.freedesktop.Secret.Item"
    static let session = "org.freedesktop.Secret.Session"
    static let login = root + "/collection/login"
    static let defaultAlias = root + "/aliases/default"
    /// A secret that is not text: every byte must come back as it went.
    static let secret: [UInt8] = [0x00, 0xff, 0x7f, 0x80, 0x0a, 0x00, 0x41, 0xc3, 0xa9]
    static let attributes = ["service": "example.org", "account": "alice"]

    // MARK: helpers

    /// OpenSession("plain", ""): the session's path.
    func openPlainSession() throws -> String {
        let reply = try client.call(Self.root, Self.service, "OpenSession") {
            $0.string("plain")
            $0.open("v", "s")
            $0.string("")
            $0.close()
        }
        XCTAssertEqual(reply.enter("v", "s"), true)
        XCTAssertEqual(reply.string(), "", "plain answers an empty output")
        XCTAssertTrue(reply.exit())
        guard let path = reply.string("o") else { throw TestFailure("no session path") }
        return path
    }

    /// CreateItem in `collectionPath` with a plain session: the item's path (the prompt must be "/").
    func createItem(in collectionPath: String = defaultAlias, session: String, label: String = "Example",
                    attributes: [String: String] = attributes, secret: [UInt8] = secret) throws -> String {
        let reply = try client.call(collectionPath, Self.collection, "CreateItem") {
            $0.open("a", "{sv}")
            $0.open("e", "sv")
            $0.string("org.freedesktop.Secret.Item.Label")
            $0.open("v", "s")
            $0.string(label)
            $0.close()
            $0.close()
            $0.open("e", "sv")
            $0.string("org.freedesktop.Secret.Item.Attributes")
            $0.open("v", "a{ss}")
            $0.stringDictionary(attributes)
            $0.close()
            $0.close()
            $0.close()
            $0.secret(session: session, parameters: [], value: secret, contentType: "application/octet-stream")
            $0.bool(false)
        }
        guard let path = reply.string("o") else { throw TestFailure("no item path") }
        XCTAssertEqual(reply.string("o"), "/", "an unlocked keychain needs no prompt")
        return path
    }

    func searchService(_ wanted: [String: String]) throws -> (unlocked: [String], locked: [String]) {
        let reply = try client.call(Self.root, Self.service, "SearchItems") { $0.stringDictionary(wanted) }
        guard let unlocked = reply.objectPaths(), let locked = reply.objectPaths() else { throw TestFailure("SearchItems reply") }
        return (unlocked, locked)
    }

    func getSecret(_ item: String, session: String) throws -> (session: String, parameters: [UInt8], value: [UInt8], contentType: String) {
        let reply = try client.call(item, Self.item, "GetSecret") { $0.string(session, type: "o") }
        guard let secret = reply.secret() else { throw TestFailure("GetSecret reply") }
        return secret
    }

    // MARK: sessions

    func test_a_plain_session_answers_an_empty_output_and_its_path() throws {
        XCTAssertEqual(try openPlainSession(), Self.root + "/session/s1")
        XCTAssertEqual(try openPlainSession(), Self.root + "/session/s2")
    }

    func test_a_closed_session_is_no_session() throws {
        let session = try openPlainSession()
        let item = try createItem(session: session)
        try client.call(session, Self.session, "Close")
        XCTAssertEqual(try client.errorName(item, Self.item, "GetSecret") { $0.string(session, type: "o") }, "org.freedesktop.Secret.Error.NoSession")
        XCTAssertThrowsError(try createItem(session: session)) { error in
            XCTAssertEqual((error as? CallFailure)?.name, "org.freedesktop.Secret.Error.NoSession")
        }
        XCTAssertEqual(try client.errorName(session, Self.session, "Close"), "org.freedesktop.Secret.Error.NoSuchObject", "the session object is gone")
    }

    // MARK: items

    func test_an_item_created_in_the_default_collection_is_found_and_gives_its_exact_bytes() throws {
        let session = try openPlainSession()
        let item = try createItem(session: session)
        XCTAssertTrue(item.hasPrefix(Self.login + "/"), item)
        XCTAssertEqual(item.count, Self.login.count + 1 + 32, "the unique ID is 32 hex digits")

        let found = try searchService(["service": "example.org"])
        XCTAssertEqual(found.unlocked, [item])
        XCTAssertEqual(found.locked, [])
        XCTAssertEqual(try searchService(["service": "example.org", "account": "bob"]).unlocked, [])
        let inCollection = try client.call(Self.login, Self.collection, "SearchItems") { $0.stringDictionary(["account": "alice"]) }
        XCTAssertEqual(inCollection.objectPaths(), [item])

        let secret = try getSecret(item, session: session)
        XCTAssertEqual(secret.session, session)
        XCTAssertEqual(secret.parameters, [])
        XCTAssertEqual(secret.value, Self.secret)
        XCTAssertEqual(secret.contentType, "application/octet-stream")
    }

    func test_item_label_and_attributes_are_read_and_written() throws {
        let session = try openPlainSession()
        let item = try createItem(session: session)
        XCTAssertEqual(try client.property(item, Self.item, "Label", signature: "s").string(), "Example")
        XCTAssertEqual(try client.property(item, Self.item, "Attributes", signature: "a{ss}").stringDictionary(), Self.attributes)
        XCTAssertEqual(try client.property(item, Self.item, "Locked", signature: "b").bool(), false)

        try client.setProperty(item, Self.item, "Label", signature: "s") { $0.string("Renamed ✓") }
        let changed = ["service": "example.org", "account": "bob", "xdg:schema": "org.example.Password"]
        try client.setProperty(item, Self.item, "Attributes", signature: "a{ss}") { $0.stringDictionary(changed) }

        XCTAssertEqual(try client.property(item, Self.item, "Label", signature: "s").string(), "Renamed ✓")
        XCTAssertEqual(try client.property(item, Self.item, "Attributes", signature: "a{ss}").stringDictionary(), changed)
        XCTAssertEqual(try client.property(item, Self.item, "Type", signature: "s").string(), "org.example.Password")
        XCTAssertEqual(try searchService(["account": "bob"]).unlocked, [item])
        XCTAssertEqual(try searchService(["account": "alice"]).unlocked, [])
        XCTAssertEqual(try getSecret(item, session: session).value, Self.secret, "the secret stays")
    }

    func test_a_collection_label_is_the_keychains_display_name_and_its_path_stays() throws {
        XCTAssertEqual(try client.property(Self.login, Self.collection, "Label", signature: "s").string(), "login")
        try client.setProperty(Self.defaultAlias, Self.collection, "Label", signature: "s") { $0.string("Mes mots ✓") }
        XCTAssertEqual(try client.property(Self.login, Self.collection, "Label", signature: "s").string(), "Mes mots ✓")
        XCTAssertEqual(try Keychain.open(at: keychainFile).displayName(), "Mes mots ✓")
        XCTAssertEqual(try Keychain.open(at: keychainFile).info(countingObjects: false).label, "login", "the token label stays")
        XCTAssertThrowsError(try client.setProperty(Self.login, Self.collection, "Label", signature: "s") { $0.string("a\u{7}b") }) { error in
            XCTAssertEqual((error as? CallFailure)?.name, "org.freedesktop.DBus.Error.InvalidArgs")
        }
        _ = try client.call(Self.root, Self.service, "Lock") { $0.objectPaths([Self.login]) }
        XCTAssertThrowsError(try client.setProperty(Self.login, Self.collection, "Label", signature: "s") { $0.string("x") }) { error in
            XCTAssertEqual((error as? CallFailure)?.name, "org.freedesktop.Secret.Error.IsLocked")
        }
        XCTAssertEqual(try client.property(Self.login, Self.collection, "Label", signature: "s").string(), "Mes mots ✓", "read while locked")
    }

    // MARK: the session collection

    func test_the_session_collection_keeps_items_in_memory_only() throws {
        let sessionPath = Self.root + "/collection/session"
        let before = try keychainBytes()
        XCTAssertEqual(try client.call(Self.root, Self.service, "ReadAlias") { $0.string("session") }.string("o"), sessionPath)
        XCTAssertEqual(try client.property(Self.root, Self.service, "Collections", signature: "ao").objectPaths(), [Self.login, sessionPath])
        let session = try openPlainSession()
        let item = try createItem(in: Self.root + "/aliases/session", session: session, attributes: ["scope": "memory"])
        XCTAssertTrue(item.hasPrefix(sessionPath + "/"), item)
        XCTAssertEqual(try searchService(["scope": "memory"]).unlocked, [item])
        XCTAssertEqual(try getSecret(item, session: session).value, Self.secret)
        XCTAssertEqual(try client.property(item, Self.item, "Label", signature: "s").string(), "Example")
        let locked = try client.call(Self.root, Self.service, "Lock") { $0.objectPaths([sessionPath]) }
        XCTAssertEqual(locked.objectPaths(), [], "the session collection is never locked")
        XCTAssertEqual(try client.property(sessionPath, Self.collection, "Locked", signature: "b").bool(), false)
        XCTAssertEqual(try keychainBytes(), before, "nothing reached the keychain file")
        XCTAssertEqual(try client.call(sessionPath, Self.collection, "Delete").string("o"), "/", "emptied at once, no prompt")
        XCTAssertEqual(try searchService(["scope": "memory"]).unlocked, [])
        XCTAssertEqual(try client.errorName(item, Self.item, "GetSecret") { $0.string(session, type: "o") }, "org.freedesktop.Secret.Error.NoSuchObject")
    }

    /// The keychain file and its side files, as bytes.
    private func keychainBytes() throws -> [[UInt8]] {
        try [keychainFile, keychainFile + "-wal"].map { path in
            FileManager.default.fileExists(atPath: path) ? Array(try Data(contentsOf: URL(fileURLWithPath: path))) : []
        }
    }

    // MARK: locking

    func test_a_locked_keychain_answers_is_locked_and_gives_no_secret() throws {
        let session = try openPlainSession()
        let item = try createItem(session: session)
        let locked = try client.call(Self.root, Self.service, "Lock") { $0.objectPaths([Self.login]) }
        XCTAssertEqual(locked.objectPaths(), [Self.login])
        XCTAssertEqual(locked.string("o"), "/")
        XCTAssertFalse(keys.isHeld(path: keychainFile))
        XCTAssertEqual(try client.property(Self.login, Self.collection, "Locked", signature: "b").bool(), true)
        XCTAssertEqual(try client.property(item, Self.item, "Label", signature: "s").string(), "", "sealed while locked")

        XCTAssertEqual(try client.errorName(item, Self.item, "GetSecret") { $0.string(session, type: "o") }, "org.freedesktop.Secret.Error.IsLocked")
        let found = try searchService(["service": "example.org"])
        XCTAssertEqual(found.unlocked, [])
        XCTAssertEqual(found.locked, [item], "found through the locked-lookup index")
        XCTAssertEqual(try searchService(["service": "example.org", "account": "bob"]).locked, [])
        XCTAssertEqual(try client.call(Self.login, Self.collection, "SearchItems") { $0.stringDictionary(["account": "alice"]) }.objectPaths(), [item])
        let unlock = try client.call(Self.root, Self.service, "Unlock") { $0.objectPaths([Self.login]) }
        XCTAssertEqual(unlock.objectPaths(), [])
        XCTAssertEqual(unlock.string("o"), Self.root + "/prompt/p2", "a prompt (p2: the session was s1)")

        try unlockKeychain()
        XCTAssertEqual(try getSecret(item, session: session).value, Self.secret)
    }

    // MARK: errors

    func test_a_missing_object_is_no_such_object() throws {
        let session = try openPlainSession()
        let missingItem = Self.login + "/" + String(repeating: "0", count: 32)
        XCTAssertEqual(try client.errorName(missingItem, Self.item, "GetSecret") { $0.string(session, type: "o") },
                       "org.freedesktop.Secret.Error.NoSuchObject")
        XCTAssertEqual(try client.errorName(Self.root + "/collection/nothere", Self.collection, "SearchItems") { $0.stringDictionary([:]) },
                       "org.freedesktop.Secret.Error.NoSuchObject")
        XCTAssertEqual(try client.errorName(Self.root + "/prompt/p99", "org.freedesktop.Secret.Prompt", "Dismiss"),
                       "org.freedesktop.Secret.Error.NoSuchObject")
    }

    func test_an_unknown_method_is_unknown_method() {
        XCTAssertEqual(try client.errorName(Self.root, Self.service, "Frobnicate"), "org.freedesktop.DBus.Error.UnknownMethod")
        XCTAssertEqual(try client.errorName(Self.login, Self.collection, "Frobnicate"), "org.freedesktop.DBus.Error.UnknownMethod")
    }
}
