import CPKCS11
import Foundation
import XCTest
import KeychainCore
import KeychainCrypto
@testable import KeychainServices
@testable import PKCS11

/// What one door stores, the other finds: SecItem passwords are PKCS#11 data objects.
final class CrossDoorTests: XCTestCase {
    func test_a_generic_password_is_a_data_object_with_its_service_as_application() throws {
        let (directory, keychain) = try makeTemporaryLoginKeychain("crossdoor")
        defer { removeTemporaryKeychain(directory) }
        let add: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "mail.example",
                                  kSecAttrAccount as String: "alice", kSecAttrLabel as String: "Mail password",
                                  kSecValueData as String: Data("hunter2".utf8)]
        XCTAssertEqual(SecItemAdd(add, nil), errSecSuccess)

        // Through PKCS#11: log in, find CKO_DATA by CKA_APPLICATION and CKA_LABEL, read CKA_VALUE.
        let p11 = FunctionLists.version240.pointee
        XCTAssertEqual(p11.C_Initialize(nil), CK_RV(CKR_OK))
        defer { _ = p11.C_Finalize(nil) }
        let slot = CK_SLOT_ID(try XCTUnwrap(try keychain.info().slotID))
        var session: CK_SESSION_HANDLE = 0
        XCTAssertEqual(p11.C_OpenSession!(slot, CK_FLAGS(CKF_SERIAL_SESSION | CKF_RW_SESSION), nil, nil, &session), CK_RV(CKR_OK))
        var pin = Array("1234".utf8)
        XCTAssertEqual(p11.C_Login!(session, CK_USER_TYPE(CKU_USER), &pin, 4), CK_RV(CKR_OK))
        var application = Array("mail.example".utf8), label = Array("Mail password".utf8)
        var found: CK_OBJECT_HANDLE = 0
        var count: CK_ULONG = 0
        application.withUnsafeMutableBytes { app in
            label.withUnsafeMutableBytes { lab in
                var template = [CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_APPLICATION), pValue: app.baseAddress, ulValueLen: CK_ULONG(app.count)),
                                CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_LABEL), pValue: lab.baseAddress, ulValueLen: CK_ULONG(lab.count))]
                XCTAssertEqual(p11.C_FindObjectsInit!(session, &template, 2), CK_RV(CKR_OK))
                XCTAssertEqual(p11.C_FindObjects!(session, &found, 1, &count), CK_RV(CKR_OK))
                XCTAssertEqual(p11.C_FindObjectsFinal!(session), CK_RV(CKR_OK))
            }
        }
        XCTAssertEqual(count, 1)
        var value = [UInt8](repeating: 0, count: 32)
        var accountBytes = [UInt8](repeating: 0, count: 32)
        value.withUnsafeMutableBytes { v in
            accountBytes.withUnsafeMutableBytes { a in
                var template = [CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_VALUE), pValue: v.baseAddress, ulValueLen: 32),
                                CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(AttributeType.account.rawValue), pValue: a.baseAddress, ulValueLen: 32)]
                XCTAssertEqual(p11.C_GetAttributeValue!(session, found, &template, 2), CK_RV(CKR_OK))
                XCTAssertEqual(template[0].ulValueLen, 7)
                XCTAssertEqual(template[1].ulValueLen, 5)
            }
        }
        XCTAssertEqual(Array(value.prefix(7)), Array("hunter2".utf8))
        XCTAssertEqual(Array(accountBytes.prefix(5)), Array("alice".utf8))

        // A second item with the same primary key is refused through PKCS#11 too.
        var duplicate: CK_OBJECT_HANDLE = 0
        var klass = CK_OBJECT_CLASS(CKO_DATA), itemClass: CK_ULONG = 1, yes: CK_BBOOL = 1
        let rv = withUnsafeMutableBytes(of: &klass) { c in
            withUnsafeMutableBytes(of: &itemClass) { i in
                withUnsafeMutableBytes(of: &yes) { y in
                    application.withUnsafeMutableBytes { app in
                        "alice".utf8CString.withUnsafeBytes { acct in
                            var template = [CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_CLASS), pValue: c.baseAddress, ulValueLen: CK_ULONG(c.count)),
                                            CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_TOKEN), pValue: y.baseAddress, ulValueLen: 1),
                                            CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(AttributeType.itemClass.rawValue), pValue: i.baseAddress, ulValueLen: CK_ULONG(i.count)),
                                            CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_APPLICATION), pValue: app.baseAddress, ulValueLen: CK_ULONG(app.count)),
                                            CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(AttributeType.account.rawValue), pValue: UnsafeMutableRawPointer(mutating: acct.baseAddress),
                                                         ulValueLen: 5)]
                            return p11.C_CreateObject!(session, &template, 5, &duplicate)
                        }
                    }
                }
            }
        }
        XCTAssertEqual(rv, CK_RV(CKR_TEMPLATE_INCONSISTENT))
    }
}

extension CrossDoorTests {
    /// A data object a PKCS#11 client wrote (no item class) is a generic password to SecItem.
    func test_a_plain_pkcs11_data_object_is_found_as_a_generic_password() throws {
        let (directory, keychain) = try makeTemporaryLoginKeychain("plain", unlocked: false)
        defer { removeTemporaryKeychain(directory) }
        let master = try Array("1234".utf8).withUnsafeBytes { try keychain.unlock(.user, pin: $0) }
        let object = try ObjectTemplate.create([(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue)), (.token, [1]),
                                                (.application, Array("backup-tool".utf8)), (.label, Array("nightly".utf8)),
                                                (.value, Array("s3cr3t".utf8))], uniqueID: Array("00000000000000000000000000000001".utf8), policy: .compatible)
        _ = try keychain.add(object, uid: Array(repeating: 1, count: 16), master: master)
        KeychainServices.lockAll()
        XCTAssertEqual(KeychainServices.unlock(password: "1234"), errSecSuccess)
        var result: CFTypeRef?
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "backup-tool", kSecReturnData as String: true]
        XCTAssertEqual(SecItemCopyMatching(query, &result), errSecSuccess)
        XCTAssertEqual(result as? Data, Data("s3cr3t".utf8))
        let internet: [String: Any] = [kSecClass as String: kSecClassInternetPassword, kSecAttrServer as String: "backup-tool"]
        XCTAssertEqual(SecItemCopyMatching(internet, nil), errSecItemNotFound)
    }
}

extension CrossDoorTests {
    /// An account given as Data is stored as its bytes: PKCS#11 reads CKA_KC_ACCOUNT as before, and
    /// the note of its type (an internal attribute) reads as absent there.
    func test_an_account_given_as_data_is_the_same_bytes_through_pkcs11() throws {
        let (directory, keychain) = try makeTemporaryLoginKeychain("datatyped")
        defer { removeTemporaryKeychain(directory) }
        let add: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "typed.example",
                                  kSecAttrAccount as String: Data("bob".utf8), kSecValueData as String: Data("pw".utf8)]
        XCTAssertEqual(SecItemAdd(add, nil), errSecSuccess)

        let p11 = FunctionLists.version240.pointee
        XCTAssertEqual(p11.C_Initialize(nil), CK_RV(CKR_OK))
        defer { _ = p11.C_Finalize(nil) }
        let slot = CK_SLOT_ID(try XCTUnwrap(try keychain.info().slotID))
        var session: CK_SESSION_HANDLE = 0
        XCTAssertEqual(p11.C_OpenSession!(slot, CK_FLAGS(CKF_SERIAL_SESSION), nil, nil, &session), CK_RV(CKR_OK))
        var pin = Array("1234".utf8)
        XCTAssertEqual(p11.C_Login!(session, CK_USER_TYPE(CKU_USER), &pin, 4), CK_RV(CKR_OK))
        var application = Array("typed.example".utf8)
        var found: CK_OBJECT_HANDLE = 0
        var count: CK_ULONG = 0
        application.withUnsafeMutableBytes { app in
            var template = [CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_APPLICATION), pValue: app.baseAddress, ulValueLen: CK_ULONG(app.count))]
            XCTAssertEqual(p11.C_FindObjectsInit!(session, &template, 1), CK_RV(CKR_OK))
            XCTAssertEqual(p11.C_FindObjects!(session, &found, 1, &count), CK_RV(CKR_OK))
            XCTAssertEqual(p11.C_FindObjectsFinal!(session), CK_RV(CKR_OK))
        }
        XCTAssertEqual(count, 1)
        var account = [UInt8](repeating: 0, count: 16), note = [UInt8](repeating: 0, count: 16)
        account.withUnsafeMutableBytes { a in
            note.withUnsafeMutableBytes { n in
                var template = [CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(AttributeType.account.rawValue), pValue: a.baseAddress, ulValueLen: 16),
                                CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(AttributeType.dataTypedAttributes.rawValue), pValue: n.baseAddress, ulValueLen: 16)]
                XCTAssertEqual(p11.C_GetAttributeValue!(session, found, &template, 2), CK_RV(CKR_ATTRIBUTE_TYPE_INVALID))
                XCTAssertEqual(template[0].ulValueLen, 3)
                XCTAssertEqual(template[1].ulValueLen, KC_UNAVAILABLE_INFORMATION)
            }
        }
        XCTAssertEqual(Array(account.prefix(3)), Array("bob".utf8))
    }

    /// A data object a PKCS#11 client wrote is found by its persistent reference without kSecClass.
    func test_a_pkcs11_objects_persistent_reference_finds_it_without_a_class() throws {
        let (directory, keychain) = try makeTemporaryLoginKeychain("plainref", unlocked: false)
        defer { removeTemporaryKeychain(directory) }
        let master = try Array("1234".utf8).withUnsafeBytes { try keychain.unlock(.user, pin: $0) }
        let uid = Array("00000000000000000000000000000002".utf8)
        let object = try ObjectTemplate.create([(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue)), (.token, [1]),
                                                (.application, Array("backup-tool".utf8)), (.value, Array("s3cr3t".utf8))],
                                               uniqueID: uid, policy: .compatible)
        _ = try keychain.add(object, uid: Array(repeating: 2, count: 16), master: master)
        KeychainServices.lockAll()
        XCTAssertEqual(KeychainServices.unlock(password: "1234"), errSecSuccess)
        var result: CFTypeRef?
        let query: [String: Any] = [kSecValuePersistentRef as String: Data("KCPR".utf8 + uid), kSecReturnAttributes as String: true, kSecReturnData as String: true]
        XCTAssertEqual(SecItemCopyMatching(query, &result), errSecSuccess)
        let found = try XCTUnwrap(result as? [String: Any])
        XCTAssertEqual(found[kSecClass as String] as? String, kSecClassGenericPassword as String, "a plain data object is a generic password")
        XCTAssertEqual(found[kSecAttrService as String] as? String, "backup-tool")
        XCTAssertEqual(found[kSecValueData as String] as? Data, Data("s3cr3t".utf8))
        // Locked, with nothing that may ask: the private item cannot be looked at.
        KeychainServices.lockAll()
        XCTAssertEqual(SecItemCopyMatching(query, &result), errSecInteractionNotAllowed)
    }
}
