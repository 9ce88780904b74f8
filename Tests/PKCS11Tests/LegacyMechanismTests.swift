import CPKCS11
import Foundation
import Glibc
import XCTest
@testable import PKCS11

/// The legacy mechanisms SoftHSM offers (DES, triple DES, MD5; DESIGN §10), with published or
/// OpenSSL-computed vectors, and their absence under `key_policy = modern`.
final class LegacyMechanismTests: ModuleTestCase {
    /// A secret key that derives, readable (the tests compare derived values).
    private func derivableKey(_ session: CK_SESSION_HANDLE, type: UInt, value: [UInt8], expect: UInt = CKR_OK, _ message: String = "") -> CK_OBJECT_HANDLE {
        var handle: CK_OBJECT_HANDLE = 0
        let template: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(type)),
                                           (UInt(CKA_VALUE), value), (UInt(CKA_DERIVE), [1]), (UInt(CKA_EXTRACTABLE), [1]), (UInt(CKA_SENSITIVE), [0])]
        XCTAssertRV(withTemplate(template) { p11.C_CreateObject!(session, $0, $1, &handle) }, expect, message)
        return handle
    }

    private func withParameter(_ type: UInt, _ bytes: [UInt8], _ body: (UnsafeMutablePointer<CK_MECHANISM>) -> CK_RV) -> CK_RV {
        var bytes = bytes
        return bytes.withUnsafeMutableBytes { buffer in
            var mechanism = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(type), pParameter: buffer.count == 0 ? nil : buffer.baseAddress,
                                         ulParameterLen: CK_ULONG(buffer.count))
            return body(&mechanism)
        }
    }

    /// C_EncryptInit/C_DecryptInit + a single-part call.
    private func crypt(_ session: CK_SESSION_HANDLE, _ type: UInt, iv: [UInt8], key: CK_OBJECT_HANDLE, encrypt: Bool, _ input: [UInt8]) -> (CK_RV, [UInt8]) {
        let initResult = withParameter(type, iv) { encrypt ? p11.C_EncryptInit!(session, $0, key) : p11.C_DecryptInit!(session, $0, key) }
        guard initResult == CK_RV(CKR_OK) else { return (initResult, []) }
        var input = input
        var output = [UInt8](repeating: 0, count: input.count + 16)
        var length = CK_ULONG(output.count)
        let call = encrypt ? p11.C_Encrypt! : p11.C_Decrypt!
        let result = call(session, &input, CK_ULONG(input.count), &output, &length)
        return (result, Array(output.prefix(Int(length))))
    }

    private func mechanisms() -> [CK_MECHANISM_TYPE] {
        var count: CK_ULONG = 0
        XCTAssertRV(p11.C_GetMechanismList!(1, nil, &count), CKR_OK)
        var list = [CK_MECHANISM_TYPE](repeating: 0, count: Int(count))
        XCTAssertRV(p11.C_GetMechanismList!(1, &list, &count), CKR_OK)
        return list
    }

    private static let message = Array("Now is the time for all ".utf8)

    func test_triple_des_matches_openssl_and_takes_two_and_three_key_keys() {
        let session = userSession()
        let three = derivableKey(session, type: UInt(CKK_DES3), value: hex("0123456789abcdef23456789abcdef01456789abcdef0123"))
        var result = crypt(session, UInt(CKM_DES3_ECB), iv: [], key: three, encrypt: true, Self.message)
        XCTAssertRV(result.0, CKR_OK)
        XCTAssertEqual(result.1, hex("314f8327fa7a09a84362760cc13ba7daff55c5f80faaac45"), "openssl enc -des-ede3")
        result = crypt(session, UInt(CKM_DES3_ECB), iv: [], key: three, encrypt: false, result.1)
        XCTAssertEqual(result.1, Self.message)

        let two = derivableKey(session, type: UInt(CKK_DES2), value: hex("0123456789abcdef23456789abcdef01"))
        result = crypt(session, UInt(CKM_DES3_CBC_PAD), iv: hex("1234567890abcdef"), key: two, encrypt: true, Self.message)
        XCTAssertEqual(result.1, hex("134b98f8eeb3f6079f1a82e0640d5f2f8e090661c42864a149f0cf718dd78b61"), "openssl enc -des-ede-cbc")
        result = crypt(session, UInt(CKM_DES3_CBC_PAD), iv: hex("1234567890abcdef"), key: two, encrypt: false, result.1)
        XCTAssertEqual(result.1, Self.message)
        XCTAssertRV(crypt(session, UInt(CKM_DES3_CBC), iv: [UInt8](repeating: 0, count: 16), key: two, encrypt: true, Self.message).0,
                    CKR_MECHANISM_PARAM_INVALID, "a triple-DES IV has 8 bytes")
        XCTAssertRV(crypt(session, UInt(CKM_DES3_CBC), iv: hex("1234567890abcdef"), key: two, encrypt: true, [1, 2, 3]).0, CKR_DATA_LEN_RANGE)

        _ = derivableKey(session, type: UInt(CKK_DES3), value: [UInt8](repeating: 1, count: 16), expect: CKR_ATTRIBUTE_VALUE_INVALID)
        // Parity bits are not part of the key: a key written with any parity is taken as given.
        let evenParity = derivableKey(session, type: UInt(CKK_DES2), value: [UInt8](repeating: 3, count: 16))
        XCTAssertEqual(value(session, evenParity, UInt(CKA_VALUE)).1, [UInt8](repeating: 3, count: 16))
        let aes = derivableKey(session, type: UInt(CKK_AES), value: [UInt8](repeating: 1, count: 24))
        XCTAssertRV(crypt(session, UInt(CKM_DES3_ECB), iv: [], key: aes, encrypt: true, Self.message).0, CKR_KEY_TYPE_INCONSISTENT)
        XCTAssertEqual(value(session, three, UInt(CKA_VALUE_LEN)).0, CK_RV(CKR_ATTRIBUTE_TYPE_INVALID), "DES keys have no CKA_VALUE_LEN")
    }

    func test_generated_des_keys_have_their_type_length_and_odd_parity() {
        let session = userSession()
        for (generator, length) in [(UInt(CKM_DES2_KEY_GEN), 16), (UInt(CKM_DES3_KEY_GEN), 24)] {
            var key: CK_OBJECT_HANDLE = 0
            XCTAssertRV(withTemplate([(UInt(CKA_EXTRACTABLE), [1]), (UInt(CKA_SENSITIVE), [0])]) { t, c in
                mechanism(generator) { p11.C_GenerateKey!(session, $0, t, c, &key) }
            }, CKR_OK)
            let bytes = value(session, key).1 ?? []
            XCTAssertEqual(bytes.count, length)
            XCTAssertTrue(bytes.allSatisfy { $0.nonzeroBitCount % 2 == 1 }, "odd parity in every byte")
            let roundTrip = crypt(session, UInt(CKM_DES3_CBC_PAD), iv: [UInt8](repeating: 7, count: 8), key: key, encrypt: true, Array("PLAIN TEXT_".utf8))
            XCTAssertRV(roundTrip.0, CKR_OK)
            XCTAssertEqual(crypt(session, UInt(CKM_DES3_CBC_PAD), iv: [UInt8](repeating: 7, count: 8), key: key, encrypt: false, roundTrip.1).1,
                           Array("PLAIN TEXT_".utf8))
            // pkcs11-tool --keygen sends CKA_VALUE_LEN: the type's own length is taken, another refused.
            XCTAssertRV(withTemplate([(UInt(CKA_VALUE_LEN), Self.ulong(UInt(length)))]) { t, c in
                mechanism(generator) { p11.C_GenerateKey!(session, $0, t, c, &key) }
            }, CKR_OK)
            XCTAssertEqual(value(session, key, UInt(CKA_VALUE_LEN)).0, CK_RV(CKR_ATTRIBUTE_TYPE_INVALID))
            XCTAssertRV(withTemplate([(UInt(CKA_VALUE_LEN), Self.ulong(UInt(length + 8)))]) { t, c in
                mechanism(generator) { p11.C_GenerateKey!(session, $0, t, c, &key) }
            }, CKR_TEMPLATE_INCONSISTENT)
        }
    }

    func test_single_des_through_the_legacy_provider_matches_fips_81() throws {
        guard mechanisms().contains(CK_MECHANISM_TYPE(CKM_DES_CBC)) else {
            throw XCTSkip("OpenSSL's legacy provider is not installed: single DES is not offered")
        }
        let session = userSession()
        let key = derivableKey(session, type: UInt(CKK_DES), value: hex("0123456789abcdef"))
        let result = crypt(session, UInt(CKM_DES_CBC), iv: hex("1234567890abcdef"), key: key, encrypt: true, Self.message)
        XCTAssertRV(result.0, CKR_OK)
        XCTAssertEqual(result.1, hex("e5c7cdde872bf27c43e934008c389c0f683788499a7c05f6"))
    }

    func test_des3_cmac_md5_and_md5_hmac_match_their_vectors() {
        let session = userSession()
        var data = Self.message
        let three = derivableKey(session, type: UInt(CKK_DES3), value: hex("0123456789abcdef23456789abcdef01456789abcdef0123"))
        var mac = [UInt8](repeating: 0, count: 16)
        var length = CK_ULONG(mac.count)
        XCTAssertRV(mechanism(UInt(CKM_DES3_CMAC)) { p11.C_SignInit!(session, $0, three) }, CKR_OK)
        XCTAssertRV(p11.C_Sign!(session, &data, CK_ULONG(data.count), &mac, &length), CKR_OK)
        XCTAssertEqual(Array(mac.prefix(Int(length))), hex("a9019df17165438a"), "openssl mac -cipher DES-EDE3-CBC CMAC")

        var abc = Array("abc".utf8)
        length = CK_ULONG(mac.count)
        XCTAssertRV(mechanism(UInt(CKM_MD5)) { p11.C_DigestInit!(session, $0) }, CKR_OK)
        XCTAssertRV(p11.C_Digest!(session, &abc, 3, &mac, &length), CKR_OK)
        XCTAssertEqual(Array(mac.prefix(Int(length))), hex("900150983cd24fb0d6963f7d28e17f72"), "RFC 1321")

        // RFC 2104's first test case.
        let hmacKey = derivableKey(session, type: UInt(CKK_GENERIC_SECRET), value: [UInt8](repeating: 0x0b, count: 16))
        var hiThere = Array("Hi There".utf8)
        length = CK_ULONG(mac.count)
        XCTAssertRV(mechanism(UInt(CKM_MD5_HMAC)) { p11.C_SignInit!(session, $0, hmacKey) }, CKR_OK)
        XCTAssertRV(p11.C_Sign!(session, &hiThere, CK_ULONG(hiThere.count), &mac, &length), CKR_OK)
        XCTAssertEqual(Array(mac.prefix(Int(length))), hex("9294727a3638bb1c13f48ef8158bfc9d"))
    }

    func test_encrypt_data_derivations_take_whole_blocks_and_enough_of_them() {
        let session = userSession()
        let aes = derivableKey(session, type: UInt(CKK_AES), value: hex("000102030405060708090a0b0c0d0e0f"))
        func derive(_ type: UInt, _ parameter: [UInt8], base: CK_OBJECT_HANDLE, keyType: UInt, length: UInt?) -> (CK_RV, [UInt8]) {
            var key: CK_OBJECT_HANDLE = 0
            var template: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(keyType)),
                                               (UInt(CKA_EXTRACTABLE), [1]), (UInt(CKA_SENSITIVE), [0])]
            if let length { template.append((UInt(CKA_VALUE_LEN), Self.ulong(length))) }
            let result = withTemplate(template) { t, c in withParameter(type, parameter) { p11.C_DeriveKey!(session, $0, base, t, c, &key) } }
            return (result, result == CK_RV(CKR_OK) ? value(session, key).1 ?? [] : [])
        }
        // FIPS 197 C.1: AES-128 of 00112233…ff under 000102…0f.
        var plaintext = hex("00112233445566778899aabbccddeeff")
        // Each parameter points into `plaintext` for the length of the call.
        XCTAssertEqual(plaintext.withUnsafeMutableBytes { buffer in
            var params = CK_KEY_DERIVATION_STRING_DATA(pData: buffer.baseAddress?.assumingMemoryBound(to: CK_BYTE.self), ulLen: 16)
            return withUnsafeBytes(of: &params) { derive(UInt(CKM_AES_ECB_ENCRYPT_DATA), Array($0), base: aes, keyType: UInt(CKK_AES), length: 16).1 }
        }, hex("69c4e0d86a7b0430d8cdb78070b4c55a"))
        XCTAssertRV(plaintext.withUnsafeMutableBytes { buffer in
            var params = CK_KEY_DERIVATION_STRING_DATA(pData: buffer.baseAddress?.assumingMemoryBound(to: CK_BYTE.self), ulLen: 15)
            return withUnsafeBytes(of: &params) { derive(UInt(CKM_AES_ECB_ENCRYPT_DATA), Array($0), base: aes, keyType: UInt(CKK_AES), length: 16).0 }
        }, CKR_MECHANISM_PARAM_INVALID, "not a whole block")
        XCTAssertRV(plaintext.withUnsafeMutableBytes { buffer in
            var params = CK_KEY_DERIVATION_STRING_DATA(pData: buffer.baseAddress?.assumingMemoryBound(to: CK_BYTE.self), ulLen: 16)
            return withUnsafeBytes(of: &params) { derive(UInt(CKM_AES_ECB_ENCRYPT_DATA), Array($0), base: aes, keyType: UInt(CKK_AES), length: 32).0 }
        }, CKR_MECHANISM_PARAM_INVALID, "16 bytes of data cannot make a 32-byte key")

        // Triple DES, CBC: a DES3 key from 24 bytes of data, under the two-key vector's key and IV.
        let two = derivableKey(session, type: UInt(CKK_DES2), value: hex("0123456789abcdef23456789abcdef01"))
        var message = Self.message
        let derived = message.withUnsafeMutableBytes { buffer in
            var params = CK_DES_CBC_ENCRYPT_DATA_PARAMS()
            withUnsafeMutableBytes(of: &params.iv) { $0.copyBytes(from: hex("1234567890abcdef")) }
            params.pData = buffer.baseAddress?.assumingMemoryBound(to: CK_BYTE.self)
            params.length = 24
            return withUnsafeBytes(of: &params) { derive(UInt(CKM_DES3_CBC_ENCRYPT_DATA), Array($0), base: two, keyType: UInt(CKK_DES3), length: nil) }
        }
        XCTAssertRV(derived.0, CKR_OK)
        // The encrypted data with each byte's low bit set for odd parity.
        let encrypted = Array(hex("134b98f8eeb3f6079f1a82e0640d5f2f8e090661c42864a149f0cf718dd78b61").prefix(24))
        XCTAssertEqual(derived.1, encrypted.map { ($0 & 0xFE) | (($0 >> 1).nonzeroBitCount % 2 == 0 ? 1 : 0) })
    }

    func test_the_modern_policy_offers_no_legacy_mechanism() {
        XCTAssertTrue(mechanisms().contains(CK_MECHANISM_TYPE(CKM_DES3_CBC_PAD)))
        XCTAssertTrue(mechanisms().contains(CK_MECHANISM_TYPE(CKM_MD5)))
        withModernPolicy { modernPolicyOffersNoLegacyMechanism() }
    }

    private func modernPolicyOffersNoLegacyMechanism() {
        let offered = mechanisms()
        for legacy in [CKM_DES3_CBC_PAD, CKM_DES3_KEY_GEN, CKM_DES_CBC, CKM_MD5, CKM_MD5_HMAC, CKM_MD5_RSA_PKCS, CKM_DES3_CMAC, CKM_AES_MAC,
                       CKM_DSA_SHA256, CKM_DH_PKCS_DERIVE] {
            XCTAssertFalse(offered.contains(CK_MECHANISM_TYPE(legacy)), "0x\(String(legacy, radix: 16))")
        }
        let session = userSession()
        var info = CK_MECHANISM_INFO()
        XCTAssertRV(p11.C_GetMechanismInfo!(1, CK_MECHANISM_TYPE(CKM_MD5), &info), CKR_MECHANISM_INVALID)
        XCTAssertRV(mechanism(UInt(CKM_MD5)) { p11.C_DigestInit!(session, $0) }, CKR_MECHANISM_INVALID)
        _ = derivableKey(session, type: UInt(CKK_DES3), value: hex("0123456789abcdef23456789abcdef01456789abcdef0123"), expect: CKR_ATTRIBUTE_VALUE_INVALID,
                      "no DES key objects under the modern policy either")
    }

    func test_cbc_macs_are_the_last_block_of_zero_padded_cbc() {
        let session = userSession()
        let aes = derivableKey(session, type: UInt(CKK_AES), value: hex("000102030405060708090a0b0c0d0e0f"))
        func mac(_ type: UInt, _ parameter: [UInt8], key: CK_OBJECT_HANDLE, _ data: [UInt8]) -> (CK_RV, [UInt8]) {
            var data = data
            var out = [UInt8](repeating: 0, count: 32)
            var length = CK_ULONG(out.count)
            let initResult = withParameter(type, parameter) { p11.C_SignInit!(session, $0, key) }
            guard initResult == CK_RV(CKR_OK) else { return (initResult, []) }
            let result = p11.C_Sign!(session, &data, CK_ULONG(data.count), &out, &length)
            return (result, Array(out.prefix(Int(length))))
        }
        // One block: the AES encryption of FIPS 197 C.1, half of it for CKM_AES_MAC.
        XCTAssertEqual(mac(UInt(CKM_AES_MAC), [], key: aes, hex("00112233445566778899aabbccddeeff")).1, hex("69c4e0d86a7b0430"))
        XCTAssertEqual(mac(UInt(CKM_AES_MAC_GENERAL), Self.ulong(12), key: aes, hex("00112233445566778899aabbccddeeff")).1,
                       hex("69c4e0d86a7b0430d8cdb780"))
        // A partial block is zero-padded (openssl enc -aes-128-ecb of "abc" and 13 zero bytes).
        XCTAssertEqual(mac(UInt(CKM_AES_MAC_GENERAL), Self.ulong(16), key: aes, Array("abc".utf8)).1, hex("7516b2e97d7ecdc3ffd9c47b69c29174"))
        XCTAssertRV(mac(UInt(CKM_AES_MAC_GENERAL), Self.ulong(17), key: aes, [1]).0, CKR_MECHANISM_PARAM_INVALID)
        XCTAssertRV(mac(UInt(CKM_AES_MAC), Self.ulong(8), key: aes, [1]).0, CKR_MECHANISM_PARAM_INVALID, "CKM_AES_MAC takes no parameter")
        // Triple DES: the last block of CBC with a zero IV (openssl enc -des-ede3-cbc).
        let three = derivableKey(session, type: UInt(CKK_DES3), value: hex("0123456789abcdef23456789abcdef01456789abcdef0123"))
        XCTAssertEqual(mac(UInt(CKM_DES3_MAC), [], key: three, Self.message).1, hex("5351c9f3"))
        XCTAssertEqual(mac(UInt(CKM_DES3_MAC_GENERAL), Self.ulong(8), key: three, Self.message).1, hex("5351c9f385748c81"))
    }

    // MARK: DSA and Diffie-Hellman (FIPS 186, PKCS #3)

    private func generateDomain(_ session: CK_SESSION_HANDLE, _ type: UInt, bits: UInt) -> (CK_RV, CK_OBJECT_HANDLE) {
        var handle: CK_OBJECT_HANDLE = 0
        let result = withTemplate([(UInt(CKA_PRIME_BITS), Self.ulong(bits))]) { t, c in mechanism(type) { p11.C_GenerateKey!(session, $0, t, c, &handle) } }
        return (result, handle)
    }

    private func generatePair(_ session: CK_SESSION_HANDLE, _ type: UInt, domain: [(UInt, [UInt8])]) -> (CK_RV, CK_OBJECT_HANDLE, CK_OBJECT_HANDLE) {
        var publicKey: CK_OBJECT_HANDLE = 0, privateKey: CK_OBJECT_HANDLE = 0
        let result = withTemplate(domain) { pt, pc in
            withTemplate([(UInt(CKA_SENSITIVE), [1])]) { vt, vc in mechanism(type) { p11.C_GenerateKeyPair!(session, $0, pt, pc, vt, vc, &publicKey, &privateKey) } }
        }
        return (result, publicKey, privateKey)
    }

    func test_dsa_parameters_keys_and_signatures() {
        let session = userSession()
        let (result, domain) = generateDomain(session, UInt(CKM_DSA_PARAMETER_GEN), bits: 1024)
        XCTAssertRV(result, CKR_OK)
        XCTAssertEqual(value(session, domain, UInt(CKA_CLASS)).1, Self.ulong(UInt(CKO_DOMAIN_PARAMETERS)))
        XCTAssertEqual(value(session, domain, UInt(CKA_PRIME_BITS)).1, Self.ulong(1024))
        XCTAssertEqual(value(session, domain, UInt(CKA_SUB_PRIME_BITS)).1, Self.ulong(160))
        let parts = [UInt(CKA_PRIME), UInt(CKA_SUBPRIME), UInt(CKA_BASE)].map { ($0, value(session, domain, $0).1 ?? []) }
        XCTAssertEqual(parts[0].1.count, 128)
        let pair = generatePair(session, UInt(CKM_DSA_KEY_PAIR_GEN), domain: parts)
        XCTAssertRV(pair.0, CKR_OK)
        XCTAssertGreaterThan(value(session, pair.1, UInt(CKA_VALUE)).1?.count ?? 0, 100, "y is public")
        XCTAssertRV(value(session, pair.2, UInt(CKA_VALUE)).0, CKR_ATTRIBUTE_SENSITIVE, "x is not")

        var data = Array("Message to sign".utf8)
        var signature = [UInt8](repeating: 0, count: 64)
        var length = CK_ULONG(signature.count)
        XCTAssertRV(mechanism(UInt(CKM_DSA_SHA256)) { p11.C_SignInit!(session, $0, pair.2) }, CKR_OK)
        XCTAssertRV(p11.C_Sign!(session, &data, CK_ULONG(data.count), &signature, &length), CKR_OK)
        XCTAssertEqual(length, 40, "r‖s, 20 bytes each for a 160-bit q")
        XCTAssertRV(mechanism(UInt(CKM_DSA_SHA256)) { p11.C_VerifyInit!(session, $0, pair.1) }, CKR_OK)
        XCTAssertRV(p11.C_Verify!(session, &data, CK_ULONG(data.count), &signature, length), CKR_OK)
        signature[5] ^= 1
        XCTAssertRV(mechanism(UInt(CKM_DSA_SHA256)) { p11.C_VerifyInit!(session, $0, pair.1) }, CKR_OK)
        XCTAssertRV(p11.C_Verify!(session, &data, CK_ULONG(data.count), &signature, length), CKR_SIGNATURE_INVALID)
        // Raw DSA takes a hash: 7 bytes are no hash (pkcs11-check's test_raw_dsa_wrong_length_digest).
        var seven = [UInt8](repeating: 7, count: 7)
        length = CK_ULONG(signature.count)
        XCTAssertRV(mechanism(UInt(CKM_DSA)) { p11.C_SignInit!(session, $0, pair.2) }, CKR_OK)
        XCTAssertRV(p11.C_Sign!(session, &seven, 7, &signature, &length), CKR_DATA_LEN_RANGE)
        var digest = [UInt8](repeating: 7, count: 20)
        length = CK_ULONG(signature.count)
        XCTAssertRV(mechanism(UInt(CKM_DSA)) { p11.C_SignInit!(session, $0, pair.2) }, CKR_OK)
        XCTAssertRV(p11.C_Sign!(session, &digest, 20, &signature, &length), CKR_OK)
        XCTAssertRV(generatePair(session, UInt(CKM_DSA_KEY_PAIR_GEN), domain: Array(parts.prefix(1))).0, CKR_TEMPLATE_INCOMPLETE)
        // A "private value" of 1 MiB would cost g^x without bound: refused before any arithmetic.
        var imported: CK_OBJECT_HANDLE = 0
        let huge: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_PRIVATE_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_DSA)))] + parts +
            [(UInt(CKA_VALUE), [UInt8](repeating: 0xA5, count: 1 << 20))]
        let started = Date()
        XCTAssertRV(withTemplate(huge) { p11.C_CreateObject!(session, $0, $1, &imported) }, CKR_ATTRIBUTE_VALUE_INVALID)
        XCTAssertLessThan(Date().timeIntervalSince(started), 2)
        XCTAssertRV(generateDomain(session, UInt(CKM_DSA_PARAMETER_GEN), bits: 1000).0, CKR_KEY_SIZE_RANGE)
    }

    func test_domain_parameters_of_sizes_outside_fips_186_4_generate() {
        let session = userSession()
        XCTAssertRV(generateDomain(session, UInt(CKM_DSA_PARAMETER_GEN), bits: 512).0, CKR_OK, "FIPS 186-2 method")
        XCTAssertRV(generateDomain(session, UInt(CKM_DH_PKCS_PARAMETER_GEN), bits: 1536).0, CKR_OK, "FIPS 186-2 method")
        XCTAssertRV(generateDomain(session, UInt(CKM_DH_PKCS_PARAMETER_GEN), bits: 4160).0, CKR_KEY_SIZE_RANGE, "generation stops at 4096 bits")
        var info = CK_MECHANISM_INFO()
        XCTAssertRV(p11.C_GetMechanismInfo!(1, CK_MECHANISM_TYPE(CKM_DSA_PARAMETER_GEN), &info), CKR_OK)
        XCTAssertEqual([info.ulMinKeySize, info.ulMaxKeySize], [512, 4096])
    }

    func test_diffie_hellman_parties_derive_the_same_key() {
        let session = userSession()
        let (result, domain) = generateDomain(session, UInt(CKM_DH_PKCS_PARAMETER_GEN), bits: 1024)
        XCTAssertRV(result, CKR_OK)
        let parts = [UInt(CKA_PRIME), UInt(CKA_BASE)].map { ($0, value(session, domain, $0).1 ?? []) }
        XCTAssertEqual(value(session, domain, UInt(CKA_SUBPRIME)).0, CK_RV(CKR_ATTRIBUTE_TYPE_INVALID), "a PKCS #3 group has no q")
        let alice = generatePair(session, UInt(CKM_DH_PKCS_KEY_PAIR_GEN), domain: parts)
        let bob = generatePair(session, UInt(CKM_DH_PKCS_KEY_PAIR_GEN), domain: parts)
        XCTAssertRV(alice.0, CKR_OK)
        XCTAssertRV(bob.0, CKR_OK)
        func derive(_ mine: CK_OBJECT_HANDLE, _ theirs: [UInt8]) -> (CK_RV, [UInt8]) {
            var key: CK_OBJECT_HANDLE = 0
            let template: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_AES))),
                                               (UInt(CKA_VALUE_LEN), Self.ulong(16)), (UInt(CKA_SENSITIVE), [0]), (UInt(CKA_EXTRACTABLE), [1])]
            let rv = withTemplate(template) { t, c in withParameter(UInt(CKM_DH_PKCS_DERIVE), theirs) { p11.C_DeriveKey!(session, $0, mine, t, c, &key) } }
            return (rv, rv == CK_RV(CKR_OK) ? value(session, key).1 ?? [] : [])
        }
        let alicePublic = value(session, alice.1, UInt(CKA_VALUE)).1 ?? []
        let bobPublic = value(session, bob.1, UInt(CKA_VALUE)).1 ?? []
        let ab = derive(alice.2, bobPublic), ba = derive(bob.2, alicePublic)
        XCTAssertRV(ab.0, CKR_OK)
        XCTAssertEqual(ab.1.count, 16)
        XCTAssertEqual(ab.1, ba.1)
        XCTAssertRV(derive(alice.2, [1]).0, CKR_MECHANISM_PARAM_INVALID, "1 is not a public value of the group")
    }
}
