import CPKCS11
import Foundation
import XCTest
import KeychainCore
@testable import KeychainServices
@testable import PKCS11

/// ML-DSA and ML-KEM keys made through PKCS#11 share the keychain with SecItem's keys: Apple's
/// Security framework has no such key type, so kSecClassKey queries pass over them (and do not
/// fail because of them), while PKCS#11 keeps finding them.
final class LatticeKeyQueryTests: XCTestCase {
    func test_secitem_key_queries_skip_ml_dsa_and_ml_kem_keys() throws {
        let (directory, keychain) = try makeTemporaryLoginKeychain("lattice-query")
        defer { removeTemporaryKeychain(directory) }
        var error: Unmanaged<CFError>?
        let ecAttributes: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                                           kSecPrivateKeyAttrs as String: [kSecAttrIsPermanent as String: true,
                                                                           kSecAttrApplicationTag as String: Data("ec".utf8)]]
        XCTAssertNotNil(SecKeyCreateRandomKey(ecAttributes as CFDictionary, &error))

        let p11 = FunctionLists.version240.pointee
        XCTAssertEqual(p11.C_Initialize(nil), CK_RV(CKR_OK))
        defer { _ = p11.C_Finalize(nil) }
        let slot = CK_SLOT_ID(try XCTUnwrap(try keychain.info().slotID))
        var session: CK_SESSION_HANDLE = 0
        XCTAssertEqual(p11.C_OpenSession!(slot, CK_FLAGS(CKF_SERIAL_SESSION | CKF_RW_SESSION), nil, nil, &session), CK_RV(CKR_OK))
        var pin = Array("1234".utf8)
        XCTAssertEqual(p11.C_Login!(session, CK_USER_TYPE(CKU_USER), &pin, 4), CK_RV(CKR_OK))
        for (generator, parameterSet) in [(CKM_ML_DSA_KEY_PAIR_GEN, CKP_ML_DSA_65), (CKM_ML_KEM_KEY_PAIR_GEN, CKP_ML_KEM_768)] {
            var mechanism = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(generator), pParameter: nil, ulParameterLen: 0)
            var set = CK_ULONG(parameterSet), yes: CK_BBOOL = 1
            var publicKey: CK_OBJECT_HANDLE = 0, privateKey: CK_OBJECT_HANDLE = 0
            let rv = withUnsafeMutableBytes(of: &set) { s in
                withUnsafeMutableBytes(of: &yes) { y in
                    var publicTemplate = [CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_PARAMETER_SET), pValue: s.baseAddress, ulValueLen: CK_ULONG(s.count)),
                                          CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_TOKEN), pValue: y.baseAddress, ulValueLen: 1)]
                    var privateTemplate = [CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_TOKEN), pValue: y.baseAddress, ulValueLen: 1)]
                    return p11.C_GenerateKeyPair!(session, &mechanism, &publicTemplate, 2, &privateTemplate, 1, &publicKey, &privateKey)
                }
            }
            XCTAssertEqual(rv, CK_RV(CKR_OK))
        }

        // Every key SecItem can see: the EC pair's private key (and its public half), no lattice key.
        let query: [String: Any] = [kSecClass as String: kSecClassKey, kSecMatchLimit as String: kSecMatchLimitAll,
                                    kSecReturnAttributes as String: true]
        var result: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &result), errSecSuccess)
        let items = try XCTUnwrap(result as? [[String: Any]])
        XCTAssertFalse(items.isEmpty)
        for item in items {
            XCTAssertEqual(item[kSecAttrKeyType as String] as? String, kSecAttrKeyTypeECSECPrimeRandom as String)
        }
        // And the lattice keys are still the token's: four objects of the two types.
        var keyType = CK_KEY_TYPE(CKK_ML_DSA)
        var found = [CK_OBJECT_HANDLE](repeating: 0, count: 8)
        var count: CK_ULONG = 0
        for type in [CKK_ML_DSA, CKK_ML_KEM] {
            keyType = CK_KEY_TYPE(type)
            withUnsafeMutableBytes(of: &keyType) { k in
                var template = [CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_KEY_TYPE), pValue: k.baseAddress, ulValueLen: CK_ULONG(k.count))]
                XCTAssertEqual(p11.C_FindObjectsInit!(session, &template, 1), CK_RV(CKR_OK))
                XCTAssertEqual(p11.C_FindObjects!(session, &found, 8, &count), CK_RV(CKR_OK))
                XCTAssertEqual(p11.C_FindObjectsFinal!(session), CK_RV(CKR_OK))
            }
            XCTAssertEqual(count, 2)
        }
    }
}
