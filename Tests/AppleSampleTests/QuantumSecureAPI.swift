import CryptoKit
import Foundation
import XCTest

// Apple's quantum-secure CryptoKit API (iOS 26 and macOS 26, 2025), each declaration with the type
// Apple's documentation gives it. `import CryptoKit` is swift-crypto's Crypto here: a name, a label
// or a parameter type that differed from Apple's would fail to compile at its line, so these lists
// pin what Apple code calls. (SecureEnclave.MLKEM768, .MLKEM1024, .MLDSA65 and .MLDSA87 are not
// offered: a TPM cannot hold lattice keys; Docs/keychain-api.md, "Quantum-secure keys".)

/// Compiles only for a type with the conformances Apple documents.
private func conforms<T: Sendable>(_ type: T.Type) -> String { "\(type)" }
private func conformsToKEMPublicKey<T: KEMPublicKey & Sendable>(_ type: T.Type) -> String { "\(type)" }
private func conformsToKEMPrivateKey<T: KEMPrivateKey>(_ type: T.Type) -> String { "\(type)" }
private func conformsToHPKE<Public: HPKEKEMPublicKey, Private: HPKEKEMPrivateKey>(_ public: Public.Type, _ private: Private.Type) -> String {
    "\(Public.self) \(Private.self)"
}

final class QuantumSecureAPITests: XCTestCase {
    func test_ml_dsa_has_apples_declarations() {
        let mlDSA65: [Any] = [
            MLDSA65.PrivateKey.init as () throws -> MLDSA65.PrivateKey,
            MLDSA65.PrivateKey.init(seedRepresentation:publicKey:) as (Data, MLDSA65.PublicKey?) throws -> MLDSA65.PrivateKey,
            MLDSA65.PrivateKey.init(integrityCheckedRepresentation:) as (Data) throws -> MLDSA65.PrivateKey,
            \MLDSA65.PrivateKey.seedRepresentation as KeyPath<MLDSA65.PrivateKey, Data>,
            \MLDSA65.PrivateKey.integrityCheckedRepresentation as KeyPath<MLDSA65.PrivateKey, Data>,
            \MLDSA65.PrivateKey.publicKey as KeyPath<MLDSA65.PrivateKey, MLDSA65.PublicKey>,
            MLDSA65.PrivateKey.signature(for:) as (MLDSA65.PrivateKey) -> ([UInt8]) throws -> Data,
            MLDSA65.PrivateKey.signature(for:context:) as (MLDSA65.PrivateKey) -> (Data, Data) throws -> Data,
            MLDSA65.PublicKey.init(rawRepresentation:) as (Data) throws -> MLDSA65.PublicKey,
            \MLDSA65.PublicKey.rawRepresentation as KeyPath<MLDSA65.PublicKey, Data>,
            MLDSA65.PublicKey.isValidSignature(_:for:) as (MLDSA65.PublicKey) -> (Data, Data) -> Bool,
            MLDSA65.PublicKey.isValidSignature(_:for:context:) as (MLDSA65.PublicKey) -> (Data, Data, Data) -> Bool,
        ]
        let mlDSA87: [Any] = [
            MLDSA87.PrivateKey.init as () throws -> MLDSA87.PrivateKey,
            MLDSA87.PrivateKey.init(seedRepresentation:publicKey:) as (Data, MLDSA87.PublicKey?) throws -> MLDSA87.PrivateKey,
            MLDSA87.PrivateKey.init(integrityCheckedRepresentation:) as (Data) throws -> MLDSA87.PrivateKey,
            \MLDSA87.PrivateKey.seedRepresentation as KeyPath<MLDSA87.PrivateKey, Data>,
            \MLDSA87.PrivateKey.integrityCheckedRepresentation as KeyPath<MLDSA87.PrivateKey, Data>,
            \MLDSA87.PrivateKey.publicKey as KeyPath<MLDSA87.PrivateKey, MLDSA87.PublicKey>,
            MLDSA87.PrivateKey.signature(for:) as (MLDSA87.PrivateKey) -> ([UInt8]) throws -> Data,
            MLDSA87.PrivateKey.signature(for:context:) as (MLDSA87.PrivateKey) -> (Data, Data) throws -> Data,
            MLDSA87.PublicKey.init(rawRepresentation:) as (Data) throws -> MLDSA87.PublicKey,
            \MLDSA87.PublicKey.rawRepresentation as KeyPath<MLDSA87.PublicKey, Data>,
            MLDSA87.PublicKey.isValidSignature(_:for:) as (MLDSA87.PublicKey) -> (Data, Data) -> Bool,
            MLDSA87.PublicKey.isValidSignature(_:for:context:) as (MLDSA87.PublicKey) -> (Data, Data, Data) -> Bool,
        ]
        XCTAssertEqual(mlDSA65.count + mlDSA87.count, 24)
        XCTAssertEqual([conforms(MLDSA65.self), conforms(MLDSA65.PrivateKey.self), conforms(MLDSA65.PublicKey.self),
                        conforms(MLDSA87.self), conforms(MLDSA87.PrivateKey.self), conforms(MLDSA87.PublicKey.self)],
                       ["MLDSA65", "PrivateKey", "PublicKey", "MLDSA87", "PrivateKey", "PublicKey"])
    }

    func test_ml_kem_has_apples_declarations() {
        let mlKEM768: [Any] = [
            MLKEM768.PrivateKey.init as () throws -> MLKEM768.PrivateKey,
            MLKEM768.PrivateKey.generate as () throws -> MLKEM768.PrivateKey,
            MLKEM768.PrivateKey.init(seedRepresentation:publicKey:) as (Data, MLKEM768.PublicKey?) throws -> MLKEM768.PrivateKey,
            MLKEM768.PrivateKey.init(integrityCheckedRepresentation:) as (Data) throws -> MLKEM768.PrivateKey,
            \MLKEM768.PrivateKey.seedRepresentation as KeyPath<MLKEM768.PrivateKey, Data>,
            \MLKEM768.PrivateKey.integrityCheckedRepresentation as KeyPath<MLKEM768.PrivateKey, Data>,
            \MLKEM768.PrivateKey.publicKey as KeyPath<MLKEM768.PrivateKey, MLKEM768.PublicKey>,
            MLKEM768.PrivateKey.decapsulate as (MLKEM768.PrivateKey) -> ([UInt8]) throws -> SymmetricKey,
            MLKEM768.PublicKey.init(rawRepresentation:) as (Data) throws -> MLKEM768.PublicKey,
            \MLKEM768.PublicKey.rawRepresentation as KeyPath<MLKEM768.PublicKey, Data>,
            MLKEM768.PublicKey.encapsulate as (MLKEM768.PublicKey) -> () throws -> KEM.EncapsulationResult,
        ]
        let mlKEM1024: [Any] = [
            MLKEM1024.PrivateKey.init as () throws -> MLKEM1024.PrivateKey,
            MLKEM1024.PrivateKey.generate as () throws -> MLKEM1024.PrivateKey,
            MLKEM1024.PrivateKey.init(seedRepresentation:publicKey:) as (Data, MLKEM1024.PublicKey?) throws -> MLKEM1024.PrivateKey,
            MLKEM1024.PrivateKey.init(integrityCheckedRepresentation:) as (Data) throws -> MLKEM1024.PrivateKey,
            \MLKEM1024.PrivateKey.seedRepresentation as KeyPath<MLKEM1024.PrivateKey, Data>,
            \MLKEM1024.PrivateKey.integrityCheckedRepresentation as KeyPath<MLKEM1024.PrivateKey, Data>,
            \MLKEM1024.PrivateKey.publicKey as KeyPath<MLKEM1024.PrivateKey, MLKEM1024.PublicKey>,
            MLKEM1024.PrivateKey.decapsulate as (MLKEM1024.PrivateKey) -> ([UInt8]) throws -> SymmetricKey,
            MLKEM1024.PublicKey.init(rawRepresentation:) as (Data) throws -> MLKEM1024.PublicKey,
            \MLKEM1024.PublicKey.rawRepresentation as KeyPath<MLKEM1024.PublicKey, Data>,
            MLKEM1024.PublicKey.encapsulate as (MLKEM1024.PublicKey) -> () throws -> KEM.EncapsulationResult,
        ]
        let result: [Any] = [
            \KEM.EncapsulationResult.sharedSecret as KeyPath<KEM.EncapsulationResult, SymmetricKey>,
            \KEM.EncapsulationResult.encapsulated as KeyPath<KEM.EncapsulationResult, Data>,
            KEM.Errors.publicKeyMismatchDuringInitialization, KEM.Errors.invalidSeed,
        ]
        XCTAssertEqual(mlKEM768.count + mlKEM1024.count + result.count, 26)
        XCTAssertEqual([conformsToKEMPublicKey(MLKEM768.PublicKey.self), conformsToKEMPrivateKey(MLKEM768.PrivateKey.self),
                        conformsToKEMPublicKey(MLKEM1024.PublicKey.self), conformsToKEMPrivateKey(MLKEM1024.PrivateKey.self)],
                       ["PublicKey", "PrivateKey", "PublicKey", "PrivateKey"])
    }

    func test_x_wing_and_its_hpke_suite_have_apples_declarations() {
        typealias XWing = XWingMLKEM768X25519
        let keys: [Any] = [
            XWing.PrivateKey.init as () throws -> XWing.PrivateKey,
            XWing.PrivateKey.generate as () throws -> XWing.PrivateKey,
            XWing.PrivateKey.init(seedRepresentation:publicKey:) as (Data, XWing.PublicKey?) throws -> XWing.PrivateKey,
            XWing.PrivateKey.init(integrityCheckedRepresentation:) as (Data) throws -> XWing.PrivateKey,
            \XWing.PrivateKey.seedRepresentation as KeyPath<XWing.PrivateKey, Data>,
            \XWing.PrivateKey.integrityCheckedRepresentation as KeyPath<XWing.PrivateKey, Data>,
            \XWing.PrivateKey.publicKey as KeyPath<XWing.PrivateKey, XWing.PublicKey>,
            XWing.PrivateKey.decapsulate as (XWing.PrivateKey) -> (Data) throws -> SymmetricKey,
            XWing.PublicKey.init(rawRepresentation:) as ([UInt8]) throws -> XWing.PublicKey,
            \XWing.PublicKey.rawRepresentation as KeyPath<XWing.PublicKey, Data>,
            XWing.PublicKey.encapsulate as (XWing.PublicKey) -> () throws -> KEM.EncapsulationResult,
            XWing.PublicKey.init(_:kem:) as (Data, HPKE.KEM) throws -> XWing.PublicKey,
            XWing.PublicKey.hpkeRepresentation(kem:) as (XWing.PublicKey) -> (HPKE.KEM) throws -> Data,
            XWing.PublicKey.EphemeralPrivateKey.self as XWing.PrivateKey.Type,
            XWing.PublicKey.HPKEEphemeralPrivateKey.self as XWing.PrivateKey.Type,
        ]
        let hpke: [Any] = [
            HPKE.Ciphersuite.XWingMLKEM768X25519_SHA256_AES_GCM_256 as HPKE.Ciphersuite,
            HPKE.KEM.XWingMLKEM768X25519 as HPKE.KEM,
            HPKE.Sender.init(recipientKey:ciphersuite:info:) as (XWing.PublicKey, HPKE.Ciphersuite, Data) throws -> HPKE.Sender,
            HPKE.Recipient.init(privateKey:ciphersuite:info:encapsulatedKey:) as (XWing.PrivateKey, HPKE.Ciphersuite, Data, Data) throws -> HPKE.Recipient,
            \HPKE.Sender.encapsulatedKey as KeyPath<HPKE.Sender, Data>,
        ]
        XCTAssertEqual(keys.count + hpke.count, 20)
        XCTAssertEqual(HPKE.Ciphersuite.XWingMLKEM768X25519_SHA256_AES_GCM_256.kem, .XWingMLKEM768X25519)
        XCTAssertEqual([conformsToKEMPublicKey(XWing.PublicKey.self), conformsToKEMPrivateKey(XWing.PrivateKey.self),
                        conforms(XWing.self), conformsToHPKE(XWing.PublicKey.self, XWing.PrivateKey.self)],
                       ["PublicKey", "PrivateKey", "XWingMLKEM768X25519", "PublicKey PrivateKey"])
    }
}
