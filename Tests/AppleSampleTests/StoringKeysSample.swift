import Foundation
import Security
import XCTest

// Apple's "Storing Keys in the Keychain" and "Generating New Cryptographic Keys", written fresh
// from their text: a key pair made with a tag, stored, found again by tag and type as a
// reference, refined by class and size, used, and deleted.

private let tag = "com.example.keys.mykey".data(using: .utf8)!

private func makeKey() throws -> SecKey {
    let attributes: [String: Any] = [
        kSecAttrKeyType as String: kSecAttrKeyTypeRSA,
        kSecAttrKeySizeInBits as String: 2048,
        kSecPrivateKeyAttrs as String: [
            kSecAttrIsPermanent as String: true,
            kSecAttrApplicationTag as String: tag,
        ],
    ]
    var error: Unmanaged<CFError>?
    guard let privateKey = SecKeyCreateRandomKey(attributes as CFDictionary, &error) else {
        throw error!.takeRetainedValue() as Error
    }
    return privateKey
}

private func retrieveKey(_ extra: [String: Any] = [:]) -> (OSStatus, CFTypeRef?) {
    var getquery: [String: Any] = [kSecClass as String: kSecClassKey,
                                   kSecAttrApplicationTag as String: tag,
                                   kSecAttrKeyType as String: kSecAttrKeyTypeRSA,
                                   kSecReturnRef as String: true]
    getquery.merge(extra) { $1 }
    var item: CFTypeRef?
    let status = SecItemCopyMatching(getquery as CFDictionary, &item)
    return (status, item)
}

final class StoringKeysSampleTests: AppleSampleCase {
    func test_a_key_stored_by_tag_is_found_and_used() throws {
        _ = try makeKey()
        let (status, item) = retrieveKey()
        XCTAssertEqual(status, errSecSuccess)
        XCTAssertEqual(CFGetTypeID(item), SecKeyGetTypeID())
        let key = item as! SecKey
        let algorithm: SecKeyAlgorithm = .rsaSignatureMessagePKCS1v15SHA256
        XCTAssertTrue(SecKeyIsAlgorithmSupported(key, .sign, algorithm))
        var error: Unmanaged<CFError>?
        let data = Data("to be signed".utf8)
        let signature = try XCTUnwrap(SecKeyCreateSignature(key, algorithm, data as CFData, &error) as Data?)
        let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(key))
        XCTAssertTrue(SecKeyVerifySignature(publicKey, algorithm, data as CFData, signature as CFData, &error))

        // Refine the search: every match, then only the private key of that size.
        let (allStatus, all) = retrieveKey([kSecMatchLimit as String: kSecMatchLimitAll])
        XCTAssertEqual(allStatus, errSecSuccess)
        XCTAssertEqual((all as? [Any])?.count, 1, "the public half is stored without the private key's tag")
        XCTAssertEqual(retrieveKey([kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecAttrKeySizeInBits as String: 2048]).0, errSecSuccess)
        XCTAssertEqual(retrieveKey([kSecAttrKeySizeInBits as String: 4096]).0, errSecItemNotFound)

        // Delete it; it is gone.
        let deleteQuery: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag]
        XCTAssertEqual(SecItemDelete(deleteQuery as CFDictionary), errSecSuccess)
        XCTAssertEqual(retrieveKey().0, errSecItemNotFound)
    }

    func test_keys_of_two_sizes_under_one_label_and_tag_are_two_items() throws {
        func add(_ bits: Int) -> OSStatus {
            var error: Unmanaged<CFError>?
            let attributes: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: bits]
            guard let key = SecKeyCreateRandomKey(attributes as CFDictionary, &error) else { return errSecParam }
            let query: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationLabel as String: "shared label",
                                        kSecAttrApplicationTag as String: tag, kSecValueRef as String: key]
            return SecItemAdd(query as CFDictionary, nil)
        }
        XCTAssertEqual(add(256), errSecSuccess)
        XCTAssertEqual(add(384), errSecSuccess, "the key size is part of a key's primary key, as on Apple platforms")
        XCTAssertEqual(add(256), errSecDuplicateItem)
        var items: CFTypeRef?
        let query: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag,
                                    kSecMatchLimit as String: kSecMatchLimitAll, kSecReturnAttributes as String: true]
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &items), errSecSuccess)
        let sizes = ((items as? [[String: Any]]) ?? []).compactMap { $0[kSecAttrKeySizeInBits as String] as? Int }.sorted()
        XCTAssertEqual(sizes, [256, 384])
    }
}
