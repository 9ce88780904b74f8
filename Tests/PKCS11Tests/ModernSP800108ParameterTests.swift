import CPKCS11
import XCTest
@testable import PKCS11

/// CK_SP800_108_KDF_PARAMS and CK_SP800_108_FEEDBACK_KDF_PARAMS with their CK_PRF_DATA_PARAM
/// lists (CK_SP800_108_COUNTER_FORMAT, CK_SP800_108_DKM_LENGTH_FORMAT) and CK_DERIVED_KEY.
///
/// The expected outputs were computed once, outside the module, from a fixed base key (bytes 0–31):
/// the counter-mode HMAC-SHA256 and AES-CMAC ones by `cryptography`'s KBKDFHMAC and KBKDFCMAC,
/// the others by a direct implementation of NIST SP 800-108 (HMAC from Python's standard library)
/// that agrees with those two, with PKCS#11's allocation of whole PRF outputs to each key.
final class ModernSP800108ParameterTests: ModernMechanismTestCase {
    /// One CK_PRF_DATA_PARAM.
    private enum Field {
        case iteration(bits: CK_ULONG, littleEndian: Bool)
        case iterationWithoutFormat
        case counter(bits: CK_ULONG, littleEndian: Bool)
        case dkmLength(method: UInt, bits: CK_ULONG, littleEndian: Bool)
        case bytes([UInt8])
        case raw(type: UInt, length: CK_ULONG)
    }

    private func dataParams(_ fields: [Field]) -> (UnsafeMutablePointer<CK_PRF_DATA_PARAM>, CK_ULONG) {
        let entries = fields.map { field -> CK_PRF_DATA_PARAM in
            switch field {
            case .iteration(let bits, let little):
                return counterFormat(UInt(CK_SP800_108_ITERATION_VARIABLE), bits: bits, littleEndian: little)
            case .counter(let bits, let little):
                return counterFormat(UInt(CK_SP800_108_OPTIONAL_COUNTER), bits: bits, littleEndian: little)
            case .iterationWithoutFormat:
                return CK_PRF_DATA_PARAM(type: CK_ULONG(CK_SP800_108_ITERATION_VARIABLE), pValue: nil, ulValueLen: 0)
            case .dkmLength(let method, let bits, let little):
                let format = memory.copy(CK_SP800_108_DKM_LENGTH_FORMAT(dkmLengthMethod: CK_ULONG(method), bLittleEndian: little ? 1 : 0, ulWidthInBits: bits))
                return CK_PRF_DATA_PARAM(type: CK_ULONG(CK_SP800_108_DKM_LENGTH), pValue: UnsafeMutableRawPointer(format),
                                         ulValueLen: CK_ULONG(MemoryLayout<CK_SP800_108_DKM_LENGTH_FORMAT>.size))
            case .bytes(let data):
                return CK_PRF_DATA_PARAM(type: CK_ULONG(CK_SP800_108_BYTE_ARRAY), pValue: memory.raw(data), ulValueLen: CK_ULONG(data.count))
            case .raw(let type, let length):
                return CK_PRF_DATA_PARAM(type: CK_ULONG(type), pValue: nil, ulValueLen: length)
            }
        }
        return (memory.copy(array: entries), CK_ULONG(entries.count))
    }

    private func counterFormat(_ type: UInt, bits: CK_ULONG, littleEndian: Bool) -> CK_PRF_DATA_PARAM {
        let format = memory.copy(CK_SP800_108_COUNTER_FORMAT(bLittleEndian: littleEndian ? 1 : 0, ulWidthInBits: bits))
        return CK_PRF_DATA_PARAM(type: CK_ULONG(type), pValue: UnsafeMutableRawPointer(format), ulValueLen: CK_ULONG(MemoryLayout<CK_SP800_108_COUNTER_FORMAT>.size))
    }

    /// The additional keys' CK_DERIVED_KEY array and the handles the module fills in.
    private func additionalKeys(_ templates: [[(UInt, [UInt8])]], handle preset: CK_OBJECT_HANDLE = 0)
        -> (UnsafeMutablePointer<CK_DERIVED_KEY>?, CK_ULONG, UnsafeMutablePointer<CK_OBJECT_HANDLE>) {
        let handles = memory.copy(array: [CK_OBJECT_HANDLE](repeating: preset, count: templates.count))
        let keys = templates.enumerated().map { index, template -> CK_DERIVED_KEY in
            let (attributes, count) = memory.template(template)
            return CK_DERIVED_KEY(pTemplate: attributes, ulAttributeCount: count, phKey: handles + index)
        }
        return (keys.isEmpty ? nil : memory.copy(array: keys), CK_ULONG(keys.count), handles)
    }

    private func kdf(_ type: UInt, prf: UInt, _ fields: [Field], additional: (UnsafeMutablePointer<CK_DERIVED_KEY>?, CK_ULONG) = (nil, 0),
                     length: Int? = nil) -> UnsafeMutablePointer<CK_MECHANISM> {
        let (params, count) = dataParams(fields)
        return memory.mechanism(type, CK_SP800_108_KDF_PARAMS(prfType: CK_MECHANISM_TYPE(prf), ulNumberOfDataParams: count, pDataParams: params,
                                                              ulAdditionalDerivedKeys: additional.1, pAdditionalDerivedKeys: additional.0), length: length)
    }

    private func feedback(prf: UInt, _ fields: [Field], iv: [UInt8]) -> UnsafeMutablePointer<CK_MECHANISM> {
        let (params, count) = dataParams(fields)
        return memory.mechanism(UInt(CKM_SP800_108_FEEDBACK_KDF),
                                CK_SP800_108_FEEDBACK_KDF_PARAMS(prfType: CK_MECHANISM_TYPE(prf), ulNumberOfDataParams: count, pDataParams: params,
                                                                 ulIVLen: CK_ULONG(iv.count), pIV: memory.bytes(iv),
                                                                 ulAdditionalDerivedKeys: 0, pAdditionalDerivedKeys: nil))
    }

    private let baseValue = Array(0...31).map(UInt8.init)
    private let label = Array("modern label".utf8), context = Array("the context".utf8)
    private let sumOfKeys = UInt(CK_SP800_108_DKM_LENGTH_SUM_OF_KEYS), sumOfSegments = UInt(CK_SP800_108_DKM_LENGTH_SUM_OF_SEGMENTS)

    /// [i]₃₂ ‖ label ‖ 00 ‖ context ‖ [L]₃₂, all big-endian: SP 800-108's counter-mode layout.
    private var counterLayout: [Field] {
        [.iteration(bits: 32, littleEndian: false), .bytes(label), .bytes([0]), .bytes(context), .dkmLength(method: sumOfKeys, bits: 32, littleEndian: false)]
    }

    /// The same fixed input for feedback and double-pipeline mode: the iteration variable (the
    /// chained value), then an optional 32-bit counter.
    private var chainedLayout: [Field] {
        [.iterationWithoutFormat, .counter(bits: 32, littleEndian: false), .bytes(label), .bytes([0]), .bytes(context),
         .dkmLength(method: sumOfKeys, bits: 32, littleEndian: false)]
    }

    private func base(_ session: CK_SESSION_HANDLE, type: UInt = UInt(CKK_GENERIC_SECRET)) -> CK_OBJECT_HANDLE {
        readableKey(session, type, baseValue, UInt(CKA_DERIVE))
    }

    // MARK: known answers

    func test_counter_mode_with_hmac_sha256_reads_each_data_parameter() {
        let session = userSession()
        let mechanism = kdf(UInt(CKM_SP800_108_COUNTER_KDF), prf: UInt(CKM_SHA256_HMAC), counterLayout)
        XCTAssertEqual(derivedValue(session, mechanism, base(session), readableTemplate(length: 42)),
                       hex("4d94346b37e6e2b36733cd6c2360cc747cca86aead55e0e02b29cf14e1e1e9aa4bd943b37c69c73a1121"))
    }

    func test_counter_mode_with_aes_cmac_derives_from_an_aes_key_and_refuses_a_generic_secret() {
        let session = userSession()
        let mechanism = kdf(UInt(CKM_SP800_108_COUNTER_KDF), prf: UInt(CKM_AES_CMAC), counterLayout)
        XCTAssertEqual(derivedValue(session, mechanism, base(session, type: UInt(CKK_AES)), readableTemplate(UInt(CKK_AES), length: 32)),
                       hex("3be77d6ab060747ef410104b8034db9aacf935b65f4e37231ac0c529aa91cdde"))
        XCTAssertRV(derive(session, mechanism, base(session), readableTemplate(UInt(CKK_AES), length: 32)).0, CKR_KEY_TYPE_INCONSISTENT)
    }

    func test_counter_mode_reads_little_endian_formats_and_a_counter_placed_last() {
        let session = userSession()
        let fields: [Field] = [.bytes(label), .dkmLength(method: sumOfSegments, bits: 16, littleEndian: true), .iteration(bits: 16, littleEndian: true)]
        let mechanism = kdf(UInt(CKM_SP800_108_COUNTER_KDF), prf: UInt(CKM_SHA3_256_HMAC), fields)
        XCTAssertEqual(derivedValue(session, mechanism, base(session), readableTemplate(length: 70)),
                       hex("cafe64da971a15ba6375e4c802e6f4131ce3bf889724ff6f9e58d4fc58bf0279c133d2f653e73f5e168e07dbfa4a182d"
                           + "615d8b08fd3f7dd2ea9b2a5784ad50cb27c55db3a294"))
    }

    func test_an_additional_key_takes_whole_segments_after_the_first_key() {
        let session = userSession()
        // 48 + 16 bytes from HMAC-SHA256: segments 1–2 for the first key, segment 3 for the other;
        // the DKM length is 512 bits (sum of keys) or 768 (sum of segments).
        let expected: [(UInt, String, String)] = [
            (sumOfKeys, "887d1c052f9178ec38a0e9682ddfd85769ac2a62d1bdf40cadfb7371d530007298ced1be5c76010cec5655852e96ca33", "f584a7ca03bac7bb28ee20d3260796e8"),
            (sumOfSegments, "905464ce3b53c4ed2066405b3262b1dfd1fb93a66048433e59a9b5bfaa4bfeb497c72ccd050c2a5fc8ef5834c434cf8d", "c6e70a6e5e6a194a2f246d0ac25fa114"),
        ]
        for (method, first, second) in expected {
            let extra = additionalKeys([readableTemplate(length: 16)])
            let fields: [Field] = [.iteration(bits: 8, littleEndian: false), .bytes(label), .dkmLength(method: method, bits: 32, littleEndian: false)]
            let mechanism = kdf(UInt(CKM_SP800_108_COUNTER_KDF), prf: UInt(CKM_SHA256_HMAC), fields, additional: (extra.0, extra.1))
            XCTAssertEqual(derivedValue(session, mechanism, base(session), readableTemplate(length: 48)), hex(first), "DKM method \(method)")
            XCTAssertNotEqual(extra.2.pointee, CK_OBJECT_HANDLE(CK_INVALID_HANDLE))
            XCTAssertEqual(value(session, extra.2.pointee).1, hex(second), "the additional key, DKM method \(method)")
        }
    }

    func test_feedback_mode_chains_from_the_iv_or_from_nothing() {
        let session = userSession()
        let iv = Array(32...63).map(UInt8.init)
        XCTAssertEqual(derivedValue(session, feedback(prf: UInt(CKM_SHA256_HMAC), chainedLayout, iv: iv), base(session), readableTemplate(length: 80)),
                       hex("353178de8fec446b28be336f383512f7300e69791d7401c43386ac419aa59cf1e903b303df3fba369dc8ec59189d0268"
                           + "b033c62cb6b8349eebf7d1b6fc41a1ac46d45f061224c91dc13b469892f6df15"))
        XCTAssertEqual(derivedValue(session, feedback(prf: UInt(CKM_SHA256_HMAC), chainedLayout, iv: []), base(session), readableTemplate(length: 80)),
                       hex("331e1c498d70b10058b5c7c15ae8b493875090557c038ad78e5800098781ee6986376f4bf390b360f4a90d75ca0a6be0"
                           + "51b7efb9d24fab7e89d73621e67209ae40a66d0d4d9767a5895cd16f01a356b0"))
    }

    func test_double_pipeline_mode_chains_the_fixed_input() {
        let session = userSession()
        let mechanism = kdf(UInt(CKM_SP800_108_DOUBLE_PIPELINE_KDF), prf: UInt(CKM_SHA256_HMAC), chainedLayout)
        XCTAssertEqual(derivedValue(session, mechanism, base(session), readableTemplate(length: 72)),
                       hex("b56f214391c20e3ec7e0ee0fda55687ca8cc030532b6f7d6ea3f664bb13777c02178b58b5b869d835ecf96cc604bfac6"
                           + "d08d48dccd2eb4048a27a72fd896bfc7cbb6b93908bfe4ba"))
    }

    // MARK: refusals

    private func refusal(_ mechanism: UnsafeMutablePointer<CK_MECHANISM>) -> CK_RV {
        let session = userSession()
        return derive(session, mechanism, base(session), readableTemplate(length: 32)).0
    }

    func test_counter_mode_without_an_iteration_variable_is_mechanism_param_invalid() {
        XCTAssertRV(refusal(kdf(UInt(CKM_SP800_108_COUNTER_KDF), prf: UInt(CKM_SHA256_HMAC), [.bytes(Array("label".utf8))])), CKR_MECHANISM_PARAM_INVALID)
    }

    func test_counter_mode_with_an_optional_counter_is_mechanism_param_invalid() {
        XCTAssertRV(refusal(kdf(UInt(CKM_SP800_108_COUNTER_KDF), prf: UInt(CKM_SHA256_HMAC),
                                     [.iteration(bits: 32, littleEndian: false), .counter(bits: 32, littleEndian: false)])), CKR_MECHANISM_PARAM_INVALID)
    }

    func test_two_dkm_lengths_are_mechanism_param_invalid() {
        let length = Field.dkmLength(method: sumOfKeys, bits: 32, littleEndian: false)
        XCTAssertRV(refusal(kdf(UInt(CKM_SP800_108_COUNTER_KDF), prf: UInt(CKM_SHA256_HMAC), [.iteration(bits: 32, littleEndian: false), length, length])),
                    CKR_MECHANISM_PARAM_INVALID)
    }

    func test_an_empty_byte_array_is_mechanism_param_invalid() {
        XCTAssertRV(refusal(kdf(UInt(CKM_SP800_108_COUNTER_KDF), prf: UInt(CKM_SHA256_HMAC),
                                     [.iteration(bits: 32, littleEndian: false), .raw(type: UInt(CK_SP800_108_BYTE_ARRAY), length: 0)])), CKR_MECHANISM_PARAM_INVALID)
    }

    func test_a_prf_that_is_a_digest_not_a_mac_is_mechanism_param_invalid() {
        XCTAssertRV(refusal(kdf(UInt(CKM_SP800_108_COUNTER_KDF), prf: UInt(CKM_SHA256), [.iteration(bits: 32, littleEndian: false), .bytes(Array("label".utf8))])),
                    CKR_MECHANISM_PARAM_INVALID)
    }

    func test_a_feedback_iteration_variable_with_a_counter_format_is_mechanism_param_invalid() {
        XCTAssertRV(refusal(feedback(prf: UInt(CKM_SHA256_HMAC), [.iteration(bits: 32, littleEndian: false), .bytes(Array("label".utf8))], iv: [])),
                    CKR_MECHANISM_PARAM_INVALID)
    }

    func test_a_kdf_parameter_of_32_bytes_is_mechanism_param_invalid() {
        XCTAssertRV(refusal(kdf(UInt(CKM_SP800_108_COUNTER_KDF), prf: UInt(CKM_SHA256_HMAC), [.iteration(bits: 32, littleEndian: false)], length: 32)),
                    CKR_MECHANISM_PARAM_INVALID)
        XCTAssertRV(refusal(kdf(UInt(CKM_SP800_108_COUNTER_KDF), prf: UInt(CKM_SHA256_HMAC), [.iteration(bits: 32, littleEndian: false)])), CKR_OK,
                    "the same parameter at its size")
    }

    func test_a_failed_derivation_sets_each_additional_handle_to_ck_invalid_handle() {
        let session = userSession()
        let extra = additionalKeys([[(UInt(CKA_CLASS), Self.ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_GENERIC_SECRET))),
                                     (UInt(CKA_VALUE_LEN), Self.ulong(16)), (UInt(CKA_TOKEN), [0])]], handle: 4711)
        let mechanism = kdf(UInt(CKM_SP800_108_COUNTER_KDF), prf: UInt(CKM_SHA256_HMAC), [.iteration(bits: 8, littleEndian: false), .bytes(Array("label".utf8))],
                            additional: (extra.0, extra.1))
        let withoutLength: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_GENERIC_SECRET))),
                                                (UInt(CKA_TOKEN), [0])]
        XCTAssertRV(derive(session, mechanism, base(session), withoutLength).0, CKR_TEMPLATE_INCOMPLETE, "the first key has no length")
        XCTAssertEqual(extra.2.pointee, CK_OBJECT_HANDLE(CK_INVALID_HANDLE))
    }
}
