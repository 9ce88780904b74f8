import CPKCS11
import XCTest
@testable import PKCS11

/// CK_EDDSA_PARAMS, CK_ECDH1_DERIVE_PARAMS, CKM_AES_KEY_WRAP's initial value and
/// CK_RSA_AES_KEY_WRAP_PARAMS: RFC 8032, RFC 7748, RFC 3394 and RFC 5649 read through the
/// parameters, and each malformed parameter or wrong key refused with its exact CK_RV.
final class ModernSignatureAndWrapParameterTests: ModernMechanismTestCase {
    private static let ed25519: [UInt8] = [0x06, 0x03, 0x2B, 0x65, 0x70], ed448: [UInt8] = [0x06, 0x03, 0x2B, 0x65, 0x71]
    private static let x25519: [UInt8] = [0x06, 0x03, 0x2B, 0x65, 0x6E]
    private static let p256: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]

    private func create(_ session: CK_SESSION_HANDLE, _ template: [(UInt, [UInt8])]) -> CK_OBJECT_HANDLE {
        var handle: CK_OBJECT_HANDLE = 0
        let (attributes, count) = memory.template(template)
        XCTAssertRV(p11.C_CreateObject!(session, attributes, count, &handle), CKR_OK)
        return handle
    }

    /// A session private key of `type` on `curve` from its seed or scalar, with `usage`.
    private func privateKey(_ session: CK_SESSION_HANDLE, _ type: UInt, curve: [UInt8], _ value: [UInt8], _ usage: UInt) -> CK_OBJECT_HANDLE {
        create(session, [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_PRIVATE_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(type)), (UInt(CKA_TOKEN), [0]),
                         (UInt(CKA_EC_PARAMS), curve), (UInt(CKA_VALUE), value), (usage, [1])])
    }

    /// A session Edwards public key; CKA_EC_POINT is the point as a DER OCTET STRING.
    private func edwardsPublicKey(_ session: CK_SESSION_HANDLE, curve: [UInt8], _ point: [UInt8]) -> CK_OBJECT_HANDLE {
        create(session, [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_PUBLIC_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_EC_EDWARDS))), (UInt(CKA_TOKEN), [0]),
                         (UInt(CKA_EC_PARAMS), curve), (UInt(CKA_EC_POINT), [0x04, UInt8(point.count)] + point), (UInt(CKA_VERIFY), [1])])
    }

    private func eddsa(prehash: Bool, context: [UInt8], length: Int? = nil) -> UnsafeMutablePointer<CK_MECHANISM> {
        memory.mechanism(UInt(CKM_EDDSA), CK_EDDSA_PARAMS(phFlag: prehash ? 1 : 0, ulContextDataLen: CK_ULONG(context.count), pContextData: memory.bytes(context)),
                         length: length)
    }

    // MARK: CKM_EDDSA — RFC 8032 §7

    /// Signs `message` with the RFC's key as `mechanism` says, expects the RFC's signature, and
    /// checks that it verifies and a modified one does not.
    private func checkRFC8032(curve: [UInt8], seed: String, publicKey: String, message: String, signature: String,
                              _ mechanism: () -> UnsafeMutablePointer<CK_MECHANISM>, _ what: String) {
        let session = userSession()
        let key = privateKey(session, UInt(CKK_EC_EDWARDS), curve: curve, hex(seed), UInt(CKA_SIGN))
        let signed = sign(session, mechanism(), key, hex(message))
        XCTAssertRV(signed.0, CKR_OK, what)
        XCTAssertEqual(signed.1, hex(signature), what)
        let verifier = edwardsPublicKey(session, curve: curve, hex(publicKey))
        XCTAssertRV(verify(session, mechanism(), verifier, hex(message), hex(signature)), CKR_OK, what)
        XCTAssertRV(verify(session, mechanism(), verifier, hex(message), Self.flipped(hex(signature))), CKR_SIGNATURE_INVALID, what)
    }

    func test_eddsa_without_a_parameter_is_pure_ed25519_as_rfc_8032_test_1() {
        checkRFC8032(curve: Self.ed25519, seed: "9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
                     publicKey: "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", message: "",
                     signature: "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b",
                     { memory.mechanism(UInt(CKM_EDDSA)) }, "Ed25519")
    }

    func test_eddsa_params_with_a_context_are_ed25519ctx_as_rfc_8032_section_7_2() {
        checkRFC8032(curve: Self.ed25519, seed: "0305334e381af78f141cb666f6199f57bc3495335a256a95bd2a55bf546663f6",
                     publicKey: "dfc9425e4f968f7f0c29f0259cf5f9aed6851c2bb4ad8bfb860cfee0ab248292", message: "f726936d19c800494e3fdaff20b276a8",
                     signature: "55a4cc2f70a54e04288c5f4cd1e45a7bb520b36292911876cada7323198dd87a8b36950b95130022907a7fb7c4e9b2d5f6cca685a587b4b21f4b888e4e7edb0d",
                     { eddsa(prehash: false, context: Array("foo".utf8)) }, "Ed25519ctx")
    }

    func test_eddsa_params_with_ph_flag_are_ed25519ph_as_rfc_8032_section_7_3() {
        checkRFC8032(curve: Self.ed25519, seed: "833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42",
                     publicKey: "ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf", message: "616263",
                     signature: "98a70222f0b8121aa9d30f813d683f809e462b469c7ff87639499bb94e6dae4131f85042463c2a355a2003d062adf5aaa10b8c61e636062aaad11c2a26083406",
                     { eddsa(prehash: true, context: []) }, "Ed25519ph (the token hashes the message)")
    }

    func test_eddsa_params_with_a_context_on_ed448_as_rfc_8032_section_7_4() {
        checkRFC8032(curve: Self.ed448, seed: "c4eab05d357007c632f3dbb48489924d552b08fe0c353a0d4a1f00acda2c463afbea67c5e8d2877c5e3bc397a659949ef8021e954e0a12274e",
                     publicKey: "43ba28f430cdff456ae531545f7ecd0ac834a55d9358c0372bfa0c6c6798c0866aea01eb00742802b8438ea4cb82169c235160627b4c3a9480", message: "03",
                     signature: "d4f8f6131770dd46f40867d6fd5d5055de43541f8c5e35abbcd001b32a89f7d2151f7647f11d8ca2ae279fb842d607217fce6e042f6815ea000c85741de5c8da"
                        + "1144a6a1aba7f96de42505d7a7298524fda538fccbbb754f578c1cad10d54d0d5428407e85dcbc98a49155c13764e66c3c00",
                     { eddsa(prehash: false, context: Array("foo".utf8)) }, "Ed448 with context")
    }

    func test_eddsa_context_of_256_bytes_and_a_16_byte_parameter_are_mechanism_param_invalid() {
        let session = userSession()
        let key = privateKey(session, UInt(CKK_EC_EDWARDS), curve: Self.ed25519, hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"), UInt(CKA_SIGN))
        XCTAssertRV(p11.C_SignInit!(session, eddsa(prehash: false, context: [UInt8](repeating: 0x63, count: 256)), key), CKR_MECHANISM_PARAM_INVALID)
        XCTAssertRV(p11.C_SignInit!(session, eddsa(prehash: false, context: Array("foo".utf8), length: 16), key), CKR_MECHANISM_PARAM_INVALID)
        XCTAssertRV(p11.C_SignInit!(session, eddsa(prehash: false, context: [UInt8](repeating: 0x63, count: 255)), key), CKR_OK, "255 bytes is the most")
    }

    func test_eddsa_with_a_p256_key_is_key_type_inconsistent() {
        let session = userSession()
        let (result, _, key) = generateKeyPair(session, UInt(CKM_EC_KEY_PAIR_GEN), public: [(UInt(CKA_EC_PARAMS), Self.p256), (UInt(CKA_TOKEN), [0])],
                                               private: [(UInt(CKA_SIGN), [1]), (UInt(CKA_TOKEN), [0])])
        XCTAssertRV(result, CKR_OK)
        XCTAssertRV(p11.C_SignInit!(session, memory.mechanism(UInt(CKM_EDDSA)), key), CKR_KEY_TYPE_INCONSISTENT)
    }

    // MARK: CKM_ECDH1_DERIVE — RFC 7748 §6.1

    private func ecdh(kdf: UInt, shared: [UInt8] = [], publicData: [UInt8], length: Int? = nil) -> UnsafeMutablePointer<CK_MECHANISM> {
        memory.mechanism(UInt(CKM_ECDH1_DERIVE), CK_ECDH1_DERIVE_PARAMS(kdf: CK_ULONG(kdf), ulSharedDataLen: CK_ULONG(shared.count), pSharedData: memory.bytes(shared),
                                                                         ulPublicDataLen: CK_ULONG(publicData.count), pPublicData: memory.bytes(publicData)),
                         length: length)
    }

    private let alicePrivate = hex("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
    private let bobPublic = hex("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
    private let x25519Shared = hex("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")

    func test_ecdh_with_ckd_null_gives_the_rfc_7748_x25519_shared_secret() {
        let session = userSession()
        let alice = privateKey(session, CK_ULONG(CKK_EC_MONTGOMERY), curve: Self.x25519, alicePrivate, UInt(CKA_DERIVE))
        XCTAssertEqual(derivedValue(session, ecdh(kdf: UInt(CKD_NULL), publicData: bobPublic), alice, readableTemplate(length: 32)), x25519Shared)
    }

    func test_ecdh_with_ckd_sha256_kdf_reads_the_shared_data() {
        let session = userSession()
        let alice = privateKey(session, CK_ULONG(CKK_EC_MONTGOMERY), curve: Self.x25519, alicePrivate, UInt(CKA_DERIVE))
        // ANSI X9.63 with SHA-256 over the RFC's shared secret and "ecdh shared" (computed by
        // `cryptography`'s X963KDF).
        let mechanism = ecdh(kdf: UInt(CKD_SHA256_KDF), shared: Array("ecdh shared".utf8), publicData: bobPublic)
        XCTAssertEqual(derivedValue(session, mechanism, alice, readableTemplate(length: 40)),
                       hex("5c205b07da2bad102d9154ad9f99c2371b79b450ddb7e1058f3ba3d6e360db542164e4645df77386"))
    }

    func test_ecdh_refuses_ckd_null_with_shared_data_an_unknown_kdf_and_a_32_byte_parameter() {
        let session = userSession()
        let ours = generateKeyPair(session, UInt(CKM_EC_KEY_PAIR_GEN), public: [(UInt(CKA_EC_PARAMS), Self.p256), (UInt(CKA_TOKEN), [0])],
                                   private: [(UInt(CKA_DERIVE), [1]), (UInt(CKA_TOKEN), [0])])
        let theirs = generateKeyPair(session, UInt(CKM_EC_KEY_PAIR_GEN), public: [(UInt(CKA_EC_PARAMS), Self.p256), (UInt(CKA_TOKEN), [0])],
                                     private: [(UInt(CKA_DERIVE), [1]), (UInt(CKA_TOKEN), [0])])
        XCTAssertRV(ours.0, CKR_OK)
        XCTAssertRV(theirs.0, CKR_OK)
        // The peer's uncompressed point without its DER OCTET STRING header (04 41).
        let point = Array((value(session, theirs.1, UInt(CKA_EC_POINT)).1 ?? []).dropFirst(2))
        XCTAssertEqual(point.count, 65)
        let template = readableTemplate(length: 32)
        let undefinedKDF: UInt = 85  // no CKD_ value
        XCTAssertRV(derive(session, ecdh(kdf: UInt(CKD_NULL), shared: Array("x".utf8), publicData: point), ours.2, template).0, CKR_MECHANISM_PARAM_INVALID)
        XCTAssertRV(derive(session, ecdh(kdf: undefinedKDF, publicData: point), ours.2, template).0, CKR_MECHANISM_PARAM_INVALID)
        XCTAssertRV(derive(session, ecdh(kdf: UInt(CKD_NULL), publicData: point, length: 32), ours.2, template).0, CKR_MECHANISM_PARAM_INVALID)
        XCTAssertRV(derive(session, ecdh(kdf: UInt(CKD_NULL), publicData: point), ours.2, template).0, CKR_OK, "the same parameter, well formed")
    }

    func test_ecdh_with_an_ed25519_key_is_key_type_inconsistent() {
        let session = userSession()
        let edwards = privateKey(session, UInt(CKK_EC_EDWARDS), curve: Self.ed25519, hex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60"),
                                 UInt(CKA_DERIVE))
        XCTAssertRV(derive(session, ecdh(kdf: UInt(CKD_NULL), publicData: bobPublic), edwards, readableTemplate(length: 32)).0, CKR_KEY_TYPE_INCONSISTENT)
    }

    // MARK: CKM_AES_KEY_WRAP and CKM_AES_KEY_WRAP_PAD — RFC 3394, RFC 5649

    private func wrappingKey(_ session: CK_SESSION_HANDLE, _ value: [UInt8]) -> CK_OBJECT_HANDLE {
        readableKey(session, UInt(CKK_AES), value, UInt(CKA_WRAP), UInt(CKA_UNWRAP))
    }

    func test_aes_key_wrap_gives_rfc_3394_sections_4_1_and_4_6_and_unwraps_them() {
        let session = userSession()
        let vectors = [("000102030405060708090a0b0c0d0e0f", "00112233445566778899aabbccddeeff", "1fa68b0a8112b447aef34bd8fb5a7b829d3e862371d2cfe5"),
                       ("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f", "00112233445566778899aabbccddeeff000102030405060708090a0b0c0d0e0f",
                        "28c9f404c4b810f4cbccb35cfb87f8263f5786e2d80ed326cbc7f0e71a99f43bfb988b9b7a02dd21")]
        for (kek, key, wrapped) in vectors {
            let wrapping = wrappingKey(session, hex(kek)), target = readableKey(session, UInt(CKK_AES), hex(key), UInt(CKA_ENCRYPT))
            let blob = wrap(session, memory.mechanism(UInt(CKM_AES_KEY_WRAP)), wrapping, target)
            XCTAssertRV(blob.0, CKR_OK)
            XCTAssertEqual(blob.1, hex(wrapped))
            let (result, unwrapped) = unwrap(session, memory.mechanism(UInt(CKM_AES_KEY_WRAP)), wrapping, hex(wrapped), readableTemplate(UInt(CKK_AES), UInt(CKA_ENCRYPT)))
            XCTAssertRV(result, CKR_OK)
            XCTAssertEqual(value(session, unwrapped).1, hex(key))
            XCTAssertRV(unwrap(session, memory.mechanism(UInt(CKM_AES_KEY_WRAP)), wrapping, Self.flipped(hex(wrapped), at: 3), readableTemplate(UInt(CKK_AES))).0,
                        CKR_WRAPPED_KEY_INVALID)
            XCTAssertRV(unwrap(session, memory.mechanism(UInt(CKM_AES_KEY_WRAP)), wrapping, Array(hex(wrapped).prefix(20)), readableTemplate(UInt(CKK_AES))).0,
                        CKR_WRAPPED_KEY_LEN_RANGE)
        }
    }

    func test_aes_key_wrap_takes_an_8_byte_initial_value_as_its_parameter() {
        let session = userSession()
        let wrapping = wrappingKey(session, hex("000102030405060708090a0b0c0d0e0f"))
        let target = readableKey(session, UInt(CKK_GENERIC_SECRET), hex("00112233445566778899aabbccddeeff"), UInt(CKA_SIGN))
        let explicitDefault = wrap(session, memory.mechanism(UInt(CKM_AES_KEY_WRAP), flat: hex("a6a6a6a6a6a6a6a6")), wrapping, target)
        XCTAssertEqual(explicitDefault.1, hex("1fa68b0a8112b447aef34bd8fb5a7b829d3e862371d2cfe5"), "RFC 3394 §4.1 with its initial value given")
        // RFC 3394 §2.2.1 with the initial value 0102030405060708 (computed from AES-ECB by `cryptography`).
        let iv = hex("0102030405060708"), expected = hex("1f0167d51c8f6e4eb1f0286f52cf9cf97d904baf9ddda8a4")
        let blob = wrap(session, memory.mechanism(UInt(CKM_AES_KEY_WRAP), flat: iv), wrapping, target)
        XCTAssertRV(blob.0, CKR_OK)
        XCTAssertEqual(blob.1, expected)
        let (result, unwrapped) = unwrap(session, memory.mechanism(UInt(CKM_AES_KEY_WRAP), flat: iv), wrapping, expected, readableTemplate(length: 16, UInt(CKA_SIGN)))
        XCTAssertRV(result, CKR_OK)
        XCTAssertEqual(value(session, unwrapped).1, hex("00112233445566778899aabbccddeeff"))
        XCTAssertRV(unwrap(session, memory.mechanism(UInt(CKM_AES_KEY_WRAP)), wrapping, expected, readableTemplate(length: 16)).0, CKR_WRAPPED_KEY_INVALID,
                    "unwrapped with the default initial value")
    }

    func test_aes_key_wrap_initial_value_of_5_bytes_is_mechanism_param_invalid() {
        let session = userSession()
        let wrapping = wrappingKey(session, hex("000102030405060708090a0b0c0d0e0f"))
        let target = readableKey(session, UInt(CKK_GENERIC_SECRET), hex("00112233445566778899aabbccddeeff"), UInt(CKA_SIGN))
        XCTAssertRV(wrap(session, memory.mechanism(UInt(CKM_AES_KEY_WRAP), flat: [0, 0, 0, 0, 0]), wrapping, target).0, CKR_MECHANISM_PARAM_INVALID)
    }

    func test_aes_key_wrap_pad_gives_rfc_5649_section_6_and_refuses_a_modified_blob() {
        let session = userSession()
        let wrapping = wrappingKey(session, hex("5840df6e29b02af1ab493b705bf16ea1ae8338f4dcc176a8"))
        let vectors = [("c37b7e6492584340bed12207808941155068f738", "138bdeaa9b8fa7fc61f97742e72248ee5ae6ae5360d1ae6a5f54f373fa543b6a"),
                       ("466f7250617369", "afbeb0f07dfbf5419200f2ccb50bb24f")]
        for (key, wrapped) in vectors {
            let target = readableKey(session, UInt(CKK_GENERIC_SECRET), hex(key), UInt(CKA_SIGN))
            let blob = wrap(session, memory.mechanism(UInt(CKM_AES_KEY_WRAP_PAD)), wrapping, target)
            XCTAssertRV(blob.0, CKR_OK)
            XCTAssertEqual(blob.1, hex(wrapped), "\(hex(key).count)-byte key")
            let (result, unwrapped) = unwrap(session, memory.mechanism(UInt(CKM_AES_KEY_WRAP_PAD)), wrapping, hex(wrapped),
                                             readableTemplate(UInt(CKK_GENERIC_SECRET), UInt(CKA_SIGN)))
            XCTAssertRV(result, CKR_OK)
            XCTAssertEqual(value(session, unwrapped).1, hex(key))
        }
        XCTAssertRV(unwrap(session, memory.mechanism(UInt(CKM_AES_KEY_WRAP_PAD)), wrapping, Self.flipped(hex(vectors[0].1), at: 5), readableTemplate()).0,
                    CKR_WRAPPED_KEY_INVALID)
    }

    func test_aes_key_wrap_encrypts_only_where_mechanism_info_says_so() {
        let session = userSession()
        let kek = readableKey(session, UInt(CKK_AES), hex("000102030405060708090a0b0c0d0e0f"), UInt(CKA_ENCRYPT), UInt(CKA_DECRYPT), UInt(CKA_WRAP), UInt(CKA_UNWRAP))
        for type in [UInt(CKM_AES_KEY_WRAP), UInt(CKM_AES_KEY_WRAP_PAD)] {
            var sessionInfo = CK_SESSION_INFO(), info = CK_MECHANISM_INFO()
            XCTAssertRV(p11.C_GetSessionInfo!(session, &sessionInfo), CKR_OK)
            XCTAssertRV(p11.C_GetMechanismInfo!(sessionInfo.slotID, CK_MECHANISM_TYPE(type), &info), CKR_OK)
            if info.flags & CK_FLAGS(CKF_ENCRYPT) != 0 {
                XCTAssertRV(encrypt(session, memory.mechanism(type), kek, hex("00112233445566778899aabbccddeeff")).0, CKR_OK)
            } else {
                XCTAssertRV(p11.C_EncryptInit!(session, memory.mechanism(type), kek), CKR_MECHANISM_INVALID, "mechanism \(type) has no CKF_ENCRYPT")
            }
        }
    }

    // MARK: CK_RSA_PKCS_PSS_PARAMS with the SHA-3 mechanisms; raw RSA's range

    private func rsaSigningPair(_ session: CK_SESSION_HANDLE) -> (CK_OBJECT_HANDLE, CK_OBJECT_HANDLE) {
        let (result, publicKey, privateKey) = generateKeyPair(session, UInt(CKM_RSA_PKCS_KEY_PAIR_GEN),
                                                              public: [(UInt(CKA_MODULUS_BITS), Self.ulong(2048)), (UInt(CKA_TOKEN), [0]), (UInt(CKA_VERIFY), [1]),
                                                                       (UInt(CKA_ENCRYPT), [1])],
                                                              private: [(UInt(CKA_TOKEN), [0]), (UInt(CKA_SIGN), [1]), (UInt(CKA_DECRYPT), [1])])
        XCTAssertRV(result, CKR_OK)
        return (publicKey, privateKey)
    }

    private func pss(_ type: UInt, hash: UInt, saltLength: Int) -> UnsafeMutablePointer<CK_MECHANISM> {
        memory.mechanism(type, CK_RSA_PKCS_PSS_PARAMS(hashAlg: CK_MECHANISM_TYPE(hash), mgf: CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA256), sLen: CK_ULONG(saltLength)))
    }

    func test_sha3_pss_takes_its_own_hash_and_a_salt_of_at_most_k_minus_2_minus_hlen() {
        let session = userSession()
        let (publicKey, privateKey) = rsaSigningPair(session)
        let data = Array("a message for PSS".utf8)
        let mechanisms: [(UInt, UInt, Int)] = [(UInt(CKM_SHA3_224_RSA_PKCS_PSS), UInt(CKM_SHA3_224), 28), (UInt(CKM_SHA3_256_RSA_PKCS_PSS), UInt(CKM_SHA3_256), 32),
                                               (UInt(CKM_SHA3_384_RSA_PKCS_PSS), UInt(CKM_SHA3_384), 48), (UInt(CKM_SHA3_512_RSA_PKCS_PSS), UInt(CKM_SHA3_512), 64)]
        for (type, hash, length) in mechanisms {
            let signed = sign(session, pss(type, hash: hash, saltLength: length), privateKey, data)
            XCTAssertRV(signed.0, CKR_OK, "mechanism \(type)")
            XCTAssertEqual(signed.1.count, 256)
            XCTAssertRV(verify(session, pss(type, hash: hash, saltLength: length), publicKey, data, signed.1), CKR_OK, "mechanism \(type)")
            XCTAssertRV(verify(session, pss(type, hash: hash, saltLength: length), publicKey, data, Self.flipped(signed.1)), CKR_SIGNATURE_INVALID)
            XCTAssertRV(p11.C_SignInit!(session, pss(type, hash: UInt(CKM_SHA256), saltLength: length), privateKey), CKR_MECHANISM_PARAM_INVALID,
                        "mechanism \(type) with hashAlg CKM_SHA256")
            XCTAssertRV(p11.C_SignInit!(session, pss(type, hash: hash, saltLength: 256 - 1 - length), privateKey), CKR_MECHANISM_PARAM_INVALID,
                        "mechanism \(type) with sLen k − 1 − hLen")
            XCTAssertRV(sign(session, pss(type, hash: hash, saltLength: 256 - 2 - length), privateKey, data).0, CKR_OK, "sLen k − 2 − hLen")
        }
    }

    func test_rsa_pkcs_pss_over_input_that_is_not_hash_length_is_data_len_range() {
        let session = userSession()
        let (_, privateKey) = rsaSigningPair(session)
        XCTAssertRV(sign(session, pss(UInt(CKM_RSA_PKCS_PSS), hash: UInt(CKM_SHA256), saltLength: 32), privateKey, [UInt8](repeating: 1, count: 31)).0,
                    CKR_DATA_LEN_RANGE)
    }

    func test_raw_rsa_of_the_modulus_itself_is_data_invalid_and_encrypted_data_invalid() {
        let session = userSession()
        let (publicKey, privateKey) = rsaSigningPair(session)
        let modulus = value(session, publicKey, UInt(CKA_MODULUS)).1 ?? []
        XCTAssertEqual(modulus.count, 256)
        XCTAssertRV(encrypt(session, memory.mechanism(UInt(CKM_RSA_X_509)), publicKey, modulus).0, CKR_DATA_INVALID)
        XCTAssertRV(decrypt(session, memory.mechanism(UInt(CKM_RSA_X_509)), privateKey, modulus).0, CKR_ENCRYPTED_DATA_INVALID)
    }

    // MARK: CKM_RSA_AES_KEY_WRAP

    private func oaep(hash: UInt, mgf: UInt, label: [UInt8]) -> UnsafeMutablePointer<CK_RSA_PKCS_OAEP_PARAMS> {
        memory.copy(CK_RSA_PKCS_OAEP_PARAMS(hashAlg: CK_MECHANISM_TYPE(hash), mgf: CK_RSA_PKCS_MGF_TYPE(mgf), source: CK_RSA_PKCS_OAEP_SOURCE_TYPE(CKZ_DATA_SPECIFIED),
                                            pSourceData: memory.raw(label), ulSourceDataLen: CK_ULONG(label.count)))
    }

    private func rsaAES(bits: CK_ULONG, hash: UInt, mgf: UInt, label: [UInt8] = [], length: Int? = nil) -> UnsafeMutablePointer<CK_MECHANISM> {
        memory.mechanism(UInt(CKM_RSA_AES_KEY_WRAP), CK_RSA_AES_KEY_WRAP_PARAMS(ulAESKeyBits: bits, pOAEPParams: oaep(hash: hash, mgf: mgf, label: label)), length: length)
    }

    private func rsaPair(_ session: CK_SESSION_HANDLE) -> (CK_OBJECT_HANDLE, CK_OBJECT_HANDLE) {
        let (result, publicKey, privateKey) = generateKeyPair(session, UInt(CKM_RSA_PKCS_KEY_PAIR_GEN),
                                                              public: [(UInt(CKA_MODULUS_BITS), Self.ulong(2048)), (UInt(CKA_TOKEN), [0]), (UInt(CKA_WRAP), [1])],
                                                              private: [(UInt(CKA_TOKEN), [0]), (UInt(CKA_UNWRAP), [1]), (UInt(CKA_DECRYPT), [1])])
        XCTAssertRV(result, CKR_OK)
        return (publicKey, privateKey)
    }

    /// The blob is RSA-OAEP (the parameter's hash, MGF and label) of a one-time AES key of
    /// ulAESKeyBits, then RFC 5649 key wrap under that key: each half opened by the token's own
    /// CKM_RSA_PKCS_OAEP and CKM_AES_KEY_WRAP_PAD (both checked against published vectors elsewhere).
    func test_rsa_aes_key_wrap_reads_aes_key_bits_hash_mgf_and_label() {
        let session = userSession()
        let (publicKey, privateKey) = rsaPair(session)
        let secret = Array(100...131).map(UInt8.init)
        let target = readableKey(session, UInt(CKK_AES), secret, UInt(CKA_ENCRYPT))
        let cases: [(CK_ULONG, UInt, UInt, [UInt8])] = [(256, UInt(CKM_SHA256), UInt(CKG_MGF1_SHA256), []), (128, UInt(CKM_SHA_1), UInt(CKG_MGF1_SHA1), []),
                                                         (192, UInt(CKM_SHA384), UInt(CKG_MGF1_SHA256), Array("a label".utf8))]
        for (bits, hash, mgf, label) in cases {
            let blob = wrap(session, rsaAES(bits: bits, hash: hash, mgf: mgf, label: label), publicKey, target)
            XCTAssertRV(blob.0, CKR_OK)
            XCTAssertEqual(blob.1.count, 256 + 40, "RSA-2048 block, then KWP of 32 bytes")
            let oaepMechanism = memory.mechanism(UInt(CKM_RSA_PKCS_OAEP), oaep(hash: hash, mgf: mgf, label: label).pointee)
            let temporary = decrypt(session, oaepMechanism, privateKey, Array(blob.1.prefix(256)))
            XCTAssertRV(temporary.0, CKR_OK)
            XCTAssertEqual(temporary.1.count, Int(bits / 8), "the one-time key has ulAESKeyBits \(bits)")
            let onceKey = readableKey(session, UInt(CKK_AES), temporary.1, UInt(CKA_UNWRAP))
            let (opened, inner) = unwrap(session, memory.mechanism(UInt(CKM_AES_KEY_WRAP_PAD)), onceKey, Array(blob.1.dropFirst(256)), readableTemplate(UInt(CKK_AES)))
            XCTAssertRV(opened, CKR_OK)
            XCTAssertEqual(value(session, inner).1, secret)
            let (whole, unwrapped) = unwrap(session, rsaAES(bits: bits, hash: hash, mgf: mgf, label: label), privateKey, blob.1, readableTemplate(UInt(CKK_AES)))
            XCTAssertRV(whole, CKR_OK)
            XCTAssertEqual(value(session, unwrapped).1, secret)
        }
    }

    func test_rsa_aes_key_wrap_refuses_100_aes_bits_a_null_oaep_pointer_and_an_8_byte_parameter() {
        let session = userSession()
        let (publicKey, _) = rsaPair(session)
        let target = readableKey(session, UInt(CKK_AES), Array(1...32).map(UInt8.init), UInt(CKA_ENCRYPT))
        XCTAssertRV(wrap(session, rsaAES(bits: 100, hash: UInt(CKM_SHA256), mgf: UInt(CKG_MGF1_SHA256)), publicKey, target).0, CKR_MECHANISM_PARAM_INVALID)
        let withoutOAEP = memory.mechanism(UInt(CKM_RSA_AES_KEY_WRAP), CK_RSA_AES_KEY_WRAP_PARAMS(ulAESKeyBits: 256, pOAEPParams: nil))
        XCTAssertRV(wrap(session, withoutOAEP, publicKey, target).0, CKR_MECHANISM_PARAM_INVALID)
        XCTAssertRV(wrap(session, rsaAES(bits: 256, hash: UInt(CKM_SHA256), mgf: UInt(CKG_MGF1_SHA256), length: 8), publicKey, target).0, CKR_MECHANISM_PARAM_INVALID)
    }

    func test_rsa_aes_key_wrap_with_an_aes_wrapping_key_is_wrapping_key_type_inconsistent() {
        let session = userSession()
        let target = readableKey(session, UInt(CKK_AES), Array(1...32).map(UInt8.init), UInt(CKA_ENCRYPT))
        let kek = wrappingKey(session, Array(33...64).map(UInt8.init))
        XCTAssertRV(wrap(session, rsaAES(bits: 256, hash: UInt(CKM_SHA256), mgf: UInt(CKG_MGF1_SHA256)), kek, target).0, CKR_WRAPPING_KEY_TYPE_INCONSISTENT)
    }
}
