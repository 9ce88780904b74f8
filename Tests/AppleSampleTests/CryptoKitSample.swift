import CryptoKit
import Foundation
import Security
import XCTest

// "Storing CryptoKit Keys in the Keychain", as the reference sample writes it, with Apple's
// module names (CryptoKit here is swift-crypto, Security this package).

protocol SecKeyConvertible: CustomStringConvertible {
    init<Bytes>(x963Representation: Bytes) throws where Bytes: ContiguousBytes
    var x963Representation: Data { get }
}

extension SecKeyConvertible {
    /// A string version of the key for visual inspection (never the key itself).
    public var description: String { "\(type(of: self))" }
}

extension P256.Signing.PrivateKey: SecKeyConvertible {}
extension P256.KeyAgreement.PrivateKey: SecKeyConvertible {}
extension P384.Signing.PrivateKey: SecKeyConvertible {}
extension P384.KeyAgreement.PrivateKey: SecKeyConvertible {}
extension P521.Signing.PrivateKey: SecKeyConvertible {}
extension P521.KeyAgreement.PrivateKey: SecKeyConvertible {}

protocol GenericPasswordConvertible: CustomStringConvertible {
    init<D>(genericKeyRepresentation data: D) throws where D: ContiguousBytes
    var genericKeyRepresentation: SymmetricKey { get }
}

extension GenericPasswordConvertible {
    public var description: String { "\(type(of: self))" }
}

extension Curve25519.KeyAgreement.PrivateKey: GenericPasswordConvertible {
    init<D>(genericKeyRepresentation data: D) throws where D: ContiguousBytes {
        try self.init(rawRepresentation: data)
    }
    var genericKeyRepresentation: SymmetricKey {
        self.rawRepresentation.withUnsafeBytes { SymmetricKey(data: $0) }
    }
}

extension Curve25519.Signing.PrivateKey: GenericPasswordConvertible {
    init<D>(genericKeyRepresentation data: D) throws where D: ContiguousBytes {
        try self.init(rawRepresentation: data)
    }
    var genericKeyRepresentation: SymmetricKey {
        self.rawRepresentation.withUnsafeBytes { SymmetricKey(data: $0) }
    }
}

extension SymmetricKey: GenericPasswordConvertible {
    init<D>(genericKeyRepresentation data: D) throws where D: ContiguousBytes {
        self.init(data: data)
    }
    var genericKeyRepresentation: SymmetricKey { self }
}

struct KeyStoreError: Error, CustomStringConvertible {
    var message: String
    init(_ message: String) { self.message = message }
    var description: String { message }
}

extension OSStatus {
    var message: String { (SecCopyErrorMessageString(self, nil) as String?) ?? String(self) }
}

/// The sample's store, written the way the sample writes it.
struct GenericPasswordStore {
    func storeKey<T: SecKeyConvertible>(_ key: T, label: String) throws {
        let attributes = [kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom,
                          kSecAttrKeyClass: kSecAttrKeyClassPrivate] as [String: Any]
        guard let secKey = SecKeyCreateWithData(key.x963Representation as CFData, attributes as CFDictionary, nil) else {
            throw KeyStoreError("Unable to create SecKey representation.")
        }
        let query = [kSecClass: kSecClassKey,
                     kSecAttrApplicationLabel: label,
                     kSecAttrAccessible: kSecAttrAccessibleWhenUnlocked,
                     kSecUseDataProtectionKeychain: true,
                     kSecValueRef: secKey] as [String: Any]
        let status = SecItemAdd(query as CFDictionary, nil)
        guard status == errSecSuccess else { throw KeyStoreError("Unable to store item: \(status.message)") }
    }

    func readKey<T: SecKeyConvertible>(label: String) throws -> T? {
        let query = [kSecClass: kSecClassKey,
                     kSecAttrApplicationLabel: label,
                     kSecAttrKeyType: kSecAttrKeyTypeECSECPrimeRandom,
                     kSecUseDataProtectionKeychain: true,
                     kSecReturnRef: true] as [String: Any]
        var item: CFTypeRef?
        var secKey: SecKey
        switch SecItemCopyMatching(query as CFDictionary, &item) {
        case errSecSuccess: secKey = item as! SecKey
        case errSecItemNotFound: return nil
        case let status: throw KeyStoreError("Keychain read failed: \(status.message)")
        }
        var error: Unmanaged<CFError>?
        guard let data = SecKeyCopyExternalRepresentation(secKey, &error) as Data? else {
            throw KeyStoreError(error.debugDescription)
        }
        return try T(x963Representation: data)
    }

    func storeKey<T: GenericPasswordConvertible>(_ key: T, account: String) throws {
        try key.genericKeyRepresentation.withUnsafeBytes { keyBytes in
            let cfd = Data(bytesNoCopy: UnsafeMutableRawPointer(mutating: keyBytes.baseAddress!), count: keyBytes.count, deallocator: .none)
            let query = [kSecClass: kSecClassGenericPassword,
                         kSecAttrAccount: account,
                         kSecAttrAccessible: kSecAttrAccessibleWhenUnlocked,
                         kSecUseDataProtectionKeychain: true,
                         kSecValueData: cfd] as [String: Any]
            let status = SecItemAdd(query as CFDictionary, nil)
            guard status == errSecSuccess else { throw KeyStoreError("Unable to store item: \(status.message)") }
        }
    }

    func readKey<T: GenericPasswordConvertible>(account: String) throws -> T? {
        let query = [kSecClass: kSecClassGenericPassword,
                     kSecAttrAccount: account,
                     kSecUseDataProtectionKeychain: true,
                     kSecReturnData: true] as [String: Any]
        var item: CFTypeRef?
        switch SecItemCopyMatching(query as CFDictionary, &item) {
        case errSecSuccess:
            guard let data = item as? Data else { return nil }
            return try T(genericKeyRepresentation: data)
        case errSecItemNotFound: return nil
        case let status: throw KeyStoreError("Keychain read failed: \(status.message)")
        }
    }
}

final class CryptoKitStorageTests: AppleSampleCase {
    func test_nist_keys_round_trip_as_keychain_keys() throws {
        let store = GenericPasswordStore()
        let p256 = P256.Signing.PrivateKey()
        try store.storeKey(p256, label: "p256 signing")
        let readP256: P256.Signing.PrivateKey? = try store.readKey(label: "p256 signing")
        XCTAssertEqual(readP256?.rawRepresentation, p256.rawRepresentation)
        let p384 = P384.KeyAgreement.PrivateKey()
        try store.storeKey(p384, label: "p384 agreement")
        let readP384: P384.KeyAgreement.PrivateKey? = try store.readKey(label: "p384 agreement")
        XCTAssertEqual(readP384?.rawRepresentation, p384.rawRepresentation)
        let p521 = P521.Signing.PrivateKey()
        try store.storeKey(p521, label: "p521 signing")
        let readP521: P521.Signing.PrivateKey? = try store.readKey(label: "p521 signing")
        XCTAssertEqual(readP521?.rawRepresentation, p521.rawRepresentation)
        let missing: P256.Signing.PrivateKey? = try store.readKey(label: "nothing here")
        XCTAssertNil(missing)
        // The stored key signs through the keychain, and CryptoKit verifies the signature.
        var item: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching([kSecClass as String: kSecClassKey, kSecAttrApplicationLabel as String: "p256 signing",
                                            kSecReturnRef as String: true] as CFDictionary, &item), errSecSuccess)
        var error: Unmanaged<CFError>?
        let message = Data("signed in the keychain".utf8)
        let der = try XCTUnwrap(SecKeyCreateSignature(item as! SecKey, .ecdsaSignatureMessageX962SHA256, message as CFData, &error) as Data?)
        XCTAssertTrue(p256.publicKey.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: der), for: message))
    }

    func test_other_keys_round_trip_as_generic_passwords() throws {
        let store = GenericPasswordStore()
        let signing = Curve25519.Signing.PrivateKey()
        try store.storeKey(signing, account: "ed25519")
        let readSigning: Curve25519.Signing.PrivateKey? = try store.readKey(account: "ed25519")
        XCTAssertEqual(readSigning?.rawRepresentation, signing.rawRepresentation)
        let agreement = Curve25519.KeyAgreement.PrivateKey()
        try store.storeKey(agreement, account: "x25519")
        let readAgreement: Curve25519.KeyAgreement.PrivateKey? = try store.readKey(account: "x25519")
        XCTAssertEqual(readAgreement?.rawRepresentation, agreement.rawRepresentation)
        let symmetric = SymmetricKey(size: .bits256)
        try store.storeKey(symmetric, account: "aes")
        let readSymmetric: SymmetricKey? = try store.readKey(account: "aes")
        XCTAssertEqual(readSymmetric, symmetric)
        XCTAssertThrowsError(try store.storeKey(symmetric, account: "aes")) { error in
            XCTAssertEqual((error as? KeyStoreError)?.message, "Unable to store item: The specified item already exists in the keychain.")
        }
    }

    func test_typed_generic_password_layer() throws {
        let password = GenericPassword(service: "db.example", account: "app")
        XCTAssertNil(try password.read())
        try password.save(Data("first".utf8))
        try password.save(Data("second".utf8))
        XCTAssertEqual(try password.read(), Data("second".utf8))
        try password.delete()
        XCTAssertNil(try password.read())
        let web = InternetPassword(server: "example.com", account: "me", protocolCode: "htps", port: 443)
        try web.save(Data("pw".utf8))
        XCTAssertEqual(try web.read(), Data("pw".utf8))
        XCTAssertNil(try InternetPassword(server: "example.com", account: "me", protocolCode: "http", port: 443).read())
        lockKeychain()
        unsetenv("KEYCHAIN_PKCS11_PROMPT")
        XCTAssertThrowsError(try web.read()) { XCTAssertEqual($0 as? KeychainServicesError, KeychainServicesError(errSecInteractionNotAllowed)) }
    }
}
