import CPKCS11
import XCTest
@testable import PKCS11

/// PKCS#11's miscellaneous simple key derivations (concatenation, XOR, extraction), with the specification's
/// example, and the defences that keep a sensitive key from being read a few bits at a time.
final class SimpleDerivationTests: ModuleTestCase {
    private let readable: [(UInt, [UInt8])] = [(UInt(CKA_SENSITIVE), [0]), (UInt(CKA_EXTRACTABLE), [1])]

    /// A session secret key for deriving from, with a known value.
    private func secretKey(_ session: CK_SESSION_HANDLE, _ value: [UInt8], type: UInt = UInt(CKK_GENERIC_SECRET), extra: [(UInt, [UInt8])]) -> CK_OBJECT_HANDLE {
        secretKey(session, type: type, value: value, extra: [(UInt(CKA_DERIVE), [1]), (UInt(CKA_TOKEN), [0])] + extra)
    }

    private func derived(_ extra: [(UInt, [UInt8])]) -> [(UInt, [UInt8])] {
        [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_GENERIC_SECRET))), (UInt(CKA_TOKEN), [0])] + extra
    }

    private func derive<P>(_ session: CK_SESSION_HANDLE, _ type: UInt, parameter: P, base: CK_OBJECT_HANDLE, _ template: [(UInt, [UInt8])]) -> (CK_RV, CK_OBJECT_HANDLE) {
        var handle: CK_OBJECT_HANDLE = 0
        let result = withTemplate(template) { t, c in
            mechanism(type, parameter: parameter) { p11.C_DeriveKey!(session, $0, base, t, c, &handle) }
        }
        return (result, handle)
    }

    private func withData<R>(_ data: [UInt8], _ body: (CK_KEY_DERIVATION_STRING_DATA) -> R) -> R {
        var data = data
        return data.withUnsafeMutableBufferPointer { buffer in body(CK_KEY_DERIVATION_STRING_DATA(pData: buffer.baseAddress, ulLen: CK_ULONG(buffer.count))) }
    }

    func test_concatenations_and_xor_give_the_values_the_specification_describes() {
        let session = userSession()
        let baseValue = Array(1...16).map(UInt8.init), otherValue = Array(101...108).map(UInt8.init), data = Array(201...206).map(UInt8.init)
        let base = secretKey(session, baseValue, extra: readable)
        let other = secretKey(session, otherValue, extra: readable)
        let (r1, k1) = derive(session, UInt(CKM_CONCATENATE_BASE_AND_KEY), parameter: other, base: base, derived(readable))
        XCTAssertRV(r1, CKR_OK)
        XCTAssertEqual(value(session, k1).1, baseValue + otherValue, "base ‖ key, the whole length without CKA_VALUE_LEN")
        let (r2, k2) = withData(data) { derive(session, UInt(CKM_CONCATENATE_BASE_AND_DATA), parameter: $0, base: base, derived(readable)) }
        XCTAssertRV(r2, CKR_OK)
        XCTAssertEqual(value(session, k2).1, baseValue + data)
        let (r3, k3) = withData(data) { derive(session, UInt(CKM_CONCATENATE_DATA_AND_BASE), parameter: $0, base: base, derived(readable + [(UInt(CKA_VALUE_LEN), Self.ulong(10))])) }
        XCTAssertRV(r3, CKR_OK)
        XCTAssertEqual(value(session, k3).1, Array((data + baseValue).prefix(10)), "cut to CKA_VALUE_LEN (the base is not sensitive)")
        let (r4, k4) = withData(data) { derive(session, UInt(CKM_XOR_BASE_AND_DATA), parameter: $0, base: base, derived(readable)) }
        XCTAssertRV(r4, CKR_OK)
        XCTAssertEqual(value(session, k4).1, zip(baseValue, data).map { $0 ^ $1 }, "as long as the shorter")
        XCTAssertEqual(value(session, k4, UInt(CKA_LOCAL)).1, [0])
        // More than the sources hold.
        XCTAssertRV(withData(data) { derive(session, UInt(CKM_CONCATENATE_BASE_AND_DATA), parameter: $0, base: base, derived([(UInt(CKA_VALUE_LEN), Self.ulong(23))])).0 },
                    CKR_KEY_SIZE_RANGE)
        // An AES key needs its length.
        let aes: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_AES))), (UInt(CKA_TOKEN), [0])]
        XCTAssertRV(withData(data) { derive(session, UInt(CKM_CONCATENATE_BASE_AND_DATA), parameter: $0, base: base, aes).0 }, CKR_TEMPLATE_INCOMPLETE)
        XCTAssertRV(withData(data) { derive(session, UInt(CKM_CONCATENATE_BASE_AND_DATA), parameter: $0, base: base, aes + [(UInt(CKA_VALUE_LEN), Self.ulong(16))]).0 }, CKR_OK)
    }

    func test_extract_key_from_key_matches_the_specification_example() {
        let session = userSession()
        let base = secretKey(session, hex("329F84A9"), extra: readable)
        let (result, key) = derive(session, UInt(CKM_EXTRACT_KEY_FROM_KEY), parameter: CK_ULONG(21), base: base, derived(readable + [(UInt(CKA_VALUE_LEN), Self.ulong(2))]))
        XCTAssertRV(result, CKR_OK)
        XCTAssertEqual(value(session, key).1, hex("9526"), "0x329F84A9 from bit 21, 2 bytes (wrapping around)")
        XCTAssertRV(derive(session, UInt(CKM_EXTRACT_KEY_FROM_KEY), parameter: CK_ULONG(21), base: base, derived(readable)).0, CKR_TEMPLATE_INCOMPLETE)
        XCTAssertRV(derive(session, UInt(CKM_EXTRACT_KEY_FROM_KEY), parameter: CK_ULONG(21), base: base, derived([(UInt(CKA_VALUE_LEN), Self.ulong(5))])).0, CKR_KEY_SIZE_RANGE)
        XCTAssertRV(derive(session, UInt(CKM_EXTRACT_KEY_FROM_KEY), parameter: CK_ULONG(32), base: base, derived([(UInt(CKA_VALUE_LEN), Self.ulong(1))])).0,
                    CKR_MECHANISM_PARAM_INVALID)
    }

    /// Clulow's attack: one byte of a sensitive key into a key of its own, then 256 guesses
    /// against a MAC under it. Every route to fewer than all of a sensitive key's bytes is refused.
    func test_a_sensitive_key_never_leaves_a_few_of_its_bytes_in_a_new_key() {
        let session = userSession()
        let secret = secretKey(session, Array(repeating: 0x5A, count: 16), extra: [(UInt(CKA_SENSITIVE), [1]), (UInt(CKA_EXTRACTABLE), [0])])
        let data = [UInt8](repeating: 0, count: 15)
        let one = [(UInt(CKA_VALUE_LEN), Self.ulong(1))]
        XCTAssertRV(derive(session, UInt(CKM_EXTRACT_KEY_FROM_KEY), parameter: CK_ULONG(0), base: secret, derived(one)).0, CKR_KEY_FUNCTION_NOT_PERMITTED)
        XCTAssertRV(withData([0]) { derive(session, UInt(CKM_XOR_BASE_AND_DATA), parameter: $0, base: secret, derived([])).0 }, CKR_KEY_FUNCTION_NOT_PERMITTED)
        XCTAssertRV(withData(data) { derive(session, UInt(CKM_CONCATENATE_BASE_AND_DATA), parameter: $0, base: secret, derived(one)).0 }, CKR_TEMPLATE_INCONSISTENT)
        XCTAssertRV(withData(data) { derive(session, UInt(CKM_CONCATENATE_DATA_AND_BASE), parameter: $0, base: secret, derived([(UInt(CKA_VALUE_LEN), Self.ulong(16))])).0 },
                    CKR_TEMPLATE_INCONSISTENT, "15 known bytes and one of the key's")
        let readableKey = secretKey(session, [1, 2, 3, 4], extra: readable)
        XCTAssertRV(derive(session, UInt(CKM_CONCATENATE_BASE_AND_KEY), parameter: secret, base: readableKey, derived([(UInt(CKA_VALUE_LEN), Self.ulong(5))])).0,
                    CKR_TEMPLATE_INCONSISTENT, "the other key is sensitive too")
        // Whole, the key stays sensitive and unextractable, whatever the template asks.
        XCTAssertRV(withData(data) { derive(session, UInt(CKM_CONCATENATE_BASE_AND_DATA), parameter: $0, base: secret, derived([(UInt(CKA_SENSITIVE), [0])])).0 },
                    CKR_TEMPLATE_INCONSISTENT)
        let (result, whole) = withData(data) { derive(session, UInt(CKM_CONCATENATE_DATA_AND_BASE), parameter: $0, base: secret, derived([(UInt(CKA_EXTRACTABLE), [1])])) }
        XCTAssertRV(result, CKR_OK)
        XCTAssertEqual(value(session, whole, UInt(CKA_SENSITIVE)).1, [1])
        XCTAssertEqual(value(session, whole, UInt(CKA_EXTRACTABLE)).1, [0])
        XCTAssertRV(value(session, whole).0, CKR_ATTRIBUTE_SENSITIVE)
    }

    func test_the_simple_derivations_are_listed_for_derive() {
        let slot = makeToken()
        for type in [CKM_CONCATENATE_BASE_AND_KEY, CKM_CONCATENATE_BASE_AND_DATA, CKM_CONCATENATE_DATA_AND_BASE, CKM_XOR_BASE_AND_DATA, CKM_EXTRACT_KEY_FROM_KEY] {
            var info = CK_MECHANISM_INFO()
            XCTAssertRV(p11.C_GetMechanismInfo!(slot, CK_MECHANISM_TYPE(type), &info), CKR_OK)
            XCTAssertEqual(info.flags & CK_FLAGS(CKF_DERIVE), CK_FLAGS(CKF_DERIVE))
        }
    }
}
