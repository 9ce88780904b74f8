import CPKCS11
import XCTest
@testable import PKCS11

/// CK_MAC_GENERAL_PARAMS (a CK_ULONG: the MAC's length in bytes) of the nine _HMAC_GENERAL
/// mechanisms, CKM_AES_CMAC_GENERAL and CKM_AES_MAC_GENERAL: published MACs truncated to the
/// parameter, and lengths the MAC cannot give refused.
final class ModernMACParameterTests: ModernMechanismTestCase {
    private func general(_ type: UInt, _ length: CK_ULONG) -> UnsafeMutablePointer<CK_MECHANISM> {
        memory.mechanism(type, length)
    }

    private let jefe = Array("Jefe".utf8), question = Array("what do ya want for nothing?".utf8)

    /// HMAC with the key "Jefe" over "what do ya want for nothing?": RFC 2202 case 2 (SHA-1), RFC
    /// 4231 case 2 (SHA-2); for SHA-3 computed with Python's hmac module.
    private let hmacs: [(UInt, String)] = [
        (UInt(CKM_SHA_1_HMAC_GENERAL), "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"),
        (UInt(CKM_SHA224_HMAC_GENERAL), "a30e01098bc6dbbf45690f3a7e9e6d0f8bbea2a39e6148008fd05e44"),
        (UInt(CKM_SHA256_HMAC_GENERAL), "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        (UInt(CKM_SHA384_HMAC_GENERAL), "af45d2e376484031617f78d2b58a6b1b9c7ef464f5a01b47e42ec3736322445e8e2240ca5e69e2c78b3239ecfab21649"),
        (UInt(CKM_SHA512_HMAC_GENERAL), "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea2505549758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"),
        (UInt(CKM_SHA3_224_HMAC_GENERAL), "7fdb8dd88bd2f60d1b798634ad386811c2cfc85bfaf5d52bbace5e66"),
        (UInt(CKM_SHA3_256_HMAC_GENERAL), "c7d4072e788877ae3596bbb0da73b887c9171f93095b294ae857fbe2645e1ba5"),
        (UInt(CKM_SHA3_384_HMAC_GENERAL), "f1101f8cbf9766fd6764d2ed61903f21ca9b18f57cf3e1a23ca13508a93243ce48c045dc007f26a21b3f5e0e9df4c20a"),
        (UInt(CKM_SHA3_512_HMAC_GENERAL), "5a4bfeab6166427c7a3647b747292b8384537cdb89afb3bf5665e4c5e709350b287baec921fd7ca0ee7a0c31d022a95e1fc92ba9d77df883960275beb4e62024"),
    ]

    /// The MAC of `data` under `mechanism` is `expected`, verifies, and a modified MAC or one a
    /// byte longer does not.
    private func checkMAC(_ session: CK_SESSION_HANDLE, _ mechanism: () -> UnsafeMutablePointer<CK_MECHANISM>, _ key: CK_OBJECT_HANDLE, _ data: [UInt8],
                          _ expected: [UInt8], _ what: String) {
        let signed = sign(session, mechanism(), key, data)
        XCTAssertRV(signed.0, CKR_OK, what)
        XCTAssertEqual(signed.1, expected, what)
        XCTAssertRV(verify(session, mechanism(), key, data, expected), CKR_OK, what)
        XCTAssertRV(verify(session, mechanism(), key, data, Self.flipped(expected)), CKR_SIGNATURE_INVALID, what)
        XCTAssertRV(verify(session, mechanism(), key, data, expected + [0]), CKR_SIGNATURE_LEN_RANGE, what)
    }

    func test_hmac_general_truncates_the_rfc_hmac_to_the_parameter_length_for_each_hash() {
        let session = userSession()
        let key = readableKey(session, UInt(CKK_GENERIC_SECRET), jefe, UInt(CKA_SIGN), UInt(CKA_VERIFY))
        for (type, full) in hmacs {
            let mac = hex(full)
            for length in [1, mac.count / 2, mac.count] {
                checkMAC(session, { general(type, CK_ULONG(length)) }, key, question, Array(mac.prefix(length)), "mechanism \(type), \(length) bytes")
            }
        }
    }

    func test_hmac_general_length_zero_or_above_the_hash_length_is_mechanism_param_invalid() {
        let session = userSession()
        let key = readableKey(session, UInt(CKK_GENERIC_SECRET), jefe, UInt(CKA_SIGN), UInt(CKA_VERIFY))
        for (type, full) in hmacs {
            for length in [0, hex(full).count + 1] {
                XCTAssertRV(p11.C_SignInit!(session, general(type, CK_ULONG(length)), key), CKR_MECHANISM_PARAM_INVALID, "mechanism \(type), \(length) bytes")
            }
        }
    }

    // MARK: AES (SP 800-38A's key and first block)

    private let nistKey = hex("2b7e151628aed2a6abf7158809cf4f3c"), firstBlock = hex("6bc1bee22e409f96e93d7e117393172a")

    func test_aes_cmac_general_truncates_rfc_4493_example_2() {
        let session = userSession()
        let key = readableKey(session, UInt(CKK_AES), nistKey, UInt(CKA_SIGN), UInt(CKA_VERIFY))
        let full = hex("070a16b46b4d4144f79bdd9dd04a287c")
        for length in [4, 8, 16] {
            checkMAC(session, { general(UInt(CKM_AES_CMAC_GENERAL), CK_ULONG(length)) }, key, firstBlock, Array(full.prefix(length)), "\(length) bytes")
        }
    }

    func test_aes_cmac_general_length_0_or_17_is_mechanism_param_invalid() {
        let session = userSession()
        let key = readableKey(session, UInt(CKK_AES), nistKey, UInt(CKA_SIGN), UInt(CKA_VERIFY))
        for length: CK_ULONG in [0, 17] {
            XCTAssertRV(p11.C_SignInit!(session, general(UInt(CKM_AES_CMAC_GENERAL), length), key), CKR_MECHANISM_PARAM_INVALID, "\(length) bytes")
        }
    }

    func test_aes_mac_is_half_a_block_and_aes_mac_general_truncates_cbc_mac() {
        let session = userSession()
        let key = readableKey(session, UInt(CKK_AES), nistKey, UInt(CKA_SIGN), UInt(CKA_VERIFY))
        // CBC-MAC of one block with a zero IV is its ECB encryption: SP 800-38A F.1.1.
        let full = hex("3ad77bb40d7a3660a89ecaf32466ef97")
        checkMAC(session, { memory.mechanism(UInt(CKM_AES_MAC)) }, key, firstBlock, Array(full.prefix(8)), "CKM_AES_MAC")
        for length in [1, 4, 16] {
            checkMAC(session, { general(UInt(CKM_AES_MAC_GENERAL), CK_ULONG(length)) }, key, firstBlock, Array(full.prefix(length)), "\(length) bytes")
        }
    }

    func test_aes_mac_general_refuses_length_0_or_17_and_a_4_byte_parameter() {
        let session = userSession()
        let key = readableKey(session, UInt(CKK_AES), nistKey, UInt(CKA_SIGN), UInt(CKA_VERIFY))
        for length: CK_ULONG in [0, 17] {
            XCTAssertRV(p11.C_SignInit!(session, general(UInt(CKM_AES_MAC_GENERAL), length), key), CKR_MECHANISM_PARAM_INVALID, "\(length) bytes")
        }
        XCTAssertRV(p11.C_SignInit!(session, memory.mechanism(UInt(CKM_AES_MAC_GENERAL), UInt32(8)), key), CKR_MECHANISM_PARAM_INVALID, "a 4-byte parameter")
    }
}
