import Foundation
import LocalAuthentication
import Security
import XCTest

// The article on keychain access control with biometrics and LocalAuthentication, written fresh
// from its text (Objective-C there, Swift here): an item protected by biometry, fetched with an
// operation prompt; the biometry preflight; an item under biometry AND an application password,
// added, updated and fetched after `evaluateAccessControl`. There is no biometric device here:
// every biometry flag is the same user-presence check, the keychain password through the prompt.

private let service = "Example"
private let label = "com.example.mypassword"

private func biometryControl(_ flags: SecAccessControlCreateFlags) -> SecAccessControl? {
    var error: Unmanaged<CFError>?
    let acl = SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, flags, &error)
    return error == nil ? acl : nil
}

private func addItem() -> OSStatus {
    guard let passwordData = "secret password".data(using: .utf8), let acl = biometryControl(.biometryAny) else { return errSecParam }
    let query: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword,
        kSecAttrService as String: service,
        kSecAttrLabel as String: label,
        kSecValueData as String: passwordData,
        kSecUseAuthenticationUI as String: kSecUseAuthenticationUIAllow,
        kSecAttrAccessGroup as String: "group.com.example.mygroup",
        kSecAttrAccessControl as String: acl,
    ]
    return SecItemAdd(query as CFDictionary, nil)
}

private func fetchItem(ui: CFString = kSecUseAuthenticationUIAllow, context: LAContext? = nil) -> (OSStatus, String?) {
    var query: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword,
        kSecAttrService as String: service,
        kSecAttrLabel as String: label,
        kSecUseAuthenticationUI as String: ui,
        kSecAttrAccessGroup as String: "group.com.example.mygroup",
        kSecUseOperationPrompt as String: "Please authenticate to retrieve the password",
        kSecReturnData as String: kCFBooleanTrue!,
        kSecMatchLimit as String: kSecMatchLimitOne,
    ]
    if let context { query[kSecUseAuthenticationContext as String] = context }
    var resultItem: CFTypeRef?
    let result = SecItemCopyMatching(query as CFDictionary, &resultItem)
    guard result == errSecSuccess, let data = resultItem as? Data else { return (result, nil) }
    return (result, String(data: data, encoding: .utf8))
}

private func deleteItem() -> OSStatus {
    let query: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword,
        kSecAttrService as String: service,
        kSecAttrAccessGroup as String: "group.com.example.mygroup",
        kSecAttrLabel as String: label,
    ]
    return SecItemDelete(query as CFDictionary)
}

private func canUseBiometrics() -> (Bool, NSError?) {
    var error: NSError?
    let context = LAContext()
    let available = context.canEvaluatePolicy(.deviceOwnerAuthenticationWithBiometrics, error: &error)
    return (available && context.biometryType != .none, error)
}

/// Add, update or fetch the item protected by biometry AND an application password, after
/// `evaluateAccessControl` as the article does; the reply's outcome is passed to `done`.
private func withPasswordProtectedItem(_ operation: LAAccessControlOperation, update: Bool = false,
                                       done: @escaping @Sendable (Bool, OSStatus, String?) -> Void) {
    guard let appPasswordData = "1234567890".data(using: .utf8), let passwordData = (update ? "new secret password" : "secret password").data(using: .utf8),
          let acl = biometryControl([.biometryAny, .applicationPassword, .and]) else { return done(false, errSecParam, nil) }
    let context = LAContext()
    context.setCredential(appPasswordData, type: .applicationPassword)
    var query: [String: Any] = [
        kSecClass as String: kSecClassGenericPassword,
        kSecAttrService as String: "Example2",
        kSecAttrLabel as String: label,
        kSecUseAuthenticationUI as String: kSecUseAuthenticationUIAllow,
        kSecAttrAccessGroup as String: "group.com.example.mygroup",
        kSecUseAuthenticationContext as String: context,
    ]
    if operation == .createItem {
        query[kSecValueData as String] = passwordData
        query[kSecAttrAccessControl as String] = acl
    } else if !update {
        query[kSecUseOperationPrompt as String] = "Please authenticate to retrieve the password"
        query[kSecReturnData as String] = kCFBooleanTrue
        query[kSecMatchLimit as String] = kSecMatchLimitOne
    } else {
        query[kSecAttrAccessControl as String] = acl
    }
    let reason = operation == .createItem ? "Please authenticate to save the password" : "Please authenticate to use the password"
    nonisolated(unsafe) let finalQuery = query
    context.evaluateAccessControl(acl, operation: operation, localizedReason: reason) { success, error in
        guard success else { return done(false, errSecAuthFailed, nil) }
        if operation == .createItem {
            done(true, SecItemAdd(finalQuery as CFDictionary, nil), nil)
        } else if update {
            done(true, SecItemUpdate(finalQuery as CFDictionary, [kSecValueData as String: passwordData] as CFDictionary), nil)
        } else {
            var resultItem: CFTypeRef?
            let result = SecItemCopyMatching(finalQuery as CFDictionary, &resultItem)
            done(true, result, (resultItem as? Data).flatMap { String(data: $0, encoding: .utf8) })
        }
    }
}

final class AccessControlSampleTests: AppleSampleCase {
    func test_biometry_protected_item_asks_with_the_operation_prompt() throws {
        XCTAssertEqual(addItem(), errSecSuccess)
        XCTAssertEqual(prompts.count, 1, "the locked keychain was unlocked to add the item")
        let fetched = fetchItem()
        XCTAssertEqual(fetched.0, errSecSuccess)
        XCTAssertEqual(fetched.1, "secret password")
        XCTAssertEqual(prompts.last, "Please authenticate to retrieve the password", "each read asks, with the query's text")
        XCTAssertEqual(prompts.count, 2)
        XCTAssertEqual(fetchItem(ui: kSecUseAuthenticationUIFail).0, errSecInteractionNotAllowed)
        XCTAssertEqual(fetchItem(ui: kSecUseAuthenticationUISkip).0, errSecItemNotFound, "Skip leaves the item out")
        try answerPrompts(with: nil)
        XCTAssertEqual(fetchItem().0, errSecUserCanceled)
        try answerPrompts(with: "4321")
        XCTAssertEqual(fetchItem().0, errSecAuthFailed)
        // An evaluated context answers the item's check without another prompt.
        try answerPrompts(with: "1234")
        let context = LAContext()
        let evaluated = expectation(description: "evaluated")
        context.evaluatePolicy(.deviceOwnerAuthentication, localizedReason: "Unlock the example") { success, error in
            XCTAssertTrue(success)
            XCTAssertNil(error)
            evaluated.fulfill()
        }
        wait(for: [evaluated], timeout: 30)
        let before = prompts.count
        XCTAssertEqual(fetchItem(context: context).1, "secret password")
        XCTAssertEqual(prompts.count, before)
        XCTAssertEqual(deleteItem(), errSecSuccess)
    }

    func test_biometry_preflight_says_no_biometry() {
        let (available, error) = canUseBiometrics()
        XCTAssertFalse(available)
        XCTAssertEqual(error?.domain, LAErrorDomain)
        XCTAssertEqual(error?.code, LAError.Code.biometryNotAvailable.rawValue)
        var ownerError: NSError?
        XCTAssertTrue(LAContext().canEvaluatePolicy(.deviceOwnerAuthentication, error: &ownerError), "a keychain password can be asked")
        XCTAssertNil(ownerError)
        XCTAssertEqual(LAContext().biometryType, .none)
    }

    func test_biometry_and_application_password_item() throws {
        func run(_ operation: LAAccessControlOperation, update: Bool = false) -> (Bool, OSStatus, String?) {
            let finished = expectation(description: "reply")
            nonisolated(unsafe) var outcome: (Bool, OSStatus, String?) = (false, errSecParam, nil)
            withPasswordProtectedItem(operation, update: update) { success, status, value in
                outcome = (success, status, value)
                finished.fulfill()
            }
            wait(for: [finished], timeout: 30)
            return outcome
        }
        let added = run(.createItem)
        XCTAssertTrue(added.0)
        XCTAssertEqual(added.1, errSecSuccess)
        let fetched = run(.useItem)
        XCTAssertEqual(fetched.1, errSecSuccess)
        XCTAssertEqual(fetched.2, "secret password")
        let updated = run(.useItem, update: true)
        XCTAssertEqual(updated.1, errSecSuccess, "the secret of an application-password item is updated when the password is given")
        XCTAssertEqual(run(.useItem).2, "new secret password")
    }
}
