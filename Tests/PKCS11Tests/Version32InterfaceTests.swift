import CPKCS11
import XCTest
@testable import PKCS11

/// The PKCS#11 3.2 function list's own functions, called through that list: verification with
/// the signature at init (§5.15), the session's validation flags (§5.6), the argument checks of
/// key encapsulation (§5.18), and the functions not offered.
final class Version32InterfaceTests: ModuleTestCase {
    private let p32 = FunctionLists.version32.pointee
    private static let p256: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
    private let message = Array("to be signed".utf8)

    /// A P-256 key pair on a logged-in session and an ECDSA-SHA256 signature of `message`.
    private func signedMessage() -> (session: CK_SESSION_HANDLE, publicKey: CK_OBJECT_HANDLE, privateKey: CK_OBJECT_HANDLE, signature: [UInt8]) {
        let session = userSession()
        var publicKey: CK_OBJECT_HANDLE = 0, privateKey: CK_OBJECT_HANDLE = 0
        let generated = withTemplate([(UInt(CKA_EC_PARAMS), Self.p256)]) { pt, pc in
            withTemplate([]) { vt, vc in
                mechanism(UInt(CKM_EC_KEY_PAIR_GEN)) { p11.C_GenerateKeyPair!(session, $0, pt, pc, vt, vc, &publicKey, &privateKey) }
            }
        }
        XCTAssertRV(generated, CKR_OK)
        XCTAssertRV(mechanism(UInt(CKM_ECDSA_SHA256)) { p11.C_SignInit!(session, $0, privateKey) }, CKR_OK)
        var data = message, signature = [UInt8](repeating: 0, count: 64), length: CK_ULONG = 64
        XCTAssertRV(p11.C_Sign!(session, &data, CK_ULONG(data.count), &signature, &length), CKR_OK)
        XCTAssertEqual(length, 64)
        return (session, publicKey, privateKey, signature)
    }

    /// `data` with one bit of the byte at `index` (from the end when negative) changed.
    private static func flipped(_ data: [UInt8], at index: Int = -1) -> [UInt8] {
        var copy = data
        copy[index < 0 ? copy.count + index : index] ^= 1
        return copy
    }

    private func verifySignatureInit(_ session: CK_SESSION_HANDLE, _ type: UInt, _ key: CK_OBJECT_HANDLE, _ signature: [UInt8]) -> CK_RV {
        var signature = signature
        return mechanism(type) { p32.C_VerifySignatureInit!(session, $0, key, &signature, CK_ULONG(signature.count)) }
    }

    private func verifySignature(_ session: CK_SESSION_HANDLE, _ data: [UInt8]) -> CK_RV {
        var data = data
        return p32.C_VerifySignature!(session, &data, CK_ULONG(data.count))
    }

    private func verifySignatureUpdate(_ session: CK_SESSION_HANDLE, _ part: [UInt8]) -> CK_RV {
        var part = part
        return p32.C_VerifySignatureUpdate!(session, &part, CK_ULONG(part.count))
    }

    private func verifyInit(_ session: CK_SESSION_HANDLE, _ key: CK_OBJECT_HANDLE) -> CK_RV {
        mechanism(UInt(CKM_ECDSA_SHA256)) { p11.C_VerifyInit!(session, $0, key) }
    }

    private func verify(_ session: CK_SESSION_HANDLE, _ data: [UInt8], _ signature: [UInt8]) -> CK_RV {
        var data = data, signature = signature
        return p11.C_Verify!(session, &data, CK_ULONG(data.count), &signature, CK_ULONG(signature.count))
    }

    // MARK: C_VerifySignature*

    func test_verify_signature_single_part_accepts_the_signature_and_refuses_others() {
        let (session, publicKey, privateKey, signature) = signedMessage()
        let ecdsa = UInt(CKM_ECDSA_SHA256)
        XCTAssertRV(verifySignatureInit(session, ecdsa, publicKey, signature), CKR_OK)
        XCTAssertRV(verifySignature(session, message), CKR_OK)
        XCTAssertRV(verifySignature(session, message), CKR_OPERATION_NOT_INITIALIZED, "C_VerifySignature ends the operation")

        XCTAssertRV(verifySignatureInit(session, ecdsa, publicKey, Self.flipped(signature, at: 10)), CKR_OK)
        XCTAssertRV(verifySignature(session, message), CKR_SIGNATURE_INVALID)
        XCTAssertRV(verifySignature(session, message), CKR_OPERATION_NOT_INITIALIZED, "an invalid signature ends it too")
        XCTAssertRV(verifySignatureInit(session, ecdsa, publicKey, signature), CKR_OK)
        XCTAssertRV(verifySignature(session, Array("other data".utf8)), CKR_SIGNATURE_INVALID)

        // A signature of the wrong length is refused at init, and no operation is left active.
        XCTAssertRV(verifySignatureInit(session, ecdsa, publicKey, Array(signature.prefix(63))), CKR_SIGNATURE_LEN_RANGE)
        XCTAssertRV(verifySignature(session, message), CKR_OPERATION_NOT_INITIALIZED)
        XCTAssertRV(verifySignatureInit(session, ecdsa, publicKey, signature + [0]), CKR_SIGNATURE_LEN_RANGE)
        XCTAssertRV(verifySignatureInit(session, ecdsa, publicKey, []), CKR_SIGNATURE_LEN_RANGE)
        XCTAssertRV(mechanism(ecdsa) { p32.C_VerifySignatureInit!(session, $0, publicKey, nil, 0) }, CKR_SIGNATURE_LEN_RANGE)
        XCTAssertRV(verifyInit(session, publicKey), CKR_OK, "no verification was left active")
        XCTAssertRV(verify(session, message, signature), CKR_OK)

        // Init's own checks are C_VerifyInit's.
        XCTAssertRV(verifySignatureInit(session, ecdsa, privateKey, signature), CKR_KEY_TYPE_INCONSISTENT)
        XCTAssertRV(verifySignatureInit(session, ecdsa, 0xFFFF, signature), CKR_KEY_HANDLE_INVALID)
        XCTAssertRV(verifySignatureInit(session, UInt(CKM_SHA256), publicKey, signature), CKR_MECHANISM_INVALID)
        XCTAssertRV(verifySignatureInit(session, UInt(CKM_SHA256_RSA_PKCS), publicKey, signature), CKR_KEY_TYPE_INCONSISTENT)
        XCTAssertRV(mechanism(ecdsa) { p32.C_VerifySignatureInit!(session, $0, publicKey, nil, 64) }, CKR_ARGUMENTS_BAD)
        XCTAssertRV(verifySignatureInit(0xBAD, ecdsa, publicKey, signature), CKR_SESSION_HANDLE_INVALID)
        XCTAssertRV(verifySignature(0xBAD, message), CKR_SESSION_HANDLE_INVALID)
        XCTAssertRV(p32.C_VerifySignatureFinal!(0xBAD), CKR_SESSION_HANDLE_INVALID)
    }

    func test_verify_signature_multi_part_and_its_operation_states() {
        let (session, publicKey, _, signature) = signedMessage()
        let ecdsa = UInt(CKM_ECDSA_SHA256)
        XCTAssertRV(verifySignatureInit(session, ecdsa, publicKey, signature), CKR_OK)
        XCTAssertRV(verifySignatureUpdate(session, Array(message.prefix(5))), CKR_OK)
        XCTAssertRV(verifySignatureUpdate(session, []), CKR_OK)
        XCTAssertRV(verifySignatureUpdate(session, Array(message.dropFirst(5))), CKR_OK)
        XCTAssertRV(p32.C_VerifySignatureFinal!(session), CKR_OK)
        XCTAssertRV(p32.C_VerifySignatureFinal!(session), CKR_OPERATION_NOT_INITIALIZED, "C_VerifySignatureFinal ends the operation")

        XCTAssertRV(verifySignatureInit(session, ecdsa, publicKey, Self.flipped(signature)), CKR_OK)
        XCTAssertRV(verifySignatureUpdate(session, message), CKR_OK)
        XCTAssertRV(p32.C_VerifySignatureFinal!(session), CKR_SIGNATURE_INVALID)
        XCTAssertRV(verifySignatureUpdate(session, message), CKR_OPERATION_NOT_INITIALIZED)

        XCTAssertRV(verifySignatureInit(session, ecdsa, publicKey, signature), CKR_OK)
        XCTAssertRV(verifySignatureUpdate(session, message), CKR_OK)
        XCTAssertRV(verifySignature(session, message), CKR_OPERATION_ACTIVE, "single-part inside multi-part")
        XCTAssertRV(p32.C_VerifySignatureFinal!(session), CKR_OPERATION_NOT_INITIALIZED, "as C_Verify: that error ended the operation")

        // A bad argument in a data step ends the operation, as in C_VerifyUpdate.
        XCTAssertRV(verifySignatureInit(session, ecdsa, publicKey, signature), CKR_OK)
        XCTAssertRV(p32.C_VerifySignatureUpdate!(session, nil, 4), CKR_ARGUMENTS_BAD)
        XCTAssertRV(p32.C_VerifySignatureFinal!(session), CKR_OPERATION_NOT_INITIALIZED)
        XCTAssertRV(verifySignatureInit(session, ecdsa, publicKey, signature), CKR_OK)
        XCTAssertRV(p32.C_VerifySignature!(session, nil, 4), CKR_ARGUMENTS_BAD)
        XCTAssertRV(verifySignature(session, message), CKR_OPERATION_NOT_INITIALIZED)

        // Without any init.
        XCTAssertRV(verifySignature(session, message), CKR_OPERATION_NOT_INITIALIZED)
        XCTAssertRV(verifySignatureUpdate(session, message), CKR_OPERATION_NOT_INITIALIZED)
        XCTAssertRV(p32.C_VerifySignatureFinal!(session), CKR_OPERATION_NOT_INITIALIZED)
    }

    /// One verification per session, whichever Init began it; the other family's data calls find
    /// no operation of their kind and leave it active.
    func test_verify_signature_and_verify_share_the_verification_operation() {
        let (session, publicKey, privateKey, signature) = signedMessage()
        let ecdsa = UInt(CKM_ECDSA_SHA256)
        XCTAssertRV(verifySignatureInit(session, ecdsa, publicKey, signature), CKR_OK)
        XCTAssertRV(verifySignatureInit(session, ecdsa, publicKey, signature), CKR_OPERATION_ACTIVE)
        XCTAssertRV(verifyInit(session, publicKey), CKR_OPERATION_ACTIVE)
        XCTAssertRV(verify(session, message, signature), CKR_OPERATION_NOT_INITIALIZED, "C_Verify on C_VerifySignatureInit's operation")
        var data = message, copy = signature
        XCTAssertRV(p11.C_VerifyUpdate!(session, &data, CK_ULONG(data.count)), CKR_OPERATION_NOT_INITIALIZED)
        XCTAssertRV(p11.C_VerifyFinal!(session, &copy, CK_ULONG(copy.count)), CKR_OPERATION_NOT_INITIALIZED)
        XCTAssertRV(verifySignature(session, message), CKR_OK, "the operation was left as it was")

        XCTAssertRV(verifyInit(session, publicKey), CKR_OK)
        XCTAssertRV(verifySignatureInit(session, ecdsa, publicKey, signature), CKR_OPERATION_ACTIVE)
        XCTAssertRV(verifySignature(session, message), CKR_OPERATION_NOT_INITIALIZED, "C_VerifySignature on C_VerifyInit's operation")
        XCTAssertRV(verifySignatureUpdate(session, message), CKR_OPERATION_NOT_INITIALIZED)
        XCTAssertRV(p32.C_VerifySignatureFinal!(session), CKR_OPERATION_NOT_INITIALIZED)
        XCTAssertRV(verify(session, message, signature), CKR_OK, "the operation was left as it was")

        // A NULL mechanism to either Init, or C_SessionCancel(CKF_VERIFY), ends either.
        XCTAssertRV(verifySignatureInit(session, ecdsa, publicKey, signature), CKR_OK)
        XCTAssertRV(p11.C_VerifyInit!(session, nil, publicKey), CKR_OK)
        XCTAssertRV(verifySignature(session, message), CKR_OPERATION_NOT_INITIALIZED)
        XCTAssertRV(verifyInit(session, publicKey), CKR_OK)
        XCTAssertRV(p32.C_VerifySignatureInit!(session, nil, publicKey, nil, 0), CKR_OK)
        XCTAssertRV(verify(session, message, signature), CKR_OPERATION_NOT_INITIALIZED)
        XCTAssertRV(verifySignatureInit(session, ecdsa, publicKey, signature), CKR_OK)
        XCTAssertRV(p32.C_SessionCancel!(session, CK_FLAGS(CKF_VERIFY)), CKR_OK)
        XCTAssertRV(verifySignature(session, message), CKR_OPERATION_NOT_INITIALIZED)
        XCTAssertRV(verifySignatureInit(session, ecdsa, publicKey, signature), CKR_OK, "nothing left active")
        XCTAssertRV(verifySignature(session, message), CKR_OK)

        // The sign operation is a separate one.
        XCTAssertRV(verifySignatureInit(session, ecdsa, publicKey, signature), CKR_OK)
        XCTAssertRV(mechanism(ecdsa) { p11.C_SignInit!(session, $0, privateKey) }, CKR_OK)
        XCTAssertRV(verifySignature(session, message), CKR_OK)
    }

    /// MACs verify the same way (RFC 4231 test case 2, HMAC-SHA256).
    func test_verify_signature_checks_a_mac() {
        let session = userSession()
        let jefe = secretKey(session, type: UInt(CKK_GENERIC_SECRET), value: Array("Jefe".utf8))
        let data = Array("what do ya want for nothing?".utf8)
        let mac = hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        XCTAssertRV(verifySignatureInit(session, UInt(CKM_SHA256_HMAC), jefe, mac), CKR_OK)
        XCTAssertRV(verifySignature(session, data), CKR_OK)
        XCTAssertRV(verifySignatureInit(session, UInt(CKM_SHA256_HMAC), jefe, mac), CKR_OK)
        XCTAssertRV(verifySignatureUpdate(session, Array(data.prefix(9))), CKR_OK)
        XCTAssertRV(verifySignatureUpdate(session, Array(data.dropFirst(9))), CKR_OK)
        XCTAssertRV(p32.C_VerifySignatureFinal!(session), CKR_OK)
        XCTAssertRV(verifySignatureInit(session, UInt(CKM_SHA256_HMAC), jefe, Self.flipped(mac, at: 0)), CKR_OK)
        XCTAssertRV(verifySignature(session, data), CKR_SIGNATURE_INVALID)
        XCTAssertRV(verifySignatureInit(session, UInt(CKM_SHA256_HMAC), jefe, Array(mac.prefix(16))), CKR_SIGNATURE_LEN_RANGE)
    }

    // MARK: C_GetSessionValidationFlags

    func test_session_validation_flags_report_no_validation() {
        let session = userSession()
        var flags: CK_FLAGS = 0xFF
        XCTAssertRV(p32.C_GetSessionValidationFlags!(session, CK_SESSION_VALIDATION_FLAGS_TYPE(CKS_LAST_VALIDATION_OK), &flags), CKR_OK)
        XCTAssertEqual(flags, 0, "the module has no validation: no operation met one")
        flags = 0xFF
        XCTAssertRV(p32.C_GetSessionValidationFlags!(session, 0, &flags), CKR_OK, "an undefined type: no flags, as Kryoptic")
        XCTAssertEqual(flags, 0)
        XCTAssertRV(p32.C_GetSessionValidationFlags!(session, CK_SESSION_VALIDATION_FLAGS_TYPE(CKS_LAST_VALIDATION_OK), nil), CKR_ARGUMENTS_BAD)
        XCTAssertRV(p32.C_GetSessionValidationFlags!(0xBAD, CK_SESSION_VALIDATION_FLAGS_TYPE(CKS_LAST_VALIDATION_OK), &flags), CKR_SESSION_HANDLE_INVALID)
        XCTAssertRV(p11.C_Finalize!(nil), CKR_OK)
        XCTAssertRV(p32.C_GetSessionValidationFlags!(session, CK_SESSION_VALIDATION_FLAGS_TYPE(CKS_LAST_VALIDATION_OK), &flags), CKR_CRYPTOKI_NOT_INITIALIZED)
    }

    // MARK: C_EncapsulateKey / C_DecapsulateKey: the boundary's argument checks

    func test_encapsulation_refuses_missing_outputs_before_doing_anything() {
        let session = userSession()
        var length: CK_ULONG = 0
        var ciphertext = [UInt8](repeating: 0, count: 8)
        XCTAssertRV(mechanism(UInt(CKM_ML_KEM)) { p32.C_EncapsulateKey!(session, $0, 0xFFFF, nil, 0, nil, &length, nil) }, CKR_ARGUMENTS_BAD, "NULL phKey")
        XCTAssertRV(mechanism(UInt(CKM_ML_KEM)) { p32.C_DecapsulateKey!(session, $0, 0xFFFF, nil, 0, &ciphertext, 8, nil) }, CKR_ARGUMENTS_BAD, "NULL phKey")
        var key: CK_OBJECT_HANDLE = 0x77
        XCTAssertRV(mechanism(UInt(CKM_ML_KEM)) { p32.C_EncapsulateKey!(session, $0, 0xFFFF, nil, 0, nil, nil, &key) }, CKR_ARGUMENTS_BAD, "NULL pulCiphertextLen")
        XCTAssertRV(p32.C_EncapsulateKey!(session, nil, 0xFFFF, nil, 0, nil, &length, &key), CKR_ARGUMENTS_BAD, "NULL mechanism")
        XCTAssertRV(mechanism(UInt(CKM_ML_KEM)) { p32.C_DecapsulateKey!(session, $0, 0xFFFF, nil, 0, nil, 8, &key) }, CKR_ARGUMENTS_BAD, "NULL ciphertext")
        XCTAssertRV(mechanism(UInt(CKM_ML_KEM)) { p32.C_DecapsulateKey!(session, $0, 0xFFFF, nil, 1, &ciphertext, 8, &key) }, CKR_ARGUMENTS_BAD, "NULL template")
        XCTAssertEqual(key, 0x77, "no handle written")
        XCTAssertRV(mechanism(UInt(CKM_ML_KEM)) { p32.C_EncapsulateKey!(0xBAD, $0, 0xFFFF, nil, 0, nil, &length, &key) }, CKR_SESSION_HANDLE_INVALID)
        XCTAssertRV(mechanism(UInt(CKM_ML_KEM)) { p32.C_DecapsulateKey!(0xBAD, $0, 0xFFFF, nil, 0, &ciphertext, 8, &key) }, CKR_SESSION_HANDLE_INVALID)
    }

    // MARK: the functions not offered

    func test_asynchronous_and_authenticated_wrap_functions_are_not_supported() {
        let session = userSession()
        var name = Array("C_Sign".utf8) + [0]
        var result = CK_ASYNC_DATA()
        var id: CK_ULONG = 0
        var bytes = [UInt8](repeating: 0, count: 16), associated = [UInt8](repeating: 0, count: 4)
        var length = CK_ULONG(bytes.count)
        var handle: CK_OBJECT_HANDLE = 0
        func calls(_ session: CK_SESSION_HANDLE) -> [CK_RV] {
            [p32.C_AsyncComplete!(session, &name, &result),
             p32.C_AsyncGetID!(session, &name, &id),
             p32.C_AsyncJoin!(session, &name, 1, &bytes, CK_ULONG(bytes.count)),
             mechanism(UInt(CKM_AES_KEY_WRAP)) { p32.C_WrapKeyAuthenticated!(session, $0, 1, 2, &associated, 4, &bytes, &length) },
             mechanism(UInt(CKM_AES_KEY_WRAP)) { p32.C_UnwrapKeyAuthenticated!(session, $0, 1, &bytes, 16, nil, 0, &associated, 4, &handle) }]
        }
        XCTAssertEqual(calls(session).map(rv), Array(repeating: rv(CK_RV(CKR_FUNCTION_NOT_SUPPORTED)), count: 5))
        XCTAssertEqual(calls(0xBAD).map(rv), Array(repeating: rv(CK_RV(CKR_SESSION_HANDLE_INVALID)), count: 5))
        XCTAssertRV(p11.C_Finalize!(nil), CKR_OK)
        XCTAssertEqual(calls(session).map(rv), Array(repeating: rv(CK_RV(CKR_CRYPTOKI_NOT_INITIALIZED)), count: 5))
    }
}
