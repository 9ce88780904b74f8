import CPKCS11
import XCTest
@testable import PKCS11

final class MechanismTests: ModuleTestCase {
    func loggedInSession() -> (CK_SLOT_ID, CK_SESSION_HANDLE) {
        let slot = makeToken()
        let session = openSession(slot, readWrite: true)
        XCTAssertRV(login(session), CKR_OK)
        return (slot, session)
    }

    /// Generates a key pair from the two templates; returns (public, private).
    func generate(_ session: CK_SESSION_HANDLE, _ type: UInt, public publicAttributes: [(UInt, [UInt8])], private privateAttributes: [(UInt, [UInt8])] = [],
                          expect: UInt = CKR_OK) -> (CK_OBJECT_HANDLE, CK_OBJECT_HANDLE) {
        var publicKey: CK_OBJECT_HANDLE = 0, privateKey: CK_OBJECT_HANDLE = 0
        let result = withTemplate(publicAttributes) { pt, pc in
            withTemplate(privateAttributes) { vt, vc in
                mechanism(type) { p11.C_GenerateKeyPair!(session, $0, pt, pc, vt, vc, &publicKey, &privateKey) }
            }
        }
        XCTAssertRV(result, expect)
        return (publicKey, privateKey)
    }

    private static let p256: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]
    private static let yes: [UInt8] = [1]

    func sign(_ session: CK_SESSION_HANDLE, _ type: UInt, key: CK_OBJECT_HANDLE, data: [UInt8]) -> (CK_RV, [UInt8]) {
        var data = data
        let initResult = mechanism(type) { p11.C_SignInit!(session, $0, key) }
        guard initResult == CK_RV(CKR_OK) else { return (initResult, []) }
        var length: CK_ULONG = 0
        XCTAssertRV(p11.C_Sign!(session, &data, CK_ULONG(data.count), nil, &length), CKR_OK)
        var signature = [UInt8](repeating: 0, count: Int(length))
        let result = p11.C_Sign!(session, &data, CK_ULONG(data.count), &signature, &length)
        return (result, Array(signature.prefix(Int(length))))
    }

    func verify(_ session: CK_SESSION_HANDLE, _ type: UInt, key: CK_OBJECT_HANDLE, data: [UInt8], signature: [UInt8]) -> CK_RV {
        var data = data, signature = signature
        XCTAssertRV(mechanism(type) { p11.C_VerifyInit!(session, $0, key) }, CKR_OK)
        return p11.C_Verify!(session, &data, CK_ULONG(data.count), &signature, CK_ULONG(signature.count))
    }

    func test_mechanism_list_and_info() {
        let slot = makeToken()
        var count: CK_ULONG = 0
        XCTAssertRV(p11.C_GetMechanismList!(slot, nil, &count), CKR_OK)
        XCTAssertGreaterThan(count, 30)
        var list = [CK_MECHANISM_TYPE](repeating: 0, count: Int(count))
        XCTAssertRV(p11.C_GetMechanismList!(slot, &list, &count), CKR_OK)
        XCTAssertTrue(list.contains(CK_MECHANISM_TYPE(CKM_SHA256_RSA_PKCS)))
        XCTAssertTrue(list.contains(CK_MECHANISM_TYPE(CKM_MD5)), "the compatible key policy offers the legacy algorithms")
        var info = CK_MECHANISM_INFO()
        XCTAssertRV(p11.C_GetMechanismInfo!(slot, CK_MECHANISM_TYPE(CKM_RSA_PKCS_KEY_PAIR_GEN), &info), CKR_OK)
        XCTAssertEqual(info.ulMinKeySize, 1024, "the compatible key policy: RSA from 1,024 bits")
        XCTAssertEqual(info.ulMaxKeySize, 8192)
        XCTAssertEqual(info.flags, CK_FLAGS(CKF_GENERATE_KEY_PAIR | CKF_HW))
        XCTAssertRV(p11.C_GetMechanismInfo!(slot, CK_MECHANISM_TYPE(CKM_DES3_CBC_PAD), &info), CKR_OK)
        XCTAssertEqual([info.ulMinKeySize, info.ulMaxKeySize], [112, 168], "DES sizes are effective key bits")
        XCTAssertRV(p11.C_GetMechanismInfo!(slot, CK_MECHANISM_TYPE(CKM_RC4), &info), CKR_MECHANISM_INVALID)
    }

    func test_digest_single_multi_part_and_call_twice() {
        let (_, session) = loggedInSession()
        let expected: [UInt8] = [0xba, 0x78, 0x16, 0xbf, 0x8f, 0x01, 0xcf, 0xea, 0x41, 0x41, 0x40, 0xde, 0x5d, 0xae, 0x22, 0x23,
                                 0xb0, 0x03, 0x61, 0xa3, 0x96, 0x17, 0x7a, 0x9c, 0xb4, 0x10, 0xff, 0x61, 0xf2, 0x00, 0x15, 0xad]
        var abc = Array("abc".utf8)
        XCTAssertRV(mechanism(UInt(CKM_SHA256)) { p11.C_DigestInit!(session, $0) }, CKR_OK)
        XCTAssertRV(mechanism(UInt(CKM_SHA256)) { p11.C_DigestInit!(session, $0) }, CKR_OPERATION_ACTIVE)
        var length: CK_ULONG = 0
        XCTAssertRV(p11.C_Digest!(session, &abc, 3, nil, &length), CKR_OK)
        XCTAssertEqual(length, 32)
        var small = [UInt8](repeating: 0, count: 8)
        length = 8
        XCTAssertRV(p11.C_Digest!(session, &abc, 3, &small, &length), CKR_BUFFER_TOO_SMALL)
        XCTAssertEqual(length, 32)
        var digest = [UInt8](repeating: 0, count: 32)
        XCTAssertRV(p11.C_Digest!(session, &abc, 3, &digest, &length), CKR_OK)
        XCTAssertEqual(digest, expected)
        XCTAssertRV(p11.C_Digest!(session, &abc, 3, &digest, &length), CKR_OPERATION_NOT_INITIALIZED, "the operation ended")
        XCTAssertRV(mechanism(UInt(CKM_SHA256)) { p11.C_DigestInit!(session, $0) }, CKR_OK)
        var a = Array("a".utf8), bc = Array("bc".utf8)
        XCTAssertRV(p11.C_DigestUpdate!(session, &a, 1), CKR_OK)
        XCTAssertRV(p11.C_DigestUpdate!(session, &bc, 2), CKR_OK)
        length = 32
        XCTAssertRV(p11.C_DigestFinal!(session, &digest, &length), CKR_OK)
        XCTAssertEqual(digest, expected)
        XCTAssertRV(mechanism(UInt(CKM_SHA256)) { p11.C_DigestInit!(session, $0) }, CKR_OK)
        XCTAssertRV(p11.C_DigestUpdate!(session, &a, 1), CKR_OK)
        XCTAssertRV(p11.C_Digest!(session, &bc, 2, &digest, &length), CKR_OPERATION_ACTIVE, "single-part inside multi-part")
        XCTAssertRV(p11.C_DigestFinal!(session, &digest, &length), CKR_OPERATION_NOT_INITIALIZED, "an error ends the operation")
        XCTAssertRV(mechanism(UInt(CKM_SHA256), parameter: CK_ULONG(1)) { p11.C_DigestInit!(session, $0) }, CKR_MECHANISM_PARAM_INVALID)
        XCTAssertRV(mechanism(UInt(CKM_ECDSA)) { p11.C_DigestInit!(session, $0) }, CKR_MECHANISM_INVALID)
        XCTAssertRV(mechanism(UInt(CKM_SHA256)) { p11.C_DigestInit!(session, $0) }, CKR_OK)
        XCTAssertRV(p11.C_DigestInit!(session, nil), CKR_OK, "PKCS#11 3.0: a NULL mechanism ends the operation")
        XCTAssertRV(p11.C_DigestUpdate!(session, &a, 1), CKR_OPERATION_NOT_INITIALIZED)
        XCTAssertRV(mechanism(UInt(CKM_SHA256)) { p11.C_DigestInit!(session, $0) }, CKR_OK)
        XCTAssertRV(FunctionLists.version30.pointee.C_SessionCancel(session, CK_FLAGS(CKF_DIGEST)), CKR_OK)
        XCTAssertRV(mechanism(UInt(CKM_SHA256)) { p11.C_DigestInit!(session, $0) }, CKR_OK, "C_SessionCancel ended the digest")
    }

    func test_ec_key_pair_signs_and_verifies_with_exact_codes() {
        let (_, session) = loggedInSession()
        let (publicKey, privateKey) = generate(session, UInt(CKM_EC_KEY_PAIR_GEN), public: [(UInt(CKA_EC_PARAMS), Self.p256), (UInt(CKA_TOKEN), Self.yes)],
                                               private: [(UInt(CKA_TOKEN), Self.yes), (UInt(CKA_LABEL), Array("ec".utf8))])
        XCTAssertEqual(value(session, privateKey, UInt(CKA_LOCAL)).1, [1])
        XCTAssertEqual(value(session, privateKey, UInt(CKA_KEY_GEN_MECHANISM)).1, ModuleTestCase.ulong(UInt(CKM_EC_KEY_PAIR_GEN)))
        XCTAssertEqual(value(session, privateKey, UInt(CKA_ALWAYS_SENSITIVE)).1, [1])
        XCTAssertEqual(value(session, privateKey, UInt(CKA_ID)).1, value(session, publicKey, UInt(CKA_ID)).1)
        XCTAssertRV(value(session, privateKey, UInt(CKA_VALUE)).0, CKR_ATTRIBUTE_SENSITIVE)
        XCTAssertEqual(value(session, publicKey, UInt(CKA_EC_POINT)).1?.prefix(2), [0x04, 0x41], "DER OCTET STRING of 65 bytes")
        let data = Array("to be signed".utf8)
        let (result, signature) = sign(session, UInt(CKM_ECDSA_SHA256), key: privateKey, data: data)
        XCTAssertRV(result, CKR_OK)
        XCTAssertEqual(signature.count, 64)
        XCTAssertRV(verify(session, UInt(CKM_ECDSA_SHA256), key: publicKey, data: data, signature: signature), CKR_OK)
        var altered = signature
        altered[10] ^= 1
        XCTAssertRV(verify(session, UInt(CKM_ECDSA_SHA256), key: publicKey, data: data, signature: altered), CKR_SIGNATURE_INVALID)
        XCTAssertRV(verify(session, UInt(CKM_ECDSA_SHA256), key: publicKey, data: data, signature: Array(signature.prefix(63))), CKR_SIGNATURE_LEN_RANGE)
        XCTAssertRV(mechanism(UInt(CKM_ECDSA)) { p11.C_SignInit!(session, $0, publicKey) }, CKR_KEY_TYPE_INCONSISTENT)
        XCTAssertRV(mechanism(UInt(CKM_SHA256_RSA_PKCS)) { p11.C_SignInit!(session, $0, privateKey) }, CKR_KEY_TYPE_INCONSISTENT)
        XCTAssertRV(mechanism(UInt(CKM_ECDSA)) { p11.C_SignInit!(session, $0, 0xFFFF) }, CKR_KEY_HANDLE_INVALID)
        XCTAssertRV(mechanism(UInt(CKM_ECDSA)) { p11.C_SignInit!(session, $0, privateKey) }, CKR_OK)
        XCTAssertRV(mechanism(UInt(CKM_ECDSA)) { p11.C_SignInit!(session, $0, privateKey) }, CKR_OPERATION_ACTIVE)
        XCTAssertRV(p11.C_Logout!(session), CKR_OK)
        XCTAssertRV(mechanism(UInt(CKM_ECDSA)) { p11.C_VerifyInit!(session, $0, privateKey) }, CKR_KEY_HANDLE_INVALID, "private keys vanish at logout")
    }

    func test_rsa_generation_rules_and_pss_parameters() {
        let (_, session) = loggedInSession()
        _ = generate(session, UInt(CKM_RSA_PKCS_KEY_PAIR_GEN), public: [], expect: CKR_TEMPLATE_INCOMPLETE)
        _ = generate(session, UInt(CKM_RSA_PKCS_KEY_PAIR_GEN), public: [(UInt(CKA_MODULUS_BITS), ModuleTestCase.ulong(1016))], expect: CKR_KEY_SIZE_RANGE)
        _ = generate(session, UInt(CKM_RSA_PKCS_KEY_PAIR_GEN), public: [(UInt(CKA_MODULUS_BITS), ModuleTestCase.ulong(2048)), (UInt(CKA_MODULUS), [1])],
                     expect: CKR_TEMPLATE_INCONSISTENT)
        _ = generate(session, UInt(CKM_RSA_PKCS_KEY_PAIR_GEN), public: [(UInt(CKA_MODULUS_BITS), ModuleTestCase.ulong(2048)),
                                                                         (UInt(CKA_KEY_TYPE), ModuleTestCase.ulong(UInt(CKK_EC)))], expect: CKR_TEMPLATE_INCONSISTENT)
        let (publicKey, privateKey) = generate(session, UInt(CKM_RSA_PKCS_KEY_PAIR_GEN), public: [(UInt(CKA_MODULUS_BITS), ModuleTestCase.ulong(2048))],
                                               private: [(UInt(CKA_SIGN), [0])])
        XCTAssertEqual(value(session, publicKey, UInt(CKA_MODULUS_BITS)).1, ModuleTestCase.ulong(2048))
        XCTAssertEqual(value(session, publicKey, UInt(CKA_PUBLIC_EXPONENT)).1, [1, 0, 1])
        XCTAssertEqual(value(session, privateKey, UInt(CKA_MODULUS)).1?.count, 256)
        XCTAssertRV(mechanism(UInt(CKM_SHA256_RSA_PKCS)) { p11.C_SignInit!(session, $0, privateKey) }, CKR_KEY_FUNCTION_NOT_PERMITTED)
        XCTAssertRV(withTemplate([(UInt(CKA_SIGN), [1])]) { p11.C_SetAttributeValue!(session, privateKey, $0, $1) }, CKR_OK)
        XCTAssertRV(withTemplate([(UInt(CKA_SENSITIVE), [0])]) { p11.C_SetAttributeValue!(session, privateKey, $0, $1) }, CKR_ATTRIBUTE_READ_ONLY)
        XCTAssertRV(withTemplate([(UInt(CKA_EXTRACTABLE), [1])]) { p11.C_SetAttributeValue!(session, privateKey, $0, $1) }, CKR_ATTRIBUTE_READ_ONLY)
        XCTAssertRV(withTemplate([(UInt(CKA_MODULUS), [1])]) { p11.C_SetAttributeValue!(session, privateKey, $0, $1) }, CKR_ATTRIBUTE_READ_ONLY)
        let pss = CK_RSA_PKCS_PSS_PARAMS(hashAlg: CK_MECHANISM_TYPE(CKM_SHA256), mgf: CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA256), sLen: 32)
        let pssMechanism = UInt(CKM_SHA256_RSA_PKCS_PSS)
        XCTAssertRV(mechanism(pssMechanism, parameter: pss) { p11.C_SignInit!(session, $0, privateKey) }, CKR_OK)
        var data = Array("pss".utf8)
        var signature = [UInt8](repeating: 0, count: 256)
        var length: CK_ULONG = 256
        XCTAssertRV(p11.C_Sign!(session, &data, 3, &signature, &length), CKR_OK)
        XCTAssertRV(mechanism(pssMechanism, parameter: pss) { p11.C_VerifyInit!(session, $0, publicKey) }, CKR_OK)
        XCTAssertRV(p11.C_Verify!(session, &data, 3, &signature, length), CKR_OK)
        let mismatch = CK_RSA_PKCS_PSS_PARAMS(hashAlg: CK_MECHANISM_TYPE(CKM_SHA384), mgf: CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA256), sLen: 32)
        XCTAssertRV(mechanism(pssMechanism, parameter: mismatch) { p11.C_SignInit!(session, $0, privateKey) }, CKR_MECHANISM_PARAM_INVALID)
        XCTAssertRV(mechanism(UInt(CKM_RSA_PKCS_PSS), parameter: pss, length: 8) { p11.C_SignInit!(session, $0, privateKey) }, CKR_MECHANISM_PARAM_INVALID)
        let huge = CK_RSA_PKCS_PSS_PARAMS(hashAlg: CK_MECHANISM_TYPE(CKM_SHA256), mgf: CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA256), sLen: 1000)
        XCTAssertRV(mechanism(UInt(CKM_RSA_PKCS_PSS), parameter: huge) { p11.C_SignInit!(session, $0, privateKey) }, CKR_MECHANISM_PARAM_INVALID)
        // Raw PKCS#1: input longer than k - 11 is CKR_DATA_LEN_RANGE and ends the operation.
        XCTAssertRV(sign(session, UInt(CKM_RSA_PKCS), key: privateKey, data: [UInt8](repeating: 1, count: 250)).0, CKR_DATA_LEN_RANGE)
        XCTAssertRV(sign(session, UInt(CKM_RSA_PKCS), key: privateKey, data: [UInt8](repeating: 1, count: 245)).0, CKR_OK)
    }

    func test_allowed_mechanisms_restrict_a_key() {
        let (_, session) = loggedInSession()
        let allowed = ModuleTestCase.ulong(UInt(CKM_ECDSA))
        let (_, privateKey) = generate(session, UInt(CKM_EC_KEY_PAIR_GEN), public: [(UInt(CKA_EC_PARAMS), Self.p256)],
                                       private: [(UInt(CKA_ALLOWED_MECHANISMS), allowed)])
        XCTAssertRV(mechanism(UInt(CKM_ECDSA_SHA256)) { p11.C_SignInit!(session, $0, privateKey) }, CKR_MECHANISM_INVALID)
        XCTAssertRV(sign(session, UInt(CKM_ECDSA), key: privateKey, data: [UInt8](repeating: 7, count: 32)).0, CKR_OK)
    }

    /// C_CreateObject makes only the object asked for (DESIGN §4): the private key carries its
    /// public half as CKA_PUBLIC_KEY_INFO, and no public-key object is invented beside it.
    func test_imported_private_key_is_the_only_object_created() {
        let (_, session) = loggedInSession()
        let (generatedPublic, generated) = generate(session, UInt(CKM_EC_KEY_PAIR_GEN), public: [(UInt(CKA_EC_PARAMS), Self.p256)],
                                      private: [(UInt(CKA_EXTRACTABLE), [1]), (UInt(CKA_SENSITIVE), [0])])
        let scalar = value(session, generated, UInt(CKA_VALUE))
        XCTAssertRV(scalar.0, CKR_OK)
        var handle: CK_OBJECT_HANDLE = 0
        let template: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), ModuleTestCase.ulong(UInt(CKO_PRIVATE_KEY))), (UInt(CKA_KEY_TYPE), ModuleTestCase.ulong(UInt(CKK_EC))),
                                           (UInt(CKA_EC_PARAMS), Self.p256), (UInt(CKA_VALUE), scalar.1 ?? []), (UInt(CKA_TOKEN), Self.yes), (UInt(CKA_ID), [0x42])]
        XCTAssertRV(withTemplate(template) { p11.C_CreateObject!(session, $0, $1, &handle) }, CKR_OK)
        let publicKeys = find(session, [(UInt(CKA_CLASS), ModuleTestCase.ulong(UInt(CKO_PUBLIC_KEY))), (UInt(CKA_ID), [0x42])])
        XCTAssertEqual(publicKeys.count, 0)
        let info = value(session, handle, UInt(CKA_PUBLIC_KEY_INFO))
        XCTAssertRV(info.0, CKR_OK)
        XCTAssertEqual(info.1, value(session, generatedPublic, UInt(CKA_PUBLIC_KEY_INFO)).1)
        var wrongLength = template
        wrongLength[3] = (UInt(CKA_VALUE), [UInt8](repeating: 0xFF, count: 32))
        XCTAssertRV(withTemplate(wrongLength) { p11.C_CreateObject!(session, $0, $1, &handle) }, CKR_ATTRIBUTE_VALUE_INVALID, "scalar above the order")
        XCTAssertRV(withTemplate(Array(template.prefix(3))) { p11.C_CreateObject!(session, $0, $1, &handle) }, CKR_TEMPLATE_INCOMPLETE)
    }
}

extension MechanismTests {
    func test_montgomery_agreement_and_ed448_signatures() {
        let (_, session) = loggedInSession()
        let x25519: [UInt8] = [0x06, 0x03, 0x2B, 0x65, 0x6E]
        var pairs: [(CK_OBJECT_HANDLE, CK_OBJECT_HANDLE)] = []
        for _ in 0..<2 {
            pairs.append(generate(session, UInt(CKM_EC_MONTGOMERY_KEY_PAIR_GEN), public: [(UInt(CKA_EC_PARAMS), x25519)]))
        }
        let ab = agreedSecret(session, mine: pairs[0].1, theirs: pairs[1].0, kdf: UInt(CKD_NULL), length: nil)
        let ba = agreedSecret(session, mine: pairs[1].1, theirs: pairs[0].0, kdf: UInt(CKD_NULL), length: nil)
        XCTAssertRV(ab.0, CKR_OK)
        XCTAssertEqual(value(session, pairs[1].0, UInt(CKA_EC_POINT)).1?.count, 34, "DER OCTET STRING of 32 bytes")
        let secrets = [ab.1, ba.1]
        XCTAssertEqual(secrets[0].count, 32)
        XCTAssertEqual(secrets[0], secrets[1])
        XCTAssertRV(mechanism(UInt(CKM_EDDSA)) { p11.C_SignInit!(session, $0, pairs[0].1) }, CKR_KEY_TYPE_INCONSISTENT, "X25519 keys do not sign")

        let ed448: [UInt8] = [0x06, 0x03, 0x2B, 0x65, 0x71]
        let (publicKey, privateKey) = generate(session, UInt(CKM_EC_EDWARDS_KEY_PAIR_GEN), public: [(UInt(CKA_EC_PARAMS), ed448)])
        let (result, signature) = sign(session, UInt(CKM_EDDSA), key: privateKey, data: Array("ed448".utf8))
        XCTAssertRV(result, CKR_OK)
        XCTAssertEqual(signature.count, 114)
        XCTAssertRV(verify(session, UInt(CKM_EDDSA), key: publicKey, data: Array("ed448".utf8), signature: signature), CKR_OK)
    }
}
