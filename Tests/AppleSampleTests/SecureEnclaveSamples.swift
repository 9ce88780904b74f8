import CryptoKit
import Foundation
import LocalAuthentication
import Security
import XCTest

// "Storing CryptoKit Keys in the Keychain": the Secure Enclave key's extension, as the article
// writes it (GenericPasswordConvertible and GenericPasswordStore are in CryptoKitSample.swift).
extension SecureEnclave.P256.Signing.PrivateKey: GenericPasswordConvertible {
    init<D>(genericKeyRepresentation data: D) throws where D: ContiguousBytes {
        try self.init(dataRepresentation: data.withUnsafeBytes { Data($0) })
    }

    var genericKeyRepresentation: SymmetricKey {
        return SymmetricKey(data: dataRepresentation)
    }
}

/// Secure Enclave samples on a TPM (swtpm): the CryptoKit article's extension, and
/// "Protecting keys with the Secure Enclave" with SecKey calls.
final class SecureEnclaveSampleTests: AppleEnclaveCase {
    /// The article's extension round-trips: the key stored as a generic password comes back as
    /// a key that signs for the same public key.
    func test_a_secure_enclave_key_round_trips_as_a_generic_password_and_signs() throws {
        XCTAssertTrue(SecureEnclave.isAvailable)
        let store = GenericPasswordStore()
        let key = try SecureEnclave.P256.Signing.PrivateKey()
        try store.storeKey(key, account: "enclave signing")
        let readBack: SecureEnclave.P256.Signing.PrivateKey? = try store.readKey(account: "enclave signing")
        let read = try XCTUnwrap(readBack)
        XCTAssertEqual(read.dataRepresentation, key.dataRepresentation)
        XCTAssertEqual(read.publicKey.x963Representation, key.publicKey.x963Representation)
        let message = Data("signed in the TPM".utf8)
        let signature = try read.signature(for: message)
        XCTAssertTrue(key.publicKey.isValidSignature(signature, for: message))
        XCTAssertFalse(key.publicKey.isValidSignature(signature, for: Data("another message".utf8)))
        // A digest signs the same way (SHA-384 truncated to the curve's 256 bits, as ECDSA does).
        let digest = SHA384.hash(data: message)
        XCTAssertTrue(key.publicKey.isValidSignature(try read.signature(for: digest), for: digest))
        // The data is the TPM's wrapped key, not a key: damaged, it does not load.
        var damaged = key.dataRepresentation
        damaged[damaged.count - 10] ^= 0xFF
        XCTAssertThrowsError(try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: damaged))
        XCTAssertThrowsError(try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: Data("not a key".utf8))) { error in
            XCTAssertEqual(error as? CryptoKitError, .underlyingCoreCryptoError(error: errSecParam))
        }
    }

    /// Apple's enclave keeps a key's access control with the key: one made with `.userPresence`
    /// asks at each use, also after a round trip through its `dataRepresentation` (the article's
    /// generic-password store). Data with the flag edited out is refused.
    func test_a_user_presence_key_keeps_asking_after_a_round_trip_through_its_data() throws {
        let access = try XCTUnwrap(SecAccessControlCreateWithFlags(nil, kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
                                                                   [.privateKeyUsage, .userPresence], nil))
        let key = try SecureEnclave.P256.Signing.PrivateKey(accessControl: access)
        let message = Data("each use asks".utf8)
        var asked = prompts.count
        XCTAssertTrue(key.publicKey.isValidSignature(try key.signature(for: message), for: message))
        XCTAssertEqual(prompts.count, asked + 1)

        let store = GenericPasswordStore()
        try store.storeKey(key, account: "presence")
        lockKeychain()
        let readBack: SecureEnclave.P256.Signing.PrivateKey? = try store.readKey(account: "presence")
        let loaded = try XCTUnwrap(readBack)
        asked = prompts.count
        XCTAssertTrue(key.publicKey.isValidSignature(try loaded.signature(for: message), for: message))
        XCTAssertEqual(prompts.count, asked + 1)
        XCTAssertTrue(key.publicKey.isValidSignature(try loaded.signature(for: message), for: message))
        XCTAssertEqual(prompts.count, asked + 2)

        // The user cancels: no signature from either key.
        try answerPrompts(with: nil)
        for signer in [key, loaded] {
            XCTAssertThrowsError(try signer.signature(for: message)) { error in
                XCTAssertEqual(error as? CryptoKitError, .underlyingCoreCryptoError(error: errSecUserCanceled))
            }
        }
        // A context that allows no interaction: refused without a prompt.
        try answerPrompts(with: "1234")
        let quiet = LAContext()
        quiet.interactionNotAllowed = true
        let silent = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: key.dataRepresentation, authenticationContext: quiet)
        asked = prompts.count
        XCTAssertThrowsError(try silent.signature(for: message)) { error in
            XCTAssertEqual(error as? CryptoKitError, .underlyingCoreCryptoError(error: errSecInteractionNotAllowed))
        }
        XCTAssertEqual(prompts.count, asked)

        // "KCSE" 02 16 serial(16) flags(8, big-endian): user presence is bit 0 of byte 29.
        var edited = key.dataRepresentation
        XCTAssertEqual(edited[edited.startIndex + 29] & 1, 1)
        edited[edited.startIndex + 29] &= ~UInt8(1)
        XCTAssertThrowsError(try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: edited)) { error in
            XCTAssertEqual(error as? CryptoKitError, .underlyingCoreCryptoError(error: errSecDecode))
        }
        // A key made without a presence flag asks nothing, before or after its data round trip.
        let plain = try SecureEnclave.P256.Signing.PrivateKey()
        let plainLoaded = try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: plain.dataRepresentation)
        asked = prompts.count
        XCTAssertTrue(plain.publicKey.isValidSignature(try plainLoaded.signature(for: message), for: message))
        XCTAssertEqual(prompts.count, asked)
    }

    func test_a_secure_enclave_key_agreement_meets_a_software_key() throws {
        let enclave = try SecureEnclave.P256.KeyAgreement.PrivateKey()
        let software = P256.KeyAgreement.PrivateKey()
        let ours = try enclave.sharedSecretFromKeyAgreement(with: software.publicKey)
        let theirs = try software.sharedSecretFromKeyAgreement(with: enclave.publicKey)
        XCTAssertEqual(ours, theirs)
        let info = Data("context".utf8)
        XCTAssertEqual(ours.x963DerivedSymmetricKey(using: SHA256.self, sharedInfo: info, outputByteCount: 32),
                       theirs.x963DerivedSymmetricKey(using: SHA256.self, sharedInfo: info, outputByteCount: 32))
        let again = try SecureEnclave.P256.KeyAgreement.PrivateKey(dataRepresentation: enclave.dataRepresentation)
        XCTAssertEqual(try again.sharedSecretFromKeyAgreement(with: software.publicKey), theirs)
    }

    /// "Protecting keys with the Secure Enclave": a permanent key made in the enclave, found
    /// again by its tag, signing, verified with its public key; key agreement with a software key.
    func test_seckey_secure_enclave_sample() throws {
        let tag = Data("com.example.keys.enclave".utf8)
        let access = SecAccessControlCreateWithFlags(kCFAllocatorDefault, kSecAttrAccessibleWhenUnlockedThisDeviceOnly, .privateKeyUsage, nil)!
        let attributes: [String: Any] = [
            kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
            kSecAttrKeySizeInBits as String: 256,
            kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
            kSecPrivateKeyAttrs as String: [
                kSecAttrIsPermanent as String: true,
                kSecAttrApplicationTag as String: tag,
                kSecAttrAccessControl as String: access,
            ],
        ]
        var error: Unmanaged<CFError>?
        guard let privateKey = SecKeyCreateRandomKey(attributes as CFDictionary, &error) else {
            throw error!.takeRetainedValue() as Error
        }
        let publicKey = try XCTUnwrap(SecKeyCopyPublicKey(privateKey))
        let message = Data("sign me".utf8)
        XCTAssertTrue(SecKeyIsAlgorithmSupported(privateKey, .sign, .ecdsaSignatureMessageX962SHA256))
        XCTAssertTrue(SecKeyIsAlgorithmSupported(privateKey, .keyExchange, .ecdhKeyExchangeStandard))
        XCTAssertFalse(SecKeyIsAlgorithmSupported(privateKey, .decrypt, .rsaEncryptionOAEPSHA256))
        let signature = try XCTUnwrap(SecKeyCreateSignature(privateKey, .ecdsaSignatureMessageX962SHA256, message as CFData, &error) as Data?)
        XCTAssertTrue(SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, message as CFData, signature as CFData, &error))
        // The RFC 4754 and digest forms, checked by CryptoKit.
        let point = try XCTUnwrap(SecKeyCopyExternalRepresentation(publicKey, &error) as Data?)
        let verifier = try P256.Signing.PublicKey(x963Representation: point)
        let raw = try XCTUnwrap(SecKeyCreateSignature(privateKey, .ecdsaSignatureMessageRFC4754SHA512, message as CFData, &error) as Data?)
        XCTAssertTrue(verifier.isValidSignature(try P256.Signing.ECDSASignature(rawRepresentation: raw), for: SHA512.hash(data: message)))
        let digest = Data(Insecure.SHA1.hash(data: message))
        let overDigest = try XCTUnwrap(SecKeyCreateSignature(privateKey, .ecdsaSignatureDigestX962SHA1, digest as CFData, &error) as Data?)
        XCTAssertTrue(SecKeyVerifySignature(publicKey, .ecdsaSignatureDigestX962SHA1, digest as CFData, overDigest as CFData, &error))

        // The private key never leaves; its attributes name the token.
        XCTAssertNil(SecKeyCopyExternalRepresentation(privateKey, &error))
        XCTAssertEqual(CFErrorGetCode(error!.takeRetainedValue()), Int(errSecUnimplemented))
        let described = try XCTUnwrap(SecKeyCopyAttributes(privateKey) as? [String: Any])
        XCTAssertEqual(described[kSecAttrTokenID as String] as? String, kSecAttrTokenIDSecureEnclave as String)
        XCTAssertEqual((described[kSecAttrKeySizeInBits as String] as? NSNumber)?.intValue, 256)

        // Found again by tag and token, and it signs.
        let query: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationTag as String: tag,
                                    kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave, kSecAttrKeySizeInBits as String: 256,
                                    kSecReturnRef as String: true]
        var item: CFTypeRef?
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &item), errSecSuccess)
        let found = item as! SecKey
        let again = try XCTUnwrap(SecKeyCreateSignature(found, .ecdsaSignatureMessageX962SHA256, message as CFData, &error) as Data?)
        XCTAssertTrue(SecKeyVerifySignature(publicKey, .ecdsaSignatureMessageX962SHA256, message as CFData, again as CFData, &error))

        // Key agreement between the enclave key and a software key: both sides agree.
        let softwareAttributes: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256]
        let software = try XCTUnwrap(SecKeyCreateRandomKey(softwareAttributes as CFDictionary, &error))
        let softwarePublic = try XCTUnwrap(SecKeyCopyPublicKey(software))
        for algorithm in [SecKeyAlgorithm.ecdhKeyExchangeStandard, .ecdhKeyExchangeCofactor, .ecdhKeyExchangeStandardX963SHA256, .ecdhKeyExchangeCofactorX963SHA1] {
            let parameters = [SecKeyKeyExchangeParameter.requestedSize.rawValue: 41,
                              SecKeyKeyExchangeParameter.sharedInfo.rawValue: Data("shared".utf8)] as [AnyHashable: Any]
            let ours = try XCTUnwrap(SecKeyCopyKeyExchangeResult(found, algorithm, softwarePublic, parameters as CFDictionary, &error) as Data?)
            let theirs = try XCTUnwrap(SecKeyCopyKeyExchangeResult(software, algorithm, publicKey, parameters as CFDictionary, &error) as Data?)
            XCTAssertEqual(ours, theirs, "\(algorithm)")
            XCTAssertEqual(ours.count, algorithm == .ecdhKeyExchangeStandard || algorithm == .ecdhKeyExchangeCofactor ? 32 : 41)
        }
        // CryptoKit computes the same X9.63 derivation from the raw secret.
        let rawSecret = try XCTUnwrap(SecKeyCopyKeyExchangeResult(found, .ecdhKeyExchangeStandard, softwarePublic, [:] as CFDictionary, &error) as Data?)
        let softwarePoint = try XCTUnwrap(SecKeyCopyExternalRepresentation(software, &error) as Data?)
        let softwareKit = try P256.KeyAgreement.PrivateKey(rawRepresentation: softwarePoint.suffix(32))
        let kitSecret = try softwareKit.sharedSecretFromKeyAgreement(with: P256.KeyAgreement.PublicKey(x963Representation: point))
        XCTAssertEqual(kitSecret.withUnsafeBytes { Data($0) }, rawSecret)
        let derived = try XCTUnwrap(SecKeyCopyKeyExchangeResult(found, .ecdhKeyExchangeStandardX963SHA256, softwarePublic,
                                                                [kSecKeyKeyExchangeParameterRequestedSize: 32,
                                                                 kSecKeyKeyExchangeParameterSharedInfo: Data("info".utf8)] as CFDictionary, &error) as Data?)
        XCTAssertEqual(kitSecret.x963DerivedSymmetricKey(using: SHA256.self, sharedInfo: Data("info".utf8), outputByteCount: 32).withUnsafeBytes { Data($0) }, derived)
        // Apple's rules: the KDF variants need the size; the shared info is Data.
        XCTAssertNil(SecKeyCopyKeyExchangeResult(found, .ecdhKeyExchangeStandardX963SHA256, softwarePublic, [:] as CFDictionary, &error))
        XCTAssertEqual(CFErrorGetCode(error!.takeRetainedValue()), Int(errSecParam))
        XCTAssertNil(SecKeyCopyKeyExchangeResult(found, .ecdhKeyExchangeStandardX963SHA256, softwarePublic,
                                                 [kSecKeyKeyExchangeParameterRequestedSize: 32, kSecKeyKeyExchangeParameterSharedInfo: "text"] as CFDictionary, &error))
        XCTAssertEqual(CFErrorGetCode(error!.takeRetainedValue()), Int(errSecParam))
        XCTAssertNil(SecKeyCopyKeyExchangeResult(found, .ecdsaSignatureMessageX962SHA256, softwarePublic, [:] as CFDictionary, &error))
        XCTAssertEqual(CFErrorGetCode(error!.takeRetainedValue()), Int(errSecParam))
    }

    func test_the_secure_enclave_makes_256_bit_ec_keys_only() {
        var error: Unmanaged<CFError>?
        for (type, bits) in [(kSecAttrKeyTypeECSECPrimeRandom, 384), (kSecAttrKeyTypeRSA, 2048)] {
            let attributes: [String: Any] = [kSecAttrKeyType as String: type, kSecAttrKeySizeInBits as String: bits,
                                             kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave]
            XCTAssertNil(SecKeyCreateRandomKey(attributes as CFDictionary, &error))
            XCTAssertEqual(CFErrorGetCode(error!.takeRetainedValue()), Int(errSecParam))
        }
    }

    /// A key stored by this process is found and used by another one (the secitem program).
    func test_a_stored_enclave_key_signs_in_a_new_process() throws {
        let tag = "com.example.keys.shared"
        var point = Data()
        do {
            var error: Unmanaged<CFError>?
            let attributes: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeEC, kSecAttrKeySizeInBits as String: 256,
                                             kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave, kSecAttrIsPermanent as String: true,
                                             kSecAttrApplicationTag as String: Data(tag.utf8)]
            let key = try XCTUnwrap(SecKeyCreateRandomKey(attributes as CFDictionary, &error))
            point = try XCTUnwrap(SecKeyCopyExternalRepresentation(try XCTUnwrap(SecKeyCopyPublicKey(key)), &error) as Data?)
        }
        // The key object is gone, and with it this process's TPM connection (swtpm serves one).
        let message = Data("from another process".utf8)
        let (status, signature) = try secitem(["sign-enclave", tag], input: message)
        XCTAssertEqual(status, 0)
        let verifier = try P256.Signing.PublicKey(x963Representation: point)
        XCTAssertTrue(verifier.isValidSignature(try P256.Signing.ECDSASignature(derRepresentation: signature), for: message))
        let (missing, _) = try secitem(["sign-enclave", "no such tag"], input: message)
        XCTAssertEqual(missing, 6)
    }

    func test_without_a_tpm_the_enclave_answers_apples_errors() {
        removeTPM()
        XCTAssertFalse(SecureEnclave.isAvailable)
        XCTAssertThrowsError(try SecureEnclave.P256.Signing.PrivateKey()) { error in
            XCTAssertEqual(error as? CryptoKitError, .underlyingCoreCryptoError(error: errSecUnimplemented))
        }
        XCTAssertThrowsError(try SecureEnclave.P256.KeyAgreement.PrivateKey()) { error in
            XCTAssertEqual(error as? CryptoKitError, .underlyingCoreCryptoError(error: errSecUnimplemented))
        }
        var error: Unmanaged<CFError>?
        let attributes: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                                         kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave]
        XCTAssertNil(SecKeyCreateRandomKey(attributes as CFDictionary, &error))
        XCTAssertEqual(CFErrorGetCode(error!.takeRetainedValue()), Int(errSecUnimplemented))
        // Nothing asked for the keychain password: the answer came first.
        XCTAssertEqual(prompts, [])
        // Everything else still works: a software key agrees as before.
        let plain: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256]
        let a = SecKeyCreateRandomKey(plain as CFDictionary, &error)!
        let b = SecKeyCreateRandomKey(plain as CFDictionary, &error)!
        let ab = SecKeyCopyKeyExchangeResult(a, .ecdhKeyExchangeStandard, SecKeyCopyPublicKey(b)!, [:] as CFDictionary, &error) as Data?
        let ba = SecKeyCopyKeyExchangeResult(b, .ecdhKeyExchangeStandard, SecKeyCopyPublicKey(a)!, [:] as CFDictionary, &error) as Data?
        XCTAssertEqual(ab?.count, 32)
        XCTAssertEqual(ab, ba)
    }
}
