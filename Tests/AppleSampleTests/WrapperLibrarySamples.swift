import Foundation
import Security
import XCTest

// Keychain code as the popular open-source wrapper libraries write it (written fresh here, in
// their shapes): the macOS branch of a clean-up that deletes with kSecMatchLimitAll, migration
// code that reads an item by its persistent reference alone, an account stored as Data, the
// CFError helpers around SecAccessControl and SecKey calls, and SecRandomCopyBytes for salts.

private let service = "com.example.wrapper"

private func store(_ account: String, in service: String = service, _ secret: String) -> OSStatus {
    let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                kSecAttrAccount as String: account, kSecValueData as String: Data(secret.utf8)]
    return SecItemAdd(query as CFDictionary, nil)
}

/// The accounts stored under a service, sorted (none: errSecItemNotFound, as Apple answers).
private func accounts(in service: String = service) -> (OSStatus, [String]) {
    let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnAttributes as String: true]
    var result: CFTypeRef?
    let status = SecItemCopyMatching(query as CFDictionary, &result)
    let found = ((result as? [[String: Any]]) ?? []).compactMap { $0[kSecAttrAccount as String] as? String }
    return (status, found.sorted())
}

/// A wrapper's "remove everything of this service": on macOS it must ask for every match.
private func removeAll(limit: Any? = kSecMatchLimitAll) -> OSStatus {
    var query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service]
    #if !os(iOS) && !os(tvOS) && !os(watchOS)
    if let limit { query[kSecMatchLimit as String] = limit }
    #endif
    return SecItemDelete(query as CFDictionary)
}

/// Migration code: the item a persistent reference names, whatever its class.
private func read(persistentReference reference: Data, _ returning: CFString = kSecReturnData) -> (OSStatus, CFTypeRef?) {
    let query: [String: Any] = [kSecValuePersistentRef as String: reference, returning as String: true]
    var result: CFTypeRef?
    let status = SecItemCopyMatching(query as CFDictionary, &result)
    return (status, result)
}

private func addReturningPersistentReference(_ attributes: [String: Any]) -> Data? {
    var query = attributes
    query[kSecReturnPersistentRef as String] = true
    var result: CFTypeRef?
    guard SecItemAdd(query as CFDictionary, &result) == errSecSuccess else { return nil }
    return result as? Data
}

final class WrapperLibrarySampleTests: AppleSampleCase {
    func test_delete_with_match_limit_all_removes_every_match_and_one_removes_one() {
        for account in ["a", "b", "c", "d"] { XCTAssertEqual(store(account, "pw-" + account), errSecSuccess) }
        XCTAssertEqual(store("a", in: "com.example.other", "other"), errSecSuccess)

        XCTAssertEqual(removeAll(limit: kSecMatchLimitOne), errSecSuccess, "macOS accepts kSecMatchLimitOne: one match is deleted")
        XCTAssertEqual(accounts().1.count, 3)
        XCTAssertEqual(removeAll(limit: 2), errSecSuccess, "a number deletes up to that many")
        XCTAssertEqual(accounts().1.count, 1)
        XCTAssertEqual(removeAll(), errSecSuccess, "kSecMatchLimitAll deletes every match")
        XCTAssertEqual(accounts().0, errSecItemNotFound)
        XCTAssertEqual(removeAll(), errSecItemNotFound, "nothing left to delete")
        XCTAssertEqual(accounts(in: "com.example.other").1, ["a"], "another service's item stays")

        // Without a limit SecItemDelete deletes every match, as before.
        for account in ["e", "f"] { XCTAssertEqual(store(account, "pw"), errSecSuccess) }
        XCTAssertEqual(removeAll(limit: nil), errSecSuccess)
        XCTAssertEqual(accounts().0, errSecItemNotFound)
        // Other search keys stay refused, as Apple's data protection keychain refuses them.
        XCTAssertEqual(SecItemDelete([kSecClass as String: kSecClassGenericPassword, kSecReturnData as String: true] as CFDictionary), errSecParam)
        XCTAssertEqual(SecItemDelete([kSecClass as String: kSecClassGenericPassword, kSecMatchLimit as String: -1] as CFDictionary), errSecParam)
    }

    func test_a_persistent_reference_alone_finds_the_item_of_any_class() throws {
        let generic = try XCTUnwrap(addReturningPersistentReference([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                                                     kSecAttrAccount as String: "migrated", kSecValueData as String: Data("generic secret".utf8)]))
        let internet = try XCTUnwrap(addReturningPersistentReference([kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "example.org",
                                                                      kSecAttrAccount as String: "migrated", kSecAttrProtocol as String: kSecAttrProtocolHTTPS,
                                                                      kSecValueData as String: Data("internet secret".utf8)]))
        var error: Unmanaged<CFError>?
        let key = try XCTUnwrap(SecKeyCreateRandomKey([kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256] as CFDictionary, &error))
        let keyReference = try XCTUnwrap(addReturningPersistentReference([kSecClass as String: kSecClassKey, kSecValueRef as String: key,
                                                                          kSecAttrApplicationTag as String: Data("com.example.wrapper.key".utf8)]))

        XCTAssertEqual(read(persistentReference: generic).1 as? Data, Data("generic secret".utf8))
        XCTAssertEqual(read(persistentReference: internet).1 as? Data, Data("internet secret".utf8))
        let attributes = read(persistentReference: internet, kSecReturnAttributes).1 as? [String: Any]
        XCTAssertEqual(attributes?[kSecClass as String] as? String, kSecClassInternetPassword as String)
        XCTAssertEqual(attributes?[kSecAttrServer as String] as? String, "example.org")
        let (keyStatus, found) = read(persistentReference: keyReference, kSecReturnRef)
        XCTAssertEqual(keyStatus, errSecSuccess)
        XCTAssertEqual(CFGetTypeID(found), SecKeyGetTypeID())
        XCTAssertEqual(read(persistentReference: keyReference).1 as? Data, SecKeyCopyExternalRepresentation(key, &error) as Data?)

        // Another keychain's reference, or data that is none, names nothing here.
        XCTAssertEqual(read(persistentReference: Data("KCPR".utf8) + Data(repeating: 7, count: 32)).0, errSecItemNotFound)
        XCTAssertEqual(read(persistentReference: Data("genp0001".utf8)).0, errSecItemNotFound)

        // Update and delete by the reference alone, too.
        let change: [String: Any] = [kSecValueData as String: Data("rotated".utf8)]
        XCTAssertEqual(SecItemUpdate([kSecValuePersistentRef as String: internet] as CFDictionary, change as CFDictionary), errSecSuccess)
        XCTAssertEqual(read(persistentReference: internet).1 as? Data, Data("rotated".utf8))
        XCTAssertEqual(SecItemDelete([kSecValuePersistentRef as String: generic] as CFDictionary), errSecSuccess)
        XCTAssertEqual(read(persistentReference: generic).0, errSecItemNotFound)
        XCTAssertEqual(read(persistentReference: internet).0, errSecSuccess, "only the named item went")
    }

    func test_an_account_stored_as_data_comes_back_as_data() throws {
        let account = Data("token-owner".utf8)
        let add: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                  kSecAttrAccount as String: account, kSecAttrLabel as String: Data("label bytes".utf8),
                                  kSecValueData as String: Data("secret".utf8)]
        XCTAssertEqual(SecItemAdd(add as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(store("plain", "other secret"), errSecSuccess)

        func attributes(account: Any) -> [String: Any]? {
            let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                                        kSecAttrAccount as String: account, kSecReturnAttributes as String: true]
            var result: CFTypeRef?
            guard SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess else { return nil }
            return result as? [String: Any]
        }
        // Found by either form of the same bytes; returned in the form it was stored in.
        for form in [account as Any, "token-owner" as Any] {
            let found = try XCTUnwrap(attributes(account: form))
            XCTAssertEqual(found[kSecAttrAccount as String] as? Data, account)
            XCTAssertNil(found[kSecAttrAccount as String] as? String)
            XCTAssertEqual(found[kSecAttrLabel as String] as? Data, Data("label bytes".utf8))
            XCTAssertEqual(found[kSecAttrService as String] as? String, service, "what was given as a string stays a string")
        }
        let plain = try XCTUnwrap(attributes(account: Data("plain".utf8)))
        XCTAssertEqual(plain[kSecAttrAccount as String] as? String, "plain")

        // An update stores the type it gives.
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service, kSecAttrAccount as String: account]
        XCTAssertEqual(SecItemUpdate(query as CFDictionary, [kSecAttrAccount as String: "renamed"] as CFDictionary), errSecSuccess)
        let renamed = try XCTUnwrap(attributes(account: "renamed"))
        XCTAssertEqual(renamed[kSecAttrAccount as String] as? String, "renamed")
        XCTAssertEqual(renamed[kSecAttrLabel as String] as? Data, Data("label bytes".utf8), "what the update did not name keeps its type")
        XCTAssertEqual(SecItemUpdate([kSecClass as String: kSecClassGenericPassword, kSecAttrAccount as String: "plain"] as CFDictionary,
                                     [kSecAttrLabel as String: Data("now data".utf8)] as CFDictionary), errSecSuccess)
        XCTAssertEqual(attributes(account: "plain")?[kSecAttrLabel as String] as? Data, Data("now data".utf8))
    }

    func test_cferror_helpers_read_the_error_of_a_security_call() throws {
        var error: Unmanaged<CFError>?
        XCTAssertNil(SecAccessControlCreateWithFlags(kCFAllocatorDefault, "not a protection class" as CFString, .userPresence, &error))
        let cfError = try XCTUnwrap(error?.takeRetainedValue())
        XCTAssertEqual(CFErrorGetDomain(cfError) as String, kCFErrorDomainOSStatus as String)
        XCTAssertEqual(CFErrorGetDomain(cfError) as String, "NSOSStatusErrorDomain")
        XCTAssertEqual(CFErrorGetCode(cfError), CFIndex(errSecParam))
        let info = try XCTUnwrap(CFErrorCopyUserInfo(cfError) as? [String: Any])
        XCTAssertEqual(info[kCFErrorLocalizedDescriptionKey as String] as? String, "the protection must be a kSecAttrAccessible value")
        XCTAssertEqual(CFErrorCopyDescription(cfError) as String?, "the protection must be a kSecAttrAccessible value")
        XCTAssertNil(CFErrorCopyFailureReason(cfError))
        XCTAssertEqual((cfError as Error as NSError).code, -50)

        let made = CFErrorCreate(kCFAllocatorDefault, kCFErrorDomainOSStatus, CFIndex(errSecItemNotFound), nil)
        XCTAssertEqual(CFErrorGetCode(made), -25300)
        XCTAssertEqual(CFErrorCopyUserInfo(made).count, 0, "no user info: an empty dictionary")

        // CFOptionFlags is the raw type of the access control flags, with Apple's bit values.
        let flags: CFOptionFlags = SecAccessControlCreateFlags.privateKeyUsage.rawValue
        XCTAssertEqual(flags, 1 << 30)
        XCTAssertEqual(SecAccessControlCreateFlags(rawValue: CFOptionFlags(1) | (1 << 15) | (1 << 4)), [.userPresence, .and, .devicePasscode])

        // The CFData a key export returns, read with CF's calls.
        let key = try XCTUnwrap(SecKeyCreateRandomKey([kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256] as CFDictionary, &error))
        let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(key))
        let exported = try XCTUnwrap(SecKeyCopyExternalRepresentation(publicKey, &error))
        XCTAssertEqual(CFDataGetLength(exported), 65, "X9.63: 04 || X || Y")
        XCTAssertEqual(CFDataGetBytePtr(exported).pointee, 0x04)
        XCTAssertEqual(CFArrayGetCount([1, 2, 3] as CFArray), 3)
        XCTAssertTrue(CFBooleanGetValue(kCFBooleanTrue))
        XCTAssertFalse(CFBooleanGetValue(kCFBooleanFalse))
    }

    func test_sec_random_copy_bytes_fills_a_salt() {
        var salt = [UInt8](repeating: 0, count: 32)
        XCTAssertEqual(SecRandomCopyBytes(kSecRandomDefault, salt.count, &salt), errSecSuccess)
        var other = Data(count: 32)
        let status = other.withUnsafeMutableBytes { buffer -> Int32 in
            guard let base = buffer.baseAddress else { return errSecAllocate }
            return SecRandomCopyBytes(kSecRandomDefault, buffer.count, base)
        }
        XCTAssertEqual(status, errSecSuccess)
        XCTAssertNotEqual(Data(salt), other, "two draws of 256 bits differ")
        XCTAssertNotEqual(salt, [UInt8](repeating: 0, count: 32))
        var nothing: UInt8 = 0xAB
        XCTAssertEqual(SecRandomCopyBytes(kSecRandomDefault, 0, &nothing), errSecSuccess)
        XCTAssertEqual(nothing, 0xAB, "a count of zero writes nothing")
        XCTAssertEqual(SecRandomCopyBytes(kSecRandomDefault, -1, &nothing), errSecParam)
        XCTAssertEqual(errSecInDarkWake, -25320, "every SecBase.h result code has its name")
        XCTAssertEqual(errSecRestrictedAPI, -34020)
    }
}
