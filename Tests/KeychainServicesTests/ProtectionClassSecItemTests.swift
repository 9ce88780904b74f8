import Foundation
import XCTest
import KeychainCore
import KeychainCrypto
@testable import KeychainServices

/// kSecAttrAccessible through the SecItem functions: which items a locked keychain still gives,
/// moving an item between classes, and a copy of the keychain folder on another device.
final class ProtectionClassSecItemTests: XCTestCase {
    private var root = ""
    private let password = "1234"
    private nonisolated(unsafe) static let classes: [(CFString, String)] = [
        (kSecAttrAccessibleWhenUnlocked, "whenUnlocked"), (kSecAttrAccessibleAfterFirstUnlock, "afterFirstUnlock"),
        (kSecAttrAccessibleAlways, "always"), (kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, "passcode"),
        (kSecAttrAccessibleWhenUnlockedThisDeviceOnly, "whenUnlockedThisDevice"),
        (kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly, "afterFirstUnlockThisDevice"), (kSecAttrAccessibleAlwaysThisDeviceOnly, "alwaysThisDevice"),
    ]

    override func setUpWithError() throws {
        // The device key outside the keychain folder, as in real use: copying the folder leaves it.
        root = try makeTemporaryLoginKeychain("protection", subfolder: "keychains", deviceKey: "/state/device-key").root
    }

    override func tearDown() { removeTemporaryKeychain(root) }

    private func query(_ account: String) -> [String: Any] {
        [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc", kSecAttrAccount as String: account]
    }

    private func read(_ account: String) -> (OSStatus, String?) {
        var q = query(account)
        q[kSecReturnData as String] = true
        var result: CFTypeRef?
        let status = SecItemCopyMatching(q, &result)
        return (status, (result as? Data).map { String(decoding: $0, as: UTF8.self) })
    }

    private func addEachClass() {
        for (constant, name) in Self.classes {
            var item = query(name)
            item[kSecValueData as String] = Data("secret \(name)".utf8)
            item[kSecAttrAccessible as String] = constant
            XCTAssertEqual(SecItemAdd(item, nil), errSecSuccess, name)
        }
    }

    func test_each_class_stored_reported_and_readable_while_locked_only_when_it_should() {
        addEachClass()
        for (constant, name) in Self.classes {
            var q = query(name)
            q[kSecReturnAttributes as String] = true
            var result: CFTypeRef?
            XCTAssertEqual(SecItemCopyMatching(q, &result), errSecSuccess, name)
            XCTAssertEqual((result as? [String: Any])?[kSecAttrAccessible as String] as? String, constant as String, name)
        }
        KeychainServices.lockAll()
        for (_, name) in Self.classes {
            let usableLocked = ["afterFirstUnlock", "always", "afterFirstUnlockThisDevice", "alwaysThisDevice"].contains(name)
            let (status, secret) = read(name)
            XCTAssertEqual(status, usableLocked ? errSecSuccess : errSecInteractionNotAllowed, name)
            XCTAssertEqual(secret, usableLocked ? "secret \(name)" : nil, name)
        }
    }

    func test_updating_kSecAttrAccessible_moves_the_item() {
        var item = query("mover")
        item[kSecValueData as String] = Data("moving".utf8)
        XCTAssertEqual(SecItemAdd(item, nil), errSecSuccess)
        XCTAssertEqual(SecItemUpdate(query("mover"), [kSecAttrAccessible as String: kSecAttrAccessibleAlwaysThisDeviceOnly]), errSecSuccess)
        KeychainServices.lockAll()
        XCTAssertEqual(read("mover").1, "moving", "now usable without unlocking")
        XCTAssertEqual(KeychainServices.unlock(password: password), errSecSuccess)
        XCTAssertEqual(SecItemUpdate(query("mover"), [kSecAttrAccessible as String: kSecAttrAccessibleWhenUnlocked]), errSecSuccess)
        KeychainServices.lockAll()
        XCTAssertEqual(read("mover").0, errSecInteractionNotAllowed)
        XCTAssertEqual(SecItemUpdate(query("mover"), [kSecAttrAccessible as String: "nonsense"]), errSecParam)
    }

    func test_a_copy_on_another_device_loses_only_this_device_items() throws {
        addEachClass()
        KeychainServices.lockAll()
        XCTAssertEqual(system("mkdir -p '\(root)/copy' && cp -r '\(root)/keychains' '\(root)/copy/'"), 0)
        setenv("KEYCHAIN_PKCS11_DIR", root + "/copy/keychains", 1)
        setenv("KEYCHAIN_PKCS11_DEVICE_KEY", root + "/other-device/device-key", 1)
        XCTAssertEqual(read("always").0, errSecInteractionNotAllowed, "on a new device the Always key needs one unlock")
        XCTAssertEqual(KeychainServices.unlock(password: password), errSecSuccess)
        for (_, name) in Self.classes {
            let survives = ["whenUnlocked", "afterFirstUnlock", "always"].contains(name)
            XCTAssertEqual(read(name).0, survives ? errSecSuccess : errSecItemNotFound, name)
        }
        XCTAssertEqual(read("always").1, "secret always")
    }

    func test_a_key_usable_without_unlocking() throws {
        let parameters: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                                         kSecPrivateKeyAttrs as String: [kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: Data("always".utf8),
                                                                         kSecAttrAccessible as String: kSecAttrAccessibleAlwaysThisDeviceOnly]]
        var error: Unmanaged<CFError>?
        XCTAssertNotNil(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
        KeychainServices.lockAll()
        var result: CFTypeRef?
        let status = SecItemCopyMatching([kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data("always".utf8),
                                          kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecReturnRef as String: true], &result)
        XCTAssertEqual(status, errSecSuccess)
        let key = try XCTUnwrap(result as? SecKey)
        let signature = SecKeyCreateSignature(key, kSecKeyAlgorithmECDSASignatureMessageX962SHA256, Data("m".utf8) as CFData, &error)
        XCTAssertNotNil(signature)
    }
}
