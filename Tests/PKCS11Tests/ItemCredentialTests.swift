import CPKCS11
import Glibc
import XCTest
@testable import PKCS11

/// Per-item authentication through the C API: an application password sealing an item's secret
/// (CKA_KC_APPLICATION_PASSWORD), user presence on a password (CKA_KC_ACCESS_CONTROL), the
/// CKO_KC_CREDENTIAL object that presents either in a session, and a key whose application
/// password is its context-specific PIN.
extension MechanismTests {
    private static let vendor = UInt(0x8000_0000 | 0x4B43_0000)
    private static let accessControl = vendor + 0x22
    private static let applicationPassword = vendor + 0x25
    private static let credentialObject = vendor + 0x26
    private static let credentialClass = ulong(vendor + 0x01)
    private static let p256Params: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]

    private func createItem(_ session: CK_SESSION_HANDLE, label: String, extra: [(UInt, [UInt8])], token: Bool = true, expect: UInt = CKR_OK) -> CK_OBJECT_HANDLE {
        var handle: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate([(UInt(CKA_CLASS), Self.dataClass), (UInt(CKA_TOKEN), [token ? 1 : 0]), (UInt(CKA_LABEL), Array(label.utf8)),
                                  (UInt(CKA_VALUE), Array("the secret of \(label)".utf8))] + extra) {
            p11.C_CreateObject!(session, $0, $1, &handle)
        }, expect, label)
        return handle
    }

    private func present(_ session: CK_SESSION_HANDLE, _ item: CK_OBJECT_HANDLE, _ secret: String, expect: UInt = CKR_OK) -> CK_OBJECT_HANDLE {
        var handle: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate([(UInt(CKA_CLASS), Self.credentialClass), (Self.credentialObject, Self.ulong(UInt(item))),
                                  (UInt(CKA_VALUE), Array(secret.utf8))]) { p11.C_CreateObject!(session, $0, $1, &handle) }, expect)
        return handle
    }

    func test_an_application_password_seals_a_password_until_a_credential_presents_it() {
        let (slot, session) = loggedInSession()
        let item = createItem(session, label: "sealed", extra: [(Self.applicationPassword, Array("app-secret".utf8))])
        XCTAssertEqual(value(session, item, UInt(CKA_LABEL)).1, Array("sealed".utf8), "non-secret attributes are not gated")
        XCTAssertEqual(value(session, item).0, CK_RV(CKR_ATTRIBUTE_SENSITIVE))
        XCTAssertEqual(value(session, item, Self.applicationPassword).0, CK_RV(CKR_ATTRIBUTE_SENSITIVE))
        XCTAssertEqual(value(session, item, Self.vendor + 0x23).0, CK_RV(CKR_ATTRIBUTE_TYPE_INVALID), "the seal is internal")
        XCTAssertEqual(value(session, item, Self.accessControl).1, Self.ulong(1 << 31), "kSecAccessControlApplicationPassword")
        XCTAssertEqual(find(session, [(UInt(CKA_VALUE), Array("the secret of sealed".utf8))]), [], "no search oracle on the value")

        _ = present(session, item, "wrong", expect: CKR_PIN_INCORRECT)
        let credential = present(session, item, "app-secret")
        XCTAssertEqual(value(session, item).1, Array("the secret of sealed".utf8))
        XCTAssertEqual(value(session, credential, UInt(CKA_CLASS)).1, Self.credentialClass)
        XCTAssertEqual(value(session, item, Self.applicationPassword).0, CK_RV(CKR_ATTRIBUTE_TYPE_INVALID), "the password is never stored")
        XCTAssertEqual(value(session, credential, UInt(CKA_VALUE)).0, CK_RV(CKR_ATTRIBUTE_TYPE_INVALID), "a credential keeps no secret")

        let other = openSession(slot, readWrite: false)
        XCTAssertEqual(value(other, item).0, CK_RV(CKR_ATTRIBUTE_SENSITIVE), "the credential belongs to one session")
        XCTAssertRV(p11.C_DestroyObject!(session, credential), CKR_OK)
        XCTAssertEqual(value(session, item).0, CK_RV(CKR_ATTRIBUTE_SENSITIVE), "destroying the credential locks the item again")

        var copy: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate([]) { p11.C_CopyObject!(session, item, $0, $1, &copy) }, CKR_ACTION_PROHIBITED)
        XCTAssertRV(withTemplate([(UInt(CKA_VALUE), Array("new".utf8))]) { p11.C_SetAttributeValue!(session, item, $0, $1) }, CKR_ATTRIBUTE_READ_ONLY)
        _ = createItem(session, label: "session", extra: [(Self.applicationPassword, Array("pw".utf8))], token: false, expect: CKR_TEMPLATE_INCONSISTENT)
        _ = createItem(session, label: "empty", extra: [(Self.applicationPassword, [])], expect: CKR_ATTRIBUTE_VALUE_INVALID)

        // The seal survives a new process: another C_Initialize, another login.
        XCTAssertRV(p11.C_Finalize!(nil), CKR_OK)
        XCTAssertRV(p11.C_Initialize!(nil), CKR_OK)
        let fresh = openSession(slot, readWrite: true)
        XCTAssertRV(login(fresh), CKR_OK)
        let again = find(fresh, [(UInt(CKA_LABEL), Array("sealed".utf8))])
        XCTAssertEqual(again.count, 1)
        _ = present(fresh, again.first ?? 0, "app-secret")
        XCTAssertEqual(value(fresh, again.first ?? 0).1, Array("the secret of sealed".utf8))
        XCTAssertRV(p11.C_Logout!(fresh), CKR_OK)
        XCTAssertRV(login(fresh), CKR_OK)
        XCTAssertEqual(value(fresh, again.first ?? 0).0, CK_RV(CKR_ATTRIBUTE_SENSITIVE), "a logout ends every credential")
    }

    /// Attack (security issue, item 1): guessing an item's application password is counted like
    /// a PIN, per item: ten wrong entries lock it (the right one then gets CKR_PIN_LOCKED), a right
    /// entry before the limit clears the count, and the SO's C_InitPIN unlocks it.
    func test_application_password_guesses_are_counted_and_lock_the_item() {
        let (slot, session) = loggedInSession()
        let item = createItem(session, label: "guarded", extra: [(Self.applicationPassword, Array("app-secret".utf8))])
        let other = createItem(session, label: "other", extra: [(Self.applicationPassword, Array("other-secret".utf8))])
        for _ in 0..<9 { _ = present(session, item, "guess", expect: CKR_PIN_INCORRECT) }
        let credential = present(session, item, "app-secret")
        XCTAssertRV(p11.C_DestroyObject!(session, credential), CKR_OK)
        for _ in 0..<10 { _ = present(session, item, "guess", expect: CKR_PIN_INCORRECT) }
        _ = present(session, item, "guess", expect: CKR_PIN_LOCKED)
        _ = present(session, item, "app-secret", expect: CKR_PIN_LOCKED)
        XCTAssertEqual(value(session, item).0, CK_RV(CKR_ATTRIBUTE_SENSITIVE))
        _ = present(session, other, "other-secret")
        XCTAssertEqual(value(session, other).1, Array("the secret of other".utf8), "the count is per item")
        XCTAssertEqual(tokenInfo(slot).flags & CK_FLAGS(CKF_USER_PIN_LOCKED), 0, "the user PIN is not charged")

        // The SO unlocks it by re-setting the user PIN.
        XCTAssertRV(p11.C_Logout!(session), CKR_OK)
        XCTAssertRV(login(session, CKU_SO, pin: soPIN), CKR_OK)
        var pin = userPIN
        XCTAssertRV(p11.C_InitPIN!(session, &pin, CK_ULONG(pin.count)), CKR_OK)
        XCTAssertRV(p11.C_Logout!(session), CKR_OK)
        XCTAssertRV(login(session), CKR_OK)
        _ = present(session, item, "app-secret")
        XCTAssertEqual(value(session, item).1, Array("the secret of guarded".utf8))
    }

    func test_user_presence_on_a_password_asks_for_the_user_pin_and_counts_failures() {
        let (slot, session) = loggedInSession()
        let item = createItem(session, label: "presence", extra: [(Self.accessControl, Self.ulong(1))])
        XCTAssertEqual(value(session, item).0, CK_RV(CKR_ATTRIBUTE_SENSITIVE))
        _ = present(session, item, "0000", expect: CKR_PIN_INCORRECT)
        XCTAssertNotEqual(tokenInfo(slot).flags & CK_FLAGS(CKF_USER_PIN_COUNT_LOW), 0, "a wrong PIN here counts like a wrong login")
        _ = present(session, item, String(decoding: userPIN, as: UTF8.self))
        XCTAssertEqual(value(session, item).1, Array("the secret of presence".utf8))
        let plain = createItem(session, label: "plain", extra: [])
        _ = present(session, plain, "anything", expect: CKR_ATTRIBUTE_VALUE_INVALID)
    }

    func test_a_key_with_an_application_password_uses_it_as_the_context_specific_pin() {
        let (slot, session) = loggedInSession()
        let publicTemplate: [(UInt, [UInt8])] = [(UInt(CKA_EC_PARAMS), Self.p256Params), (UInt(CKA_TOKEN), [1]), (UInt(CKA_VERIFY), [1])]
        _ = generate(session, UInt(CKM_EC_KEY_PAIR_GEN), public: publicTemplate,
                     private: [(UInt(CKA_TOKEN), [1]), (UInt(CKA_SIGN), [1]), (Self.applicationPassword, Array("key-pw".utf8))],
                     expect: CKR_TEMPLATE_INCONSISTENT)
        let (publicKey, privateKey) = generate(session, UInt(CKM_EC_KEY_PAIR_GEN), public: publicTemplate,
                                               private: [(UInt(CKA_TOKEN), [1]), (UInt(CKA_SIGN), [1]), (UInt(CKA_ALWAYS_AUTHENTICATE), [1]),
                                                         (Self.applicationPassword, Array("key-pw".utf8))])
        var data = Array("signed with an application password".utf8)
        func signInit() -> CK_RV { mechanism(UInt(CKM_ECDSA_SHA256)) { p11.C_SignInit!(session, $0, privateKey) } }
        func signNow() -> (CK_RV, [UInt8]) {
            var signature = [UInt8](repeating: 0, count: 64)
            var length = CK_ULONG(signature.count)
            let result = p11.C_Sign!(session, &data, CK_ULONG(data.count), &signature, &length)
            return (result, Array(signature.prefix(Int(length))))
        }
        func contextLogin(_ pin: String) -> CK_RV { login(session, UInt(CKU_CONTEXT_SPECIFIC), pin: Array(pin.utf8)) }

        XCTAssertRV(signInit(), CKR_OK)
        XCTAssertRV(signNow().0, CKR_USER_NOT_LOGGED_IN, "the user's own login does not open it")
        XCTAssertRV(signInit(), CKR_OK)
        XCTAssertRV(contextLogin(String(decoding: userPIN, as: UTF8.self)), CKR_PIN_INCORRECT, "the user PIN is not this key's PIN")
        XCTAssertRV(contextLogin("key-pw"), CKR_OK)
        let failuresBefore = tokenInfo(slot).flags & CK_FLAGS(CKF_USER_PIN_COUNT_LOW)
        XCTAssertRV(contextLogin("key-pw"), CKR_OK, "presented again: checked against the key, not counted as a user PIN")
        XCTAssertRV(contextLogin("not-it"), CKR_PIN_INCORRECT)
        XCTAssertEqual(tokenInfo(slot).flags & CK_FLAGS(CKF_USER_PIN_COUNT_LOW), failuresBefore, "a wrong application password is not a wrong user PIN")
        let (result, signature) = signNow()
        XCTAssertRV(result, CKR_OK)
        XCTAssertRV(verify(session, UInt(CKM_ECDSA_SHA256), key: publicKey, data: data, signature: signature), CKR_OK)
        XCTAssertRV(signInit(), CKR_OK)
        XCTAssertRV(signNow().0, CKR_USER_NOT_LOGGED_IN, "every signature asks again")

        var wrapped = [UInt8](repeating: 0, count: 512)
        var wrappedLength = CK_ULONG(wrapped.count)
        var aes: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate([(UInt(CKA_VALUE_LEN), Self.ulong(32)), (UInt(CKA_WRAP), [1])]) { template, count in
            mechanism(UInt(CKM_AES_KEY_GEN)) { p11.C_GenerateKey!(session, $0, template, count, &aes) }
        }, CKR_OK)
        // Not extractable (the default): C_WrapKey names that first, before its application password.
        XCTAssertRV(mechanism(0x210A /* CKM_AES_KEY_WRAP_PAD */) { p11.C_WrapKey!(session, $0, aes, privateKey, &wrapped, &wrappedLength) }, CKR_KEY_UNEXTRACTABLE)
        _ = present(session, privateKey, "key-pw", expect: CKR_ATTRIBUTE_VALUE_INVALID)
        _ = present(session, 0xFFFF, "key-pw", expect: CKR_ATTRIBUTE_VALUE_INVALID)
        var point = value(session, publicKey, UInt(CKA_EC_POINT)).1 ?? []
        var derived: CK_OBJECT_HANDLE = 0
        let deriveResult = point.withUnsafeMutableBufferPointer { buffer -> CK_RV in
            let params = CK_ECDH1_DERIVE_PARAMS(kdf: CK_ULONG(CKD_NULL), ulSharedDataLen: 0, pSharedData: nil,
                                                ulPublicDataLen: CK_ULONG(buffer.count), pPublicData: buffer.baseAddress)
            return withTemplate([(UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_GENERIC_SECRET)))]) { t, c in
                mechanism(UInt(CKM_ECDH1_DERIVE), parameter: params) { p11.C_DeriveKey!(session, $0, privateKey, t, c, &derived) }
            }
        }
        XCTAssertRV(deriveResult, CKR_KEY_FUNCTION_NOT_PERMITTED)
        var presence: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate([(UInt(CKA_CLASS), Self.dataClass), (UInt(CKA_TOKEN), [1]), (UInt(CKA_VALUE), [1]),
                                  (Self.accessControl, Self.ulong(1)), (Self.applicationPassword, Array("pw".utf8))]) {
            p11.C_CreateObject!(session, $0, $1, &presence)
        }, CKR_TEMPLATE_INCONSISTENT, "one per-use secret per item")
    }
}
