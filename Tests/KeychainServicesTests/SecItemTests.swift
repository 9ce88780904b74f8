import Foundation
import XCTest
import KeychainCore
import KeychainCrypto
@testable import KeychainServices

/// The SecItem functions against a real keychain file in a temporary folder.
final class SecItemTests: XCTestCase {
    private var directory = ""
    private let password = "1234"

    override func setUpWithError() throws {
        directory = try makeTemporaryLoginKeychain("secitem").root
    }

    override func tearDown() { removeTemporaryKeychain(directory) }

    private func add(_ attributes: [String: Any]) -> OSStatus { SecItemAdd(attributes, nil) }

    private func copy(_ query: [String: Any]) -> (OSStatus, AnyObject?) {
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query, &result)
        return (status, result)
    }

    private func generic(_ account: String?, _ service: String, _ secret: String? = nil) -> [String: Any] {
        var query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service]
        if let account { query[kSecAttrAccount as String] = account }
        if let secret { query[kSecValueData as String] = Data(secret.utf8) }
        return query
    }

    func test_add_then_read_the_secret() {
        XCTAssertEqual(add(generic("alice", "mail", "s3cret")), errSecSuccess)
        var query = generic("alice", "mail")
        query[kSecReturnData as String] = true
        let (status, result) = copy(query)
        XCTAssertEqual(status, errSecSuccess)
        XCTAssertEqual(result as? Data, Data("s3cret".utf8))
    }

    func test_duplicates_per_class_with_absent_equal_to_empty() {
        XCTAssertEqual(add(generic("alice", "mail", "a")), errSecSuccess)
        XCTAssertEqual(add(generic("alice", "mail", "b")), errSecDuplicateItem)
        XCTAssertEqual(add(generic(nil, "mail", "c")), errSecSuccess)
        XCTAssertEqual(add(generic("", "mail", "d")), errSecDuplicateItem, "an absent account equals an empty one")
        XCTAssertEqual(add(generic("alice", "web", "e")), errSecSuccess)
        var other = generic("alice", "mail", "f")
        other[kSecAttrLabel as String] = "different label"
        XCTAssertEqual(add(other), errSecDuplicateItem, "the label is not part of the primary key")
        var synced = generic("alice", "mail", "g")
        synced[kSecAttrSynchronizable as String] = true
        XCTAssertEqual(add(synced), errSecSuccess, "synchronizable is part of the primary key")
        let internet: [String: Any] = [kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "mail",
                                       kSecAttrAccount as String: "alice", kSecValueData as String: Data("h".utf8)]
        XCTAssertEqual(add(internet), errSecSuccess, "classes have separate primary keys")
        XCTAssertEqual(add(internet), errSecDuplicateItem)
        var otherPort = internet
        otherPort[kSecAttrPort as String] = 8443
        XCTAssertEqual(add(otherPort), errSecSuccess)
    }

    func test_match_limits_and_result_shapes() {
        for account in ["a", "b", "c"] { XCTAssertEqual(add(generic(account, "svc", "pw-" + account)), errSecSuccess) }
        var query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc", kSecReturnAttributes as String: true]
        let one = copy(query)
        XCTAssertEqual(one.0, errSecSuccess)
        XCTAssertEqual((one.1 as? [String: Any])?[kSecAttrService as String] as? String, "svc", "limit one by default: a dictionary")
        query[kSecMatchLimit as String] = kSecMatchLimitAll
        let all = copy(query)
        XCTAssertEqual((all.1 as? [Any])?.count, 3)
        query[kSecMatchLimit as String] = 2
        XCTAssertEqual((copy(query).1 as? [Any])?.count, 2)
        query[kSecMatchLimit as String] = kSecMatchLimitOne
        query[kSecReturnData as String] = true
        query[kSecReturnPersistentRef as String] = true
        query[kSecAttrAccount as String] = "b"
        let combined = copy(query).1 as? [String: Any]
        XCTAssertEqual(combined?[kSecValueData as String] as? Data, Data("pw-b".utf8))
        XCTAssertEqual(combined?[kSecAttrAccount as String] as? String, "b")
        XCTAssertNotNil(combined?[kSecAttrCreationDate as String] as? Date)
        XCTAssertEqual(combined?[kSecAttrAccessible as String] as? String, kSecAttrAccessibleWhenUnlocked as String)
        guard let reference = combined?[kSecValuePersistentRef as String] as? Data else { return XCTFail("no persistent reference") }
        let byReference = copy([kSecClass as String: kSecClassGenericPassword, kSecValuePersistentRef as String: reference, kSecReturnData as String: true])
        XCTAssertEqual(byReference.1 as? Data, Data("pw-b".utf8))
        XCTAssertEqual(copy(generic("zzz", "svc")).0, errSecItemNotFound)
        var none = generic("zzz", "svc")
        none[kSecMatchLimit as String] = kSecMatchLimitAll
        none[kSecReturnAttributes as String] = true
        let empty = copy(none)
        XCTAssertEqual(empty.0, errSecItemNotFound, "no match is not-found, never an empty array")
        XCTAssertNil(empty.1)
    }

    func test_update_and_delete() {
        XCTAssertEqual(add(generic("alice", "mail", "old")), errSecSuccess)
        XCTAssertEqual(add(generic("bob", "mail", "bob's")), errSecSuccess)
        XCTAssertEqual(SecItemUpdate(generic("alice", "mail"), [kSecValueData as String: Data("new".utf8)]), errSecSuccess)
        var read = generic("alice", "mail")
        read[kSecReturnData as String] = true
        XCTAssertEqual(copy(read).1 as? Data, Data("new".utf8))
        var withSearchKey = generic("alice", "mail")
        withSearchKey[kSecReturnData as String] = true
        XCTAssertEqual(SecItemUpdate(withSearchKey, [kSecValueData as String: Data("x".utf8)]), errSecParam)
        XCTAssertEqual(SecItemDelete(withSearchKey), errSecParam)
        XCTAssertEqual(SecItemUpdate(generic("alice", "mail"), [kSecClass as String: kSecClassGenericPassword]), errSecParam)
        XCTAssertEqual(SecItemUpdate(generic("alice", "mail"), [kSecAttrAccount as String: "bob"]), errSecDuplicateItem)
        XCTAssertEqual(copy(read).1 as? Data, Data("new".utf8), "a refused update changes nothing")
        XCTAssertEqual(SecItemUpdate(generic("carol", "mail"), [kSecValueData as String: Data("x".utf8)]), errSecItemNotFound)
        XCTAssertEqual(SecItemDelete([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "mail"]), errSecSuccess)
        XCTAssertEqual(copy(read).0, errSecItemNotFound)
        XCTAssertEqual(SecItemDelete(generic("alice", "mail")), errSecItemNotFound)
    }

    func test_wrong_types_and_unknown_keys_are_errSecParam() {
        XCTAssertEqual(add([kSecAttrService as String: "x"]), errSecParam, "no class")
        XCTAssertEqual(add([kSecClass as String: "nope"]), errSecParam)
        XCTAssertEqual(add([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: 42]), errSecParam)
        XCTAssertEqual(add([kSecClass as String: kSecClassGenericPassword, kSecValueData as String: "not data"]), errSecParam)
        XCTAssertEqual(add([kSecClass as String: kSecClassGenericPassword, kSecAttrServer as String: "x"]), errSecParam, "a server is not a generic password attribute")
        XCTAssertEqual(add([kSecClass as String: kSecClassGenericPassword, kSecMatchLimit as String: kSecMatchLimitAll]), errSecParam)
        XCTAssertEqual(add([kSecClass as String: kSecClassGenericPassword, kSecAttrAccessible as String: "bogus"]), errSecParam)
        XCTAssertEqual(copy([kSecClass as String: kSecClassGenericPassword, kSecMatchLimit as String: -3]).0, errSecParam)
    }

    func test_synchronizable_items_need_sync_any_to_be_found() {
        var synced = generic("alice", "cloud", "s")
        synced[kSecAttrSynchronizable as String] = true
        XCTAssertEqual(add(synced), errSecSuccess)
        XCTAssertEqual(copy(generic("alice", "cloud")).0, errSecItemNotFound, "absent kSecAttrSynchronizable matches only local items")
        var any = generic("alice", "cloud")
        any[kSecAttrSynchronizable as String] = kSecAttrSynchronizableAny
        any[kSecReturnData as String] = true
        XCTAssertEqual(copy(any).1 as? Data, Data("s".utf8))
    }

    func test_locked_keychain_and_wrong_password() {
        XCTAssertEqual(add(generic("alice", "mail", "s")), errSecSuccess)
        KeychainServices.lockAll()
        XCTAssertEqual(copy(generic("alice", "mail")).0, errSecInteractionNotAllowed)
        XCTAssertEqual(KeychainServices.unlock(password: "9999"), errSecAuthFailed)
        var query = generic("alice", "mail")
        query[kSecUseAuthenticationContext as String] = SecAuthenticationContext(password: password)
        query[kSecReturnData as String] = true
        XCTAssertEqual(copy(query).1 as? Data, Data("s".utf8), "an authentication context unlocks without a prompt")
        XCTAssertEqual(copy([kSecClass as String: kSecClassGenericPassword, kSecUseKeychainLabel as String: "nope"]).0, errSecNoSuchKeychain)
    }

    /// Shaped like the reference examples (CFDictionary, CFString casts, kCFBooleanTrue).
    func test_code_shaped_like_apple_examples_works() {
        var dict = [String: AnyObject]()
        dict[kSecClass as String] = kSecClassGenericPassword
        dict[kSecAttrAccessible as String] = kSecAttrAccessibleWhenUnlocked
        dict[kSecAttrLabel as String] = "com.me.myapp.myaccountpassword" as CFString
        dict[kSecAttrAccount as String] = "My Name" as CFString
        dict[kSecAttrService as String] = "MyService" as CFString
        dict[kSecValueData as String] = "my_password!!".data(using: .utf8) as CFData?
        dict[kSecReturnAttributes as String] = kCFBooleanTrue
        var result: AnyObject?
        let status = withUnsafeMutablePointer(to: &result) { SecItemAdd(dict as CFDictionary, UnsafeMutablePointer($0)) }
        XCTAssertEqual(status, errSecSuccess)
        let newAttributes = result as? [String: AnyObject]
        XCTAssertEqual(newAttributes?[kSecAttrLabel as String] as? String, "com.me.myapp.myaccountpassword")

        var find = [String: AnyObject]()
        find[kSecClass as String] = kSecClassGenericPassword
        find[kSecAttrAccount as String] = "My Name" as CFString
        find[kSecAttrService as String] = "MyService" as CFString
        find[kSecReturnData as String] = kCFBooleanTrue
        var queryResult: AnyObject?
        let found = withUnsafeMutablePointer(to: &queryResult) { SecItemCopyMatching(find as CFDictionary, UnsafeMutablePointer($0)) }
        XCTAssertEqual(found, errSecSuccess)
        XCTAssertEqual(String(data: (queryResult as? Data) ?? Data(), encoding: .utf8), "my_password!!")
        XCTAssertEqual(SecCopyErrorMessageString(errSecItemNotFound, nil) as String?, "The specified item could not be found in the keychain.")
    }
}

extension SecItemTests {
    /// Every non-empty combination of the four kSecReturn… keys, with limit one and limit all.
    func test_every_return_combination_has_apples_shape() throws {
        XCTAssertEqual(add(generic("alice", "shapes", "pw")), errSecSuccess)
        let keys = [kSecReturnData as String, kSecReturnAttributes as String, kSecReturnRef as String, kSecReturnPersistentRef as String]
        for mask in 1..<16 {
            let chosen = keys.indices.filter { mask & (1 << $0) != 0 }.map { keys[$0] }
            for limit in [kSecMatchLimitOne as String, kSecMatchLimitAll as String] {
                var query = generic("alice", "shapes")
                query[kSecMatchLimit as String] = limit
                for key in chosen { query[key] = true }
                let (status, result) = copy(query)
                XCTAssertEqual(status, errSecSuccess, "\(chosen) \(limit)")
                let single: AnyObject?
                if limit == kSecMatchLimitAll as String {
                    let array = result as? [AnyObject]
                    XCTAssertEqual(array?.count, 1, "limit all gives an array")
                    single = array?.first
                } else {
                    single = result
                }
                if chosen.count == 1 {
                    if chosen == [kSecReturnAttributes as String] {
                        XCTAssertEqual((single as? [String: Any])?[kSecAttrAccount as String] as? String, "alice")
                    } else if chosen == [kSecReturnData as String] {
                        XCTAssertEqual(single as? Data, Data("pw".utf8))
                    } else {
                        XCTAssertEqual((single as? Data)?.prefix(4), Data("KCPR".utf8), "references are persistent references")
                    }
                } else {
                    let dictionary = try XCTUnwrap(single as? [String: Any], "several return keys give a dictionary: \(chosen)")
                    XCTAssertEqual(dictionary[kSecValueData as String] as? Data, chosen.contains(kSecReturnData as String) ? Data("pw".utf8) : nil)
                    XCTAssertEqual(dictionary[kSecAttrAccount as String] != nil, chosen.contains(kSecReturnAttributes as String))
                    XCTAssertEqual(dictionary[kSecValuePersistentRef as String] != nil, chosen.contains(kSecReturnPersistentRef as String))
                }
            }
        }
        let (status, result) = copy(generic("alice", "shapes"))
        XCTAssertEqual(status, errSecSuccess, "no return key: success and no result")
        XCTAssertNil(result)
    }
}
