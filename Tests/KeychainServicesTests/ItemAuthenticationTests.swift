import CPKCS11
import Foundation
import XCTest
import KeychainCore
import KeychainCrypto
@testable import KeychainServices
@testable import PKCS11

/// Per-item authentication through the Swift door: kSecAccessControl with user presence or an
/// application password on passwords and keys, answered by the authentication context; and the
/// same items through the C API.
final class ItemAuthenticationTests: XCTestCase {
    private var directory = ""
    private let password = "1234"

    override func setUpWithError() throws {
        directory = try makeTemporaryLoginKeychain("itemauth").root
    }

    override func tearDown() { removeTemporaryKeychain(directory) }

    private func control(_ flags: SecAccessControlCreateFlags) throws -> SecAccessControl {
        var error: Unmanaged<CFError>?
        return try XCTUnwrap(SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleWhenUnlocked, flags, &error))
    }

    private func item(_ account: String) -> [String: Any] {
        [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "auth", kSecAttrAccount as String: account]
    }

    private func read(_ account: String, context: SecAuthenticationContext?, returnData: Bool = true) -> (OSStatus, AnyObject?) {
        var query = item(account)
        if returnData { query[kSecReturnData as String] = true } else { query[kSecReturnAttributes as String] = true }
        if let context { query[kSecUseAuthenticationContext as String] = context }
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query, &result)
        return (status, result)
    }

    private func userPINFailures() throws -> Int64 {
        try Keychain.open(at: try XCTUnwrap(KeychainDirectory(path: directory).keychainFiles().first)).info().userPIN.failures
    }

    func test_user_presence_on_a_password_asks_for_the_keychain_password_at_each_read() throws {
        var add = item("presence")
        add[kSecValueData as String] = Data("presence secret".utf8)
        add[kSecAttrAccessControl as String] = try control(.userPresence)
        XCTAssertEqual(SecItemAdd(add, nil), errSecSuccess)
        XCTAssertEqual(read("presence", context: nil).0, errSecInteractionNotAllowed, "no context: no prompt possible")
        let attributes = read("presence", context: nil, returnData: false)
        XCTAssertEqual(attributes.0, errSecSuccess, "attributes are not gated")
        XCTAssertEqual((attributes.1 as? [String: Any])?[kSecAttrAccount as String] as? String, "presence")
        XCTAssertEqual(read("presence", context: SecAuthenticationContext(password: "9999")).0, errSecAuthFailed)
        XCTAssertEqual(try userPINFailures(), 1, "a wrong password here counts like a wrong login")
        XCTAssertEqual(read("presence", context: SecAuthenticationContext(password: password)).1 as? Data, Data("presence secret".utf8))
        XCTAssertEqual(try userPINFailures(), 0)
    }

    func test_an_application_password_seals_a_password() throws {
        var add = item("app")
        add[kSecValueData as String] = Data("application secret".utf8)
        add[kSecAttrAccessControl as String] = try control(.applicationPassword)
        XCTAssertEqual(SecItemAdd(add, nil), errSecInteractionNotAllowed, "adding needs the password on the context")
        let context = SecAuthenticationContext()
        XCTAssertTrue(context.setCredential(Data("open sesame".utf8), type: .applicationPassword))
        add[kSecUseAuthenticationContext as String] = context
        XCTAssertEqual(SecItemAdd(add, nil), errSecSuccess)

        XCTAssertEqual(read("app", context: nil).0, errSecInteractionNotAllowed)
        XCTAssertEqual(read("app", context: SecAuthenticationContext(password: password)).0, errSecInteractionNotAllowed,
                       "the keychain password is not the application password")
        let wrong = SecAuthenticationContext()
        wrong.setCredential(Data("open barley".utf8), type: .applicationPassword)
        XCTAssertEqual(read("app", context: wrong).0, errSecAuthFailed)
        XCTAssertEqual(read("app", context: context).1 as? Data, Data("application secret".utf8))
        XCTAssertEqual(read("app", context: nil, returnData: false).0, errSecSuccess, "attributes are not gated")

        // Either one, with .or: the application password or the keychain password opens it.
        var either = item("either")
        either[kSecValueData as String] = Data("x".utf8)
        either[kSecAttrAccessControl as String] = try control([.applicationPassword, .userPresence, .or])
        either[kSecUseAuthenticationContext as String] = context
        XCTAssertEqual(SecItemAdd(either, nil), errSecSuccess)
        XCTAssertEqual(read("either", context: context).1 as? Data, Data("x".utf8), "the application password")
        XCTAssertEqual(read("either", context: SecAuthenticationContext(password: password)).1 as? Data, Data("x".utf8), "the keychain password")
        XCTAssertEqual(read("either", context: nil).0, errSecInteractionNotAllowed, "neither, and nothing can ask")
        XCTAssertEqual(read("either", context: wrong).0, errSecAuthFailed, "a wrong application password")
        // Both, with .and (biometry is the same user-presence check here): the application
        // password opens the secret and the keychain password is asked for again at each read.
        var both = item("both")
        both[kSecValueData as String] = Data("y".utf8)
        both[kSecUseAuthenticationContext as String] = context
        both[kSecAttrAccessControl as String] = try control([.applicationPassword, .biometryAny, .and])
        XCTAssertEqual(SecItemAdd(both, nil), errSecSuccess)
        XCTAssertEqual(read("both", context: context).0, errSecInteractionNotAllowed, "the application password alone is not enough")
        let bothPasswords = SecAuthenticationContext(password: password)
        bothPasswords.setCredential(Data("open sesame".utf8), type: .applicationPassword)
        XCTAssertEqual(read("both", context: bothPasswords).1 as? Data, Data("y".utf8))
        let wrongPIN = SecAuthenticationContext(password: "not the password")
        wrongPIN.setCredential(Data("open sesame".utf8), type: .applicationPassword)
        XCTAssertEqual(read("both", context: wrongPIN).0, errSecAuthFailed)

        // Not in the file in clear, under the master key or otherwise.
        let path = try XCTUnwrap(KeychainDirectory(path: directory).keychainFiles().first)
        let bytes = (FileManager.default.contents(atPath: path) ?? Data()) + (FileManager.default.contents(atPath: path + "-wal") ?? Data())
        XCTAssertNil(bytes.range(of: Data("application secret".utf8)))
        XCTAssertNil(bytes.range(of: Data("open sesame".utf8)))
    }

    func test_a_key_with_an_application_password_signs_through_both_doors() throws {
        let context = SecAuthenticationContext()
        context.setCredential(Data("key password".utf8), type: .applicationPassword)
        let parameters: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
            kSecUseAuthenticationContext as String: context,
            kSecPrivateKeyAttrs as String: [kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: Data("app-key".utf8),
                                            kSecAttrLabel as String: "app-key", kSecAttrAccessControl as String: try control([.applicationPassword, .privateKeyUsage])],
        ]
        var error: Unmanaged<CFError>?
        let key = try XCTUnwrap(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
        let message = Data("signed behind an application password".utf8)
        XCTAssertNotNil(SecKeyCreateSignature(key, kSecKeyAlgorithmECDSASignatureMessageX962SHA256, message as CFData, &error))

        var query: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: Data("app-key".utf8),
                                    kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecReturnRef as String: true]
        var result: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(query, &result), errSecInteractionNotAllowed)
        query[kSecUseAuthenticationContext as String] = context
        XCTAssertEqual(SecItemCopyMatching(query, &result), errSecSuccess)
        let fetched = try XCTUnwrap(result as? SecKey)
        XCTAssertNotNil(SecKeyCreateSignature(fetched, kSecKeyAlgorithmECDSASignatureMessageX962SHA256, message as CFData, &error))
        context.setCredential(Data("not it".utf8), type: .applicationPassword)
        XCTAssertNil(SecKeyCreateSignature(fetched, kSecKeyAlgorithmECDSASignatureMessageX962SHA256, message as CFData, &error),
                     "the password is checked at each use")
        XCTAssertEqual((error?.takeRetainedValue() as Error? as NSError?)?.code, Int(errSecAuthFailed))

        // Through PKCS#11: the application password is the key's context-specific PIN.
        let p11 = FunctionLists.version240.pointee
        XCTAssertEqual(p11.C_Initialize(nil), CK_RV(CKR_OK))
        defer { _ = p11.C_Finalize(nil) }
        var slots = [CK_SLOT_ID](repeating: 0, count: 4)
        var slotCount = CK_ULONG(slots.count)
        XCTAssertEqual(p11.C_GetSlotList!(1, &slots, &slotCount), CK_RV(CKR_OK))
        var session: CK_SESSION_HANDLE = 0
        XCTAssertEqual(p11.C_OpenSession!(slots[0], CK_FLAGS(CKF_SERIAL_SESSION), nil, nil, &session), CK_RV(CKR_OK))
        var pin = Array(password.utf8)
        XCTAssertEqual(p11.C_Login!(session, CK_USER_TYPE(CKU_USER), &pin, CK_ULONG(pin.count)), CK_RV(CKR_OK))
        var keyClass = CK_ULONG(CKO_PRIVATE_KEY)
        var handle: CK_OBJECT_HANDLE = 0
        var found: CK_ULONG = 0
        withUnsafeMutableBytes(of: &keyClass) { bytes in
            var template = [CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_CLASS), pValue: bytes.baseAddress, ulValueLen: CK_ULONG(bytes.count))]
            XCTAssertEqual(p11.C_FindObjectsInit!(session, &template, 1), CK_RV(CKR_OK))
            XCTAssertEqual(p11.C_FindObjects!(session, &handle, 1, &found), CK_RV(CKR_OK))
            XCTAssertEqual(p11.C_FindObjectsFinal!(session), CK_RV(CKR_OK))
        }
        XCTAssertEqual(found, 1)
        var mechanism = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_ECDSA_SHA256), pParameter: nil, ulParameterLen: 0)
        var data = Array(message)
        var signature = [UInt8](repeating: 0, count: 64)
        var length = CK_ULONG(signature.count)
        XCTAssertEqual(p11.C_SignInit!(session, &mechanism, handle), CK_RV(CKR_OK))
        var keyPassword = Array("key password".utf8)
        XCTAssertEqual(p11.C_Login!(session, CK_USER_TYPE(CKU_CONTEXT_SPECIFIC), &keyPassword, CK_ULONG(keyPassword.count)), CK_RV(CKR_OK))
        XCTAssertEqual(p11.C_Sign!(session, &data, CK_ULONG(data.count), &signature, &length), CK_RV(CKR_OK))
        XCTAssertEqual(length, 64)
    }

    /// Each flag as PKCS#11 sees the key it protects: CKA_KC_ACCESS_CONTROL holds the flags,
    /// presence of any kind is CKA_ALWAYS_AUTHENTICATE, privateKeyUsage is sensitive and unextractable.
    func test_each_flag_on_a_key_as_pkcs11_attributes() throws {
        let cases: [(String, SecAccessControlCreateFlags)] = [
            ("userPresence", .userPresence), ("devicePasscode", .devicePasscode), ("biometryAny", .biometryAny),
            ("biometryCurrentSet", .biometryCurrentSet), ("watch", .watch), ("privateKeyUsage", .privateKeyUsage),
            ("both", [.biometryAny, .devicePasscode, .or]),
        ]
        let keychain = try Keychain.open(at: try XCTUnwrap(KeychainDirectory(path: directory).keychainFiles().first))
        let master = try Array(password.utf8).withUnsafeBytes { try keychain.unlock(.user, pin: $0) }
        for (name, flags) in cases {
            var error: Unmanaged<CFError>?
            let parameters: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                                             kSecPrivateKeyAttrs as String: [kSecAttrIsPermanent as String: true, kSecAttrLabel as String: name,
                                                                             kSecAttrAccessControl as String: try control(flags)]]
            XCTAssertNotNil(SecKeyCreateRandomKey(parameters as CFDictionary, &error), name)
            let found = try keychain.find([(.label, Array(name.utf8)), (.objectClass, AttributeValue.ulong(ObjectClass.privateKey.rawValue))], master: master)
            XCTAssertEqual(found.count, 1, name)
            let stored = try keychain.object(id: try XCTUnwrap(found.first).id, master: master)
            XCTAssertEqual(stored[.accessControl], AttributeValue.ulong(UInt(flags.rawValue)), name)
            XCTAssertEqual(stored.bool(.alwaysAuthenticate), name != "privateKeyUsage", name)
            XCTAssertTrue(stored.bool(.sensitive), "\(name): a key checked at each use never leaves")
            XCTAssertFalse(stored.bool(.extractable), name)
            XCTAssertEqual(stored[.accessible], AttributeValue.ulong(ProtectionClass.whenUnlocked.rawValue), name)
        }
    }
}
