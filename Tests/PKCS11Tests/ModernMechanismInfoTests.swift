import CPKCS11
import XCTest
@testable import PKCS11

/// C_GetMechanismList and C_GetMechanismInfo for the PKCS#11 3.x mechanisms: each listed with the
/// functions the specification's "Mechanisms vs. Functions" tables give it and no others, and with
/// key sizes in the unit its section uses.
final class ModernMechanismInfoTests: ModernMechanismTestCase {
    private func mechanismList(_ slot: CK_SLOT_ID) -> [CK_MECHANISM_TYPE] {
        var count: CK_ULONG = 0
        XCTAssertRV(p11.C_GetMechanismList!(slot, nil, &count), CKR_OK)
        var list = [CK_MECHANISM_TYPE](repeating: 0, count: Int(count))
        XCTAssertRV(p11.C_GetMechanismList!(slot, &list, &count), CKR_OK)
        return Array(list.prefix(Int(count)))
    }

    private func info(_ slot: CK_SLOT_ID, _ type: CK_MECHANISM_TYPE) -> (CK_RV, CK_MECHANISM_INFO) {
        var info = CK_MECHANISM_INFO()
        let result = p11.C_GetMechanismInfo!(slot, type, &info)
        return (result, info)
    }

    func test_the_mechanism_list_has_no_duplicates_and_each_size_range_is_ordered() {
        let slot = makeToken()
        let list = mechanismList(slot)
        XCTAssertFalse(list.isEmpty)
        XCTAssertEqual(Set(list).count, list.count, "duplicates in C_GetMechanismList")
        for type in list {
            let (result, info) = info(slot, type)
            XCTAssertRV(result, CKR_OK, "mechanism \(type)")
            XCTAssertLessThanOrEqual(info.ulMinKeySize, info.ulMaxKeySize, "mechanism \(type)")
        }
    }

    func test_an_unknown_mechanism_is_mechanism_invalid() {
        let slot = makeToken()
        // CKM_VENDOR_DEFINED (the header's cast, which Swift does not import, is KC_VENDOR_DEFINED).
        let unknownVendorMechanism = CK_MECHANISM_TYPE(KC_VENDOR_DEFINED) | 4660
        XCTAssertRV(info(slot, unknownVendorMechanism).0, CKR_MECHANISM_INVALID)
    }

    private typealias Sizes = @Sendable (CK_ULONG, CK_ULONG) -> Bool

    private static func exactly(_ ranges: (CK_ULONG, CK_ULONG)...) -> Sizes {
        { low, high in ranges.contains { $0.0 == low && $0.1 == high } }
    }

    private static func including(_ size: CK_ULONG) -> Sizes {
        { low, high in low <= size && size <= high }
    }

    private static let anySize: Sizes = { _, _ in true }

    func test_the_3x_mechanisms_have_the_flags_and_key_sizes_their_tables_give() {
        let slot = makeToken()
        let listed = Set(mechanismList(slot))
        let encryptDecrypt = CK_FLAGS(CKF_ENCRYPT | CKF_DECRYPT), signVerify = CK_FLAGS(CKF_SIGN | CKF_VERIFY)
        let wrapUnwrap = CK_FLAGS(CKF_WRAP | CKF_UNWRAP), generate = CK_FLAGS(CKF_GENERATE), deriveFlag = CK_FLAGS(CKF_DERIVE)
        // What each family may carry besides its required flags: the message-based functions,
        // and for elliptic curves their capability flags.
        let cipherExtra = encryptDecrypt | wrapUnwrap | Spec3.CKF_MESSAGE_ENCRYPT | Spec3.CKF_MESSAGE_DECRYPT | Spec3.CKF_MULTI_MESSAGE
        let signExtra = signVerify | Spec3.CKF_MESSAGE_SIGN | Spec3.CKF_MESSAGE_VERIFY | Spec3.CKF_MULTI_MESSAGE
        let curveExtra = CK_FLAGS(CKF_EC_F_P | CKF_EC_NAMEDCURVE | CKF_EC_UNCOMPRESS | CKF_EC_COMPRESS) | Spec3.CKF_EC_F_2M | Spec3.CKF_EC_ECPARAMETERS
            | Spec3.CKF_EC_CURVENAME
        let aesBytes = Self.exactly((16, 32)), chachaSizes = Self.exactly((32, 32), (256, 256))
        var rows: [(String, UInt, CK_FLAGS, CK_FLAGS, Sizes)] = [
            ("CKM_AES_GCM", UInt(CKM_AES_GCM), encryptDecrypt, cipherExtra, aesBytes),
            ("CKM_AES_CCM", UInt(CKM_AES_CCM), encryptDecrypt, cipherExtra, aesBytes),
            ("CKM_AES_CTS", UInt(CKM_AES_CTS), encryptDecrypt, cipherExtra, aesBytes),
            ("CKM_AES_OFB", UInt(CKM_AES_OFB), encryptDecrypt, cipherExtra, aesBytes),
            ("CKM_AES_CFB8", UInt(CKM_AES_CFB8), encryptDecrypt, cipherExtra, aesBytes),
            ("CKM_AES_CFB128", UInt(CKM_AES_CFB128), encryptDecrypt, cipherExtra, aesBytes),
            ("CKM_AES_XTS", UInt(CKM_AES_XTS), encryptDecrypt, cipherExtra, Self.exactly((32, 64))),
            ("CKM_AES_XTS_KEY_GEN", UInt(CKM_AES_XTS_KEY_GEN), generate, 0, Self.exactly((32, 64))),
            ("CKM_CHACHA20", UInt(CKM_CHACHA20), encryptDecrypt, cipherExtra, chachaSizes),
            ("CKM_CHACHA20_KEY_GEN", UInt(CKM_CHACHA20_KEY_GEN), generate, 0, Self.exactly((32, 32))),
            ("CKM_CHACHA20_POLY1305", UInt(CKM_CHACHA20_POLY1305), encryptDecrypt, cipherExtra, chachaSizes),
            ("CKM_AES_MAC", UInt(CKM_AES_MAC), signVerify, signExtra, aesBytes),
            ("CKM_AES_MAC_GENERAL", UInt(CKM_AES_MAC_GENERAL), signVerify, signExtra, aesBytes),
            ("CKM_AES_CMAC_GENERAL", UInt(CKM_AES_CMAC_GENERAL), signVerify, signExtra, aesBytes),
            ("CKM_RSA_PKCS_PSS", UInt(CKM_RSA_PKCS_PSS), signVerify, signExtra, Self.including(2048)),
            ("CKM_RSA_X_509", UInt(CKM_RSA_X_509), encryptDecrypt | signVerify,
             CK_FLAGS(CKF_SIGN_RECOVER | CKF_VERIFY_RECOVER) | wrapUnwrap | Spec3.CKF_ENCAPSULATE | Spec3.CKF_DECAPSULATE, Self.including(2048)),
            ("CKM_EDDSA", UInt(CKM_EDDSA), signVerify, signExtra, Self.exactly((255, 448))),
            ("CKM_HKDF_DERIVE", UInt(CKM_HKDF_DERIVE), deriveFlag, 0, Self.anySize),
            ("CKM_HKDF_DATA", UInt(CKM_HKDF_DATA), deriveFlag, 0, Self.anySize),
            ("CKM_HKDF_KEY_GEN", UInt(CKM_HKDF_KEY_GEN), generate, 0, Self.anySize),
            ("CKM_PKCS5_PBKD2", UInt(CKM_PKCS5_PBKD2), generate, 0, Self.anySize),
            ("CKM_GENERIC_SECRET_KEY_GEN", UInt(CKM_GENERIC_SECRET_KEY_GEN), generate, 0, Self.anySize),
            ("CKM_SP800_108_COUNTER_KDF", UInt(CKM_SP800_108_COUNTER_KDF), deriveFlag, 0, Self.including(256)),
            ("CKM_SP800_108_FEEDBACK_KDF", UInt(CKM_SP800_108_FEEDBACK_KDF), deriveFlag, 0, Self.including(256)),
            ("CKM_SP800_108_DOUBLE_PIPELINE_KDF", UInt(CKM_SP800_108_DOUBLE_PIPELINE_KDF), deriveFlag, 0, Self.including(256)),
            ("CKM_ECDH1_DERIVE", UInt(CKM_ECDH1_DERIVE), deriveFlag, curveExtra, { low, high in low <= 255 && high >= 256 }),
            ("CKM_ECDH1_COFACTOR_DERIVE", UInt(CKM_ECDH1_COFACTOR_DERIVE), deriveFlag, curveExtra, Self.including(256)),
            ("CKM_AES_KEY_WRAP", UInt(CKM_AES_KEY_WRAP), wrapUnwrap, encryptDecrypt, aesBytes),
            ("CKM_AES_KEY_WRAP_PAD", UInt(CKM_AES_KEY_WRAP_PAD), wrapUnwrap, encryptDecrypt, aesBytes),
            ("CKM_RSA_AES_KEY_WRAP", UInt(CKM_RSA_AES_KEY_WRAP), wrapUnwrap, 0, Self.including(2048)),
        ]
        let hmacGeneral = [("CKM_SHA_1_HMAC_GENERAL", UInt(CKM_SHA_1_HMAC_GENERAL)), ("CKM_SHA224_HMAC_GENERAL", UInt(CKM_SHA224_HMAC_GENERAL)),
                           ("CKM_SHA256_HMAC_GENERAL", UInt(CKM_SHA256_HMAC_GENERAL)), ("CKM_SHA384_HMAC_GENERAL", UInt(CKM_SHA384_HMAC_GENERAL)),
                           ("CKM_SHA512_HMAC_GENERAL", UInt(CKM_SHA512_HMAC_GENERAL)), ("CKM_SHA3_224_HMAC_GENERAL", UInt(CKM_SHA3_224_HMAC_GENERAL)),
                           ("CKM_SHA3_256_HMAC_GENERAL", UInt(CKM_SHA3_256_HMAC_GENERAL)), ("CKM_SHA3_384_HMAC_GENERAL", UInt(CKM_SHA3_384_HMAC_GENERAL)),
                           ("CKM_SHA3_512_HMAC_GENERAL", UInt(CKM_SHA3_512_HMAC_GENERAL))]
        rows += hmacGeneral.map { ($0.0, $0.1, signVerify, signExtra, Self.anySize) }
        let sha3RSA = [("CKM_SHA3_224_RSA_PKCS", UInt(CKM_SHA3_224_RSA_PKCS)), ("CKM_SHA3_256_RSA_PKCS", UInt(CKM_SHA3_256_RSA_PKCS)),
                       ("CKM_SHA3_384_RSA_PKCS", UInt(CKM_SHA3_384_RSA_PKCS)), ("CKM_SHA3_512_RSA_PKCS", UInt(CKM_SHA3_512_RSA_PKCS)),
                       ("CKM_SHA3_224_RSA_PKCS_PSS", UInt(CKM_SHA3_224_RSA_PKCS_PSS)), ("CKM_SHA3_256_RSA_PKCS_PSS", UInt(CKM_SHA3_256_RSA_PKCS_PSS)),
                       ("CKM_SHA3_384_RSA_PKCS_PSS", UInt(CKM_SHA3_384_RSA_PKCS_PSS)), ("CKM_SHA3_512_RSA_PKCS_PSS", UInt(CKM_SHA3_512_RSA_PKCS_PSS))]
        rows += sha3RSA.map { ($0.0, $0.1, signVerify, signExtra, Self.including(2048)) }
        let sha3ECDSA = [("CKM_ECDSA_SHA3_224", UInt(CKM_ECDSA_SHA3_224)), ("CKM_ECDSA_SHA3_256", UInt(CKM_ECDSA_SHA3_256)),
                         ("CKM_ECDSA_SHA3_384", UInt(CKM_ECDSA_SHA3_384)), ("CKM_ECDSA_SHA3_512", UInt(CKM_ECDSA_SHA3_512))]
        rows += sha3ECDSA.map { ($0.0, $0.1, signVerify, signExtra | curveExtra, { low, high in low <= 256 && high >= 384 }) }

        let alwaysAllowed = CK_FLAGS(CKF_HW) | Spec3.CKF_EXTENSION
        for (name, type, required, allowed, sizes) in rows {
            XCTAssertTrue(listed.contains(CK_MECHANISM_TYPE(type)), "\(name) is not in C_GetMechanismList")
            let (result, info) = info(slot, CK_MECHANISM_TYPE(type))
            XCTAssertRV(result, CKR_OK, name)
            XCTAssertEqual(info.flags & required, required, "\(name) lacks flags 0x\(String(required & ~info.flags, radix: 16))")
            XCTAssertEqual(info.flags & ~(required | allowed | alwaysAllowed), 0,
                           "\(name) has flags 0x\(String(info.flags & ~(required | allowed | alwaysAllowed), radix: 16)) its table does not give it")
            XCTAssertTrue(sizes(info.ulMinKeySize, info.ulMaxKeySize), "\(name) key sizes \(info.ulMinKeySize)…\(info.ulMaxKeySize)")
        }
    }

    /// ML-DSA and ML-KEM are not listed: nothing here could check them. Should one be listed, it
    /// must at least make a key pair (parameter set 2), and the test is skipped as unverifiable.
    func test_post_quantum_mechanisms_are_not_listed_or_make_a_key_pair() throws {
        let slot = makeToken()
        let listed = Set(mechanismList(slot))
        let postQuantum = [("CKM_ML_DSA", Spec3.CKM_ML_DSA), ("CKM_ML_DSA_KEY_PAIR_GEN", Spec3.CKM_ML_DSA_KEY_PAIR_GEN),
                           ("CKM_ML_KEM", Spec3.CKM_ML_KEM), ("CKM_ML_KEM_KEY_PAIR_GEN", Spec3.CKM_ML_KEM_KEY_PAIR_GEN)]
        let present = postQuantum.filter { listed.contains(CK_MECHANISM_TYPE($0.1)) }
        guard !present.isEmpty else {
            for (name, type) in postQuantum {
                XCTAssertRV(info(slot, CK_MECHANISM_TYPE(type)).0, CKR_MECHANISM_INVALID, name)
            }
            return
        }
        let dsa = present.contains { $0.1 == Spec3.CKM_ML_DSA || $0.1 == Spec3.CKM_ML_DSA_KEY_PAIR_GEN }
        let session = openSession(slot, readWrite: true)
        XCTAssertRV(login(session), CKR_OK)
        let made = generateKeyPair(session, dsa ? Spec3.CKM_ML_DSA_KEY_PAIR_GEN : Spec3.CKM_ML_KEM_KEY_PAIR_GEN,
                                   public: [(UInt(CKA_TOKEN), [0]), (Spec3.CKA_PARAMETER_SET, Self.ulong(2))], private: [(UInt(CKA_TOKEN), [0])])
        XCTAssertRV(made.0, CKR_OK)
        throw XCTSkip("\(present.map(\.0)) listed and makes keys; no independent implementation here to verify it")
    }
}
