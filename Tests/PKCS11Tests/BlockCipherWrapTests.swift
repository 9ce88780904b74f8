import CPKCS11
import XCTest
@testable import PKCS11

/// C_WrapKey and C_UnwrapKey with the block-cipher modes PKCS#11's mechanism table lets wrap
/// (CKM_AES_ECB, CKM_AES_CBC, CKM_AES_CBC_PAD and the DES3 ones), with published vectors, and
/// the return codes C_WrapKey fixes for keys that may not leave.
final class BlockCipherWrapTests: ModuleTestCase {
    private let wrapRoles: [(UInt, [UInt8])] = [(UInt(CKA_WRAP), [1]), (UInt(CKA_UNWRAP), [1])]
    private let readable: [(UInt, [UInt8])] = [(UInt(CKA_EXTRACTABLE), [1]), (UInt(CKA_SENSITIVE), [0])]

    private func withMechanism(_ type: UInt, iv: [UInt8], _ body: (UnsafeMutablePointer<CK_MECHANISM>) -> CK_RV) -> CK_RV {
        guard !iv.isEmpty else { return mechanism(type, body) }
        var iv = iv
        return iv.withUnsafeMutableBytes { buffer in
            var mechanism = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(type), pParameter: buffer.baseAddress, ulParameterLen: CK_ULONG(buffer.count))
            return body(&mechanism)
        }
    }

    /// C_WrapKey with a length query first.
    private func wrap(_ session: CK_SESSION_HANDLE, _ type: UInt, iv: [UInt8] = [], with wrappingKey: CK_OBJECT_HANDLE, _ key: CK_OBJECT_HANDLE) -> (CK_RV, [UInt8]) {
        var length: CK_ULONG = 0
        let query = withMechanism(type, iv: iv) { p11.C_WrapKey!(session, $0, wrappingKey, key, nil, &length) }
        guard query == CK_RV(CKR_OK) else { return (query, []) }
        var out = [UInt8](repeating: 0, count: Int(length))
        let result = withMechanism(type, iv: iv) { p11.C_WrapKey!(session, $0, wrappingKey, key, &out, &length) }
        return (result, Array(out.prefix(Int(length))))
    }

    private func unwrap(_ session: CK_SESSION_HANDLE, _ type: UInt, iv: [UInt8] = [], with key: CK_OBJECT_HANDLE, _ blob: [UInt8],
                        _ attributes: [(UInt, [UInt8])]) -> (CK_RV, CK_OBJECT_HANDLE) {
        var blob = blob
        var handle: CK_OBJECT_HANDLE = 0
        let result = withTemplate(attributes) { t, c in
            withMechanism(type, iv: iv) { p11.C_UnwrapKey!(session, $0, key, &blob, CK_ULONG(blob.count), t, c, &handle) }
        }
        return (result, handle)
    }

    private func secretTemplate(_ type: UInt, _ extra: [(UInt, [UInt8])] = []) -> [(UInt, [UInt8])] {
        [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(type))] + readable + extra
    }

    func test_block_cipher_modes_report_wrap_and_unwrap() {
        let slot = makeToken()
        for type in [CKM_AES_ECB, CKM_AES_CBC, CKM_AES_CBC_PAD, CKM_DES3_ECB, CKM_DES3_CBC, CKM_DES3_CBC_PAD] {
            var info = CK_MECHANISM_INFO()
            XCTAssertRV(p11.C_GetMechanismInfo!(slot, CK_MECHANISM_TYPE(type), &info), CKR_OK)
            XCTAssertEqual(info.flags & CK_FLAGS(CKF_WRAP | CKF_UNWRAP), CK_FLAGS(CKF_WRAP | CKF_UNWRAP), "mechanism 0x\(String(type, radix: 16))")
            XCTAssertEqual(info.flags & CK_FLAGS(CKF_ENCRYPT | CKF_DECRYPT), CK_FLAGS(CKF_ENCRYPT | CKF_DECRYPT))
        }
    }

    func test_aes_ecb_wraps_as_fips197_encrypts_and_unwraps() {
        let session = userSession()
        let kek = secretKey(session, type: UInt(CKK_AES), value: hex("000102030405060708090a0b0c0d0e0f"), extra: wrapRoles)
        let target = secretKey(session, type: UInt(CKK_AES), value: hex("00112233445566778899aabbccddeeff"), extra: readable)
        let (result, wrapped) = wrap(session, UInt(CKM_AES_ECB), with: kek, target)
        XCTAssertRV(result, CKR_OK)
        XCTAssertEqual(wrapped, hex("69c4e0d86a7b0430d8cdb78070b4c55a"), "FIPS-197 C.1")
        let (unwrapResult, unwrapped) = unwrap(session, UInt(CKM_AES_ECB), with: kek, wrapped, secretTemplate(UInt(CKK_AES)))
        XCTAssertRV(unwrapResult, CKR_OK)
        XCTAssertEqual(value(session, unwrapped).1, hex("00112233445566778899aabbccddeeff"))
        XCTAssertEqual(value(session, unwrapped, UInt(CKA_LOCAL)).1, [0])
    }

    func test_aes_cbc_wraps_as_sp800_38a_encrypts() {
        let session = userSession()
        let kek = secretKey(session, type: UInt(CKK_AES), value: hex("2b7e151628aed2a6abf7158809cf4f3c"), extra: wrapRoles)
        let target = secretKey(session, type: UInt(CKK_AES), value: hex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"), extra: readable)
        let iv = hex("000102030405060708090a0b0c0d0e0f")
        let (result, wrapped) = wrap(session, UInt(CKM_AES_CBC), iv: iv, with: kek, target)
        XCTAssertRV(result, CKR_OK)
        XCTAssertEqual(wrapped, hex("7649abac8119b246cee98e9b12e9197d5086cb9b507219ee95db113a917678b2"), "SP 800-38A F.2.1")
        let (unwrapResult, unwrapped) = unwrap(session, UInt(CKM_AES_CBC), iv: iv, with: kek, wrapped, secretTemplate(UInt(CKK_AES)))
        XCTAssertRV(unwrapResult, CKR_OK)
        XCTAssertEqual(value(session, unwrapped).1, hex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51"))
        // A wrong IV length is the mechanism's parameter, checked before anything is wrapped.
        XCTAssertRV(wrap(session, UInt(CKM_AES_CBC), iv: [1, 2, 3], with: kek, target).0, CKR_MECHANISM_PARAM_INVALID)
    }

    func test_ecb_and_cbc_pad_a_value_that_is_not_whole_blocks_with_zeros_and_unwrap_cuts_it_to_value_len() {
        let session = userSession()
        let kek = secretKey(session, type: UInt(CKK_AES), value: [UInt8](repeating: 3, count: 32), extra: wrapRoles)
        let secret = Array(1...20).map(UInt8.init)
        let target = secretKey(session, type: UInt(CKK_GENERIC_SECRET), value: secret, extra: readable)
        let (result, wrapped) = wrap(session, UInt(CKM_AES_ECB), with: kek, target)
        XCTAssertRV(result, CKR_OK)
        XCTAssertEqual(wrapped.count, 32)
        let twenty = secretTemplate(UInt(CKK_GENERIC_SECRET), [(UInt(CKA_VALUE_LEN), Self.ulong(20))])
        let (unwrapResult, unwrapped) = unwrap(session, UInt(CKM_AES_ECB), with: kek, wrapped, twenty)
        XCTAssertRV(unwrapResult, CKR_OK)
        XCTAssertEqual(value(session, unwrapped).1, secret)
        // Without CKA_VALUE_LEN a generic secret keeps every decrypted byte (the zeros too).
        let (wholeResult, whole) = unwrap(session, UInt(CKM_AES_ECB), with: kek, wrapped, secretTemplate(UInt(CKK_GENERIC_SECRET)))
        XCTAssertRV(wholeResult, CKR_OK)
        XCTAssertEqual(value(session, whole).1, secret + [UInt8](repeating: 0, count: 12))
        // More than the blob holds: the blob cannot be that key.
        let tooLong = secretTemplate(UInt(CKK_GENERIC_SECRET), [(UInt(CKA_VALUE_LEN), Self.ulong(33))])
        XCTAssertRV(unwrap(session, UInt(CKM_AES_ECB), with: kek, wrapped, tooLong).0, CKR_WRAPPED_KEY_INVALID)
        // Not whole blocks: the wrapped data cannot come from ECB.
        XCTAssertRV(unwrap(session, UInt(CKM_AES_ECB), with: kek, Array(wrapped.prefix(20)), twenty).0, CKR_WRAPPED_KEY_LEN_RANGE)
        // CBC_PAD pads by PKCS #7 and gives the exact value back.
        let iv = [UInt8](repeating: 5, count: 16)
        let (padResult, padded) = wrap(session, UInt(CKM_AES_CBC_PAD), iv: iv, with: kek, target)
        XCTAssertRV(padResult, CKR_OK)
        XCTAssertEqual(padded.count, 32)
        let (padUnwrap, exact) = unwrap(session, UInt(CKM_AES_CBC_PAD), iv: iv, with: kek, padded, secretTemplate(UInt(CKK_GENERIC_SECRET)))
        XCTAssertRV(padUnwrap, CKR_OK)
        XCTAssertEqual(value(session, exact).1, secret)
        var tampered = padded
        tampered[31] ^= 0x55
        XCTAssertRV(unwrap(session, UInt(CKM_AES_CBC_PAD), iv: iv, with: kek, tampered, secretTemplate(UInt(CKK_GENERIC_SECRET))).0, CKR_WRAPPED_KEY_INVALID)
    }

    func test_des3_ecb_and_cbc_wrap_and_unwrap_des3_keys() {
        let session = userSession()
        let kek = secretKey(session, type: UInt(CKK_DES3), value: hex("0123456789abcdef23456789abcdef01456789abcdef0123"), extra: wrapRoles)
        let target = secretKey(session, type: UInt(CKK_DES3), value: hex("fedcba9876543210fedcba9876543210fedcba9876543210"), extra: readable)
        for (type, iv) in [(UInt(CKM_DES3_ECB), [UInt8]()), (UInt(CKM_DES3_CBC), [UInt8](repeating: 7, count: 8)), (UInt(CKM_DES3_CBC_PAD), [UInt8](repeating: 7, count: 8))] {
            let (result, wrapped) = wrap(session, type, iv: iv, with: kek, target)
            XCTAssertRV(result, CKR_OK, "mechanism 0x\(String(type, radix: 16))")
            XCTAssertEqual(wrapped.count, type == UInt(CKM_DES3_CBC_PAD) ? 32 : 24)
            let (unwrapResult, unwrapped) = unwrap(session, type, iv: iv, with: kek, wrapped, secretTemplate(UInt(CKK_DES3)))
            XCTAssertRV(unwrapResult, CKR_OK)
            XCTAssertEqual(value(session, unwrapped).1, hex("fedcba9876543210fedcba9876543210fedcba9876543210"))
        }
        // An AES mechanism with a DES3 wrapping key is the wrapping key's type error.
        XCTAssertRV(wrap(session, UInt(CKM_AES_ECB), with: kek, target).0, CKR_WRAPPING_KEY_TYPE_INCONSISTENT)
    }

    func test_ecb_and_cbc_wrap_secret_keys_only_and_cbc_pad_wraps_a_private_key() {
        let session = userSession()
        let kek = secretKey(session, type: UInt(CKK_AES), value: [UInt8](repeating: 9, count: 16), extra: wrapRoles)
        var publicKey: CK_OBJECT_HANDLE = 0, privateKey: CK_OBJECT_HANDLE = 0
        let curve = hex("06082a8648ce3d030107")
        XCTAssertRV(withTemplate([(UInt(CKA_EC_PARAMS), curve)]) { pt, pc in
            withTemplate(readable) { st, sc in
                mechanism(UInt(CKM_EC_KEY_PAIR_GEN)) { p11.C_GenerateKeyPair!(session, $0, pt, pc, st, sc, &publicKey, &privateKey) }
            }
        }, CKR_OK)
        XCTAssertRV(wrap(session, UInt(CKM_AES_ECB), with: kek, privateKey).0, CKR_KEY_NOT_WRAPPABLE)
        XCTAssertRV(wrap(session, UInt(CKM_AES_CBC), iv: [UInt8](repeating: 0, count: 16), with: kek, privateKey).0, CKR_KEY_NOT_WRAPPABLE)
        let iv = [UInt8](repeating: 1, count: 16)
        let (result, wrapped) = wrap(session, UInt(CKM_AES_CBC_PAD), iv: iv, with: kek, privateKey)
        XCTAssertRV(result, CKR_OK)
        let template: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_PRIVATE_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_EC))),
                                           (UInt(CKA_SIGN), [1])]
        let (unwrapResult, unwrapped) = unwrap(session, UInt(CKM_AES_CBC_PAD), iv: iv, with: kek, wrapped, template)
        XCTAssertRV(unwrapResult, CKR_OK)
        let info = value(session, privateKey, UInt(CKA_PUBLIC_KEY_INFO)).1
        XCTAssertNotNil(info)
        XCTAssertEqual(value(session, unwrapped, UInt(CKA_PUBLIC_KEY_INFO)).1, info)
    }

    /// PKCS#11 C_WrapKey: CKR_KEY_UNEXTRACTABLE when CKA_EXTRACTABLE is false, whatever else holds;
    /// CKR_KEY_NOT_WRAPPABLE for an extractable key that may not be wrapped this way (here: a
    /// sensitive key under a key that is not trusted). The same for every wrapping mechanism.
    func test_unextractable_and_unwrappable_keys_get_their_own_codes() {
        let session = userSession()
        let kek = secretKey(session, type: UInt(CKK_AES), value: [UInt8](repeating: 4, count: 16), extra: wrapRoles)
        let unextractable = secretKey(session, type: UInt(CKK_AES), value: [UInt8](repeating: 6, count: 16),
                                      extra: [(UInt(CKA_EXTRACTABLE), [0]), (UInt(CKA_SENSITIVE), [1])])
        let sensitive = secretKey(session, type: UInt(CKK_AES), value: [UInt8](repeating: 8, count: 16),
                                  extra: [(UInt(CKA_EXTRACTABLE), [1]), (UInt(CKA_SENSITIVE), [1])])
        let cbcIV = [UInt8](repeating: 0, count: 16)
        for (type, iv) in [(UInt(CKM_AES_KEY_WRAP), [UInt8]()), (UInt(CKM_AES_KEY_WRAP_PAD), []), (UInt(CKM_AES_ECB), []),
                           (UInt(CKM_AES_CBC), cbcIV), (UInt(CKM_AES_CBC_PAD), cbcIV)] {
            XCTAssertRV(wrap(session, type, iv: iv, with: kek, unextractable).0, CKR_KEY_UNEXTRACTABLE, "mechanism 0x\(String(type, radix: 16))")
            XCTAssertRV(wrap(session, type, iv: iv, with: kek, sensitive).0, CKR_KEY_NOT_WRAPPABLE, "mechanism 0x\(String(type, radix: 16))")
        }
    }
}
