import Foundation
import Security
import XCTest

// The password examples of the Keychain chapter of a well-known Swift/Objective-C examples book,
// written fresh from their text: add, find, update and delete a generic password with
// dictionaries, then the book's `Keychain` helper class (Objective-C there, Swift here).

private func addPassword() -> (OSStatus, [String: AnyObject]?) {
    var dict = [String: AnyObject]()
    dict[kSecClass as String] = kSecClassGenericPassword
    dict[kSecAttrAccessible as String] = kSecAttrAccessibleWhenUnlocked
    dict[kSecAttrLabel as String] = "com.me.myapp.myaccountpassword" as CFString
    dict[kSecAttrAccount as String] = "My Name" as CFString
    dict[kSecAttrService as String] = "MyService" as CFString
    dict[kSecValueData as String] = "my_password!!".data(using: .utf8)! as CFData
    dict[kSecReturnAttributes as String] = kCFBooleanTrue
    var result: AnyObject?
    let status = withUnsafeMutablePointer(to: &result) {
        SecItemAdd(dict as CFDictionary, UnsafeMutablePointer($0))
    }
    return (status, result as? [String: AnyObject])
}

private func findPassword() -> (OSStatus, String?) {
    var dict = [String: AnyObject]()
    dict[kSecClass as String] = kSecClassGenericPassword
    dict[kSecAttrLabel as String] = "com.me.myapp.myaccountpassword" as CFString
    dict[kSecAttrAccount as String] = "My Name" as CFString
    dict[kSecAttrService as String] = "MyService" as CFString
    dict[kSecReturnData as String] = kCFBooleanTrue
    var queryResult: AnyObject?
    let status = withUnsafeMutablePointer(to: &queryResult) {
        SecItemCopyMatching(dict as CFDictionary, UnsafeMutablePointer($0))
    }
    guard status == errSecSuccess, let data = queryResult as? Data else { return (status, nil) }
    return (status, String(data: data, encoding: .utf8))
}

private func updatePassword(withClassInChanges: Bool) -> OSStatus {
    var dict = [String: AnyObject]()
    dict[kSecClass as String] = kSecClassGenericPassword
    dict[kSecAttrLabel as String] = "com.me.myapp.myaccountpassword" as CFString
    dict[kSecAttrAccount as String] = "My Name" as CFString
    dict[kSecValueData as String] = "my_password!!".data(using: .utf8)! as CFData
    var newDict = [String: AnyObject]()
    if withClassInChanges { newDict[kSecClass as String] = kSecClassGenericPassword }
    newDict[kSecAttrLabel as String] = "com.me.myapp.myaccountpassword" as CFString
    newDict[kSecAttrAccount as String] = "My Name" as CFString
    newDict[kSecValueData as String] = "new_password!!".data(using: .utf8)! as CFData
    return SecItemUpdate(dict as CFDictionary, newDict as CFDictionary)
}

private func deletePassword() -> OSStatus {
    var dict = [String: AnyObject]()
    dict[kSecClass as String] = kSecClassGenericPassword
    dict[kSecAttrLabel as String] = "com.me.myapp.myaccountpassword" as CFString
    dict[kSecAttrAccount as String] = "My Name" as CFString
    return SecItemDelete(dict as CFDictionary)
}

/// The book's helper class: one service (and optionally an access group), items keyed by a
/// string stored as data in kSecAttrAccount and kSecAttrGeneric, AlwaysThisDeviceOnly.
final class Keychain {
    typealias KeychainOperationBlock = (Bool, Data?, OSStatus) -> Void
    private let keychainService: String
    private let keychainGroup: String?

    init(service: String, group: String?) {
        keychainService = service
        keychainGroup = group
    }

    func insertKey(_ key: String, withData data: Data, completion: KeychainOperationBlock?) {
        var dict = prepareDict(key)
        dict[kSecValueData as String] = data
        dict[kSecAttrService as String] = keychainService
        let status = SecItemAdd(dict as CFDictionary, nil)
        if status != errSecSuccess, status != errSecDuplicateItem { completion?(false, nil, status) }
        if status == errSecDuplicateItem {
            updateKey(key, withData: data, completion: completion)
        } else if status == errSecSuccess {
            completion?(true, nil, status)
        }
    }

    func findDataForKey(_ key: String, completion: KeychainOperationBlock?) {
        var dict = prepareDict(key)
        dict[kSecMatchLimit as String] = kSecMatchLimitOne
        dict[kSecAttrService as String] = keychainService
        dict[kSecReturnData as String] = kCFBooleanTrue
        var result: CFTypeRef?
        let status = SecItemCopyMatching(dict as CFDictionary, &result)
        completion?(status == errSecSuccess, status == errSecSuccess ? result as? Data : nil, status)
    }

    func updateKey(_ key: String, withData data: Data, completion: KeychainOperationBlock?) {
        let dictKey = prepareDict(key)
        var dictUpdate = [String: Any]()
        dictUpdate[kSecValueData as String] = data
        dictUpdate[kSecAttrService as String] = keychainService
        let status = SecItemUpdate(dictKey as CFDictionary, dictUpdate as CFDictionary)
        completion?(status == errSecSuccess, nil, status)
    }

    func removeDataForKey(_ key: String, completion: KeychainOperationBlock?) {
        let status = SecItemDelete(prepareDict(key) as CFDictionary)
        completion?(status == errSecSuccess, nil, status)
    }

    private func prepareDict(_ key: String) -> [String: Any] {
        var dict = [String: Any]()
        dict[kSecClass as String] = kSecClassGenericPassword
        let encodedKey = key.data(using: .utf8)!
        dict[kSecAttrGeneric as String] = encodedKey
        dict[kSecAttrAccount as String] = encodedKey
        dict[kSecAttrService as String] = keychainService
        dict[kSecAttrAccessible as String] = kSecAttrAccessibleAlwaysThisDeviceOnly
        if let keychainGroup { dict[kSecAttrAccessGroup as String] = keychainGroup }
        return dict
    }
}

final class PasswordSampleTests: AppleSampleCase {
    func test_add_find_update_delete_a_password_as_the_book_shows() throws {
        let (added, attributes) = addPassword()
        XCTAssertEqual(added, errSecSuccess)
        XCTAssertEqual(attributes?[kSecAttrAccount as String] as? String, "My Name")
        XCTAssertEqual(attributes?[kSecAttrService as String] as? String, "MyService")
        XCTAssertEqual(attributes?[kSecAttrLabel as String] as? String, "com.me.myapp.myaccountpassword")
        XCTAssertEqual(prompts.count, 1, "the locked keychain asked once, through the prompt program")
        XCTAssertEqual(addPassword().0, errSecDuplicateItem)
        let found = findPassword()
        XCTAssertEqual(found.0, errSecSuccess)
        XCTAssertEqual(found.1, "my_password!!")
        // kSecClass in the attributes to change is refused (errSecParam), as on Apple platforms;
        // without it the update goes through.
        XCTAssertEqual(updatePassword(withClassInChanges: true), errSecParam)
        XCTAssertEqual(updatePassword(withClassInChanges: false), errSecSuccess)
        XCTAssertEqual(findPassword().1, "new_password!!")
        XCTAssertEqual(deletePassword(), errSecSuccess)
        XCTAssertEqual(findPassword().0, errSecItemNotFound)
        XCTAssertEqual(deletePassword(), errSecItemNotFound)
        XCTAssertEqual(prompts.count, 1, "unlocked once for the process")
    }

    func test_the_keychain_helper_class() throws {
        let keychain = Keychain(service: "com.example.helper", group: nil)
        var outcomes: [(Bool, Data?, OSStatus)] = []
        keychain.insertKey("token", withData: Data("first".utf8)) { outcomes.append(($0, $1, $2)) }
        keychain.insertKey("token", withData: Data("second".utf8)) { outcomes.append(($0, $1, $2)) }
        keychain.findDataForKey("token") { outcomes.append(($0, $1, $2)) }
        // AlwaysThisDeviceOnly items need no unlock: nothing was asked so far.
        XCTAssertEqual(prompts, [])
        keychain.removeDataForKey("token") { outcomes.append(($0, $1, $2)) }
        keychain.findDataForKey("token") { outcomes.append(($0, $1, $2)) }
        XCTAssertEqual(outcomes.map(\.2), [errSecSuccess, errSecSuccess, errSecSuccess, errSecSuccess, errSecItemNotFound])
        XCTAssertEqual(outcomes[2].1, Data("second".utf8), "a duplicate insert updates")
        // Finding nothing while locked: the keychain is unlocked to look among the private items too.
        XCTAssertEqual(prompts.count, 1)
    }

    func test_without_a_prompt_program_a_locked_keychain_is_interaction_not_allowed() throws {
        unsetenv("KEYCHAIN_PKCS11_PROMPT")
        XCTAssertEqual(addPassword().0, errSecInteractionNotAllowed)
        try answerPrompts(with: nil)
        XCTAssertEqual(addPassword().0, errSecUserCanceled, "the user cancelled the prompt")
        try answerPrompts(with: "9999")
        XCTAssertEqual(addPassword().0, errSecAuthFailed, "a wrong password")
        try answerPrompts(with: "1234")
        XCTAssertEqual(addPassword().0, errSecSuccess)
    }
}
