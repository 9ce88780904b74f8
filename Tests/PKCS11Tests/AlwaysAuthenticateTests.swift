import CPKCS11
import XCTest
@testable import PKCS11

/// CKA_ALWAYS_AUTHENTICATE keys: every sign or decrypt operation waits for
/// C_Login(CKU_CONTEXT_SPECIFIC) with the user PIN, once per operation.
extension MechanismTests {
    private var yes: [UInt8] { [1] }
    private var p256: [UInt8] { [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07] }

    private func ecPair(_ session: CK_SESSION_HANDLE, alwaysAuthenticate: Bool, expect: UInt = CKR_OK) -> (CK_OBJECT_HANDLE, CK_OBJECT_HANDLE) {
        generate(session, UInt(CKM_EC_KEY_PAIR_GEN),
                 public: [(UInt(CKA_EC_PARAMS), p256), (UInt(CKA_TOKEN), yes), (UInt(CKA_VERIFY), yes)],
                 private: [(UInt(CKA_TOKEN), yes), (UInt(CKA_PRIVATE), yes), (UInt(CKA_SIGN), yes), (UInt(CKA_DERIVE), yes),
                           (UInt(CKA_ALWAYS_AUTHENTICATE), [alwaysAuthenticate ? 1 : 0])], expect: expect)
    }

    private func signInit(_ session: CK_SESSION_HANDLE, _ key: CK_OBJECT_HANDLE) -> CK_RV {
        mechanism(UInt(CKM_ECDSA_SHA256)) { p11.C_SignInit!(session, $0, key) }
    }

    private func signOnce(_ session: CK_SESSION_HANDLE, data: [UInt8]) -> (CK_RV, [UInt8]) {
        var data = data, signature = [UInt8](repeating: 0, count: 64), length = CK_ULONG(64)
        let result = p11.C_Sign!(session, &data, CK_ULONG(data.count), &signature, &length)
        return (result, Array(signature.prefix(Int(length))))
    }

    func test_always_authenticate_key_signs_only_after_a_context_login_each_time() {
        let (slot, session) = loggedInSession()
        let (publicKey, privateKey) = ecPair(session, alwaysAuthenticate: true)
        XCTAssertEqual(value(session, privateKey, UInt(CKA_ALWAYS_AUTHENTICATE)).1, [1])
        let data = Array("sign me".utf8)

        // No operation waits yet.
        XCTAssertRV(login(session, UInt(CKU_CONTEXT_SPECIFIC)), CKR_OPERATION_NOT_INITIALIZED)
        // Making the key spent the credit of this session's C_Login(CKU_USER): the sign needs the
        // context login (a conformance suite signs right after generating such a key).
        XCTAssertRV(signInit(session, privateKey), CKR_OK)
        XCTAssertRV(signOnce(session, data: data).0, CKR_USER_NOT_LOGGED_IN)
        // The first sign operation after C_Login(CKU_USER), with only searching in between, counts
        // as authenticated by it (OpenSSH signs so); the credit is spent whatever that operation's key.
        XCTAssertRV(p11.C_Logout!(session), CKR_OK)
        XCTAssertRV(login(session), CKR_OK)
        XCTAssertEqual(find(session, [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_PRIVATE_KEY)))]).count, 1)
        XCTAssertRV(signInit(session, privateKey), CKR_OK)
        XCTAssertRV(signOnce(session, data: data).0, CKR_OK)
        // Without the context login the step is refused and the operation ends.
        XCTAssertRV(signInit(session, privateKey), CKR_OK)
        XCTAssertRV(signOnce(session, data: data).0, CKR_USER_NOT_LOGGED_IN)
        XCTAssertRV(signOnce(session, data: data).0, CKR_OPERATION_NOT_INITIALIZED)

        // A wrong PIN counts like a failed login and leaves the operation waiting.
        XCTAssertRV(signInit(session, privateKey), CKR_OK)
        XCTAssertRV(login(session, UInt(CKU_CONTEXT_SPECIFIC), pin: Array("9999".utf8)), CKR_PIN_INCORRECT)
        XCTAssertEqual(tokenInfo(slot).flags & CK_FLAGS(CKF_USER_PIN_COUNT_LOW), CK_FLAGS(CKF_USER_PIN_COUNT_LOW))
        XCTAssertRV(login(session, UInt(CKU_CONTEXT_SPECIFIC)), CKR_OK)
        XCTAssertEqual(tokenInfo(slot).flags & CK_FLAGS(CKF_USER_PIN_COUNT_LOW), 0, "a right PIN resets the count")
        let (result, signature) = signOnce(session, data: data)
        XCTAssertRV(result, CKR_OK)
        XCTAssertRV(verify(session, UInt(CKM_ECDSA_SHA256), key: publicKey, data: data, signature: signature), CKR_OK)

        // The login served that operation only.
        XCTAssertRV(signInit(session, privateKey), CKR_OK)
        XCTAssertRV(signOnce(session, data: data).0, CKR_USER_NOT_LOGGED_IN)

        // Multi-part: the login comes between C_SignInit and the first C_SignUpdate.
        var part = data
        XCTAssertRV(signInit(session, privateKey), CKR_OK)
        XCTAssertRV(login(session, UInt(CKU_CONTEXT_SPECIFIC)), CKR_OK)
        XCTAssertRV(login(session, UInt(CKU_CONTEXT_SPECIFIC)), CKR_OK, "presenting the PIN again is accepted")
        XCTAssertRV(p11.C_SignUpdate!(session, &part, CK_ULONG(part.count)), CKR_OK)
        var multi = [UInt8](repeating: 0, count: 64), length = CK_ULONG(64)
        XCTAssertRV(p11.C_SignFinal!(session, &multi, &length), CKR_OK)
        XCTAssertRV(verify(session, UInt(CKM_ECDSA_SHA256), key: publicKey, data: data, signature: Array(multi.prefix(Int(length)))), CKR_OK)

        // A key without the attribute signs as before; a context login has nothing to release.
        let (_, plainKey) = ecPair(session, alwaysAuthenticate: false)
        XCTAssertRV(signInit(session, plainKey), CKR_OK)
        XCTAssertRV(login(session, UInt(CKU_CONTEXT_SPECIFIC)), CKR_OPERATION_NOT_INITIALIZED)
        XCTAssertRV(signOnce(session, data: data).0, CKR_OK)

        // After C_Logout the private key is out of reach altogether.
        XCTAssertRV(signInit(session, privateKey), CKR_OK)
        XCTAssertRV(p11.C_Logout!(session), CKR_OK)
        XCTAssertRV(login(session, UInt(CKU_CONTEXT_SPECIFIC)), CKR_USER_NOT_LOGGED_IN)
        XCTAssertRV(p11.C_SignFinal!(session, &multi, &length), CKR_USER_NOT_LOGGED_IN)

        // A login in another session gives this one no credit.
        let other = openSession(slot, readWrite: false)
        XCTAssertRV(login(other), CKR_OK)
        XCTAssertRV(signInit(session, privateKey), CKR_OK)
        XCTAssertRV(signOnce(session, data: data).0, CKR_USER_NOT_LOGGED_IN)
        XCTAssertRV(signInit(other, privateKey), CKR_OK)
        XCTAssertRV(signOnce(other, data: data).0, CKR_OK)
    }

    func test_always_authenticate_decrypt_and_the_single_call_functions() {
        let (_, session) = loggedInSession()
        let (publicKey, privateKey) = generate(session, UInt(CKM_RSA_PKCS_KEY_PAIR_GEN),
                                               public: [(UInt(CKA_MODULUS_BITS), Self.ulong(2048)), (UInt(CKA_ENCRYPT), yes)],
                                               private: [(UInt(CKA_DECRYPT), yes), (UInt(CKA_ALWAYS_AUTHENTICATE), yes)])
        var plain = Array("secret".utf8), cipher = [UInt8](repeating: 0, count: 256), cipherLength = CK_ULONG(256)
        XCTAssertRV(mechanism(UInt(CKM_RSA_PKCS)) { p11.C_EncryptInit!(session, $0, publicKey) }, CKR_OK, "encryption uses the public key: no PIN")
        XCTAssertRV(p11.C_Encrypt!(session, &plain, CK_ULONG(plain.count), &cipher, &cipherLength), CKR_OK)
        var output = [UInt8](repeating: 0, count: 256), outputLength = CK_ULONG(256)
        XCTAssertRV(p11.C_Logout!(session), CKR_OK)
        XCTAssertRV(login(session), CKR_OK)
        XCTAssertRV(mechanism(UInt(CKM_RSA_PKCS)) { p11.C_DecryptInit!(session, $0, privateKey) }, CKR_OK, "spends the login's credit")
        XCTAssertRV(p11.C_Decrypt!(session, &cipher, cipherLength, &output, &outputLength), CKR_OK)
        outputLength = 256
        XCTAssertRV(mechanism(UInt(CKM_RSA_PKCS)) { p11.C_DecryptInit!(session, $0, privateKey) }, CKR_OK)
        XCTAssertRV(p11.C_Decrypt!(session, &cipher, cipherLength, &output, &outputLength), CKR_USER_NOT_LOGGED_IN)
        XCTAssertRV(mechanism(UInt(CKM_RSA_PKCS)) { p11.C_DecryptInit!(session, $0, privateKey) }, CKR_OK)
        XCTAssertRV(login(session, UInt(CKU_CONTEXT_SPECIFIC)), CKR_OK)
        outputLength = 256
        XCTAssertRV(p11.C_Decrypt!(session, &cipher, cipherLength, &output, &outputLength), CKR_OK)
        XCTAssertEqual(Array(output.prefix(Int(outputLength))), plain)

        // ECDH has no moment for the per-use PIN.
        let (_, mine) = ecPair(session, alwaysAuthenticate: true)
        let (theirs, _) = ecPair(session, alwaysAuthenticate: false)
        XCTAssertRV(agreedSecret(session, mine: mine, theirs: theirs, kdf: UInt(CKD_NULL), length: 32).0, CKR_KEY_FUNCTION_NOT_PERMITTED)

        // A key that needs no login cannot ask for the PIN at every use.
        _ = generate(session, UInt(CKM_EC_KEY_PAIR_GEN), public: [(UInt(CKA_EC_PARAMS), p256)],
                     private: [(UInt(CKA_PRIVATE), [0]), (UInt(CKA_SIGN), yes), (UInt(CKA_ALWAYS_AUTHENTICATE), yes)], expect: CKR_TEMPLATE_INCONSISTENT)
    }
}
