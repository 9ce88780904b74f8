import CPKCS11
import Glibc
import XCTest
@testable import PKCS11

/// The rules of the specification that third-party suites (python-pkcs11's tests, Java's
/// SunPKCS11, conformance suites) check, each with its exact CK_RV.
final class ConformanceTests: ModuleTestCase {
    private func aesKey(_ session: CK_SESSION_HANDLE, _ value: [UInt8]) -> CK_OBJECT_HANDLE {
        var handle: CK_OBJECT_HANDLE = 0
        let template: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_AES))),
                                           (UInt(CKA_VALUE), value)]
        XCTAssertRV(withTemplate(template) { p11.C_CreateObject!(session, $0, $1, &handle) }, CKR_OK)
        return handle
    }

    private func generatePair(_ session: CK_SESSION_HANDLE, _ type: UInt, public publicAttributes: [(UInt, [UInt8])],
                              private privateAttributes: [(UInt, [UInt8])] = [(UInt(CKA_SIGN), [1])]) -> (CK_RV, CK_OBJECT_HANDLE, CK_OBJECT_HANDLE) {
        var publicKey: CK_OBJECT_HANDLE = 0, privateKey: CK_OBJECT_HANDLE = 0
        let result = withTemplate(publicAttributes) { pt, pc in
            withTemplate(privateAttributes) { vt, vc in
                mechanism(type) { p11.C_GenerateKeyPair!(session, $0, pt, pc, vt, vc, &publicKey, &privateKey) }
            }
        }
        return (result, publicKey, privateKey)
    }

    private func signAndVerify(_ session: CK_SESSION_HANDLE, _ type: UInt, _ pair: (CK_OBJECT_HANDLE, CK_OBJECT_HANDLE),
                               data given: [UInt8] = [UInt8](repeating: 0x5A, count: 32)) -> CK_RV {
        var data = given
        var signature = [UInt8](repeating: 0, count: 1024)
        var length = CK_ULONG(signature.count)
        var rv = mechanism(type) { p11.C_SignInit!(session, $0, pair.1) }
        guard rv == CK_RV(CKR_OK) else { return rv }
        rv = p11.C_Sign!(session, &data, CK_ULONG(data.count), &signature, &length)
        guard rv == CK_RV(CKR_OK) else { return rv }
        rv = mechanism(type) { p11.C_VerifyInit!(session, $0, pair.0) }
        guard rv == CK_RV(CKR_OK) else { return rv }
        return p11.C_Verify!(session, &data, CK_ULONG(data.count), &signature, length)
    }

    private static let p192: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x01]

    // MARK: C_Initialize (§5.4)

    func test_initialize_refuses_a_reserved_pointer_and_partial_mutex_callbacks() {
        XCTAssertRV(p11.C_Finalize!(nil), CKR_OK)
        let reserved = UnsafeMutableRawPointer.allocate(byteCount: 8, alignment: 8)
        defer { reserved.deallocate() }
        var args = CK_C_INITIALIZE_ARGS()
        args.flags = CK_FLAGS(CKF_OS_LOCKING_OK)
        args.pReserved = reserved
        XCTAssertRV(p11.C_Initialize!(&args), CKR_ARGUMENTS_BAD, "pReserved must be NULL")
        var count: CK_ULONG = 0
        XCTAssertRV(p11.C_GetSlotList!(CK_BBOOL(CK_FALSE), nil, &count), CKR_CRYPTOKI_NOT_INITIALIZED)

        args = CK_C_INITIALIZE_ARGS()
        args.CreateMutex = { _ in CK_RV(CKR_OK) }
        XCTAssertRV(p11.C_Initialize!(&args), CKR_ARGUMENTS_BAD, "some but not all mutex callbacks")
        args.DestroyMutex = { _ in CK_RV(CKR_OK) }
        args.LockMutex = { _ in CK_RV(CKR_OK) }
        args.UnlockMutex = { _ in CK_RV(CKR_OK) }
        XCTAssertRV(p11.C_Initialize!(&args), CKR_CANT_LOCK, "application locking only, without CKF_OS_LOCKING_OK")
        args.flags = CK_FLAGS(CKF_OS_LOCKING_OK)
        XCTAssertRV(p11.C_Initialize!(&args), CKR_OK, "either kind of locking")
        XCTAssertRV(p11.C_Finalize!(nil), CKR_OK)
        args = CK_C_INITIALIZE_ARGS()
        XCTAssertRV(p11.C_Initialize!(&args), CKR_OK, "no callbacks, no flags: a single-threaded application")
    }

    // MARK: the operation lifecycle (§5.2, §5.8–§5.12)

    func test_a_failed_single_part_call_ends_the_operation() {
        let session = userSession()
        let key = aesKey(session, [UInt8](repeating: 1, count: 16))
        var input = [UInt8](repeating: 2, count: 3)
        var output = [UInt8](repeating: 0, count: 64)
        var length = CK_ULONG(output.count)
        XCTAssertRV(mechanism(UInt(CKM_AES_ECB)) { p11.C_EncryptInit!(session, $0, key) }, CKR_OK)
        XCTAssertRV(p11.C_Encrypt!(session, &input, 3, &output, &length), CKR_DATA_LEN_RANGE)
        XCTAssertRV(p11.C_Encrypt!(session, &input, 3, &output, &length), CKR_OPERATION_NOT_INITIALIZED)
        XCTAssertRV(mechanism(UInt(CKM_AES_ECB)) { p11.C_EncryptInit!(session, $0, key) }, CKR_OK, "a new operation starts at once")

        // A failed final call ends it too.
        XCTAssertRV(p11.C_EncryptUpdate!(session, &input, 3, &output, &length), CKR_OK)
        length = CK_ULONG(output.count)
        XCTAssertRV(p11.C_EncryptFinal!(session, &output, &length), CKR_DATA_LEN_RANGE)
        XCTAssertRV(p11.C_EncryptFinal!(session, &output, &length), CKR_OPERATION_NOT_INITIALIZED)

        // A failed update ends it.
        var signature = [UInt8](repeating: 0, count: 7)
        XCTAssertRV(mechanism(UInt(CKM_SHA256)) { p11.C_DigestInit!(session, $0) }, CKR_OK)
        XCTAssertRV(p11.C_DigestUpdate!(session, nil, 5), CKR_ARGUMENTS_BAD)
        XCTAssertRV(p11.C_DigestUpdate!(session, &input, 3), CKR_OPERATION_NOT_INITIALIZED)
        // A failed verification ends it.
        let mac = aesKey(session, [UInt8](repeating: 3, count: 16))
        XCTAssertRV(mechanism(UInt(CKM_AES_CMAC)) { p11.C_VerifyInit!(session, $0, mac) }, CKR_OK)
        XCTAssertRV(p11.C_Verify!(session, &input, 3, &signature, 7), CKR_SIGNATURE_LEN_RANGE)
        XCTAssertRV(mechanism(UInt(CKM_AES_CMAC)) { p11.C_VerifyInit!(session, $0, mac) }, CKR_OK)
    }

    func test_a_length_query_makes_the_operation_single_part() {
        let session = userSession()
        var data = Array("abc".utf8)
        var length: CK_ULONG = 0
        XCTAssertRV(mechanism(UInt(CKM_SHA256)) { p11.C_DigestInit!(session, $0) }, CKR_OK)
        XCTAssertRV(p11.C_Digest!(session, &data, 3, nil, &length), CKR_OK)
        XCTAssertEqual(length, 32)
        XCTAssertRV(p11.C_DigestUpdate!(session, &data, 3), CKR_OPERATION_ACTIVE)
        XCTAssertRV(p11.C_Digest!(session, &data, 3, nil, &length), CKR_OPERATION_NOT_INITIALIZED, "the refused update ended it")

        XCTAssertRV(mechanism(UInt(CKM_SHA256)) { p11.C_DigestInit!(session, $0) }, CKR_OK)
        XCTAssertRV(p11.C_Digest!(session, &data, 3, nil, &length), CKR_OK)
        var digest = [UInt8](repeating: 0, count: 32)
        XCTAssertRV(p11.C_DigestFinal!(session, &digest, &length), CKR_OPERATION_ACTIVE)

        // A short buffer leaves a single-part operation single-part, and then it completes.
        XCTAssertRV(mechanism(UInt(CKM_SHA256)) { p11.C_DigestInit!(session, $0) }, CKR_OK)
        length = 4
        XCTAssertRV(p11.C_Digest!(session, &data, 3, &digest, &length), CKR_BUFFER_TOO_SMALL)
        XCTAssertEqual(length, 32)
        XCTAssertRV(p11.C_Digest!(session, &data, 3, &digest, &length), CKR_OK)
        XCTAssertEqual(digest.prefix(4), [0xba, 0x78, 0x16, 0xbf])

        let key = aesKey(session, [UInt8](repeating: 1, count: 16))
        var iv = [UInt8](repeating: 0, count: 16)
        XCTAssertRV(iv.withUnsafeMutableBytes { buffer in
            var mechanism = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_AES_CBC_PAD), pParameter: buffer.baseAddress, ulParameterLen: 16)
            return p11.C_EncryptInit!(session, &mechanism, key)
        }, CKR_OK)
        var block = [UInt8](repeating: 0, count: 32)
        length = 32
        XCTAssertRV(p11.C_EncryptUpdate!(session, &data, 3, &block, &length), CKR_OK)
        XCTAssertEqual(length, 0)
        length = 32
        XCTAssertRV(p11.C_Encrypt!(session, &data, 3, &block, &length), CKR_OPERATION_ACTIVE, "after an update")
        XCTAssertRV(p11.C_EncryptFinal!(session, &block, &length), CKR_OPERATION_NOT_INITIALIZED, "the refused single-part call ended it")
    }

    // MARK: key sizes and curves (DESIGN §10)

    func test_rsa_1024_and_p192_are_generated_under_the_default_policy() {
        let session = userSession()
        var info = CK_MECHANISM_INFO()
        XCTAssertRV(p11.C_GetMechanismInfo!(1, CK_MECHANISM_TYPE(CKM_RSA_PKCS_KEY_PAIR_GEN), &info), CKR_OK)
        XCTAssertEqual(info.ulMinKeySize, 1024)
        XCTAssertRV(p11.C_GetMechanismInfo!(1, CK_MECHANISM_TYPE(CKM_EC_KEY_PAIR_GEN), &info), CKR_OK)
        XCTAssertEqual(info.ulMinKeySize, 192)
        XCTAssertEqual(info.ulMaxKeySize, 521)
        let rsa = generatePair(session, UInt(CKM_RSA_PKCS_KEY_PAIR_GEN), public: [(UInt(CKA_MODULUS_BITS), Self.ulong(1024)), (UInt(CKA_VERIFY), [1])])
        XCTAssertRV(rsa.0, CKR_OK)
        XCTAssertRV(signAndVerify(session, UInt(CKM_SHA256_RSA_PKCS), (rsa.1, rsa.2)), CKR_OK)
        let tiny = generatePair(session, UInt(CKM_RSA_PKCS_KEY_PAIR_GEN), public: [(UInt(CKA_MODULUS_BITS), Self.ulong(512))])
        XCTAssertRV(tiny.0, CKR_KEY_SIZE_RANGE)
        let p192 = generatePair(session, UInt(CKM_EC_KEY_PAIR_GEN), public: [(UInt(CKA_EC_PARAMS), Self.p192), (UInt(CKA_VERIFY), [1])])
        XCTAssertRV(p192.0, CKR_OK)
        XCTAssertRV(signAndVerify(session, UInt(CKM_ECDSA_SHA256), (p192.1, p192.2)), CKR_OK)
    }

    func test_every_named_curve_of_openssl_generates_and_signs() {
        let session = userSession()
        let curves: [(String, [UInt8])] = [
            ("P-224", [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x21]), ("secp256k1", [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x0A]),
            ("brainpoolP256r1", [0x06, 0x09, 0x2B, 0x24, 0x03, 0x03, 0x02, 0x08, 0x01, 0x01, 0x07]),
            ("brainpoolP384r1", [0x06, 0x09, 0x2B, 0x24, 0x03, 0x03, 0x02, 0x08, 0x01, 0x01, 0x0B]),
            ("brainpoolP512r1", [0x06, 0x09, 0x2B, 0x24, 0x03, 0x03, 0x02, 0x08, 0x01, 0x01, 0x0D]),
        ]
        for (name, oid) in curves {
            let pair = generatePair(session, UInt(CKM_EC_KEY_PAIR_GEN), public: [(UInt(CKA_EC_PARAMS), oid), (UInt(CKA_VERIFY), [1])])
            XCTAssertRV(pair.0, CKR_OK, name)
            XCTAssertRV(signAndVerify(session, UInt(CKM_ECDSA), (pair.1, pair.2)), CKR_OK, name)
            XCTAssertEqual(value(session, pair.1, UInt(CKA_EC_PARAMS)).1, oid, name)
        }
    }

    func test_a_public_key_with_explicit_curve_parameters_of_a_named_curve_imports() {
        let session = userSession()
        let named: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
        let pair = generatePair(session, UInt(CKM_EC_KEY_PAIR_GEN), public: [(UInt(CKA_EC_PARAMS), named), (UInt(CKA_VERIFY), [1])])
        XCTAssertRV(pair.0, CKR_OK)
        guard let point = value(session, pair.1, UInt(CKA_EC_POINT)).1 else { return XCTFail("no CKA_EC_POINT") }
        // `openssl ecparam -name prime256v1 -param_enc explicit -outform DER`
        let explicit = hex("3081f7020101302c06072a8648ce3d0101022100ffffffff00000001000000000000000000000000ffffffffffffffffffffffff305b0420ffffffff00000001000000000000000000000000fffffffffffffffffffffffc04205ac635d8aa3a93e7b3ebbd55769886bc651d06b0cc53b0f63bce3c3e27d2604b031500c49d360886e704936a6678e1139d26b7819f7e900441046b17d1f2e12c4247f8bce6e563a440f277037d812deb33a0f4a13945d898c2964fe342e2fe1a7f9b8ee7eb4a7c0f9e162bce33576b315ececbb6406837bf51f5022100ffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551020101")
        var imported: CK_OBJECT_HANDLE = 0
        let template: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_PUBLIC_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_EC))),
                                           (UInt(CKA_EC_PARAMS), explicit), (UInt(CKA_EC_POINT), point), (UInt(CKA_VERIFY), [1])]
        XCTAssertRV(withTemplate(template) { p11.C_CreateObject!(session, $0, $1, &imported) }, CKR_OK)
        XCTAssertRV(signAndVerify(session, UInt(CKM_ECDSA_SHA256), (imported, pair.2)), CKR_OK)
        var tampered = explicit
        tampered[40] ^= 1  // the field prime: no longer P-256
        XCTAssertRV(withTemplate([(UInt(CKA_CLASS), Self.ulong(UInt(CKO_PUBLIC_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_EC))),
                                  (UInt(CKA_EC_PARAMS), tampered), (UInt(CKA_EC_POINT), point)]) { p11.C_CreateObject!(session, $0, $1, &imported) },
                    CKR_ATTRIBUTE_VALUE_INVALID)
    }

    func test_the_modern_policy_refuses_legacy_sizes_and_curves() {
        withModernPolicy {
            let session = userSession()
            var info = CK_MECHANISM_INFO()
            XCTAssertRV(p11.C_GetMechanismInfo!(1, CK_MECHANISM_TYPE(CKM_RSA_PKCS_KEY_PAIR_GEN), &info), CKR_OK)
            XCTAssertEqual(info.ulMinKeySize, 2048)
            XCTAssertRV(p11.C_GetMechanismInfo!(1, CK_MECHANISM_TYPE(CKM_EC_KEY_PAIR_GEN), &info), CKR_OK)
            XCTAssertEqual(info.ulMinKeySize, 224)
            let rsa = generatePair(session, UInt(CKM_RSA_PKCS_KEY_PAIR_GEN), public: [(UInt(CKA_MODULUS_BITS), Self.ulong(1024))])
            XCTAssertRV(rsa.0, CKR_KEY_SIZE_RANGE)
            let p192 = generatePair(session, UInt(CKM_EC_KEY_PAIR_GEN), public: [(UInt(CKA_EC_PARAMS), Self.p192)])
            XCTAssertRV(p192.0, CKR_ATTRIBUTE_VALUE_INVALID)
        }
    }

    // MARK: AES-CTR counter bits (§2.14.7 of the current mechanisms)

    private func ctr(_ session: CK_SESSION_HANDLE, key: CK_OBJECT_HANDLE, counterBits: CK_ULONG, block: [UInt8]) -> CK_RV {
        var params = CK_AES_CTR_PARAMS()
        params.ulCounterBits = counterBits
        withUnsafeMutableBytes(of: &params.cb) { $0.copyBytes(from: block) }
        return withUnsafeMutableBytes(of: &params) { buffer in
            var mechanism = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_AES_CTR), pParameter: buffer.baseAddress, ulParameterLen: CK_ULONG(buffer.count))
            return p11.C_EncryptInit!(session, &mechanism, key)
        }
    }

    func test_aes_ctr_honours_the_counter_bits_and_never_wraps_into_the_nonce() {
        let session = userSession()
        let key = aesKey(session, hex("2b7e151628aed2a6abf7158809cf4f3c"))
        // NIST SP 800-38A F.5.1, first block.
        var plaintext = hex("6bc1bee22e409f96e93d7e117393172a")
        var output = [UInt8](repeating: 0, count: 64)
        var length = CK_ULONG(output.count)
        XCTAssertRV(ctr(session, key: key, counterBits: 128, block: hex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")), CKR_OK)
        XCTAssertRV(p11.C_Encrypt!(session, &plaintext, 16, &output, &length), CKR_OK)
        XCTAssertEqual(Array(output.prefix(Int(length))), hex("874d6191b620e3261bef6864990db6ce"))

        XCTAssertRV(ctr(session, key: key, counterBits: 0, block: hex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")), CKR_MECHANISM_PARAM_INVALID)
        XCTAssertRV(ctr(session, key: key, counterBits: 129, block: hex("f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff")), CKR_MECHANISM_PARAM_INVALID)

        // An 8-bit counter at 0xfe has two blocks left: 32 bytes pass, 33 do not.
        var data = [UInt8](repeating: 0x11, count: 33)
        let block = hex("000102030405060708090a0b0c0d0efe")
        XCTAssertRV(ctr(session, key: key, counterBits: 8, block: block), CKR_OK)
        length = CK_ULONG(output.count)
        XCTAssertRV(p11.C_Encrypt!(session, &data, 33, &output, &length), CKR_DATA_LEN_RANGE)
        XCTAssertRV(ctr(session, key: key, counterBits: 8, block: block), CKR_OK)
        length = CK_ULONG(output.count)
        XCTAssertRV(p11.C_Encrypt!(session, &data, 32, &output, &length), CKR_OK)
        let twoBlocks = Array(output.prefix(32))
        XCTAssertRV(ctr(session, key: key, counterBits: 128, block: block), CKR_OK)
        length = CK_ULONG(output.count)
        XCTAssertRV(p11.C_Encrypt!(session, &data, 32, &output, &length), CKR_OK)
        XCTAssertEqual(Array(output.prefix(32)), twoBlocks, "within its range the counter counts as a 128-bit one does")

        // Multi-part: the range is shared by the parts.
        XCTAssertRV(ctr(session, key: key, counterBits: 8, block: block), CKR_OK)
        length = CK_ULONG(output.count)
        XCTAssertRV(p11.C_EncryptUpdate!(session, &data, 20, &output, &length), CKR_OK)
        length = CK_ULONG(output.count)
        XCTAssertRV(p11.C_EncryptUpdate!(session, &data, 12, &output, &length), CKR_OK)
        length = CK_ULONG(output.count)
        XCTAssertRV(p11.C_EncryptUpdate!(session, &data, 1, &output, &length), CKR_DATA_LEN_RANGE)
    }

    // MARK: found by pkcs11-check 0.2.3

    func test_set_attribute_value_refuses_what_the_token_made_even_unchanged() {
        let session = userSession()
        var key: CK_OBJECT_HANDLE = 0
        XCTAssertRV(withTemplate([(UInt(CKA_VALUE_LEN), Self.ulong(32))]) { t, c in
            mechanism(UInt(CKM_AES_KEY_GEN)) { p11.C_GenerateKey!(session, $0, t, c, &key) }
        }, CKR_OK)
        XCTAssertRV(withTemplate([(UInt(CKA_KEY_GEN_MECHANISM), Self.ulong(UInt(CKM_AES_KEY_GEN)))]) { p11.C_SetAttributeValue!(session, key, $0, $1) },
                    CKR_ATTRIBUTE_READ_ONLY, "§4.1.2: read-only whatever the value")
        XCTAssertRV(withTemplate([(UInt(CKA_LABEL), Array("same or not".utf8))]) { p11.C_SetAttributeValue!(session, key, $0, $1) }, CKR_OK)
    }

    func test_an_empty_allowed_mechanisms_list_is_refused() {
        let session = userSession()
        var handle: CK_OBJECT_HANDLE = 0
        let template: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_AES))),
                                           (UInt(CKA_VALUE), [UInt8](repeating: 1, count: 16)), (UInt(CKA_ALLOWED_MECHANISMS), [])]
        XCTAssertRV(withTemplate(template) { p11.C_CreateObject!(session, $0, $1, &handle) }, CKR_ATTRIBUTE_VALUE_INVALID,
                    "an empty list would read as no restriction")
    }

    func test_hmac_keys_of_their_own_type_sign_as_rfc_4231_says() {
        let session = userSession()
        var key: CK_OBJECT_HANDLE = 0
        let template: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_SHA256_HMAC))),
                                           (UInt(CKA_VALUE), [UInt8](repeating: 0x0b, count: 20)), (UInt(CKA_SIGN), [1])]
        XCTAssertRV(withTemplate(template) { p11.C_CreateObject!(session, $0, $1, &key) }, CKR_OK)
        var data = Array("Hi There".utf8)
        var mac = [UInt8](repeating: 0, count: 64)
        var length = CK_ULONG(mac.count)
        XCTAssertRV(mechanism(UInt(CKM_SHA256_HMAC)) { p11.C_SignInit!(session, $0, key) }, CKR_OK)
        XCTAssertRV(p11.C_Sign!(session, &data, CK_ULONG(data.count), &mac, &length), CKR_OK)
        XCTAssertEqual(Array(mac.prefix(Int(length))), hex("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"))
        XCTAssertRV(mechanism(UInt(CKM_SHA512_HMAC)) { p11.C_SignInit!(session, $0, key) }, CKR_KEY_TYPE_INCONSISTENT, "a SHA-256 HMAC key")
    }

    func test_raw_rsa_takes_input_shorter_than_the_modulus() {
        let session = userSession()
        let (result, publicKey, privateKey) = generatePair(session, UInt(CKM_RSA_PKCS_KEY_PAIR_GEN),
                                                           public: [(UInt(CKA_MODULUS_BITS), Self.ulong(2048)), (UInt(CKA_ENCRYPT), [1]), (UInt(CKA_VERIFY), [1])],
                                                           private: [(UInt(CKA_DECRYPT), [1]), (UInt(CKA_SIGN), [1])])
        XCTAssertRV(result, CKR_OK)
        var short = Array("short".utf8)
        var block = [UInt8](repeating: 0, count: 256)
        var length = CK_ULONG(block.count)
        XCTAssertRV(mechanism(UInt(CKM_RSA_X_509)) { p11.C_EncryptInit!(session, $0, publicKey) }, CKR_OK)
        XCTAssertRV(p11.C_Encrypt!(session, &short, CK_ULONG(short.count), &block, &length), CKR_OK)
        var plain = [UInt8](repeating: 0, count: 256)
        var plainLength = CK_ULONG(plain.count)
        XCTAssertRV(mechanism(UInt(CKM_RSA_X_509)) { p11.C_DecryptInit!(session, $0, privateKey) }, CKR_OK)
        XCTAssertRV(p11.C_Decrypt!(session, &block, length, &plain, &plainLength), CKR_OK)
        XCTAssertEqual(Array(plain.prefix(Int(plainLength))), [UInt8](repeating: 0, count: 251) + short, "left-padded with zeros (§2.1.8)")
        XCTAssertRV(signAndVerify(session, UInt(CKM_RSA_X_509), (publicKey, privateKey), data: short), CKR_OK)
    }

    func test_ed25519_with_parameters_is_ed25519ctx_and_refused() {
        let session = userSession()
        let ed25519: [UInt8] = [0x06, 0x03, 0x2B, 0x65, 0x70]
        let (result, _, privateKey) = generatePair(session, 0x1055, public: [(UInt(CKA_EC_PARAMS), ed25519)])
        XCTAssertRV(result, CKR_OK)
        // CK_EDDSA_PARAMS { phFlag = FALSE, ulContextDataLen = 0, pContextData = NULL }
        var parameters = CK_EDDSA_PARAMS(phFlag: 0, ulContextDataLen: 0, pContextData: nil)
        let rv = withUnsafeMutableBytes(of: &parameters) { buffer in
            var mechanism = CK_MECHANISM(mechanism: 0x1057, pParameter: buffer.baseAddress, ulParameterLen: CK_ULONG(buffer.count))
            return p11.C_SignInit!(session, &mechanism, privateKey)
        }
        XCTAssertRV(rv, CKR_MECHANISM_PARAM_INVALID, "RFC 8032: with parameters the scheme is Ed25519ctx, not pure Ed25519")
        XCTAssertRV(mechanism(0x1057) { p11.C_SignInit!(session, $0, privateKey) }, CKR_OK, "pure Ed25519 without parameters")
    }
}
