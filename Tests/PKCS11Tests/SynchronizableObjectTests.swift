import CPKCS11
import Glibc
import XCTest
@testable import PKCS11

/// CKA_KC_SYNCHRONIZABLE through the C API: CK_TRUE is refused with CKR_TEMPLATE_INCONSISTENT on
/// an object that cannot leave this device (a ThisDeviceOnly class, a key in the TPM, access
/// control bound to this device) or this process (a session object), by every function that
/// makes an object and by C_SetAttributeValue, and nothing is left behind; other objects take it.
final class SynchronizableObjectTests: ModuleTestCase {
    static let synchronizable = UInt(KC_VENDOR_ATTRIBUTE_BASE) + 0x18
    static let accessible = UInt(KC_VENDOR_ATTRIBUTE_BASE) + 0x19
    static let accessControl = UInt(KC_VENDOR_ATTRIBUTE_BASE) + 0x22
    static let applicationPassword = UInt(KC_VENDOR_ATTRIBUTE_BASE) + 0x25
    static let tpm = UInt(KC_VENDOR_ATTRIBUTE_BASE) + 0x2C
    static let yes: [UInt8] = [1], no: [UInt8] = [0]
    static let p256: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
    /// kSecAttrAccessibleWhenUnlockedThisDeviceOnly.
    static let thisDeviceOnly = ulong(5)
    static let sync: (UInt, [UInt8]) = (synchronizable, yes)

    override func setUp() {
        // No TPM: a key asked in the TPM with CKA_KC_SYNCHRONIZABLE is refused before one is needed.
        setenv("KEYCHAIN_PKCS11_TCTI", "none", 1)
        super.setUp()
    }

    override func tearDown() {
        super.tearDown()
        unsetenv("KEYCHAIN_PKCS11_TCTI")
    }

    // MARK: helpers

    private func create(_ session: CK_SESSION_HANDLE, _ attributes: [(UInt, [UInt8])], expect: UInt, _ message: String = "",
                        line: UInt = #line) -> CK_OBJECT_HANDLE {
        var handle: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate(attributes) { p11.C_CreateObject!(session, $0, $1, &handle) }, expect, message, line: line)
        return handle
    }

    private func data(_ label: String, token: Bool = true, _ extra: [(UInt, [UInt8])] = []) -> [(UInt, [UInt8])] {
        [(UInt(CKA_CLASS), Self.dataClass), (UInt(CKA_TOKEN), token ? Self.yes : Self.no), (UInt(CKA_LABEL), Array(label.utf8)),
         (UInt(CKA_VALUE), Array("secret".utf8))] + extra
    }

    private func labelled(_ session: CK_SESSION_HANDLE, _ label: String) -> [CK_OBJECT_HANDLE] {
        find(session, [(UInt(CKA_LABEL), Array(label.utf8))])
    }

    private func generatePair(_ session: CK_SESSION_HANDLE, label: String, public extraPublic: [(UInt, [UInt8])], private extraPrivate: [(UInt, [UInt8])],
                              expect: UInt, line: UInt = #line) {
        var publicKey: CK_OBJECT_HANDLE = 0, privateKey: CK_OBJECT_HANDLE = 0
        let publicTemplate: [(UInt, [UInt8])] = [(UInt(CKA_EC_PARAMS), Self.p256), (UInt(CKA_TOKEN), Self.yes), (UInt(CKA_LABEL), Array(label.utf8))] + extraPublic
        let privateTemplate: [(UInt, [UInt8])] = [(UInt(CKA_TOKEN), Self.yes), (UInt(CKA_SIGN), Self.yes), (UInt(CKA_LABEL), Array(label.utf8))] + extraPrivate
        let result = withTemplate(publicTemplate) { pt, pc in
            withTemplate(privateTemplate) { vt, vc in
                mechanism(UInt(CKM_EC_KEY_PAIR_GEN)) { p11.C_GenerateKeyPair!(session, $0, pt, pc, vt, vc, &publicKey, &privateKey) }
            }
        }
        XCTAssertRV(result, expect, label, line: line)
    }

    private func setSync(_ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE, _ flag: Bool) -> CK_RV {
        withTemplate([(Self.synchronizable, flag ? Self.yes : Self.no)]) { p11.C_SetAttributeValue!(session, object, $0, $1) }
    }

    // MARK: C_CreateObject

    func test_create_object_marks_a_portable_token_object_and_refuses_one_bound_to_this_device() {
        let session = userSession()
        let portable = create(session, data("portable", [Self.sync]), expect: CKR_OK)
        XCTAssertEqual(value(session, portable, Self.synchronizable).1, Self.yes)
        XCTAssertEqual(value(session, create(session, data("plain"), expect: CKR_OK), Self.synchronizable).1, Self.no, "the default is CK_FALSE")
        // An application password alone travels with the item.
        _ = create(session, data("app password", [Self.sync, (Self.accessControl, Self.ulong(1 << 31)),
                                                   (Self.applicationPassword, Array("app-secret".utf8))]), expect: CKR_OK)

        for raw in UInt(4)...7 {
            _ = create(session, data("device \(raw)", [Self.sync, (Self.accessible, Self.ulong(raw))]), expect: CKR_TEMPLATE_INCONSISTENT, "class \(raw)")
            XCTAssertEqual(labelled(session, "device \(raw)"), [], "nothing stored for class \(raw)")
        }
        _ = create(session, data("session", token: false, [Self.sync]), expect: CKR_TEMPLATE_INCONSISTENT, "a session object never leaves the process")
        XCTAssertEqual(labelled(session, "session"), [])
        for flag in [UInt(1 << 0), 1 << 1, 1 << 3, 1 << 4, 1 << 5] {
            _ = create(session, data("presence \(flag)", [Self.sync, (UInt(CKA_PRIVATE), Self.yes), (Self.accessControl, Self.ulong(flag))]),
                       expect: CKR_TEMPLATE_INCONSISTENT, "access-control flag \(flag)")
        }
        // The same objects without the flag are stored.
        _ = create(session, data("device 5", [(Self.accessible, Self.thisDeviceOnly)]), expect: CKR_OK)
        _ = create(session, data("session", token: false), expect: CKR_OK)
    }

    // MARK: C_CopyObject

    func test_copy_object_refuses_a_synchronizable_copy_bound_to_this_device_or_process() {
        let session = userSession()
        let bound = create(session, data("bound", [(Self.accessible, Self.thisDeviceOnly)]), expect: CKR_OK)
        let portable = create(session, data("portable", [Self.sync]), expect: CKR_OK)
        var copy: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate([Self.sync, (UInt(CKA_LABEL), Array("bound copy".utf8))]) { p11.C_CopyObject!(session, bound, $0, $1, &copy) },
                    CKR_TEMPLATE_INCONSISTENT)
        XCTAssertRV(withTemplate([(UInt(CKA_TOKEN), Self.no), (UInt(CKA_LABEL), Array("session copy".utf8))]) { p11.C_CopyObject!(session, portable, $0, $1, &copy) },
                    CKR_TEMPLATE_INCONSISTENT, "a session copy of a synchronizable object keeps the flag: refused")
        XCTAssertEqual(labelled(session, "bound copy") + labelled(session, "session copy"), [])
        XCTAssertRV(withTemplate([(UInt(CKA_TOKEN), Self.no), (Self.synchronizable, Self.no)]) { p11.C_CopyObject!(session, portable, $0, $1, &copy) }, CKR_OK)
        XCTAssertRV(withTemplate([Self.sync, (UInt(CKA_LABEL), Array("portable copy".utf8))]) { p11.C_CopyObject!(session, portable, $0, $1, &copy) }, CKR_OK)
        XCTAssertEqual(value(session, copy, Self.synchronizable).1, Self.yes)
    }

    // MARK: C_GenerateKeyPair, C_GenerateKey

    func test_generate_key_pair_refuses_either_template_and_stores_neither_key() {
        let session = userSession()
        generatePair(session, label: "private device", public: [Self.sync], private: [Self.sync, (Self.accessible, Self.thisDeviceOnly)],
                     expect: CKR_TEMPLATE_INCONSISTENT)
        generatePair(session, label: "public device", public: [Self.sync, (Self.accessible, Self.ulong(7))], private: [Self.sync],
                     expect: CKR_TEMPLATE_INCONSISTENT)
        generatePair(session, label: "session public", public: [Self.sync, (UInt(CKA_TOKEN), Self.no)], private: [],
                     expect: CKR_TEMPLATE_INCONSISTENT)
        generatePair(session, label: "session private", public: [], private: [Self.sync, (UInt(CKA_TOKEN), Self.no)],
                     expect: CKR_TEMPLATE_INCONSISTENT)
        generatePair(session, label: "per-use PIN", public: [], private: [Self.sync, (Self.accessControl, Self.ulong(1))],
                     expect: CKR_TEMPLATE_INCONSISTENT)
        // In the TPM: refused before any TPM is asked (this test has none: KEYCHAIN_PKCS11_TCTI=none).
        generatePair(session, label: "tpm", public: [], private: [Self.sync, (Self.tpm, Self.yes)], expect: CKR_TEMPLATE_INCONSISTENT)
        for label in ["private device", "public device", "session public", "session private", "per-use PIN", "tpm"] {
            XCTAssertEqual(labelled(session, label), [], "\(label): neither key stored")
        }
        generatePair(session, label: "portable", public: [Self.sync], private: [Self.sync], expect: CKR_OK)
        let pair = labelled(session, "portable")
        XCTAssertEqual(pair.count, 2)
        for key in pair { XCTAssertEqual(value(session, key, Self.synchronizable).1, Self.yes) }
    }

    func test_generate_key_refuses_a_session_or_device_bound_synchronizable_key() {
        let session = userSession()
        func generate(_ label: String, _ extra: [(UInt, [UInt8])]) -> CK_RV {
            var key: CK_OBJECT_HANDLE = 0
            let template: [(UInt, [UInt8])] = [(UInt(CKA_VALUE_LEN), Self.ulong(32)), (UInt(CKA_LABEL), Array(label.utf8)), Self.sync] + extra
            return withTemplate(template) { t, c in mechanism(UInt(CKM_AES_KEY_GEN)) { p11.C_GenerateKey!(session, $0, t, c, &key) } }
        }
        XCTAssertRV(generate("session", [(UInt(CKA_TOKEN), Self.no)]), CKR_TEMPLATE_INCONSISTENT)
        XCTAssertRV(generate("device", [(UInt(CKA_TOKEN), Self.yes), (Self.accessible, Self.thisDeviceOnly)]), CKR_TEMPLATE_INCONSISTENT)
        XCTAssertEqual(labelled(session, "session") + labelled(session, "device"), [])
        XCTAssertRV(generate("portable", [(UInt(CKA_TOKEN), Self.yes)]), CKR_OK)
    }

    // MARK: C_UnwrapKey, C_DeriveKey

    func test_unwrap_key_refuses_a_device_bound_synchronizable_key() {
        let session = userSession()
        let kek = secretKey(session, type: UInt(CKK_AES), value: hex("000102030405060708090a0b0c0d0e0f"), extra: [(UInt(CKA_WRAP), [1]), (UInt(CKA_UNWRAP), [1])])
        // RFC 3394 §4.1: 00112233445566778899AABBCCDDEEFF under that key.
        var wrapped = hex("1fa68b0a8112b447aef34bd8fb5a7b829d3e862371d2cfe5")
        func unwrap(_ label: String, _ extra: [(UInt, [UInt8])]) -> CK_RV {
            var handle: CK_OBJECT_HANDLE = 0
            let template: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_AES))),
                                               (UInt(CKA_LABEL), Array(label.utf8)), Self.sync] + extra
            return withTemplate(template) { t, c in
                mechanism(UInt(CKM_AES_KEY_WRAP)) { p11.C_UnwrapKey!(session, $0, kek, &wrapped, CK_ULONG(wrapped.count), t, c, &handle) }
            }
        }
        XCTAssertRV(unwrap("device", [(UInt(CKA_TOKEN), Self.yes), (Self.accessible, Self.thisDeviceOnly)]), CKR_TEMPLATE_INCONSISTENT)
        XCTAssertRV(unwrap("session", []), CKR_TEMPLATE_INCONSISTENT, "CKA_TOKEN defaults to CK_FALSE: a session key")
        XCTAssertEqual(labelled(session, "device") + labelled(session, "session"), [])
        XCTAssertRV(unwrap("portable", [(UInt(CKA_TOKEN), Self.yes)]), CKR_OK)
    }

    func test_derive_key_refuses_a_session_or_device_bound_synchronizable_key() {
        let session = userSession()
        let base = secretKey(session, type: UInt(CKK_GENERIC_SECRET), value: Array(1...16).map(UInt8.init), extra: [(UInt(CKA_DERIVE), [1])])
        func derive(_ label: String, _ extra: [(UInt, [UInt8])]) -> CK_RV {
            var handle: CK_OBJECT_HANDLE = 0
            var bytes = Array("more".utf8)
            let template: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_GENERIC_SECRET))),
                                               (UInt(CKA_LABEL), Array(label.utf8)), Self.sync] + extra
            return bytes.withUnsafeMutableBufferPointer { buffer in
                let parameter = CK_KEY_DERIVATION_STRING_DATA(pData: buffer.baseAddress, ulLen: CK_ULONG(buffer.count))
                return withTemplate(template) { t, c in
                    mechanism(UInt(CKM_CONCATENATE_BASE_AND_DATA), parameter: parameter) { p11.C_DeriveKey!(session, $0, base, t, c, &handle) }
                }
            }
        }
        XCTAssertRV(derive("session", [(UInt(CKA_TOKEN), Self.no)]), CKR_TEMPLATE_INCONSISTENT)
        XCTAssertRV(derive("device", [(UInt(CKA_TOKEN), Self.yes), (Self.accessible, Self.thisDeviceOnly)]), CKR_TEMPLATE_INCONSISTENT)
        XCTAssertEqual(labelled(session, "session") + labelled(session, "device"), [])
        XCTAssertRV(derive("portable", [(UInt(CKA_TOKEN), Self.yes)]), CKR_OK)
    }

    // MARK: C_SetAttributeValue

    func test_set_attribute_value_refuses_marking_a_bound_object_and_changes_nothing() {
        let session = userSession()
        let bound = create(session, data("bound", [(Self.accessible, Self.thisDeviceOnly)]), expect: CKR_OK)
        let local = create(session, data("session", token: false), expect: CKR_OK)
        let portable = create(session, data("portable"), expect: CKR_OK)
        XCTAssertRV(setSync(session, bound, true), CKR_TEMPLATE_INCONSISTENT)
        XCTAssertRV(setSync(session, local, true), CKR_TEMPLATE_INCONSISTENT)
        XCTAssertEqual(value(session, bound, Self.synchronizable).1, Self.no)
        XCTAssertEqual(value(session, local, Self.synchronizable).1, Self.no)
        XCTAssertRV(setSync(session, bound, false), CKR_OK, "CK_FALSE is always allowed")
        XCTAssertRV(setSync(session, portable, true), CKR_OK)
        XCTAssertEqual(value(session, portable, Self.synchronizable).1, Self.yes)
        XCTAssertEqual(find(session, [(Self.synchronizable, Self.yes)]), [portable], "found by the flag")
        XCTAssertRV(setSync(session, portable, false), CKR_OK)
        XCTAssertEqual(value(session, portable, Self.synchronizable).1, Self.no)
    }
}
