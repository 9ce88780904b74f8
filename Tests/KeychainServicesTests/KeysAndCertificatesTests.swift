import Foundation
import XCTest
import KeychainCore
import KeychainCrypto
@testable import KeychainServices

final class KeysAndCertificatesTests: XCTestCase {
    private var directory = ""

    static func hex(_ text: String) -> Data {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16) ?? 0)
            index = next
        }
        return Data(bytes)
    }

    /// A self-signed P-256 certificate (CN=Keychain Test) and its key as X9.63 04‖X‖Y‖K.
    static let certificateDER = hex("3082017230820119a00302010202021234300a06082a8648ce3d04030230183116301406035504030c0d4b6579636861696e2054657374301e170d3236313132323030303033305a170d3336313131393030303033305a30183116301406035504030c0d4b6579636861696e20546573743059301306072a8648ce3d020106082a8648ce3d03010703420004107fcdb8e7fbf82b1566890d0acb4da2ad558f7980c15b64f9cf323ccfda98c10825484e4b72b12aaf5e4f7368367a6a49a6cba7c260b1708c8449aff754ad90a3533051301d0603551d0e0416041492b4d707a0d234f073091439f8f6e1f9895e5e1d301f0603551d2304183016801492b4d707a0d234f073091439f8f6e1f9895e5e1d300f0603551d130101ff040530030101ff300a06082a8648ce3d04030203470030440220060173d81ef7f58f296d292af7144e0b98e33280edb5fc2672a0d724d32cbc4b0220312f287399395789b084fa6a8891dd8453d0e076e6fb16600f535adc42cc607e")
    static let certificateKeyX963 = hex("04107fcdb8e7fbf82b1566890d0acb4da2ad558f7980c15b64f9cf323ccfda98c10825484e4b72b12aaf5e4f7368367a6a49a6cba7c260b1708c8449aff754ad90"
                                        + "b38c6b7d2dc44d8b6b1f5098c2940d3b4d9071cbf9f5acd96d81275141f25b19")

    override func setUpWithError() throws {
        directory = try makeTemporaryLoginKeychain("keys").root
    }

    override func tearDown() { removeTemporaryKeychain(directory) }

    /// "Storing keys in the keychain": create a permanent key with a tag, find it by the tag, sign.
    func test_permanent_key_found_by_application_tag_signs() throws {
        let tag = "com.example.keys.mykey".data(using: .utf8)!
        let attributes: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                                         kSecPrivateKeyAttrs as String: [kSecAttrIsPermanent as String: true, kSecAttrApplicationTag as String: tag]]
        var error: Unmanaged<CFError>?
        guard let created = SecKeyCreateRandomKey(attributes as CFDictionary, &error) else {
            throw error!.takeRetainedValue() as Error
        }
        let getquery: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag,
                                       kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass as String: kSecAttrKeyClassPrivate,
                                       kSecReturnRef as String: true]
        var item: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(getquery as CFDictionary, &item), errSecSuccess)
        let key = try XCTUnwrap(item as? SecKey)
        let message = Data("sign me".utf8)
        let signature = try XCTUnwrap(SecKeyCreateSignature(key, kSecKeyAlgorithmECDSASignatureMessageX962SHA256, message as CFData, &error) as Data?)
        XCTAssertEqual(signature.first, 0x30, "X9.62 signatures are DER")
        let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(created))
        XCTAssertTrue(SecKeyVerifySignature(publicKey, kSecKeyAlgorithmECDSASignatureMessageX962SHA256, message as CFData, signature as CFData, &error))
        XCTAssertFalse(SecKeyVerifySignature(publicKey, kSecKeyAlgorithmECDSASignatureMessageX962SHA256, Data("other".utf8) as CFData,
                                             signature as CFData, &error))
        let raw = try XCTUnwrap(SecKeyCreateSignature(key, kSecKeyAlgorithmECDSASignatureMessageRFC4754SHA256, message as CFData, &error) as Data?)
        XCTAssertEqual(raw.count, 64, "RFC 4754 signatures are r‖s")
        let attributesOut = try XCTUnwrap(SecKeyCopyAttributes(key) as? [String: Any])
        XCTAssertEqual(attributesOut[kSecAttrKeySizeInBits as String] as? Int, 256)
        XCTAssertEqual(attributesOut[kSecAttrApplicationTag as String] as? Data, tag)
        XCTAssertEqual((SecKeyCopyExternalRepresentation(key, &error) as Data?)?.count, 97, "04‖X‖Y‖K")
        // Both halves were stored; deleting by tag removes them.
        XCTAssertEqual(SecItemDelete([kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag]), errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching(getquery as CFDictionary, &item), errSecItemNotFound)
    }

    func test_rsa_keys_sign_and_encrypt() throws {
        var error: Unmanaged<CFError>?
        let parameters: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeRSA, kSecAttrKeySizeInBits as String: 2048]
        let privateKey = try XCTUnwrap(SecKeyCreateRandomKey(parameters as CFDictionary, &error))
        let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(privateKey))
        let message = Data("rsa".utf8)
        for algorithm in [kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA256, kSecKeyAlgorithmRSASignatureMessagePSSSHA256] {
            let signature = try XCTUnwrap(SecKeyCreateSignature(privateKey, algorithm, message as CFData, &error))
            XCTAssertTrue(SecKeyVerifySignature(publicKey, algorithm, message as CFData, signature, &error))
        }
        let ciphertext = try XCTUnwrap(SecKeyCreateEncryptedData(publicKey, kSecKeyAlgorithmRSAEncryptionOAEPSHA256, message as CFData, &error))
        XCTAssertEqual(SecKeyCreateDecryptedData(privateKey, kSecKeyAlgorithmRSAEncryptionOAEPSHA256, ciphertext, &error) as Data?, message)
        XCTAssertNil(SecKeyCreateSignature(publicKey, kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA256, message as CFData, &error))
        XCTAssertTrue(SecKeyIsAlgorithmSupported(privateKey, .sign, kSecKeyAlgorithmRSASignatureMessagePKCS1v15SHA256))
        XCTAssertFalse(SecKeyIsAlgorithmSupported(privateKey, .sign, kSecKeyAlgorithmECDSASignatureMessageX962SHA256))
        let der = try XCTUnwrap(SecKeyCopyExternalRepresentation(publicKey, &error) as Data?)
        XCTAssertEqual(der.first, 0x30, "RSA public keys export as PKCS#1 DER")
    }

    /// CryptoKit style: a key imported from its X9.63 bytes, stored, and read back byte for byte.
    func test_x963_key_round_trips_through_the_keychain() throws {
        var error: Unmanaged<CFError>?
        let attributes: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeyClass as String: kSecAttrKeyClassPrivate]
        let key = try XCTUnwrap(SecKeyCreateWithData(Self.certificateKeyX963 as CFData, attributes as CFDictionary, &error))
        let add: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationLabel as String: Data("my-key".utf8),
                                  kSecAttrLabel as String: "My Key", kSecValueRef as String: key]
        XCTAssertEqual(SecItemAdd(add as CFDictionary, nil), errSecSuccess)
        XCTAssertEqual(SecItemAdd(add as CFDictionary, nil), errSecDuplicateItem)
        var item: CFTypeRef?
        let query: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrLabel as String: "My Key", kSecReturnData as String: true]
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &item), errSecSuccess)
        XCTAssertEqual(item as? Data, Self.certificateKeyX963)
        XCTAssertNil(SecKeyCreateWithData(Data([1, 2, 3]) as CFData, attributes as CFDictionary, &error))
    }

    func test_certificates_and_identities() throws {
        let certificate = try XCTUnwrap(SecCertificateCreateWithData(nil, Self.certificateDER as CFData))
        XCTAssertEqual(SecCertificateCopySubjectSummary(certificate) as String?, "Keychain Test")
        XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassCertificate, kSecValueRef as String: certificate, kSecAttrLabel as String: "test cert"], nil),
                       errSecSuccess)
        XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassCertificate, kSecValueRef as String: certificate], nil), errSecDuplicateItem,
                       "issuer and serial identify a certificate")
        var item: CFTypeRef?
        let find: [String: Any] = [kSecClass as String: kSecClassCertificate, kSecAttrLabel as String: "test cert", kSecReturnRef as String: true]
        XCTAssertEqual(SecItemCopyMatching(find as CFDictionary, &item), errSecSuccess)
        let stored = try XCTUnwrap(item as? SecCertificate)
        XCTAssertEqual(SecCertificateCopyData(stored) as Data, Self.certificateDER)
        var attributes: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching([kSecClass as String: kSecClassCertificate, kSecReturnAttributes as String: true] as CFDictionary, &attributes),
                       errSecSuccess)
        XCTAssertEqual((attributes as? [String: Any])?[kSecAttrSerialNumber as String] as? Data, Data([0x12, 0x34]))

        // No identity until the private key is there; then the pair is found.
        let identityQuery: [String: Any] = [kSecClass as String: kSecClassIdentity, kSecReturnRef as String: true]
        XCTAssertEqual(SecItemCopyMatching(identityQuery as CFDictionary, &item), errSecItemNotFound)
        var error: Unmanaged<CFError>?
        let key = try XCTUnwrap(SecKeyCreateWithData(Self.certificateKeyX963 as CFData, [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                                                                                          kSecAttrKeyClass as String: kSecAttrKeyClassPrivate] as CFDictionary, &error))
        XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassKey, kSecValueRef as String: key], nil), errSecSuccess)
        XCTAssertEqual(SecItemCopyMatching(identityQuery as CFDictionary, &item), errSecSuccess)
        let identity = try XCTUnwrap(item as? SecIdentity)
        var identityKey: SecKey?
        XCTAssertEqual(SecIdentityCopyPrivateKey(identity, &identityKey), errSecSuccess)
        var identityCertificate: SecCertificate?
        XCTAssertEqual(SecIdentityCopyCertificate(identity, &identityCertificate), errSecSuccess)
        let signature = try XCTUnwrap(SecKeyCreateSignature(try XCTUnwrap(identityKey), kSecKeyAlgorithmECDSASignatureMessageX962SHA256,
                                                            Data("id".utf8) as CFData, &error))
        let certificateKey = try XCTUnwrap(SecCertificateCopyKey(try XCTUnwrap(identityCertificate)))
        XCTAssertTrue(SecKeyVerifySignature(certificateKey, kSecKeyAlgorithmECDSASignatureMessageX962SHA256, Data("id".utf8) as CFData, signature, &error))
    }
}
