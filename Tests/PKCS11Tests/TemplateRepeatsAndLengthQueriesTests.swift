import CPKCS11
import XCTest
@testable import PKCS11

/// What strangers' suites found (PyKCS11 1.5.20, pkcs11-check 0.2.3), pinned with exact CK_RVs:
/// a template naming an attribute twice, and the length query of an AEAD decryption update.
final class TemplateRepeatsAndLengthQueriesTests: ModuleTestCase {
    private func createData(_ session: CK_SESSION_HANDLE, _ attributes: [(UInt, [UInt8])]) -> CK_RV {
        var handle: CK_OBJECT_HANDLE = 0
        let base: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_DATA))), (UInt(CKA_VALUE), [1, 2, 3])]
        return withTemplate(base + attributes) { p11.C_CreateObject!(session, $0, $1, &handle) }
    }

    func test_an_attribute_named_twice_with_the_same_value_counts_once() {
        let session = userSession()
        XCTAssertRV(createData(session, [(UInt(CKA_TOKEN), [0]), (UInt(CKA_LABEL), Array("a".utf8)), (UInt(CKA_TOKEN), [0])]), CKR_OK)
        XCTAssertRV(createData(session, [(UInt(CKA_TOKEN), [0]), (UInt(CKA_TOKEN), [1])]), CKR_TEMPLATE_INCONSISTENT)
        // PyKCS11's wrap tests: CKA_EXTRACTABLE twice in C_GenerateKey's template.
        var key: CK_OBJECT_HANDLE = 0
        let template: [(UInt, [UInt8])] = [(UInt(CKA_VALUE_LEN), Self.ulong(32)), (UInt(CKA_EXTRACTABLE), [1]), (UInt(CKA_TOKEN), [0]),
                                           (UInt(CKA_EXTRACTABLE), [1])]
        XCTAssertRV(withTemplate(template) { t, c in mechanism(UInt(CKM_AES_KEY_GEN)) { p11.C_GenerateKey!(session, $0, t, c, &key) } }, CKR_OK)
        XCTAssertEqual(value(session, key, UInt(CKA_EXTRACTABLE)).1, [1])
        let conflicting: [(UInt, [UInt8])] = [(UInt(CKA_VALUE_LEN), Self.ulong(32)), (UInt(CKA_EXTRACTABLE), [1]), (UInt(CKA_EXTRACTABLE), [0])]
        XCTAssertRV(withTemplate(conflicting) { t, c in mechanism(UInt(CKM_AES_KEY_GEN)) { p11.C_GenerateKey!(session, $0, t, c, &key) } }, CKR_TEMPLATE_INCONSISTENT)
    }

    /// A multi-part AES-GCM decryption: the update's length query answers an upper bound (the
    /// input's length) and takes nothing; the real update releases nothing before the tag; the
    /// final step gives all the plaintext.
    func test_aead_decrypt_update_length_query_answers_the_input_length_and_takes_nothing() {
        let session = userSession()
        var key: CK_OBJECT_HANDLE = 0
        let template: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_AES))),
                                           (UInt(CKA_VALUE), [UInt8](repeating: 7, count: 16)), (UInt(CKA_TOKEN), [0])]
        XCTAssertRV(withTemplate(template) { p11.C_CreateObject!(session, $0, $1, &key) }, CKR_OK)
        var iv = [UInt8](repeating: 1, count: 12)
        func gcm(_ body: (UnsafeMutablePointer<CK_MECHANISM>) -> CK_RV) -> CK_RV {
            iv.withUnsafeMutableBufferPointer { ivBuffer in
                let params = CK_GCM_PARAMS(pIv: ivBuffer.baseAddress, ulIvLen: 12, ulIvBits: 96, pAAD: nil, ulAADLen: 0, ulTagBits: 128)
                return mechanism(UInt(CKM_AES_GCM), parameter: params, body)
            }
        }
        var plaintext = Array("sixteen bytes!!!".utf8)
        XCTAssertRV(gcm { p11.C_EncryptInit!(session, $0, key) }, CKR_OK)
        var sealed = [UInt8](repeating: 0, count: 64)
        var sealedLength = CK_ULONG(sealed.count)
        XCTAssertRV(p11.C_Encrypt!(session, &plaintext, CK_ULONG(plaintext.count), &sealed, &sealedLength), CKR_OK)
        sealed = Array(sealed.prefix(Int(sealedLength)))
        XCTAssertRV(gcm { p11.C_DecryptInit!(session, $0, key) }, CKR_OK)
        var length: CK_ULONG = 0
        XCTAssertRV(p11.C_DecryptUpdate!(session, &sealed, CK_ULONG(sealed.count), nil, &length), CKR_OK)
        XCTAssertEqual(length, CK_ULONG(sealed.count), "an upper bound: the input's length")
        XCTAssertRV(p11.C_DecryptUpdate!(session, &sealed, CK_ULONG(sealed.count), nil, &length), CKR_OK)
        XCTAssertEqual(length, CK_ULONG(sealed.count), "asked again: still nothing taken")
        var out = [UInt8](repeating: 0, count: Int(length))
        XCTAssertRV(p11.C_DecryptUpdate!(session, &sealed, CK_ULONG(sealed.count), &out, &length), CKR_OK)
        XCTAssertEqual(length, 0, "nothing is released before the tag is checked")
        var final = [UInt8](repeating: 0, count: 64)
        var finalLength = CK_ULONG(final.count)
        XCTAssertRV(p11.C_DecryptFinal!(session, &final, &finalLength), CKR_OK)
        XCTAssertEqual(Array(final.prefix(Int(finalLength))), plaintext, "the input was taken once, by the real update")
    }
}
