import CPKCS11
import XCTest
@testable import PKCS11

final class ObjectTests: ModuleTestCase {
    private let label = UInt(CKA_LABEL), value = UInt(CKA_VALUE), klass = UInt(CKA_CLASS)

    func test_create_read_and_find_token_objects() {
        let slot = makeToken()
        let session = openSession(slot, readWrite: true)
        XCTAssertRV(login(session), CKR_OK)
        let secret = createData(session, token: true, isPrivate: true, label: "secret", value: Array("s3cr3t".utf8))
        let open = createData(session, token: true, isPrivate: false, label: "open", value: [1, 2, 3])
        XCTAssertEqual(value(session, secret).1, Array("s3cr3t".utf8))
        XCTAssertEqual(find(session, [(label, Array("secret".utf8))]), [secret])
        XCTAssertEqual(Set(find(session, [(klass, Self.dataClass)])), [secret, open])
        XCTAssertEqual(find(session, [(value, [1, 2, 3])]), [open])
        XCTAssertEqual(find(session, [(UInt(CKA_KEY_TYPE), Self.ulong(0))]), [])
        // A second module instance (another process, in effect) sees the object at once.
        XCTAssertRV(p11.C_Finalize(nil), CKR_OK)
        XCTAssertRV(p11.C_Initialize(nil), CKR_OK)
        let again = openSession(slot, readWrite: false)
        XCTAssertEqual(find(again, [(label, Array("secret".utf8))]), [], "private objects are invisible before login")
        let found = find(again, [(label, Array("open".utf8))])
        XCTAssertEqual(found.count, 1)
        XCTAssertEqual(value(again, found[0]).1, [1, 2, 3])
        XCTAssertRV(login(again), CKR_OK)
        XCTAssertEqual(value(again, find(again, [(label, Array("secret".utf8))])[0]).1, Array("s3cr3t".utf8))
    }

    func test_write_rules_for_sessions_and_login() {
        let slot = makeToken()
        let ro = openSession(slot, readWrite: false)
        _ = createData(ro, token: true, isPrivate: false, label: "x", value: [], expect: CKR_SESSION_READ_ONLY)
        _ = createData(ro, token: false, isPrivate: true, label: "x", value: [], expect: CKR_USER_NOT_LOGGED_IN)
        let sessionObject = createData(ro, token: false, isPrivate: false, label: "session", value: [5])
        XCTAssertEqual(value(ro, sessionObject).1, [5], "read-only sessions may create session objects")
        let rw = openSession(slot, readWrite: true)
        let publicToken = createData(rw, token: true, isPrivate: false, label: "public", value: [6])
        XCTAssertRV(p11.C_DestroyObject!(ro, publicToken), CKR_SESSION_READ_ONLY)
        XCTAssertRV(withTemplate([(label, [1])]) { p11.C_SetAttributeValue!(ro, publicToken, $0, $1) }, CKR_SESSION_READ_ONLY)
        XCTAssertEqual(value(rw, publicToken).1, [6])
    }

    func test_bad_templates_get_precise_codes_and_store_nothing() {
        let slot = makeToken()
        let session = openSession(slot, readWrite: true)
        var handle: CK_OBJECT_HANDLE = 0
        XCTAssertRV(p11.C_CreateObject!(session, nil, 1, &handle), CKR_ARGUMENTS_BAD)
        XCTAssertRV(withTemplate([(klass, Self.dataClass)]) { p11.C_CreateObject!(session, $0, $1, nil) }, CKR_ARGUMENTS_BAD)
        XCTAssertRV(withTemplate([(klass, Self.dataClass)]) { t, _ in p11.C_CreateObject!(session, t, CK_ULONG.max, &handle) }, CKR_ARGUMENTS_BAD)
        XCTAssertRV(withTemplate([(klass, Self.dataClass)]) { t, _ in p11.C_CreateObject!(session, t, 100_000, &handle) }, CKR_ARGUMENTS_BAD)
        XCTAssertRV(withTemplate([(label, [1])]) { p11.C_CreateObject!(session, $0, $1, &handle) }, CKR_TEMPLATE_INCOMPLETE)
        XCTAssertRV(withTemplate([(klass, [0, 0, 0, 0])]) { p11.C_CreateObject!(session, $0, $1, &handle) }, CKR_ATTRIBUTE_VALUE_INVALID)
        XCTAssertRV(withTemplate([(klass, Self.dataClass), (UInt(CKA_TOKEN), [1, 1])]) { p11.C_CreateObject!(session, $0, $1, &handle) }, CKR_ATTRIBUTE_VALUE_INVALID)
        XCTAssertRV(withTemplate([(klass, Self.dataClass), (UInt(CKA_MODULUS), [1])]) { p11.C_CreateObject!(session, $0, $1, &handle) }, CKR_ATTRIBUTE_TYPE_INVALID)
        XCTAssertRV(withTemplate([(klass, Self.dataClass), (UInt(CKA_UNIQUE_ID), [1])]) { p11.C_CreateObject!(session, $0, $1, &handle) }, CKR_ATTRIBUTE_READ_ONLY)
        XCTAssertRV(withTemplate([(klass, Self.dataClass), (label, [1]), (label, [2])]) { p11.C_CreateObject!(session, $0, $1, &handle) }, CKR_TEMPLATE_INCONSISTENT)
        XCTAssertRV(withTemplate([(klass, Self.ulong(UInt(CKO_HW_FEATURE)))]) { p11.C_CreateObject!(session, $0, $1, &handle) }, CKR_ATTRIBUTE_VALUE_INVALID)
        XCTAssertRV(withTemplate([(klass, Self.ulong(UInt(CKO_CERTIFICATE)))]) { p11.C_CreateObject!(session, $0, $1, &handle) }, CKR_TEMPLATE_INCOMPLETE)
        XCTAssertRV(withTemplate([(klass, Self.ulong(UInt(CKO_CERTIFICATE))), (UInt(CKA_CERTIFICATE_TYPE), Self.ulong(UInt(CKC_X_509))),
                                  (UInt(CKA_SUBJECT), [0x30, 0x00]), (value, [0x30, 0x03, 0x02, 0x01, 0x01])]) { p11.C_CreateObject!(session, $0, $1, &handle) }, CKR_ATTRIBUTE_VALUE_INVALID)
        var nullValue = CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_LABEL), pValue: nil, ulValueLen: 5)
        XCTAssertRV(p11.C_CreateObject!(session, &nullValue, 1, &handle), CKR_ARGUMENTS_BAD)
        var small = [UInt8](repeating: 0x41, count: 8)
        small.withUnsafeMutableBytes { bytes in
            var huge = CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_LABEL), pValue: bytes.baseAddress, ulValueLen: CK_ULONG.max)
            XCTAssertRV(p11.C_CreateObject!(session, &huge, 1, &handle), CKR_ATTRIBUTE_VALUE_INVALID)
        }
        XCTAssertEqual(find(session, []), [], "no failed creation left an object")
    }

    func test_get_attribute_value_reports_each_attribute() {
        let slot = makeToken()
        let session = openSession(slot, readWrite: true)
        let object = createData(session, token: true, isPrivate: false, label: "abc", value: [1, 2, 3, 4])
        var labelBuffer = [UInt8](repeating: 0, count: 2)
        var valueBuffer = [UInt8](repeating: 0, count: 16)
        var size: CK_ULONG = 0
        labelBuffer.withUnsafeMutableBytes { labelBytes in
            valueBuffer.withUnsafeMutableBytes { valueBytes in
                var template = [
                    CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_LABEL), pValue: labelBytes.baseAddress, ulValueLen: 2),
                    CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_MODULUS), pValue: nil, ulValueLen: 0),
                    CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_VALUE), pValue: valueBytes.baseAddress, ulValueLen: 16),
                    CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_APPLICATION), pValue: nil, ulValueLen: 0),
                ]
                let result = p11.C_GetAttributeValue!(session, object, &template, 4)
                XCTAssertTrue([CK_RV(CKR_BUFFER_TOO_SMALL), CK_RV(CKR_ATTRIBUTE_TYPE_INVALID)].contains(result), rv(result))
                XCTAssertEqual(template[0].ulValueLen, KC_UNAVAILABLE_INFORMATION)
                XCTAssertEqual(template[1].ulValueLen, KC_UNAVAILABLE_INFORMATION)
                XCTAssertEqual(template[2].ulValueLen, 4)
                XCTAssertEqual(template[3].ulValueLen, 0)
            }
        }
        XCTAssertEqual(Array(valueBuffer.prefix(4)), [1, 2, 3, 4])
        XCTAssertRV(p11.C_GetAttributeValue!(session, object, nil, 1), CKR_ARGUMENTS_BAD)
        XCTAssertRV(p11.C_GetAttributeValue!(session, 4242, nil, 0), CKR_OBJECT_HANDLE_INVALID)
        XCTAssertRV(p11.C_GetObjectSize!(session, object, &size), CKR_OK)
        XCTAssertGreaterThan(size, 0)
        XCTAssertRV(p11.C_GetObjectSize!(session, object, nil), CKR_ARGUMENTS_BAD)
        let unique = value(session, object, UInt(CKA_UNIQUE_ID))
        XCTAssertRV(unique.0, CKR_OK)
        XCTAssertEqual(unique.1?.count, 32)
    }

    func test_set_copy_and_destroy_follow_the_rules() {
        let slot = makeToken()
        let session = openSession(slot, readWrite: true)
        XCTAssertRV(login(session), CKR_OK)
        let object = createData(session, token: true, isPrivate: true, label: "orig", value: [1])
        XCTAssertRV(withTemplate([(label, Array("renamed".utf8)), (value, [2])]) { p11.C_SetAttributeValue!(session, object, $0, $1) }, CKR_OK)
        XCTAssertEqual(value(session, object, label).1, Array("renamed".utf8))
        XCTAssertRV(withTemplate([(UInt(CKA_PRIVATE), [0])]) { p11.C_SetAttributeValue!(session, object, $0, $1) }, CKR_ATTRIBUTE_READ_ONLY)
        XCTAssertRV(withTemplate([(label, Array("ignored".utf8)), (UInt(CKA_TOKEN), [0])]) { p11.C_SetAttributeValue!(session, object, $0, $1) }, CKR_ATTRIBUTE_READ_ONLY)
        XCTAssertEqual(value(session, object, label).1, Array("renamed".utf8), "a refused update changes nothing")
        var copy: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate([(UInt(CKA_TOKEN), [0]), (UInt(CKA_DESTROYABLE), [0])]) { p11.C_CopyObject!(session, object, $0, $1, &copy) }, CKR_OK)
        XCTAssertEqual(value(session, copy).1, [2])
        XCTAssertEqual(value(session, copy, UInt(CKA_TOKEN)).1, [0])
        // CKA_PRIVATE never goes from TRUE to FALSE, on copy either (a PIN-less copy of a secret);
        // a public object may be copied as a private one.
        var lowered: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate([(UInt(CKA_PRIVATE), [0])]) { p11.C_CopyObject!(session, object, $0, $1, &lowered) }, CKR_ATTRIBUTE_READ_ONLY)
        let open = createData(session, token: false, isPrivate: false, label: "public", value: [3])
        XCTAssertRV(withTemplate([(UInt(CKA_PRIVATE), [1])]) { p11.C_CopyObject!(session, open, $0, $1, &lowered) }, CKR_OK)
        XCTAssertEqual(value(session, lowered, UInt(CKA_PRIVATE)).1, [1])
        XCTAssertNotEqual(value(session, copy, UInt(CKA_UNIQUE_ID)).1, value(session, object, UInt(CKA_UNIQUE_ID)).1)
        XCTAssertRV(p11.C_DestroyObject!(session, copy), CKR_ACTION_PROHIBITED)
        XCTAssertRV(withTemplate([(UInt(CKA_COPYABLE), [0])]) { p11.C_SetAttributeValue!(session, object, $0, $1) }, CKR_OK)
        XCTAssertRV(withTemplate([(UInt(CKA_COPYABLE), [1])]) { p11.C_SetAttributeValue!(session, object, $0, $1) }, CKR_ATTRIBUTE_READ_ONLY)
        XCTAssertRV(withTemplate([]) { p11.C_CopyObject!(session, object, $0, $1, &copy) }, CKR_ACTION_PROHIBITED)
        let frozen = createData(session, token: false, isPrivate: false, label: "frozen", value: [])
        var fixed: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate([(UInt(CKA_MODIFIABLE), [0])]) { p11.C_CopyObject!(session, frozen, $0, $1, &fixed) }, CKR_OK)
        XCTAssertRV(withTemplate([(label, [1])]) { p11.C_SetAttributeValue!(session, fixed, $0, $1) }, CKR_ACTION_PROHIBITED)
        XCTAssertRV(p11.C_DestroyObject!(session, object), CKR_OK)
        XCTAssertRV(p11.C_DestroyObject!(session, object), CKR_OBJECT_HANDLE_INVALID)
        XCTAssertEqual(find(session, [(label, Array("renamed".utf8)), (UInt(CKA_TOKEN), [1])]), [])
    }

    func test_private_objects_disappear_at_logout_and_session_objects_with_their_session() {
        let slot = makeToken()
        let keeper = openSession(slot, readWrite: true)
        let session = openSession(slot, readWrite: true)
        XCTAssertRV(login(session), CKR_OK)
        let secret = createData(session, token: true, isPrivate: true, label: "s", value: [1])
        let ephemeral = createData(session, token: false, isPrivate: false, label: "e", value: [2])
        XCTAssertEqual(value(keeper, ephemeral).1, [2], "session objects are visible to the application's other sessions")
        XCTAssertRV(p11.C_Logout!(session), CKR_OK)
        XCTAssertRV(value(session, secret).0, CKR_OBJECT_HANDLE_INVALID)
        XCTAssertEqual(find(session, []), [ephemeral])
        XCTAssertRV(p11.C_CloseSession!(session), CKR_OK)
        XCTAssertRV(value(keeper, ephemeral).0, CKR_OBJECT_HANDLE_INVALID)
    }

    func test_find_operation_states() {
        let slot = makeToken()
        let session = openSession(slot, readWrite: true)
        var handles = [CK_OBJECT_HANDLE](repeating: 0, count: 4)
        var count: CK_ULONG = 0
        XCTAssertRV(p11.C_FindObjects!(session, &handles, 4, &count), CKR_OPERATION_NOT_INITIALIZED)
        XCTAssertRV(p11.C_FindObjectsFinal!(session), CKR_OPERATION_NOT_INITIALIZED)
        XCTAssertRV(p11.C_FindObjectsInit!(session, nil, 0), CKR_OK)
        XCTAssertRV(p11.C_FindObjectsInit!(session, nil, 0), CKR_OPERATION_ACTIVE)
        XCTAssertRV(p11.C_FindObjects!(session, &handles, 4, nil), CKR_ARGUMENTS_BAD)
        XCTAssertRV(p11.C_FindObjects!(session, &handles, CK_ULONG.max, &count), CKR_OK)
        XCTAssertEqual(count, 0)
        XCTAssertRV(p11.C_FindObjectsFinal!(session), CKR_OK)
        XCTAssertRV(p11.C_FindObjectsInit!(session, nil, 3), CKR_ARGUMENTS_BAD)
    }
}
