import CPKCS11
import XCTest
@testable import PKCS11

/// CK_HKDF_PARAMS (CKM_HKDF_DERIVE, CKM_HKDF_DATA) and CK_PKCS5_PBKD2_PARAMS2 (CKM_PKCS5_PBKD2
/// through C_GenerateKey): RFC 5869 and RFC 6070 read through the parameters, and each
/// malformed parameter refused with its exact CK_RV.
final class ModernKDFParameterTests: ModernMechanismTestCase {
    private func hkdf(_ prf: UInt, extract: Bool = true, expand: Bool = true, saltType: UInt, salt: [UInt8] = [], saltKey: CK_OBJECT_HANDLE = 0,
                      info: [UInt8] = [], type: UInt = UInt(CKM_HKDF_DERIVE), length: Int? = nil) -> UnsafeMutablePointer<CK_MECHANISM> {
        let params = CK_HKDF_PARAMS(bExtract: extract ? 1 : 0, bExpand: expand ? 1 : 0, prfHashMechanism: CK_MECHANISM_TYPE(prf), ulSaltType: CK_ULONG(saltType),
                                    pSalt: memory.bytes(salt), ulSaltLen: CK_ULONG(salt.count), hSaltKey: saltKey,
                                    pInfo: memory.bytes(info), ulInfoLen: CK_ULONG(info.count))
        return memory.mechanism(type, params, length: length)
    }

    private func derivable(_ session: CK_SESSION_HANDLE, _ value: [UInt8], type: UInt = UInt(CKK_GENERIC_SECRET)) -> CK_OBJECT_HANDLE {
        readableKey(session, type, value, UInt(CKA_DERIVE))
    }

    // RFC 5869 Appendix A: (hash, IKM, salt or none, info, L, PRK, OKM).
    private typealias HKDFCase = (prf: UInt, ikm: [UInt8], salt: [UInt8]?, info: [UInt8], length: UInt, prk: [UInt8], okm: [UInt8])
    private let case1: HKDFCase = (UInt(CKM_SHA256), [UInt8](repeating: 0x0b, count: 22), Array(0...12).map(UInt8.init), Array(0xF0...0xF9).map(UInt8.init), 42,
                                   hex("077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5"),
                                   hex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"))
    private let case3: HKDFCase = (UInt(CKM_SHA256), [UInt8](repeating: 0x0b, count: 22), nil, [], 42,
                                   hex("19ef24a32c717b167f33a91d6f648bdf96596776afdb6377ac434c1c293ccb04"),
                                   hex("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8"))
    private let case4: HKDFCase = (UInt(CKM_SHA_1), [UInt8](repeating: 0x0b, count: 11), Array(0...12).map(UInt8.init), Array(0xF0...0xF9).map(UInt8.init), 42,
                                   hex("9b6c18c432a7bf8f0e71c8eb88f4b30baa2ba243"),
                                   hex("085a01ea1b10f36933068b56efa5ad81a4f14b822f5b091568a9cdd4f155fda2c22e422478d305f3f896"))

    private func hkdf(_ vector: HKDFCase, extract: Bool = true, expand: Bool = true, type: UInt = UInt(CKM_HKDF_DERIVE)) -> UnsafeMutablePointer<CK_MECHANISM> {
        hkdf(vector.prf, extract: extract, expand: expand, saltType: vector.salt == nil ? UInt(CKF_HKDF_SALT_NULL) : UInt(CKF_HKDF_SALT_DATA),
             salt: vector.salt ?? [], info: vector.info, type: type)
    }

    // MARK: HKDF known answers

    func test_hkdf_extract_and_expand_give_rfc_5869_cases_1_3_and_4() {
        let session = userSession()
        for (name, vector) in [("1", case1), ("3 (CKF_HKDF_SALT_NULL)", case3), ("4 (SHA-1)", case4)] {
            let base = derivable(session, vector.ikm)
            XCTAssertEqual(derivedValue(session, hkdf(vector), base, readableTemplate(length: vector.length)), vector.okm, "RFC 5869 case \(name)")
        }
    }

    func test_hkdf_makes_an_aes_key_of_the_first_32_bytes_of_case_1() {
        let session = userSession()
        let (result, key) = derive(session, hkdf(case1), derivable(session, case1.ikm), readableTemplate(UInt(CKK_AES), length: 32, UInt(CKA_ENCRYPT)))
        XCTAssertRV(result, CKR_OK)
        XCTAssertEqual(ulongValue(session, key, UInt(CKA_KEY_TYPE)), UInt(CKK_AES))
        XCTAssertEqual(ulongValue(session, key, UInt(CKA_CLASS)), UInt(CKO_SECRET_KEY))
        XCTAssertEqual(value(session, key).1, Array(case1.okm.prefix(32)))
    }

    func test_hkdf_extract_alone_gives_the_prk_and_expand_alone_gives_the_okm() {
        let session = userSession()
        for vector in [case1, case4] {
            let base = derivable(session, vector.ikm)
            XCTAssertEqual(derivedValue(session, hkdf(vector, expand: false), base, readableTemplate()), vector.prk, "without CKA_VALUE_LEN")
            XCTAssertEqual(derivedValue(session, hkdf(vector, expand: false), base, readableTemplate(length: UInt(vector.prk.count))), vector.prk)
            let prk = derivable(session, vector.prk)
            XCTAssertEqual(derivedValue(session, hkdf(vector, extract: false), prk, readableTemplate(length: vector.length)), vector.okm)
        }
    }

    func test_hkdf_without_value_len_gives_hash_length_bytes() {
        let session = userSession()
        for vector in [case1, case4] {
            XCTAssertEqual(derivedValue(session, hkdf(vector), derivable(session, vector.ikm), readableTemplate()), Array(vector.okm.prefix(vector.prk.count)),
                           "T(1) alone")
        }
    }

    func test_hkdf_salt_key_takes_the_salt_from_the_value_of_h_salt_key() {
        let session = userSession()
        let salt = derivable(session, case1.salt ?? [])
        let mechanism = hkdf(case1.prf, saltType: UInt(CKF_HKDF_SALT_KEY), saltKey: salt, info: case1.info)
        XCTAssertEqual(derivedValue(session, mechanism, derivable(session, case1.ikm), readableTemplate(length: 42)), case1.okm)
    }

    func test_hkdf_data_makes_a_data_object_holding_the_okm() {
        let session = userSession()
        let template: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_DATA))), (UInt(CKA_TOKEN), [0]), (UInt(CKA_VALUE_LEN), Self.ulong(42))]
        let (result, object) = derive(session, hkdf(case1, type: UInt(CKM_HKDF_DATA)), derivable(session, case1.ikm), template)
        XCTAssertRV(result, CKR_OK)
        XCTAssertEqual(ulongValue(session, object, UInt(CKA_CLASS)), UInt(CKO_DATA))
        XCTAssertEqual(value(session, object).1, case1.okm)
    }

    func test_hkdf_takes_a_data_object_as_input_when_it_extracts_with_a_salt() {
        let session = userSession()
        var object: CK_OBJECT_HANDLE = 0
        let (attributes, count) = memory.template([(UInt(CKA_CLASS), Self.ulong(UInt(CKO_DATA))), (UInt(CKA_TOKEN), [0]), (UInt(CKA_VALUE), case1.ikm),
                                                   (UInt(CKA_APPLICATION), Array("modern-test".utf8))])
        XCTAssertRV(p11.C_CreateObject!(session, attributes, count, &object), CKR_OK)
        XCTAssertEqual(derivedValue(session, hkdf(case1), object, readableTemplate(length: 42)), case1.okm)
    }

    func test_hkdf_derives_from_a_ckk_hkdf_key_and_hkdf_key_gen_needs_a_length() {
        let session = userSession()
        let base = derivable(session, case1.ikm, type: CK_ULONG(CKK_HKDF))
        XCTAssertEqual(derivedValue(session, hkdf(case1), base, readableTemplate(length: 42)), case1.okm)
        let (made, key) = generateKey(session, memory.mechanism(UInt(CKM_HKDF_KEY_GEN)), Self.readable + [(UInt(CKA_VALUE_LEN), Self.ulong(48)), (UInt(CKA_DERIVE), [1])])
        XCTAssertRV(made, CKR_OK)
        XCTAssertEqual(ulongValue(session, key, UInt(CKA_KEY_TYPE)), CK_ULONG(CKK_HKDF))
        XCTAssertEqual(value(session, key).1?.count, 48)
        XCTAssertRV(generateKey(session, memory.mechanism(UInt(CKM_HKDF_KEY_GEN)), [(UInt(CKA_TOKEN), [0]), (UInt(CKA_DERIVE), [1])]).0, CKR_TEMPLATE_INCOMPLETE)
        XCTAssertRV(generateKey(session, memory.mechanism(UInt(CKM_GENERIC_SECRET_KEY_GEN)), readableTemplate(UInt(CKK_GENERIC_SECRET), UInt(CKA_SIGN))).0, CKR_TEMPLATE_INCOMPLETE,
                    "CKM_GENERIC_SECRET_KEY_GEN without CKA_VALUE_LEN")
    }

    // MARK: HKDF refusals

    private func hkdfRefusal(_ mechanism: UnsafeMutablePointer<CK_MECHANISM>, base type: UInt = UInt(CKK_GENERIC_SECRET)) -> CK_RV {
        let session = userSession()
        return derive(session, mechanism, derivable(session, [UInt8](repeating: 0x42, count: 32), type: type), readableTemplate(length: 32)).0
    }

    func test_hkdf_that_neither_extracts_nor_expands_is_mechanism_param_invalid() {
        XCTAssertRV(hkdfRefusal(hkdf(UInt(CKM_SHA256), extract: false, expand: false, saltType: UInt(CKF_HKDF_SALT_NULL))), CKR_MECHANISM_PARAM_INVALID)
    }

    func test_hkdf_unknown_salt_type_is_mechanism_param_invalid() {
        let neitherNullDataNorKey: UInt = 3
        XCTAssertRV(hkdfRefusal(hkdf(UInt(CKM_SHA256), saltType: neitherNullDataNorKey, salt: Array("salt".utf8))), CKR_MECHANISM_PARAM_INVALID)
    }

    func test_hkdf_salt_type_data_without_salt_is_mechanism_param_invalid() {
        XCTAssertRV(hkdfRefusal(hkdf(UInt(CKM_SHA256), saltType: UInt(CKF_HKDF_SALT_DATA))), CKR_MECHANISM_PARAM_INVALID)
    }

    func test_hkdf_prf_that_is_not_a_hash_is_mechanism_param_invalid() {
        XCTAssertRV(hkdfRefusal(hkdf(UInt(CKM_AES_ECB), saltType: UInt(CKF_HKDF_SALT_DATA), salt: Array("salt".utf8))), CKR_MECHANISM_PARAM_INVALID)
    }

    func test_hkdf_parameter_of_56_bytes_is_mechanism_param_invalid() {
        XCTAssertRV(hkdfRefusal(hkdf(UInt(CKM_SHA256), saltType: UInt(CKF_HKDF_SALT_DATA), salt: Array("salt".utf8), length: 56)), CKR_MECHANISM_PARAM_INVALID)
    }

    func test_hkdf_from_an_aes_key_is_key_type_inconsistent() {
        XCTAssertRV(hkdfRefusal(hkdf(UInt(CKM_SHA256), saltType: UInt(CKF_HKDF_SALT_DATA), salt: Array("salt".utf8)), base: UInt(CKK_AES)), CKR_KEY_TYPE_INCONSISTENT)
    }

    // MARK: PBKDF2

    private func pbkdf2(_ password: [UInt8], _ salt: [UInt8], iterations: CK_ULONG, prf: CK_ULONG, saltSource: CK_ULONG = CK_ULONG(CKZ_SALT_SPECIFIED),
                        prfData: [UInt8] = [], passwordLength: CK_ULONG? = nil, length: Int? = nil) -> UnsafeMutablePointer<CK_MECHANISM> {
        let params = CK_PKCS5_PBKD2_PARAMS2(saltSource: saltSource, pSaltSourceData: memory.raw(salt), ulSaltSourceDataLen: CK_ULONG(salt.count),
                                            iterations: iterations, prf: prf, pPrfData: memory.raw(prfData), ulPrfDataLen: CK_ULONG(prfData.count),
                                            pPassword: memory.bytes(password), ulPasswordLen: passwordLength ?? CK_ULONG(password.count))
        return memory.mechanism(UInt(CKM_PKCS5_PBKD2), params, length: length)
    }

    func test_pbkdf2_gives_the_rfc_6070_vectors_and_marks_the_key_local() {
        let session = userSession()
        let vectors: [(String, String, CK_ULONG, String)] = [
            ("password", "salt", 1, "0c60c80f961f0e71f3a9b524af6012062fe037a6"), ("password", "salt", 2, "ea6c014dc72d6f8ccd1ed92ace1d41f0d8de8957"),
            ("password", "salt", 4096, "4b007901b765489abead49d926f721d065a429c1"),
            ("passwordPASSWORDpassword", "saltSALTsaltSALTsaltSALTsaltSALTsalt", 4096, "3d2eec4fe41c849b80c8d83662c0e44a8b291a964cf2f07038"),
            ("pass\0word", "sa\0lt", 4096, "56fa6aa75548099dcc37d7f03425e0c3"),
        ]
        for (password, salt, iterations, expected) in vectors {
            let mechanism = pbkdf2(Array(password.utf8), Array(salt.utf8), iterations: iterations, prf: CK_ULONG(CKP_PKCS5_PBKD2_HMAC_SHA1))
            let (result, key) = generateKey(session, mechanism, readableTemplate(length: UInt(hex(expected).count)))
            XCTAssertRV(result, CKR_OK)
            XCTAssertEqual(value(session, key).1, hex(expected), "\(password.debugDescription) c=\(iterations)")
            XCTAssertEqual(value(session, key, UInt(CKA_LOCAL)).1, [1], "made by C_GenerateKey on the token")
            XCTAssertEqual(ulongValue(session, key, UInt(CKA_KEY_GEN_MECHANISM)), UInt(CKM_PKCS5_PBKD2))
        }
    }

    func test_pbkdf2_refuses_zero_iterations_unknown_prf_and_salt_source_prf_data_and_a_64_byte_parameter() {
        let session = userSession()
        let password = Array("pw".utf8), salt = Array("salt".utf8), sha256 = CK_ULONG(CKP_PKCS5_PBKD2_HMAC_SHA256)
        let template = readableTemplate(length: 32)
        let undefinedPRF: CK_ULONG = 99, undefinedSaltSource: CK_ULONG = 2
        let refused: [(String, UnsafeMutablePointer<CK_MECHANISM>)] = [
            ("0 iterations", pbkdf2(password, salt, iterations: 0, prf: sha256)),
            ("PRF 99", pbkdf2(password, salt, iterations: 10, prf: undefinedPRF)),
            ("salt source 2", pbkdf2(password, salt, iterations: 10, prf: sha256, saltSource: undefinedSaltSource)),
            ("pPrfData with HMAC-SHA256", pbkdf2(password, salt, iterations: 10, prf: sha256, prfData: [6, 1, 0])),
            ("ulParameterLen 64", pbkdf2(password, salt, iterations: 10, prf: sha256, length: 64)),
        ]
        for (what, mechanism) in refused {
            XCTAssertRV(generateKey(session, mechanism, template).0, CKR_MECHANISM_PARAM_INVALID, what)
        }
        XCTAssertRV(generateKey(session, pbkdf2(password, salt, iterations: 10, prf: sha256), template).0, CKR_OK)
    }

    func test_pbkdf2_generic_secret_without_value_len_is_template_incomplete() {
        let session = userSession()
        let mechanism = pbkdf2(Array("pw".utf8), Array("salt".utf8), iterations: 10, prf: CK_ULONG(CKP_PKCS5_PBKD2_HMAC_SHA256))
        XCTAssertRV(generateKey(session, mechanism, readableTemplate()).0, CKR_TEMPLATE_INCOMPLETE)
    }

    func test_pbkdf2_work_above_ten_million_blocks_is_refused_before_any_is_done() {
        let session = userSession()
        // HMAC-SHA-1, 64 bytes: 4 output blocks of 10 million iterations each.
        let mechanism = pbkdf2(Array("password".utf8), Array("salt".utf8), iterations: 10_000_000, prf: CK_ULONG(CKP_PKCS5_PBKD2_HMAC_SHA1))
        let started = Date()
        XCTAssertRV(generateKey(session, mechanism, readableTemplate(length: 64)).0, CKR_MECHANISM_PARAM_INVALID)
        XCTAssertLessThan(Date().timeIntervalSince(started), 1, "refused at once, not after the work")
    }

    func test_pbkdf2_password_length_neither_a_length_nor_a_pointer_is_mechanism_param_invalid() {
        let session = userSession()
        // 100,000: above any password length the module takes, below any 2.40 caller's pointer.
        let mechanism = pbkdf2(Array("password".utf8), Array("salt".utf8), iterations: 1, prf: CK_ULONG(CKP_PKCS5_PBKD2_HMAC_SHA1), passwordLength: 100_000)
        XCTAssertRV(generateKey(session, mechanism, readableTemplate(length: 64)).0, CKR_MECHANISM_PARAM_INVALID)
    }
}
