import CPKCS11
import XCTest
@testable import PKCS11

/// The parameters of the AES modes and ChaCha20 ciphers of PKCS#11 3.x (CK_GCM_PARAMS,
/// CK_CCM_PARAMS, CK_CHACHA20_PARAMS, CK_SALSA20_CHACHA20_POLY1305_PARAMS, flat IVs and tweaks):
/// each read as a published vector shows, and each malformed one refused with its exact CK_RV.
final class ModernAEADParameterTests: ModernMechanismTestCase {
    private func aesKey(_ session: CK_SESSION_HANDLE, _ value: [UInt8]) -> CK_OBJECT_HANDLE {
        readableKey(session, UInt(CKK_AES), value, UInt(CKA_ENCRYPT), UInt(CKA_DECRYPT))
    }

    private func chachaKey(_ session: CK_SESSION_HANDLE, _ value: [UInt8]) -> CK_OBJECT_HANDLE {
        readableKey(session, CK_ULONG(CKK_CHACHA20), value, UInt(CKA_ENCRYPT), UInt(CKA_DECRYPT))
    }

    private func gcm(iv: [UInt8], aad: [UInt8], tagBits: CK_ULONG) -> UnsafeMutablePointer<CK_MECHANISM> {
        memory.mechanism(UInt(CKM_AES_GCM), CK_GCM_PARAMS(pIv: memory.bytes(iv), ulIvLen: CK_ULONG(iv.count), ulIvBits: CK_ULONG(iv.count * 8),
                                                          pAAD: memory.bytes(aad), ulAADLen: CK_ULONG(aad.count), ulTagBits: tagBits))
    }

    private func ccm(dataLength: Int, nonce: [UInt8], aad: [UInt8], macLength: CK_ULONG, length: Int? = nil) -> UnsafeMutablePointer<CK_MECHANISM> {
        memory.mechanism(UInt(CKM_AES_CCM), CK_CCM_PARAMS(ulDataLen: CK_ULONG(dataLength), pNonce: memory.bytes(nonce), ulNonceLen: CK_ULONG(nonce.count),
                                                          pAAD: memory.bytes(aad), ulAADLen: CK_ULONG(aad.count), ulMACLen: macLength), length: length)
    }

    private func chacha20(counter: [UInt8], nonce: [UInt8], length: Int? = nil) -> UnsafeMutablePointer<CK_MECHANISM> {
        memory.mechanism(UInt(CKM_CHACHA20), CK_CHACHA20_PARAMS(pBlockCounter: memory.bytes(counter), blockCounterBits: CK_ULONG(counter.count * 8),
                                                                pNonce: memory.bytes(nonce), ulNonceBits: CK_ULONG(nonce.count * 8)), length: length)
    }

    /// `nonceLength` is ulNonceLen as given (bytes, or bits); the nonce's own length by default.
    private func chachaPoly(nonce: [UInt8], aad: [UInt8] = [], nonceLength: Int? = nil, length: Int? = nil) -> UnsafeMutablePointer<CK_MECHANISM> {
        memory.mechanism(UInt(CKM_CHACHA20_POLY1305),
                         CK_SALSA20_CHACHA20_POLY1305_PARAMS(pNonce: memory.bytes(nonce), ulNonceLen: CK_ULONG(nonceLength ?? nonce.count),
                                                             pAAD: memory.bytes(aad), ulAADLen: CK_ULONG(aad.count)), length: length)
    }

    // MARK: CKM_AES_GCM — the GCM specification's test case 4

    private let gcmKey = hex("feffe9928665731c6d6a8f9467308308"), gcmIV = hex("cafebabefacedbaddecaf888")
    private let gcmAAD = hex("feedfacedeadbeeffeedfacedeadbeefabaddad2")
    private let gcmPlain = hex("d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39")
    private let gcmCipher = hex("42831ec2217774244b7221b784d0d49ce3aa212f2c02a4e035c17e2329aca12e21d514b25466931c7d8f6a5aac84aa051ba30b396a0aac973d58e091")
    private let gcmTag = hex("5bc94fbc3221a5db94fae95ae7121a47")

    func test_gcm_reads_iv_aad_and_tag_bits_as_gcm_test_case_4() {
        let session = userSession()
        let key = aesKey(session, gcmKey)
        let full = encrypt(session, gcm(iv: gcmIV, aad: gcmAAD, tagBits: 128), key, gcmPlain)
        XCTAssertRV(full.0, CKR_OK)
        XCTAssertEqual(full.1, gcmCipher + gcmTag)
        let opened = decrypt(session, gcm(iv: gcmIV, aad: gcmAAD, tagBits: 128), key, gcmCipher + gcmTag)
        XCTAssertRV(opened.0, CKR_OK)
        XCTAssertEqual(opened.1, gcmPlain)
        let short = encrypt(session, gcm(iv: gcmIV, aad: gcmAAD, tagBits: 96), key, gcmPlain)
        XCTAssertRV(short.0, CKR_OK)
        XCTAssertEqual(short.1, gcmCipher + gcmTag.prefix(12), "a 96-bit tag is the full tag's first 12 bytes")
    }

    func test_gcm_with_a_modified_tag_is_encrypted_data_invalid() {
        let session = userSession()
        let key = aesKey(session, gcmKey)
        XCTAssertRV(decrypt(session, gcm(iv: gcmIV, aad: gcmAAD, tagBits: 128), key, Self.flipped(gcmCipher + gcmTag)).0, CKR_ENCRYPTED_DATA_INVALID)
    }

    func test_gcm_tag_of_129_bits_is_mechanism_param_invalid() {
        let session = userSession()
        let key = aesKey(session, gcmKey)
        XCTAssertRV(p11.C_EncryptInit!(session, gcm(iv: gcmIV, aad: [], tagBits: 129), key), CKR_MECHANISM_PARAM_INVALID)
    }

    // MARK: CKM_AES_CCM — RFC 3610 packet vector #1 (8-byte MAC, 13-byte nonce)

    private let ccmKey = hex("c0c1c2c3c4c5c6c7c8c9cacbcccdcecf"), ccmNonce = hex("00000003020100a0a1a2a3a4a5"), ccmAAD = hex("0001020304050607")
    private let ccmPlain = Array(UInt8(0x08)...UInt8(0x1E))
    private let ccmSealed = hex("588c979a61c663d2f066d0c2c0f989806d5f6b61dac38417e8d12cfdf926e0")

    func test_ccm_reads_rfc_3610_packet_vector_1_with_the_plaintext_length_both_ways() {
        let session = userSession()
        let key = aesKey(session, ccmKey)
        let sealed = encrypt(session, ccm(dataLength: ccmPlain.count, nonce: ccmNonce, aad: ccmAAD, macLength: 8), key, ccmPlain)
        XCTAssertRV(sealed.0, CKR_OK)
        XCTAssertEqual(sealed.1, ccmSealed)
        let opened = decrypt(session, ccm(dataLength: ccmPlain.count, nonce: ccmNonce, aad: ccmAAD, macLength: 8), key, ccmSealed)
        XCTAssertRV(opened.0, CKR_OK, "ulDataLen is the plaintext's length when decrypting too")
        XCTAssertEqual(opened.1, ccmPlain)
    }

    func test_ccm_mac_length_nonce_length_and_structure_size_are_mechanism_param_invalid() {
        let session = userSession()
        let key = aesKey(session, ccmKey)
        XCTAssertRV(p11.C_EncryptInit!(session, ccm(dataLength: 23, nonce: ccmNonce, aad: ccmAAD, macLength: 5), key), CKR_MECHANISM_PARAM_INVALID, "odd MAC length")
        XCTAssertRV(p11.C_EncryptInit!(session, ccm(dataLength: 23, nonce: Array(ccmNonce.prefix(6)), aad: ccmAAD, macLength: 8), key),
                    CKR_MECHANISM_PARAM_INVALID, "6-byte nonce")
        XCTAssertRV(p11.C_EncryptInit!(session, ccm(dataLength: 23, nonce: ccmNonce + [0xA6], aad: ccmAAD, macLength: 8), key),
                    CKR_MECHANISM_PARAM_INVALID, "14-byte nonce")
        XCTAssertRV(p11.C_EncryptInit!(session, ccm(dataLength: 23, nonce: ccmNonce, aad: ccmAAD, macLength: 8, length: 40), key),
                    CKR_MECHANISM_PARAM_INVALID, "ulParameterLen 40")
        XCTAssertRV(p11.C_EncryptInit!(session, ccm(dataLength: 23, nonce: ccmNonce, aad: ccmAAD, macLength: 8), key), CKR_OK)
    }

    func test_ccm_data_of_another_length_than_ul_data_len_is_a_length_range_error() {
        let session = userSession()
        let key = aesKey(session, ccmKey)
        XCTAssertRV(encrypt(session, ccm(dataLength: 23, nonce: ccmNonce, aad: ccmAAD, macLength: 8), key, Array(ccmPlain.dropLast())).0, CKR_DATA_LEN_RANGE)
        XCTAssertRV(decrypt(session, ccm(dataLength: 23, nonce: ccmNonce, aad: ccmAAD, macLength: 8), key, Array(ccmSealed.dropLast())).0,
                    CKR_ENCRYPTED_DATA_LEN_RANGE, "ulDataLen + ulMACLen − 1 bytes")
        XCTAssertRV(decrypt(session, ccm(dataLength: 23, nonce: ccmNonce, aad: ccmAAD, macLength: 8), key, Self.flipped(ccmSealed)).0,
                    CKR_ENCRYPTED_DATA_INVALID, "a modified MAC")
    }

    func test_ccm_with_a_des3_key_is_key_type_inconsistent() {
        let session = userSession()
        let des3 = readableKey(session, UInt(CKK_DES3), hex("0123456789abcdeffedcba987654321089abcdef01234567"), UInt(CKA_ENCRYPT), UInt(CKA_DECRYPT))
        XCTAssertRV(p11.C_EncryptInit!(session, ccm(dataLength: 23, nonce: ccmNonce, aad: ccmAAD, macLength: 8), des3), CKR_KEY_TYPE_INCONSISTENT)
    }

    // MARK: CKM_AES_CTS, the IV modes, CKM_AES_XTS

    func test_cts_is_cbc_cs1_on_the_rfc_3962_vectors() {
        let session = userSession()
        let key = aesKey(session, hex("636869636b656e207465726979616b69"))
        // RFC 3962 Appendix B (AES-128, IV 0), its last two blocks put back in CBC order (CS1).
        let vectors = [("4920776f756c64206c696b652074686520", "97c6353568f2bf8cb4d8a580362da7ff7f"),
                       ("4920776f756c64206c696b65207468652047656e6572616c20476175277320", "97687268d6ecccc0c07b25e25ecfe5fc00783e0efdb2c1d445d4c8eff7ed22"),
                       ("4920776f756c64206c696b65207468652047656e6572616c2047617527732043",
                        "97687268d6ecccc0c07b25e25ecfe58439312523a78662d5be7fcbcc98ebf5a8")]
        for (plain, cipher) in vectors {
            let sealed = encrypt(session, memory.mechanism(UInt(CKM_AES_CTS), flat: [UInt8](repeating: 0, count: 16)), key, hex(plain))
            XCTAssertRV(sealed.0, CKR_OK)
            XCTAssertEqual(sealed.1, hex(cipher), "\(hex(plain).count) bytes")
            let opened = decrypt(session, memory.mechanism(UInt(CKM_AES_CTS), flat: [UInt8](repeating: 0, count: 16)), key, hex(cipher))
            XCTAssertEqual(opened.1, hex(plain))
        }
    }

    func test_cts_refuses_less_than_a_block_and_an_8_byte_iv() {
        let session = userSession()
        let key = aesKey(session, [UInt8](repeating: 7, count: 32))
        let iv = [UInt8](repeating: 0, count: 16), short = [UInt8](repeating: 1, count: 15)
        XCTAssertRV(encrypt(session, memory.mechanism(UInt(CKM_AES_CTS), flat: iv), key, short).0, CKR_DATA_LEN_RANGE)
        XCTAssertRV(decrypt(session, memory.mechanism(UInt(CKM_AES_CTS), flat: iv), key, short).0, CKR_ENCRYPTED_DATA_LEN_RANGE)
        XCTAssertRV(p11.C_EncryptInit!(session, memory.mechanism(UInt(CKM_AES_CTS), flat: Array(iv.prefix(8))), key), CKR_MECHANISM_PARAM_INVALID)
    }

    func test_ofb_cfb8_and_cfb128_read_the_iv_as_sp_800_38a_and_refuse_an_8_byte_one() {
        let session = userSession()
        let key = aesKey(session, hex("2b7e151628aed2a6abf7158809cf4f3c"))
        let iv = hex("000102030405060708090a0b0c0d0e0f")
        let plain = hex("6bc1bee22e409f96e93d7e117393172aae2d8a571e03ac9c9eb76fac45af8e51")
        let vectors: [(UInt, [UInt8], String)] = [
            (UInt(CKM_AES_OFB), plain, "3b3fd92eb72dad20333449f8e83cfb4a7789508d16918f03f53c52dac54ed825"),  // F.4.1
            (UInt(CKM_AES_CFB8), Array(plain.prefix(18)), "3b79424c9c0dd436bace9e0ed4586a4f32b9"),  // F.3.7
            (UInt(CKM_AES_CFB128), plain, "3b3fd92eb72dad20333449f8e83cfb4ac8a64537a0b3a93fcde3cdad9f1ce58b"),  // F.3.13
        ]
        for (type, data, expected) in vectors {
            let sealed = encrypt(session, memory.mechanism(type, flat: iv), key, data)
            XCTAssertRV(sealed.0, CKR_OK)
            XCTAssertEqual(sealed.1, hex(expected), "mechanism \(type)")
            XCTAssertEqual(decrypt(session, memory.mechanism(type, flat: iv), key, hex(expected)).1, data)
            XCTAssertRV(p11.C_EncryptInit!(session, memory.mechanism(type, flat: Array(iv.prefix(8))), key), CKR_MECHANISM_PARAM_INVALID)
        }
    }

    func test_xts_reads_the_tweak_as_ieee_1619_vector_2() {
        let session = userSession()
        let key = readableKey(session, CK_ULONG(CKK_AES_XTS), [UInt8](repeating: 0x11, count: 16) + [UInt8](repeating: 0x22, count: 16),
                              UInt(CKA_ENCRYPT), UInt(CKA_DECRYPT))
        // Data unit sequence number 0x3333333333, little-endian in the 16-byte tweak.
        let tweak = [UInt8](repeating: 0x33, count: 5) + [UInt8](repeating: 0, count: 11)
        let plain = [UInt8](repeating: 0x44, count: 32), expected = hex("c454185e6a16936e39334038acef838bfb186fff7480adc4289382ecd6d394f0")
        let sealed = encrypt(session, memory.mechanism(UInt(CKM_AES_XTS), flat: tweak), key, plain)
        XCTAssertRV(sealed.0, CKR_OK)
        XCTAssertEqual(sealed.1, expected)
        XCTAssertEqual(decrypt(session, memory.mechanism(UInt(CKM_AES_XTS), flat: tweak), key, expected).1, plain)
    }

    func test_xts_refuses_an_8_byte_tweak_15_bytes_of_data_and_a_plain_aes_key() {
        let session = userSession()
        let key = readableKey(session, CK_ULONG(CKK_AES_XTS), Array(1...64).map(UInt8.init), UInt(CKA_ENCRYPT), UInt(CKA_DECRYPT))
        let tweak = [UInt8](repeating: 0, count: 16)
        XCTAssertRV(encrypt(session, memory.mechanism(UInt(CKM_AES_XTS), flat: tweak), key, [UInt8](repeating: 5, count: 15)).0, CKR_DATA_LEN_RANGE)
        XCTAssertRV(p11.C_EncryptInit!(session, memory.mechanism(UInt(CKM_AES_XTS), flat: Array(tweak.prefix(8))), key), CKR_MECHANISM_PARAM_INVALID)
        let aes = aesKey(session, Array(1...32).map(UInt8.init))
        XCTAssertRV(p11.C_EncryptInit!(session, memory.mechanism(UInt(CKM_AES_XTS), flat: tweak), aes), CKR_KEY_TYPE_INCONSISTENT)
    }

    // MARK: CKM_CHACHA20 — RFC 8439 §2.4.2

    private let sunscreen = Array("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.".utf8)
    private let chachaCipher = hex("6e2e359a2568f98041ba0728dd0d6981e97e7aec1d4360c20a27afccfd9fae0bf91b65c5524733ab8f593dabcd62b357"
                                   + "1639d624e65152ab8f530c359f0861d807ca0dbf500d6a6156a38e088a22b65e52bc514d16ccf806818ce91ab77937365af90bbf74a35be6b40b8eedf2785e42874d")

    func test_chacha20_reads_a_32_bit_counter_and_a_96_bit_nonce_as_rfc_8439_section_2_4_2() {
        let session = userSession()
        let key = chachaKey(session, Array(0...31).map(UInt8.init))
        // pBlockCounter holds the counter word as the state does: little-endian.
        let sealed = encrypt(session, chacha20(counter: [1, 0, 0, 0], nonce: hex("000000000000004a00000000")), key, sunscreen)
        XCTAssertRV(sealed.0, CKR_OK)
        XCTAssertEqual(sealed.1, chachaCipher)
        XCTAssertEqual(decrypt(session, chacha20(counter: [1, 0, 0, 0], nonce: hex("000000000000004a00000000")), key, chachaCipher).1, sunscreen)
    }

    func test_chacha20_reads_a_64_bit_counter_and_a_64_bit_nonce_as_the_same_state_words() {
        let session = userSession()
        let key = chachaKey(session, Array(0...31).map(UInt8.init))
        // State words 12–15 as in §2.4.2: counter 1, then 0, 0x4a000000, 0 — as a 64-bit counter
        // (1) and a 64-bit nonce (words 14 and 15) they give the RFC's ciphertext too.
        let sealed = encrypt(session, chacha20(counter: [1, 0, 0, 0, 0, 0, 0, 0], nonce: hex("0000004a00000000")), key, sunscreen)
        XCTAssertRV(sealed.0, CKR_OK)
        XCTAssertEqual(sealed.1, chachaCipher)
    }

    func test_chacha20_refuses_an_80_bit_nonce_a_16_bit_counter_a_wrong_structure_size_and_an_aes_key() {
        let session = userSession()
        let key = chachaKey(session, Array(0...31).map(UInt8.init))
        let nonce = hex("000000000000004a00000000")
        XCTAssertRV(p11.C_EncryptInit!(session, chacha20(counter: [0, 0, 0, 0], nonce: Array(nonce.prefix(10))), key), CKR_MECHANISM_PARAM_INVALID)
        XCTAssertRV(p11.C_EncryptInit!(session, chacha20(counter: [0, 0], nonce: nonce), key), CKR_MECHANISM_PARAM_INVALID)
        XCTAssertRV(p11.C_EncryptInit!(session, chacha20(counter: [1, 0, 0, 0], nonce: nonce, length: 24), key), CKR_MECHANISM_PARAM_INVALID)
        let aes = aesKey(session, Array(0...31).map(UInt8.init))
        XCTAssertRV(p11.C_EncryptInit!(session, chacha20(counter: [1, 0, 0, 0], nonce: nonce), aes), CKR_KEY_TYPE_INCONSISTENT)
    }

    // MARK: CKM_CHACHA20_POLY1305 — RFC 8439 §2.8.2

    private let aeadKey = Array(0x80...0x9F).map(UInt8.init), aeadNonce = hex("070000004041424344454647"), aeadAAD = hex("50515253c0c1c2c3c4c5c6c7")
    private let aeadCipher = hex("d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b"
                                 + "1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc3ff4def08e4b7a9de576d26586cec64b6116")
    private let aeadTag = hex("1ae10b594f09e26a7e902ecbd0600691")

    func test_chacha20_poly1305_reads_nonce_and_aad_as_rfc_8439_section_2_8_2() {
        let session = userSession()
        let key = chachaKey(session, aeadKey)
        let sealed = encrypt(session, chachaPoly(nonce: aeadNonce, aad: aeadAAD), key, sunscreen)
        XCTAssertRV(sealed.0, CKR_OK)
        XCTAssertEqual(sealed.1, aeadCipher + aeadTag, "the tag follows the ciphertext")
        let opened = decrypt(session, chachaPoly(nonce: aeadNonce, aad: aeadAAD), key, aeadCipher + aeadTag)
        XCTAssertRV(opened.0, CKR_OK)
        XCTAssertEqual(opened.1, sunscreen)
    }

    func test_chacha20_poly1305_nonce_length_of_96_bits_gives_the_same_result() {
        let session = userSession()
        let key = chachaKey(session, aeadKey)
        let sealed = encrypt(session, chachaPoly(nonce: aeadNonce, aad: aeadAAD, nonceLength: 96), key, sunscreen)
        XCTAssertRV(sealed.0, CKR_OK, "the specification's text: ulNonceLen in bits")
        XCTAssertEqual(sealed.1, aeadCipher + aeadTag)
    }

    func test_chacha20_poly1305_with_a_modified_tag_or_aad_is_encrypted_data_invalid() {
        let session = userSession()
        let key = chachaKey(session, aeadKey)
        XCTAssertRV(decrypt(session, chachaPoly(nonce: aeadNonce, aad: aeadAAD), key, Self.flipped(aeadCipher + aeadTag)).0, CKR_ENCRYPTED_DATA_INVALID)
        XCTAssertRV(decrypt(session, chachaPoly(nonce: aeadNonce, aad: Self.flipped(aeadAAD)), key, aeadCipher + aeadTag).0, CKR_ENCRYPTED_DATA_INVALID)
    }

    func test_chacha20_poly1305_refuses_a_10_byte_nonce_a_wrong_structure_size_and_an_aes_key() {
        let session = userSession()
        let key = chachaKey(session, aeadKey)
        XCTAssertRV(p11.C_EncryptInit!(session, chachaPoly(nonce: Array(aeadNonce.prefix(10))), key), CKR_MECHANISM_PARAM_INVALID)
        XCTAssertRV(p11.C_EncryptInit!(session, chachaPoly(nonce: aeadNonce, aad: aeadAAD, length: 24), key), CKR_MECHANISM_PARAM_INVALID)
        let aes = aesKey(session, aeadKey)
        XCTAssertRV(p11.C_EncryptInit!(session, chachaPoly(nonce: aeadNonce, aad: aeadAAD), aes), CKR_KEY_TYPE_INCONSISTENT)
    }

    func test_chacha20_poly1305_nonce_length_neither_12_8_bytes_nor_96_64_bits_is_refused_before_reading() {
        let session = userSession()
        let key = chachaKey(session, aeadKey)
        // A 24-byte nonce (XChaCha20's) with ulNonceLen 24, 192 (its bits: 192 bytes would be read
        // past the buffer), 16 and 128.
        let nonce = [UInt8](repeating: 0x5C, count: 24)
        for length in [24, 192, 16, 128] {
            XCTAssertRV(p11.C_EncryptInit!(session, chachaPoly(nonce: nonce, nonceLength: length), key), CKR_MECHANISM_PARAM_INVALID, "ulNonceLen \(length)")
        }
    }
}
