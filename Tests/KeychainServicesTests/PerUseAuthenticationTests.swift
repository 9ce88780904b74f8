import Foundation
import XCTest
import KeychainCore
import KeychainCrypto
@testable import KeychainServices

/// A key with CKA_ALWAYS_AUTHENTICATE (made through PKCS#11, e.g. pkcs11-tool --always-auth)
/// asks for the PIN at every use through the Swift door too: the context it was fetched with is
/// checked again at each signature or decryption.
final class PerUseAuthenticationTests: XCTestCase {
    private var directory = ""
    private var keychain: Keychain?

    override func setUpWithError() throws {
        (directory, keychain) = try makeTemporaryLoginKeychain("peruse", unlocked: false)
    }

    override func tearDown() { removeTemporaryKeychain(directory) }

    /// Stores a P-256 private key labelled `label` the way C_GenerateKeyPair would.
    private func storeKey(label: String, alwaysAuthenticate: Bool, isRSA: Bool = false) throws {
        let keychain = try XCTUnwrap(keychain)
        let key = try AsymmetricKey.generate(isRSA ? .rsa : .ec(.p256), bits: isRSA ? 2048 : 256)
        let uid = try UniqueID.random()
        let object = try keyObject(key, extra: [(.token, [1]), (.isPrivate, [1]), (.label, Array(label.utf8)),
                                                (.alwaysAuthenticate, [alwaysAuthenticate ? 1 : 0])], uniqueID: uid.text)
        let master = try Array("1234".utf8).withUnsafeBytes { try keychain.unlock(.user, pin: $0) }
        _ = try keychain.add(object, uid: uid.bytes, master: master)
    }

    private func fetch(_ label: String, context: SecAuthenticationContext?) throws -> SecKey {
        var query: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrLabel as String: label,
                                    kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecReturnRef as String: true]
        if let context { query[kSecUseAuthenticationContext as String] = context }
        var result: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(query, &result), errSecSuccess)
        return try XCTUnwrap(result as? SecKey)
    }

    private func sign(_ key: SecKey) -> (Data?, Int?) {
        var error: Unmanaged<CFError>?
        let signature = SecKeyCreateSignature(key, kSecKeyAlgorithmECDSASignatureMessageX962SHA256, Data("m".utf8) as CFData, &error) as Data?
        return (signature, error.map { ($0.takeRetainedValue() as Error as NSError).code })
    }

    /// An extractable key that asks for the PIN at each use asks before it leaves, too.
    func test_a_per_use_key_is_not_exported_without_the_pin() throws {
        try storeKey(label: "exportable", alwaysAuthenticate: true)
        XCTAssertEqual(KeychainServices.unlock(password: "1234"), errSecSuccess)
        var query: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrLabel as String: "exportable",
                                    kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecReturnData as String: true]
        var result: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(query, &result), errSecInteractionNotAllowed)
        query[kSecUseAuthenticationContext as String] = SecAuthenticationContext(password: "1234")
        XCTAssertEqual(SecItemCopyMatching(query, &result), errSecSuccess)
        XCTAssertNotNil(result as? Data)
        var error: Unmanaged<CFError>?
        XCTAssertNil(SecKeyCopyExternalRepresentation(try fetch("exportable", context: nil), &error))
        XCTAssertEqual((error?.takeRetainedValue() as Error? as NSError?)?.code, Int(errSecInteractionNotAllowed))
        XCTAssertNotNil(SecKeyCopyExternalRepresentation(try fetch("exportable", context: SecAuthenticationContext(password: "1234")), &error))
    }

    func test_a_per_use_key_signs_with_the_context_it_was_fetched_with_and_never_without() throws {
        try storeKey(label: "always", alwaysAuthenticate: true)
        try storeKey(label: "plain", alwaysAuthenticate: false)

        // Unlocked without a context: the plain key signs, the per-use key cannot ask for the PIN.
        XCTAssertEqual(KeychainServices.unlock(password: "1234"), errSecSuccess)
        XCTAssertNotNil(sign(try fetch("plain", context: nil)).0)
        let (refused, code) = sign(try fetch("always", context: nil))
        XCTAssertNil(refused)
        XCTAssertEqual(code, Int(errSecInteractionNotAllowed))

        // Fetched with a context: each signature checks its PIN again.
        let context = SecAuthenticationContext(password: "1234")
        let key = try fetch("always", context: context)
        XCTAssertNotNil(sign(key).0)
        XCTAssertNotNil(sign(key).0)

        // The PIN changes through PKCS#11 after the key was fetched: the next use fails and counts.
        let keychain = try XCTUnwrap(keychain)
        try Array("1234".utf8).withUnsafeBytes { old in
            try Array("5678".utf8).withUnsafeBytes { try keychain.changePIN(.user, old: old, new: $0, kdf: ScryptParameters(logN: 8, blockSize: 8, parallelism: 1)) }
        }
        let (stale, staleCode) = sign(key)
        XCTAssertNil(stale)
        XCTAssertEqual(staleCode, Int(errSecAuthFailed))
        XCTAssertEqual(try keychain.info().userPIN.failures, 1)
    }

    func test_a_per_use_rsa_key_decrypts_only_with_its_context() throws {
        try storeKey(label: "rsa-always", alwaysAuthenticate: true, isRSA: true)
        XCTAssertEqual(KeychainServices.unlock(password: "1234"), errSecSuccess)
        let unconfirmed = try fetch("rsa-always", context: nil)
        let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(unconfirmed))
        var error: Unmanaged<CFError>?
        let ciphertext = try XCTUnwrap(SecKeyCreateEncryptedData(publicKey, kSecKeyAlgorithmRSAEncryptionOAEPSHA256, Data("secret".utf8) as CFData, &error))
        XCTAssertNil(SecKeyCreateDecryptedData(unconfirmed, kSecKeyAlgorithmRSAEncryptionOAEPSHA256, ciphertext, &error))
        XCTAssertEqual((error?.takeRetainedValue() as Error? as NSError?)?.code, Int(errSecInteractionNotAllowed))
        let confirmed = try fetch("rsa-always", context: SecAuthenticationContext(password: "1234"))
        XCTAssertEqual(SecKeyCreateDecryptedData(confirmed, kSecKeyAlgorithmRSAEncryptionOAEPSHA256, ciphertext, nil) as Data?, Data("secret".utf8))
    }

    // MARK: SecAccessControl

    private func control(_ protection: CFString, _ flags: SecAccessControlCreateFlags) -> (SecAccessControl?, Int?) {
        var error: Unmanaged<CFError>?
        let made = SecAccessControlCreateWithFlags(nil, protection, flags, &error)
        return (made, error.map { ($0.takeRetainedValue() as Error as NSError).code })
    }

    func test_access_control_validity_follows_apple() {
        XCTAssertNotNil(control(kSecAttrAccessibleWhenUnlocked, []).0)
        XCTAssertNotNil(control(kSecAttrAccessibleWhenUnlockedThisDeviceOnly, [.privateKeyUsage, .userPresence]).0)
        XCTAssertNotNil(control(kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, [.biometryAny, .devicePasscode, .or]).0)
        XCTAssertEqual(control("nope" as CFString, [.userPresence]).1, Int(errSecParam), "unknown protection")
        XCTAssertEqual(control(kSecAttrAccessibleWhenUnlocked, [.userPresence, .devicePasscode, .and, .or]).1, Int(errSecParam), "and with or")
        XCTAssertEqual(control(kSecAttrAccessibleWhenUnlocked, [.userPresence, .and]).1, Int(errSecParam), "a conjunction of one")
        XCTAssertEqual(control(kSecAttrAccessibleWhenUnlocked, SecAccessControlCreateFlags(rawValue: 1 << 20)).1, Int(errSecParam), "unknown bit")
        XCTAssertEqual(SecAccessControlCreateFlags.touchIDAny, .biometryAny)
        XCTAssertEqual(SecAccessControlCreateFlags.applicationPassword.rawValue, 1 << 31)
    }

    func test_a_user_presence_key_is_always_authenticate_sensitive_and_never_extractable() throws {
        let keychain = try XCTUnwrap(keychain)
        let (made, _) = control(kSecAttrAccessibleWhenUnlockedThisDeviceOnly, [.privateKeyUsage, .userPresence])
        let access = try XCTUnwrap(made)
        let context = SecAuthenticationContext(password: "1234")
        let parameters: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                                         kSecUseAuthenticationContext as String: context,
                                         kSecPrivateKeyAttrs as String: [kSecAttrIsPermanent as String: true, kSecAttrLabel as String: "presence",
                                                                         kSecAttrAccessControl as String: access]]
        var error: Unmanaged<CFError>?
        let key = try XCTUnwrap(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
        XCTAssertNil(SecKeyCopyExternalRepresentation(key, nil), "privateKeyUsage: the key does not leave")
        let (signature, _) = sign(key)
        XCTAssertNotNil(signature, "the creating context signs")

        // What PKCS#11 sees: CKA_ALWAYS_AUTHENTICATE, sensitive, not extractable, WhenUnlockedThisDeviceOnly.
        let master = try Array("1234".utf8).withUnsafeBytes { try keychain.unlock(.user, pin: $0) }
        let rows = try keychain.find([(.objectClass, AttributeValue.ulong(ObjectClass.privateKey.rawValue)), (.label, Array("presence".utf8))], master: master)
        XCTAssertEqual(rows.count, 1)
        let stored = try keychain.object(id: try XCTUnwrap(rows.first).id, master: master)
        XCTAssertTrue(stored.bool(.alwaysAuthenticate))
        XCTAssertTrue(stored.bool(.sensitive))
        XCTAssertFalse(stored.bool(.extractable))
        XCTAssertEqual(stored[.accessible], AttributeValue.ulong(5))

        // Fetched later without a context it cannot sign; with one it can.
        KeychainServices.lockAll()
        XCTAssertEqual(KeychainServices.unlock(password: "1234"), errSecSuccess)
        XCTAssertEqual(sign(try fetch("presence", context: nil)).1, Int(errSecInteractionNotAllowed))
        XCTAssertNotNil(sign(try fetch("presence", context: context)).0)

        // A key that is not stored has no keychain to check the PIN against.
        var transientParameters = parameters
        transientParameters[kSecPrivateKeyAttrs as String] = [kSecAttrIsPermanent as String: false, kSecAttrAccessControl as String: access]
        XCTAssertNil(SecKeyCreateRandomKey(transientParameters as CFDictionary, &error))
        XCTAssertEqual((error?.takeRetainedValue() as Error? as NSError?)?.code, Int(errSecParam))
    }

    func test_access_control_rules_on_items() throws {
        XCTAssertEqual(KeychainServices.unlock(password: "1234"), errSecSuccess)
        let presence = try XCTUnwrap(control(kSecAttrAccessibleWhenUnlocked, [.userPresence]).0)
        let plain = try XCTUnwrap(control(kSecAttrAccessibleWhenUnlockedThisDeviceOnly, []).0)
        let password: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "svc",
                                       kSecAttrAccount as String: "me", kSecValueData as String: Data("pw".utf8)]
        var add = password
        add[kSecAttrAccount as String] = "with presence"
        add[kSecAttrAccessControl as String] = presence
        XCTAssertEqual(SecItemAdd(add, nil), errSecSuccess, "per-read authentication of passwords (ItemAuthenticationTests)")
        add = password
        add[kSecAttrAccessControl as String] = plain
        add[kSecAttrAccessible as String] = kSecAttrAccessibleAlways
        XCTAssertEqual(SecItemAdd(add, nil), errSecParam, "both kSecAttrAccessible and kSecAttrAccessControl")
        add[kSecAttrAccessible as String] = nil
        XCTAssertEqual(SecItemAdd(add, nil), errSecSuccess)
        var result: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(password.merging([kSecReturnAttributes as String: true, kSecValueData as String: NSNull()]) { $1 }
                                            .filter { $0.key != kSecValueData as String }, &result), errSecSuccess)
        XCTAssertEqual((result as? [String: Any])?[kSecAttrAccessible as String] as? String, kSecAttrAccessibleWhenUnlockedThisDeviceOnly as String)

        let withAppPassword = try XCTUnwrap(control(kSecAttrAccessibleWhenUnlocked, [.applicationPassword]).0)
        let parameters: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                                         kSecPrivateKeyAttrs as String: [kSecAttrIsPermanent as String: true, kSecAttrAccessControl as String: withAppPassword]]
        var error: Unmanaged<CFError>?
        XCTAssertNil(SecKeyCreateRandomKey(parameters as CFDictionary, &error), "the application password must be on the context")
        XCTAssertEqual((error?.takeRetainedValue() as Error? as NSError?)?.code, Int(errSecInteractionNotAllowed))
    }
}
