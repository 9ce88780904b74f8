import CPKCS11
import Glibc
import XCTest
@testable import PKCS11

/// Attacks of the Clulow / Tookan family (security issue, items 6 and 7), each performed through
/// the C API by a logged-in user who wants the value of a sensitive, extractable key, and shown
/// refused with its exact CK_RV.
extension MechanismTests {
    private static let aesClass = [(UInt(CKA_CLASS), ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), ulong(UInt(CKK_AES)))]

    private func createKey(_ session: CK_SESSION_HANDLE, _ attributes: [(UInt, [UInt8])], expect: UInt = CKR_OK, _ message: String = "") -> CK_OBJECT_HANDLE {
        var handle: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate(Self.aesClass + attributes) { p11.C_CreateObject!(session, $0, $1, &handle) }, expect, message)
        return handle
    }

    private func flag(_ session: CK_SESSION_HANDLE, _ key: CK_OBJECT_HANDLE, _ type: UInt) -> Bool? {
        value(session, key, type).1.map { $0 == [1] }
    }

    private func wrap(_ session: CK_SESSION_HANDLE, _ type: UInt, with wrappingKey: CK_OBJECT_HANDLE, _ key: CK_OBJECT_HANDLE) -> (CK_RV, [UInt8]) {
        var length: CK_ULONG = 512
        var out = [UInt8](repeating: 0, count: 512)
        let result = oaepOrPlain(type) { p11.C_WrapKey!(session, $0, wrappingKey, key, &out, &length) }
        return (result, Array(out.prefix(Int(length))))
    }

    private func unwrap(_ session: CK_SESSION_HANDLE, _ type: UInt, with key: CK_OBJECT_HANDLE, _ blob: [UInt8], _ attributes: [(UInt, [UInt8])]) -> (CK_RV, CK_OBJECT_HANDLE) {
        var blob = blob
        var handle: CK_OBJECT_HANDLE = 0
        let result = withTemplate(Self.aesClass + attributes) { t, c in
            oaepOrPlain(type) { p11.C_UnwrapKey!(session, $0, key, &blob, CK_ULONG(blob.count), t, c, &handle) }
        }
        return (result, handle)
    }

    private func oaepOrPlain(_ type: UInt, _ body: (UnsafeMutablePointer<CK_MECHANISM>) -> CK_RV) -> CK_RV {
        guard type == UInt(CKM_RSA_PKCS_OAEP) else { return mechanism(type, body) }
        let params = CK_RSA_PKCS_OAEP_PARAMS(hashAlg: CK_MECHANISM_TYPE(CKM_SHA256), mgf: CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA256),
                                             source: CK_RSA_PKCS_OAEP_SOURCE_TYPE(CKZ_DATA_SPECIFIED), pSourceData: nil, ulSourceDataLen: 0)
        return mechanism(type, parameter: params, body)
    }

    private func ecbDecrypt(_ session: CK_SESSION_HANDLE, _ key: CK_OBJECT_HANDLE, _ data: [UInt8]) -> CK_RV {
        var data = data
        let initResult = mechanism(UInt(CKM_AES_ECB)) { p11.C_DecryptInit!(session, $0, key) }
        guard initResult == CK_RV(CKR_OK) else { return initResult }
        var out = [UInt8](repeating: 0, count: data.count)
        var length = CK_ULONG(out.count)
        return p11.C_Decrypt!(session, &data, CK_ULONG(data.count), &out, &length)
    }

    func test_a_key_gets_transport_or_data_roles_by_default_not_both() {
        let (_, session) = loggedInSession()
        var key: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate([(UInt(CKA_VALUE_LEN), Self.ulong(16))]) { t, c in mechanism(UInt(CKM_AES_KEY_GEN)) { p11.C_GenerateKey!(session, $0, t, c, &key) } }, CKR_OK)
        XCTAssertEqual([CKA_ENCRYPT, CKA_DECRYPT, CKA_WRAP, CKA_UNWRAP].map { flag(session, key, $0) }, [true, true, false, false], "a generated AES key: data roles")
        let transport = createKey(session, [(UInt(CKA_VALUE), [UInt8](repeating: 3, count: 16)), (UInt(CKA_UNWRAP), [1])])
        XCTAssertEqual([CKA_ENCRYPT, CKA_DECRYPT, CKA_WRAP, CKA_UNWRAP].map { flag(session, transport, $0) }, [false, false, true, true], "asked to unwrap: transport roles")
        let both = createKey(session, [(UInt(CKA_VALUE), [UInt8](repeating: 4, count: 16)), (UInt(CKA_WRAP), [1]), (UInt(CKA_DECRYPT), [1])])
        XCTAssertEqual([CKA_ENCRYPT, CKA_DECRYPT, CKA_WRAP, CKA_UNWRAP].map { flag(session, both, $0) }, [false, true, true, true], "explicit roles are kept")
        let (publicKey, privateKey) = generate(session, UInt(CKM_RSA_PKCS_KEY_PAIR_GEN), public: [(UInt(CKA_MODULUS_BITS), Self.ulong(2048))])
        XCTAssertEqual([CKA_ENCRYPT, CKA_WRAP].map { flag(session, publicKey, $0) }, [true, false], "RSA public key")
        XCTAssertEqual([CKA_DECRYPT, CKA_UNWRAP].map { flag(session, privateKey, $0) }, [true, false], "RSA private key")
    }

    /// Attack: wrap the sensitive key under a key the attacker knows (imported AES key, imported
    /// RSA public key), or under a key that can also decrypt, then read the blob.
    func test_a_sensitive_key_is_not_wrapped_under_an_untrusted_key() {
        let (_, session) = loggedInSession()
        let secret = createKey(session, [(UInt(CKA_VALUE), [UInt8](repeating: 7, count: 32)), (UInt(CKA_EXTRACTABLE), [1]), (UInt(CKA_TOKEN), [1])])
        XCTAssertEqual(flag(session, secret, CKA_SENSITIVE), true)
        let known = createKey(session, [(UInt(CKA_VALUE), [UInt8](repeating: 9, count: 16)), (UInt(CKA_WRAP), [1]), (UInt(CKA_DECRYPT), [1])])
        XCTAssertRV(wrap(session, UInt(CKM_AES_KEY_WRAP), with: known, secret).0, CKR_KEY_NOT_WRAPPABLE)
        XCTAssertRV(wrap(session, UInt(CKM_AES_KEY_WRAP_PAD), with: known, secret).0, CKR_KEY_NOT_WRAPPABLE)
        let (rsaPublic, _) = generate(session, UInt(CKM_RSA_PKCS_KEY_PAIR_GEN), public: [(UInt(CKA_MODULUS_BITS), Self.ulong(2048)), (UInt(CKA_WRAP), [1])],
                                      private: [(UInt(CKA_UNWRAP), [1])])
        XCTAssertRV(wrap(session, UInt(CKM_RSA_PKCS_OAEP), with: rsaPublic, secret).0, CKR_KEY_NOT_WRAPPABLE)
        XCTAssertRV(wrap(session, UInt(CKM_RSA_PKCS), with: rsaPublic, secret).0, CKR_KEY_NOT_WRAPPABLE)
        // The user cannot make a key trusted.
        XCTAssertRV(withTemplate([(UInt(CKA_TRUSTED), [1])]) { p11.C_SetAttributeValue!(session, known, $0, $1) }, CKR_ATTRIBUTE_READ_ONLY)
        _ = createKey(session, [(UInt(CKA_VALUE), [UInt8](repeating: 9, count: 16)), (UInt(CKA_TRUSTED), [1])], expect: CKR_ATTRIBUTE_READ_ONLY)
        // A key that is not sensitive still wraps under any wrapping key (python-pkcs11's wrap tests).
        let open = createKey(session, [(UInt(CKA_VALUE), [UInt8](repeating: 5, count: 16)), (UInt(CKA_EXTRACTABLE), [1]), (UInt(CKA_SENSITIVE), [0])])
        let (result, blob) = wrap(session, UInt(CKM_AES_KEY_WRAP), with: known, open)
        XCTAssertRV(result, CKR_OK)
        XCTAssertEqual(blob.count, 24)
    }

    /// Attacks with a trusted wrapping key the SO made: decrypt the blob with it (it may not
    /// decrypt, and cannot be given CKA_DECRYPT later, in place or on a copy), or unwrap the blob
    /// as a non-sensitive key.
    func test_a_trusted_wrapping_key_neither_decrypts_nor_unwraps_a_sensitive_key_into_the_open() {
        let slot = makeToken()
        let so = openSession(slot, readWrite: true)
        XCTAssertRV(login(so, CKU_SO, pin: soPIN), CKR_OK)
        let kekValue = [UInt8](repeating: 0x42, count: 32)
        let trustedTemplate: [(UInt, [UInt8])] = [(UInt(CKA_VALUE), kekValue), (UInt(CKA_TOKEN), [1]), (UInt(CKA_PRIVATE), [0]), (UInt(CKA_TRUSTED), [1]),
                                                  (UInt(CKA_LABEL), Array("kek".utf8))]
        _ = createKey(so, trustedTemplate + [(UInt(CKA_DECRYPT), [1])], expect: CKR_TEMPLATE_INCONSISTENT, "a trusted key that decrypts")
        let kek = createKey(so, trustedTemplate, "the SO makes a trusted key")
        XCTAssertEqual([CKA_ENCRYPT, CKA_DECRYPT, CKA_WRAP, CKA_UNWRAP, CKA_TRUSTED].map { flag(so, kek, $0) }, [false, false, true, true, true])
        XCTAssertRV(p11.C_Logout!(so), CKR_OK)

        let session = openSession(slot, readWrite: true)
        XCTAssertRV(login(session), CKR_OK)
        let secretValue = [UInt8](repeating: 0x17, count: 32)
        let secret = createKey(session, [(UInt(CKA_VALUE), secretValue), (UInt(CKA_EXTRACTABLE), [1])])
        let (wrapped, blob) = wrap(session, UInt(CKM_AES_KEY_WRAP), with: kek, secret)
        XCTAssertRV(wrapped, CKR_OK, "a trusted key wraps a sensitive key")
        XCTAssertEqual(blob.count, 40)

        // Decrypt the blob with the wrapping key: it has no CKA_DECRYPT, and cannot get it.
        XCTAssertRV(ecbDecrypt(session, kek, blob), CKR_KEY_FUNCTION_NOT_PERMITTED)
        XCTAssertRV(withTemplate([(UInt(CKA_DECRYPT), [1])]) { p11.C_SetAttributeValue!(session, kek, $0, $1) }, CKR_TEMPLATE_INCONSISTENT)
        var copy: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate([(UInt(CKA_DECRYPT), [1])]) { p11.C_CopyObject!(session, kek, $0, $1, &copy) }, CKR_TEMPLATE_INCONSISTENT)
        XCTAssertRV(withTemplate([(UInt(CKA_ENCRYPT), [1])]) { p11.C_CopyObject!(session, kek, $0, $1, &copy) }, CKR_TEMPLATE_INCONSISTENT)
        XCTAssertEqual(flag(session, kek, CKA_DECRYPT), false)

        // Unwrap it as a non-sensitive key: refused; unwrapped without saying, it is sensitive.
        XCTAssertRV(unwrap(session, UInt(CKM_AES_KEY_WRAP), with: kek, blob, [(UInt(CKA_SENSITIVE), [0]), (UInt(CKA_EXTRACTABLE), [1])]).0, CKR_TEMPLATE_INCONSISTENT)
        let (result, unwrapped) = unwrap(session, UInt(CKM_AES_KEY_WRAP), with: kek, blob, [(UInt(CKA_EXTRACTABLE), [1])])
        XCTAssertRV(result, CKR_OK)
        XCTAssertEqual(flag(session, unwrapped, CKA_SENSITIVE), true)
        XCTAssertRV(value(session, unwrapped).0, CKR_ATTRIBUTE_SENSITIVE)
        // Nor can the unwrapped copy be turned non-sensitive afterwards.
        XCTAssertRV(withTemplate([(UInt(CKA_SENSITIVE), [0])]) { p11.C_SetAttributeValue!(session, unwrapped, $0, $1) }, CKR_ATTRIBUTE_READ_ONLY)
        XCTAssertRV(withTemplate([(UInt(CKA_SENSITIVE), [0])]) { p11.C_CopyObject!(session, unwrapped, $0, $1, &copy) }, CKR_ATTRIBUTE_READ_ONLY)
    }

    /// The same through RSA: a trusted RSA public key wraps a sensitive key; its private half
    /// (found by modulus) unwraps it only as a sensitive key.
    func test_a_private_key_whose_public_half_is_trusted_unwraps_only_sensitive_keys() {
        let (slot, session) = loggedInSession()
        let (rsaPublic, rsaPrivate) = generate(session, UInt(CKM_RSA_PKCS_KEY_PAIR_GEN),
                                               public: [(UInt(CKA_MODULUS_BITS), Self.ulong(2048)), (UInt(CKA_WRAP), [1]), (UInt(CKA_TOKEN), [1])],
                                               private: [(UInt(CKA_UNWRAP), [1]), (UInt(CKA_TOKEN), [1])])
        let secret = createKey(session, [(UInt(CKA_VALUE), [UInt8](repeating: 0x21, count: 16)), (UInt(CKA_EXTRACTABLE), [1])])
        XCTAssertRV(wrap(session, UInt(CKM_RSA_PKCS_OAEP), with: rsaPublic, secret).0, CKR_KEY_NOT_WRAPPABLE, "not trusted yet")
        XCTAssertRV(p11.C_Logout!(session), CKR_OK)
        XCTAssertRV(login(session, CKU_SO, pin: soPIN), CKR_OK)
        XCTAssertRV(withTemplate([(UInt(CKA_TRUSTED), [1])]) { p11.C_SetAttributeValue!(session, rsaPublic, $0, $1) }, CKR_OK)
        XCTAssertRV(p11.C_Logout!(session), CKR_OK)
        XCTAssertRV(login(session), CKR_OK)
        let again = createKey(session, [(UInt(CKA_VALUE), [UInt8](repeating: 0x22, count: 16)), (UInt(CKA_EXTRACTABLE), [1])])
        let (wrapped, blob) = wrap(session, UInt(CKM_RSA_PKCS_OAEP), with: rsaPublic, again)
        XCTAssertRV(wrapped, CKR_OK)
        XCTAssertRV(unwrap(session, UInt(CKM_RSA_PKCS_OAEP), with: rsaPrivate, blob, [(UInt(CKA_SENSITIVE), [0])]).0, CKR_TEMPLATE_INCONSISTENT)
        let (result, unwrapped) = unwrap(session, UInt(CKM_RSA_PKCS_OAEP), with: rsaPrivate, blob, [])
        XCTAssertRV(result, CKR_OK)
        XCTAssertRV(value(session, unwrapped).0, CKR_ATTRIBUTE_SENSITIVE)
        _ = slot
    }

    /// `sensitive_wrapping = any` is the documented way back to SoftHSM's behaviour.
    func test_sensitive_wrapping_any_lets_any_wrapping_key_wrap_a_sensitive_key() {
        XCTAssertRV(p11.C_Finalize!(nil), CKR_OK)
        setenv("KEYCHAIN_PKCS11_SENSITIVE_WRAPPING", "any", 1)
        defer { unsetenv("KEYCHAIN_PKCS11_SENSITIVE_WRAPPING") }
        XCTAssertRV(p11.C_Initialize!(nil), CKR_OK)
        let (_, session) = loggedInSession()
        let secret = createKey(session, [(UInt(CKA_VALUE), [UInt8](repeating: 7, count: 32)), (UInt(CKA_EXTRACTABLE), [1])])
        let kek = createKey(session, [(UInt(CKA_VALUE), [UInt8](repeating: 9, count: 16)), (UInt(CKA_WRAP), [1]), (UInt(CKA_UNWRAP), [1])])
        let (result, blob) = wrap(session, UInt(CKM_AES_KEY_WRAP), with: kek, secret)
        XCTAssertRV(result, CKR_OK)
        XCTAssertEqual(blob.count, 40)
        let (unwrapped, key) = unwrap(session, UInt(CKM_AES_KEY_WRAP), with: kek, blob, [])
        XCTAssertRV(unwrapped, CKR_OK)
        XCTAssertEqual(flag(session, key, CKA_SENSITIVE), true, "sensitive by default")
    }
}
