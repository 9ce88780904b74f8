import Foundation
import XCTest
import KeychainCore
@testable import KeychainServices

/// kSecAttrSynchronizable with Apple's rules: an item that cannot leave this device (a
/// …ThisDeviceOnly class, access control bound to it, a Secure Enclave key) cannot be made
/// synchronizable — errSecParam, nothing stored or changed — and queries, updates and deletes
/// select by the flag (absent: non-synchronizable items only; kSecAttrSynchronizableAny: both).
final class SynchronizableSecItemTests: XCTestCase {
    private var directory = ""
    private nonisolated(unsafe) static let deviceOnly: [CFString] = [kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
                                                                    kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly, kSecAttrAccessibleAlwaysThisDeviceOnly]
    private nonisolated(unsafe) static let portable: [CFString] = [kSecAttrAccessibleWhenUnlocked, kSecAttrAccessibleAfterFirstUnlock, kSecAttrAccessibleAlways]

    override func setUpWithError() throws {
        directory = try makeTemporaryLoginKeychain("sync").root
        // No TPM here: a Secure Enclave key with kSecAttrSynchronizable is refused before one is asked.
        setenv("KEYCHAIN_PKCS11_TCTI", "none", 1)
    }

    override func tearDown() {
        unsetenv("KEYCHAIN_PKCS11_TCTI")
        removeTemporaryKeychain(directory)
    }

    // MARK: helpers

    private func item(_ account: String, sync: Any? = nil, secret: String? = nil) -> [String: Any] {
        var query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "sync.example",
                                    kSecAttrAccount as String: account]
        if let sync { query[kSecAttrSynchronizable as String] = sync }
        if let secret { query[kSecValueData as String] = Data(secret.utf8) }
        return query
    }

    /// The secrets of the items `query` finds (all of them), sorted; [] when none.
    private func secrets(_ query: [String: Any]) -> [String] {
        var query = query
        query[kSecReturnData as String] = true
        query[kSecMatchLimit as String] = kSecMatchLimitAll
        var result: CFTypeRef?
        guard SecItemCopyMatching(query, &result) == errSecSuccess else { return [] }
        return ((result as? [Data]) ?? []).map { String(decoding: $0, as: UTF8.self) }.sorted()
    }

    private func attributes(_ query: [String: Any]) -> [String: Any]? {
        var query = query
        query[kSecReturnAttributes as String] = true
        var result: CFTypeRef?
        guard SecItemCopyMatching(query, &result) == errSecSuccess else { return nil }
        return result as? [String: Any]
    }

    private func control(_ protection: CFString, _ flags: SecAccessControlCreateFlags) throws -> SecAccessControl {
        var error: Unmanaged<CFError>?
        return try XCTUnwrap(SecAccessControlCreateWithFlags(kCFAllocatorDefault, protection, flags, &error))
    }

    /// SecKeyCreateRandomKey's OSStatus (errSecSuccess when it made the key).
    private func createKey(_ parameters: [String: Any]) -> OSStatus {
        var error: Unmanaged<CFError>?
        guard SecKeyCreateRandomKey(parameters as CFDictionary, &error) != nil else {
            return OSStatus(error.map { CFErrorGetCode($0.takeRetainedValue()) } ?? 0)
        }
        return errSecSuccess
    }

    // MARK: SecItemAdd

    func test_add_refuses_a_synchronizable_this_device_only_item() {
        for (index, constant) in Self.deviceOnly.enumerated() {
            var add = item("device \(index)", sync: true, secret: "s")
            add[kSecAttrAccessible as String] = constant
            XCTAssertEqual(SecItemAdd(add, nil), errSecParam, constant as String)
            add[kSecAttrSynchronizable as String] = false
            XCTAssertEqual(SecItemAdd(add, nil), errSecSuccess, "\(constant) without sync")
        }
        XCTAssertEqual(secrets(item("device 1", sync: true)), [], "nothing synchronizable was stored")
        for (index, constant) in Self.portable.enumerated() {
            var add = item("portable \(index)", sync: true, secret: "p\(index)")
            add[kSecAttrAccessible as String] = constant
            XCTAssertEqual(SecItemAdd(add, nil), errSecSuccess, constant as String)
        }
        XCTAssertEqual(secrets([kSecClass as String: kSecClassGenericPassword, kSecAttrSynchronizable as String: true]), ["p0", "p1", "p2"])
    }

    func test_add_refuses_a_synchronizable_item_bound_by_its_access_control() throws {
        let refused: [(CFString, SecAccessControlCreateFlags)] = [(kSecAttrAccessibleWhenUnlockedThisDeviceOnly, []), (kSecAttrAccessibleWhenUnlocked, .userPresence),
                                                                  (kSecAttrAccessibleWhenUnlocked, .biometryAny), (kSecAttrAccessibleWhenUnlocked, .biometryCurrentSet),
                                                                  (kSecAttrAccessibleWhenUnlocked, .devicePasscode), (kSecAttrAccessibleAfterFirstUnlock, .watch),
                                                                  (kSecAttrAccessibleWhenUnlocked, [.applicationPassword, .userPresence, .or])]
        for (index, (protection, flags)) in refused.enumerated() {
            var add = item("bound \(index)", sync: true, secret: "s")
            add[kSecAttrAccessControl as String] = try control(protection, flags)
            XCTAssertEqual(SecItemAdd(add, nil), errSecParam, "\(protection) \(flags.rawValue)")
        }
        XCTAssertEqual(secrets(item("bound 1", sync: kSecAttrSynchronizableAny)), [])
        // An application password alone travels with the item.
        let context = SecAuthenticationContext()
        XCTAssertTrue(context.setCredential(Data("open sesame".utf8), type: .applicationPassword))
        var add = item("app password", sync: true, secret: "sealed")
        add[kSecAttrAccessControl as String] = try control(kSecAttrAccessibleWhenUnlocked, .applicationPassword)
        add[kSecUseAuthenticationContext as String] = context
        XCTAssertEqual(SecItemAdd(add, nil), errSecSuccess)
        XCTAssertEqual(attributes(item("app password", sync: true))?[kSecAttrSynchronizable as String] as? Bool, true)
    }

    func test_a_secure_enclave_key_cannot_be_synchronizable() {
        let parameters: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                                         kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave, kSecAttrSynchronizable as String: true,
                                         kSecPrivateKeyAttrs as String: [kSecAttrIsPermanent as String: true]]
        XCTAssertEqual(createKey(parameters), errSecParam, "errSecParam even without a TPM (errSecUnimplemented otherwise)")
        var inPrivate = parameters
        inPrivate[kSecAttrSynchronizable as String] = nil
        inPrivate[kSecPrivateKeyAttrs as String] = [kSecAttrIsPermanent as String: true, kSecAttrSynchronizable as String: true]
        XCTAssertEqual(createKey(inPrivate), errSecParam)
        let add: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
                                  kSecAttrSynchronizable as String: true, kSecValueData as String: Data([4] + [UInt8](repeating: 1, count: 64)),
                                  kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass as String: kSecAttrKeyClassPublic]
        XCTAssertEqual(SecItemAdd(add, nil), errSecParam)
    }

    func test_sec_key_create_random_key_follows_the_rule_for_each_half() throws {
        let tag = Data("com.example.sync".utf8)
        func parameters(_ extra: [String: Any], private privateExtra: [String: Any] = [:]) -> [String: Any] {
            let privateAttributes: [String: Any] = [kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: tag].merging(privateExtra) { $1 }
            return [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                    kSecPrivateKeyAttrs as String: privateAttributes].merging(extra) { $1 }
        }
        XCTAssertEqual(createKey(parameters([kSecAttrSynchronizable as String: true, kSecAttrAccessible as String: kSecAttrAccessibleWhenUnlockedThisDeviceOnly])),
                       errSecParam)
        XCTAssertEqual(createKey(parameters([:], private: [kSecAttrSynchronizable as String: true, kSecAttrIsPermanent as String: false])), errSecParam,
                       "a key that is not stored cannot sync")
        XCTAssertEqual(createKey(parameters([:], private: [kSecAttrSynchronizable as String: true,
                                                           kSecAttrAccessControl as String: try control(kSecAttrAccessibleWhenUnlocked, .userPresence)])), errSecParam)
        XCTAssertEqual(createKey(parameters([kSecAttrSynchronizable as String: kSecAttrSynchronizableAny])), errSecParam)
        let keys: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag, kSecAttrSynchronizable as String: kSecAttrSynchronizableAny]
        XCTAssertNil(attributes(keys), "nothing was stored")

        // The top level names both halves.
        XCTAssertEqual(createKey(parameters([kSecAttrSynchronizable as String: true])), errSecSuccess)
        var query: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrSynchronizable as String: true, kSecReturnAttributes as String: true,
                                    kSecMatchLimit as String: kSecMatchLimitAll]
        var result: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(query, &result), errSecSuccess)
        let found = (result as? [[String: Any]]) ?? []
        XCTAssertEqual(Set(found.compactMap { $0[kSecAttrKeyClass as String] as? String }), [kSecAttrKeyClassPrivate as String, kSecAttrKeyClassPublic as String])
        // kSecPrivateKeyAttrs names the private key alone.
        XCTAssertEqual(SecItemDelete([kSecClass as String: kSecClassKey, kSecAttrSynchronizable as String: kSecAttrSynchronizableAny]), errSecSuccess)
        XCTAssertEqual(createKey(parameters([:], private: [kSecAttrSynchronizable as String: true])), errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching(query, &result), errSecSuccess)
        XCTAssertEqual(((result as? [[String: Any]]) ?? []).compactMap { $0[kSecAttrKeyClass as String] as? String }, [kSecAttrKeyClassPrivate as String])
        query[kSecAttrSynchronizable as String] = false
        XCTAssertEqual(SecItemCopyMatching(query, &result), errSecSuccess)
        XCTAssertEqual(((result as? [[String: Any]]) ?? []).compactMap { $0[kSecAttrKeyClass as String] as? String }, [kSecAttrKeyClassPublic as String])
    }

    // MARK: SecItemUpdate

    func test_update_refuses_making_a_bound_item_synchronizable_and_changes_nothing() {
        var local = item("local", secret: "local")
        local[kSecAttrAccessible as String] = kSecAttrAccessibleWhenUnlockedThisDeviceOnly
        XCTAssertEqual(SecItemAdd(local, nil), errSecSuccess)
        XCTAssertEqual(SecItemUpdate(item("local"), [kSecAttrSynchronizable as String: true]), errSecParam)
        XCTAssertEqual(SecItemUpdate(item("local"), [kSecAttrSynchronizable as String: true, kSecAttrAccessible as String: kSecAttrAccessibleWhenUnlocked]),
                       errSecSuccess, "moving it off this device at the same time is allowed")
        XCTAssertEqual(secrets(item("local", sync: true)), ["local"])

        XCTAssertEqual(SecItemAdd(item("shared", sync: true, secret: "shared"), nil), errSecSuccess)
        XCTAssertEqual(SecItemUpdate(item("shared", sync: true), [kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly]), errSecParam)
        XCTAssertEqual(attributes(item("shared", sync: true))?[kSecAttrAccessible as String] as? String, kSecAttrAccessibleWhenUnlocked as String,
                       "still WhenUnlocked")
        XCTAssertEqual(SecItemUpdate(item("shared", sync: true), [kSecAttrSynchronizable as String: kSecAttrSynchronizableAny]), errSecParam,
                       "kSecAttrSynchronizableAny is for searches")
        // Both together, then off again.
        XCTAssertEqual(SecItemUpdate(item("shared", sync: true), [kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
                                                                  kSecAttrSynchronizable as String: false]), errSecSuccess)
        XCTAssertEqual(secrets(item("shared")), ["shared"])
    }

    func test_update_and_delete_select_by_the_synchronizable_flag() {
        XCTAssertEqual(SecItemAdd(item("alice", secret: "local"), nil), errSecSuccess)
        XCTAssertEqual(SecItemAdd(item("alice", sync: true, secret: "cloud"), nil), errSecSuccess, "the flag is part of the primary key")
        XCTAssertEqual(secrets(item("alice")), ["local"], "no key: non-synchronizable items only")
        XCTAssertEqual(secrets(item("alice", sync: false)), ["local"])
        XCTAssertEqual(secrets(item("alice", sync: true)), ["cloud"])
        XCTAssertEqual(secrets(item("alice", sync: kSecAttrSynchronizableAny)), ["cloud", "local"])

        XCTAssertEqual(SecItemUpdate(item("alice"), [kSecAttrComment as String: "no key"]), errSecSuccess)
        XCTAssertEqual(SecItemUpdate(item("alice", sync: true), [kSecValueData as String: Data("cloud 2".utf8)]), errSecSuccess)
        XCTAssertEqual(secrets(item("alice", sync: kSecAttrSynchronizableAny)), ["cloud 2", "local"])
        XCTAssertNil(attributes(item("alice", sync: true))?[kSecAttrComment as String], "an update without the key left the synchronizable item alone")
        XCTAssertEqual(SecItemUpdate(item("alice", sync: kSecAttrSynchronizableAny), [kSecAttrComment as String: "both"]), errSecSuccess)
        XCTAssertEqual(attributes(item("alice", sync: true))?[kSecAttrComment as String] as? String, "both")
        XCTAssertEqual(attributes(item("alice", sync: false))?[kSecAttrComment as String] as? String, "both")

        XCTAssertEqual(SecItemDelete(item("alice", sync: true)), errSecSuccess)
        XCTAssertEqual(secrets(item("alice", sync: kSecAttrSynchronizableAny)), ["local"], "deleting by true left the local item")
        XCTAssertEqual(SecItemAdd(item("alice", sync: true, secret: "cloud 3"), nil), errSecSuccess)
        XCTAssertEqual(SecItemDelete(item("alice")), errSecSuccess)
        XCTAssertEqual(secrets(item("alice", sync: kSecAttrSynchronizableAny)), ["cloud 3"], "deleting without the key left the synchronizable item")
        XCTAssertEqual(SecItemDelete(item("alice")), errSecItemNotFound)
        XCTAssertEqual(SecItemAdd(item("alice", secret: "local 2"), nil), errSecSuccess)
        XCTAssertEqual(SecItemDelete(item("alice", sync: kSecAttrSynchronizableAny)), errSecSuccess)
        XCTAssertEqual(secrets(item("alice", sync: kSecAttrSynchronizableAny)), [], "kSecAttrSynchronizableAny deleted both")
    }
}
