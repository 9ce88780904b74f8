import Glibc
import XCTest
import KeychainCrypto
@testable import KeychainCore
@testable import KeychainStore

/// Secret Service items in a real keychain file: lookup attributes searched through their
/// blind-index entries (any subset of pairs finds the item), kept out of the file in clear, and
/// the mapping to Apple's generic and internet passwords.
final class SecretServiceItemsTests: XCTestCase {
    private var directory = ""
    private let kdf = ScryptParameters(logN: 8, blockSize: 8, parallelism: 1)
    private let userPIN = Array("1234".utf8)

    override func setUp() {
        var template = Array("/tmp/kc-ssitems.XXXXXX".utf8CString)
        directory = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        setenv("KEYCHAIN_PKCS11_DEVICE_KEY", directory + "/state/device-key", 1)
    }

    override func tearDown() { _ = system("rm -rf '\(directory)'") }

    private func makeKeychain() throws -> (Keychain, MasterKey) {
        let keychain = try Array("so-secret".utf8).withUnsafeBytes { so in
            try userPIN.withUnsafeBytes { try KeychainDirectory(path: directory + "/keychains").createKeychain(slotID: nil, label: "t", soPIN: so, userPIN: $0, kdf: kdf) }
        }
        return (keychain, try userPIN.withUnsafeBytes { try keychain.unlock(.user, pin: $0) })
    }

    private func store(_ keychain: Keychain, _ master: MasterKey, _ attributes: [String: String], secret: String) throws -> ObjectAttributes {
        try SecretServiceItems.add(attributes, label: "item", contentType: "text/plain", secret: Array(secret.utf8), to: keychain, master: master)
    }

    private func found(_ keychain: Keychain, _ master: MasterKey?, _ wanted: [String: String]) throws -> [String] {
        var values: [String] = []
        var seen: Set<Int64> = []
        for template in SecretServiceItems.searchTemplates(wanted) {
            for row in try keychain.find(template, master: master) where seen.insert(row.id).inserted {
                let object = try keychain.object(id: row.id, master: master)
                if SecretServiceItems.matches(object, wanted) { values.append(String(decoding: object[.value] ?? [], as: UTF8.self)) }
            }
        }
        return values.sorted()
    }

    func test_lookup_attributes_encode_and_refuse_malformed_input() throws {
        let set = LookupAttributes(["b": "2", "a": "1", "ünï": "✓"])
        XCTAssertEqual(set.pairs.map(\.name), ["a", "b", "ünï"])
        XCTAssertEqual(LookupAttributes(encoded: set.encoded), set)
        XCTAssertNil(LookupAttributes(encoded: [0, 0, 0, 9, 0x61]), "a length beyond the end")
        XCTAssertNil(LookupAttributes(encoded: LookupAttributes(["a": "1"]).encoded + LookupAttributes(["a": "2"]).encoded), "a repeated name")
        XCTAssertNil(LookupAttributes(encoded: [0, 0, 0, 1, 0xFF, 0, 0, 0, 0]), "not UTF-8")
        XCTAssertTrue(LookupAttributes(["a": "1"]).isSubset(of: set))
        XCTAssertFalse(LookupAttributes(["a": "2"]).isSubset(of: set))
    }

    func test_any_subset_of_the_pairs_finds_the_item_through_the_index() throws {
        let (keychain, master) = try makeKeychain()
        _ = try store(keychain, master, ["application": "mail", "user": "ann", "xdg:schema": "org.example.Mail"], secret: "one")
        _ = try store(keychain, master, ["application": "mail", "user": "bob"], secret: "two")
        _ = try store(keychain, master, ["application": "chat", "user": "ann"], secret: "three")
        XCTAssertEqual(try found(keychain, master, ["application": "mail"]), ["one", "two"])
        XCTAssertEqual(try found(keychain, master, ["user": "ann"]), ["one", "three"])
        XCTAssertEqual(try found(keychain, master, ["application": "mail", "user": "ann"]), ["one"])
        XCTAssertEqual(try found(keychain, master, ["application": "mail", "user": "carl"]), [])
        XCTAssertEqual(try found(keychain, master, [:]), ["one", "three", "two"])
        // Locked: private items are not found (their index digests need the master key).
        XCTAssertEqual(try found(keychain, nil, ["application": "mail"]), [])
        // The index is what decides: the rows found by one pair are exactly those with it.
        let rows = try keychain.find([(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue)),
                                      (.lookupAttributes, LookupAttributes(["user": "bob"]).encoded)], master: master)
        XCTAssertEqual(rows.count, 1)
    }

    func test_attributes_and_secrets_are_not_in_the_file_in_clear() throws {
        let (keychain, master) = try makeKeychain()
        _ = try store(keychain, master, ["application": "distinctive-application-name", "user": "distinctive-user-name"], secret: "distinctive-secret-value")
        for suffix in ["", "-wal"] {
            guard let handle = fopen(keychain.path + suffix, "rb") else { continue }
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = fread(&buffer, 1, buffer.count, handle)
                if count <= 0 { break }
                bytes += buffer.prefix(count)
            }
            fclose(handle)
            for needle in ["distinctive-application-name", "distinctive-user-name", "distinctive-secret-value"] {
                let pattern = Array(needle.utf8)
                let present = bytes.count >= pattern.count && (0...(bytes.count - pattern.count)).contains { bytes[$0..<$0 + pattern.count].elementsEqual(pattern) }
                XCTAssertFalse(present, "\(needle) in \(keychain.path + suffix)")
            }
        }
    }

    func test_mapping_to_apple_fields_and_back() throws {
        let (keychain, master) = try makeKeychain()
        // A generic item: service and account become kSecAttrService / kSecAttrAccount, no item class.
        let generic = try store(keychain, master, ["service": "example.org", "account": "alice", "extra": "1"], secret: "g")
        XCTAssertEqual(generic[.application], Array("example.org".utf8))
        XCTAssertEqual(generic[.account], Array("alice".utf8))
        XCTAssertNil(generic.itemClass)
        XCTAssertEqual(SecretServiceItems.attributes(of: generic), ["service": "example.org", "account": "alice", "extra": "1"])
        // Two items may share service and account (the Secret Service allows it).
        _ = try store(keychain, master, ["service": "example.org", "account": "alice", "extra": "2"], secret: "g2")
        XCTAssertEqual(try found(keychain, master, ["service": "example.org", "account": "alice"]), ["g", "g2"])
        // libsecret's network schema: an internet password.
        let network = try store(keychain, master, ["xdg:schema": SecretServiceItems.networkSchema, "server": "git.example", "user": "erin",
                                                   "protocol": "https", "port": "8443", "object": "repo"], secret: "n")
        XCTAssertEqual(network.itemClass, .internetPassword)
        XCTAssertEqual(network[.application], Array("git.example".utf8))
        XCTAssertEqual(network[.itemProtocol].flatMap(AttributeValue.decodeULong), UInt(0x6874_7073))  // "htps"
        XCTAssertEqual(network[.port].flatMap(AttributeValue.decodeULong), 8443)
        XCTAssertEqual(network[.path], Array("repo".utf8))
        // An item of another door shows the attributes its fields give, and is found by them.
        let uid = try UniqueID.random()
        let plain = try ObjectTemplate.create([(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue)), (.token, [1]), (.isPrivate, [1]),
                                               (.itemClass, AttributeValue.ulong(ItemClass.internetPassword.rawValue)),
                                               (.application, Array("imap.example".utf8)), (.account, Array("fay".utf8)),
                                               (.itemProtocol, SecretServiceItems.fourCharacterCode("imps")), (.value, Array("p".utf8))],
                                              uniqueID: uid.text, policy: .compatible)
        _ = try keychain.add(plain, uid: uid.bytes, master: master)
        XCTAssertEqual(SecretServiceItems.attributes(of: plain), ["server": "imap.example", "user": "fay", "protocol": "imaps"])
        XCTAssertEqual(try found(keychain, master, ["server": "imap.example", "protocol": "imaps"]), ["p"])
        XCTAssertEqual(try found(keychain, master, ["server": "imap.example", "protocol": "https"]), [])
    }
}
