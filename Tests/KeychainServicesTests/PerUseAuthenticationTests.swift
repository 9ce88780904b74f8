import Foundation
import XCTest
import KeychainCore
import KeychainCrypto
@testable import KeychainServices

/// A key with CKA_ALWAYS_AUTHENTICATE (made through PKCS#11, e.g. pkcs11-tool --always-auth)
/// asks for the PIN at every use through the Swift door too: the context it was fetched with is
/// checked again at each signature or decryption.
final class PerUseAuthenticationTests: XCTestCase {
    private var directory = ""
    private var keychain: Keychain?

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "kc-peruse-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        setenv("KEYCHAIN_PKCS11_DIR", directory, 1)
        let kdf = ScryptParameters(logN: 8, blockSize: 8, parallelism: 1)
        keychain = try Array("12345678".utf8).withUnsafeBytes { so in
            try Array("1234".utf8).withUnsafeBytes { user in
                try KeychainDirectory(path: directory).createKeychain(slotID: nil, label: "login", soPIN: so, userPIN: user, kdf: kdf)
            }
        }
        KeychainServices.lockAll()
    }

    override func tearDown() {
        KeychainServices.lockAll()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Stores a P-256 private key labelled `label` the way C_GenerateKeyPair would.
    private func storeKey(label: String, alwaysAuthenticate: Bool, isRSA: Bool = false) throws {
        let keychain = try XCTUnwrap(keychain)
        let key = try AsymmetricKey.generate(isRSA ? .rsa : .ec(.p256), bits: isRSA ? 2048 : 256)
        let uid = try Random.uniqueID()
        let object = try keyObject(key, extra: [(.token, [1]), (.isPrivate, [1]), (.label, Array(label.utf8)),
                                                (.alwaysAuthenticate, [alwaysAuthenticate ? 1 : 0])], uniqueID: uid.text)
        let master = try Array("1234".utf8).withUnsafeBytes { try keychain.unlock(.user, pin: $0) }
        _ = try keychain.add(object, uid: uid.bytes, master: master)
    }

    private func fetch(_ label: String, context: SecAuthenticationContext?) throws -> SecKey {
        var query: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrLabel as String: label,
                                    kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecReturnRef as String: true]
        if let context { query[kSecUseAuthenticationContext as String] = context }
        var result: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(query, &result), errSecSuccess)
        return try XCTUnwrap(result as? SecKey)
    }

    private func sign(_ key: SecKey) -> (Data?, Int?) {
        var error: Unmanaged<CFError>?
        let signature = SecKeyCreateSignature(key, kSecKeyAlgorithmECDSASignatureMessageX962SHA256, Data("m".utf8) as CFData, &error) as Data?
        return (signature, error.map { ($0.takeRetainedValue() as Error as NSError).code })
    }

    func test_a_per_use_key_signs_with_the_context_it_was_fetched_with_and_never_without() throws {
        try storeKey(label: "always", alwaysAuthenticate: true)
        try storeKey(label: "plain", alwaysAuthenticate: false)

        // Unlocked without a context: the plain key signs, the per-use key cannot ask for the PIN.
        XCTAssertEqual(KeychainServices.unlock(password: "1234"), errSecSuccess)
        XCTAssertNotNil(sign(try fetch("plain", context: nil)).0)
        let (refused, code) = sign(try fetch("always", context: nil))
        XCTAssertNil(refused)
        XCTAssertEqual(code, Int(errSecInteractionNotAllowed))

        // Fetched with a context: each signature checks its PIN again.
        let context = SecAuthenticationContext(password: "1234")
        let key = try fetch("always", context: context)
        XCTAssertNotNil(sign(key).0)
        XCTAssertNotNil(sign(key).0)

        // The PIN changes through PKCS#11 after the key was fetched: the next use fails and counts.
        let keychain = try XCTUnwrap(keychain)
        try Array("1234".utf8).withUnsafeBytes { old in
            try Array("5678".utf8).withUnsafeBytes { try keychain.changePIN(.user, old: old, new: $0, kdf: ScryptParameters(logN: 8, blockSize: 8, parallelism: 1)) }
        }
        let (stale, staleCode) = sign(key)
        XCTAssertNil(stale)
        XCTAssertEqual(staleCode, Int(errSecAuthFailed))
        XCTAssertEqual(try keychain.info().userPIN.failures, 1)
    }

    func test_a_per_use_rsa_key_decrypts_only_with_its_context() throws {
        try storeKey(label: "rsa-always", alwaysAuthenticate: true, isRSA: true)
        XCTAssertEqual(KeychainServices.unlock(password: "1234"), errSecSuccess)
        let unconfirmed = try fetch("rsa-always", context: nil)
        let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(unconfirmed))
        var error: Unmanaged<CFError>?
        let ciphertext = try XCTUnwrap(SecKeyCreateEncryptedData(publicKey, kSecKeyAlgorithmRSAEncryptionOAEPSHA256, Data("secret".utf8) as CFData, &error))
        XCTAssertNil(SecKeyCreateDecryptedData(unconfirmed, kSecKeyAlgorithmRSAEncryptionOAEPSHA256, ciphertext, &error))
        XCTAssertEqual((error?.takeRetainedValue() as Error? as NSError?)?.code, Int(errSecInteractionNotAllowed))
        let confirmed = try fetch("rsa-always", context: SecAuthenticationContext(password: "1234"))
        XCTAssertEqual(SecKeyCreateDecryptedData(confirmed, kSecKeyAlgorithmRSAEncryptionOAEPSHA256, ciphertext, nil) as Data?, Data("secret".utf8))
    }
}
