import Foundation
import Security
import XCTest

// What the wrapper libraries' own XCTest suites, built on Linux against this Security module,
// found still different from Apple (issue 33's measurement), each in the shape that library
// writes it: SwiftKeychainWrapper reads `attributes[kSecAttrAccount]` from `[[AnyHashable: Any]]`
// results, SimpleKeychain compares queries with `NSDictionary.isEqual(to:)`, Valet migrates an
// iCloud item by its persistent reference, Locksmith takes its default service from
// `kCFBundleIdentifierKey` and expects attributes it never set to be absent.

private let service = "com.example.wrapper-suite"

final class WrapperSuiteSampleTests: AppleSampleCase {
    func test_constants_find_their_values_in_any_hashable_dictionaries() throws {
        let account = Data("token".utf8)
        let add: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                  kSecAttrAccount as String: account, kSecValueData as String: Data("secret".utf8)]
        XCTAssertEqual(SecItemAdd(add as CFDictionary, nil), errSecSuccess)

        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                    kSecReturnAttributes as String: kCFBooleanTrue!, kSecMatchLimit as String: kSecMatchLimitAll]
        var result: AnyObject?
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecSuccess)
        let items = try XCTUnwrap(result as? [[AnyHashable: Any]])
        XCTAssertEqual(items.count, 1)
        // A CFString key finds the String key, as it does on Apple platforms.
        XCTAssertEqual(items[0][kSecAttrAccount] as? Data, account)
        XCTAssertEqual(items[0][kSecAttrService] as? String, service)
        XCTAssertEqual(AnyHashable(kSecClass), AnyHashable("class"))
        XCTAssertEqual(Set<AnyHashable>([kSecClassGenericPassword, "genp"]).count, 1)

        // Dictionaries holding constants compare equal as Foundation dictionaries (SimpleKeychain's
        // base query: class, service, account).
        let base: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                   kSecAttrAccount as String: "token", kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlock]
        XCTAssertTrue(NSDictionary(dictionary: base).isEqual(to: base))
        XCTAssertTrue(NSDictionary(dictionary: [kSecClass as String: kSecClassGenericPassword]).isEqual(to: [kSecClass as String: "genp"]))

        // And the CFError user-info keys find their values in a bridged dictionary.
        var error: Unmanaged<CFError>?
        XCTAssertNil(SecAccessControlCreateWithFlags(kCFAllocatorDefault, "not a protection class" as CFString, .userPresence, &error))
        let info = try XCTUnwrap(CFErrorCopyUserInfo(try XCTUnwrap(error?.takeRetainedValue())) as? [AnyHashable: Any])
        XCTAssertEqual(info[kCFErrorLocalizedDescriptionKey] as? String, "the protection must be a kSecAttrAccessible value")
    }

    func test_a_persistent_reference_finds_a_synchronizable_item() throws {
        let add: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                  kSecAttrAccount as String: "icloud", kSecAttrSynchronizable as String: true,
                                  kSecValueData as String: Data("synced secret".utf8), kSecReturnPersistentRef as String: true]
        var added: CFTypeRef?
        XCTAssertEqual(SecItemAdd(add as CFDictionary, &added), errSecSuccess)
        let reference = try XCTUnwrap(added as? Data)

        // A search by attributes without kSecAttrSynchronizable still sees no synchronizable item.
        var result: CFTypeRef?
        let byAttributes: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                           kSecReturnData as String: true]
        XCTAssertEqual(SecItemCopyMatching(byAttributes as CFDictionary, &result), errSecItemNotFound)

        // A persistent reference names the item: found without kSecAttrSynchronizable, with or
        // without kSecClass (Valet's migration reads each item this way).
        let byReference: [String: Any] = [kSecValuePersistentRef as String: reference, kSecReturnData as String: true]
        XCTAssertEqual(SecItemCopyMatching(byReference as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual(result as? Data, Data("synced secret".utf8))
        var withClass = byReference
        withClass[kSecClass as String] = kSecClassGenericPassword
        result = nil
        XCTAssertEqual(SecItemCopyMatching(withClass as CFDictionary, &result), errSecSuccess)
        XCTAssertEqual(result as? Data, Data("synced secret".utf8))
        // Naming kSecAttrSynchronizable false narrows the search again.
        var notSynchronizable = byReference
        notSynchronizable[kSecAttrSynchronizable as String] = false
        XCTAssertEqual(SecItemCopyMatching(notSynchronizable as CFDictionary, &result), errSecItemNotFound)

        XCTAssertEqual(SecItemUpdate([kSecValuePersistentRef as String: reference] as CFDictionary,
                                     [kSecValueData as String: Data("rotated".utf8)] as CFDictionary), errSecSuccess)
        XCTAssertEqual(SecItemDelete([kSecValuePersistentRef as String: reference] as CFDictionary), errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching(byReference as CFDictionary, &result), errSecItemNotFound)
    }

    func test_bundle_info_keys_have_apples_values() {
        // Locksmith's default service, word for word.
        let defaultService = Bundle.main.infoDictionary?[String(kCFBundleIdentifierKey)] as? String ?? "com.locksmith.defaultService"
        XCTAssertEqual(defaultService, Bundle.main.bundleIdentifier ?? "com.locksmith.defaultService")
        XCTAssertEqual(kCFBundleIdentifierKey as String, "CFBundleIdentifier")
        XCTAssertEqual(kCFBundleNameKey as String, "CFBundleName")
        XCTAssertEqual(kCFBundleVersionKey as String, "CFBundleVersion")
        XCTAssertEqual(kCFBundleExecutableKey as String, "CFBundleExecutable")
        XCTAssertEqual(kCFBundleInfoDictionaryVersionKey as String, "CFBundleInfoDictionaryVersion")
        XCTAssertEqual(kCFBundleLocalizationsKey as String, "CFBundleLocalizations")
        XCTAssertEqual(kCFBundleDevelopmentRegionKey as String, "CFBundleDevelopmentRegion")
    }

    func test_attributes_never_set_are_left_out_of_the_result() throws {
        func attributes(_ account: String) throws -> [String: Any] {
            let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                        kSecAttrAccount as String: account, kSecReturnAttributes as String: true]
            var result: CFTypeRef?
            XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecSuccess)
            return try XCTUnwrap(result as? [String: Any])
        }
        XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                   kSecAttrAccount as String: "plain", kSecValueData as String: Data("pw".utf8)] as CFDictionary, nil), errSecSuccess)
        let plain = try attributes("plain")
        XCTAssertNil(plain[kSecAttrGeneric as String], "Apple keeps an unset kSecAttrGeneric as NULL and returns nothing")
        XCTAssertNil(plain[kSecAttrIsInvisible as String])
        XCTAssertNil(plain[kSecAttrIsNegative as String])
        XCTAssertNil(plain[kSecAttrComment as String])
        XCTAssertEqual(plain[kSecAttrSynchronizable as String] as? Bool, false, "sync defaults to 0 and is returned")
        XCTAssertEqual(plain[kSecAttrAccount as String] as? String, "plain")

        XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                   kSecAttrAccount as String: "marked", kSecValueData as String: Data("pw".utf8),
                                   kSecAttrGeneric as String: Data([1, 2]), kSecAttrIsInvisible as String: true,
                                   kSecAttrIsNegative as String: true] as CFDictionary, nil), errSecSuccess)
        let marked = try attributes("marked")
        XCTAssertEqual(marked[kSecAttrGeneric as String] as? Data, Data([1, 2]))
        XCTAssertEqual(marked[kSecAttrIsInvisible as String] as? Bool, true)
        XCTAssertEqual(marked[kSecAttrIsNegative as String] as? Bool, true)
    }
}
