import XCTest
@testable import KeychainCrypto

/// NIST's ACVP vectors (the subset in Vectors/, named in Vectors/README.md) through LatticeKey:
/// keys made from seeds, signatures verified with a context, ciphertexts decapsulated with keys
/// made from seeds, and the encapsulation key check.
final class LatticeKnownAnswerTests: XCTestCase {
    private typealias Vectors = ACVPVectors

    func test_mldsa_key_from_seed_has_the_acvp_public_key() throws {
        let file = try Vectors.decode(Vectors.mlDSAKeyGen, as: Vectors.MLDSAKeyGen.self)
        XCTAssertEqual([file.algorithm, file.mode, file.revision], ["ML-DSA", "keyGen", "FIPS204"])
        XCTAssertEqual(file.testGroups.map(\.set), [.mlDSA65, .mlDSA87])
        var checked = 0
        for group in file.testGroups {
            let set = try XCTUnwrap(group.set)
            for test in group.tests {
                let seed = try Vectors.bytes(test.seed), pk = try Vectors.bytes(test.pk)
                let key = try LatticeKey.privateKey(set, seed: SecureBytes(seed))
                XCTAssertEqual(key.publicKey, pk, "tcId \(test.tcId)")
                XCTAssertEqual(key.seedBytes()?.bytes, seed, "tcId \(test.tcId)")
                XCTAssertNoThrow(try LatticeKey.privateKey(set, seed: SecureBytes(seed), expectedPublicKey: pk), "tcId \(test.tcId)")
                checked += 1
            }
        }
        XCTAssertEqual(checked, 6)
    }

    /// FIPS 203's seed is d ‖ z (ML-KEM.KeyGen_internal(d, z)), the order RFC 9935 stores it in.
    func test_mlkem_key_from_d_and_z_has_the_acvp_encapsulation_key() throws {
        let file = try Vectors.decode(Vectors.mlKEMKeyGen, as: Vectors.MLKEMKeyGen.self)
        XCTAssertEqual([file.algorithm, file.mode, file.revision], ["ML-KEM", "keyGen", "FIPS203"])
        XCTAssertEqual(file.testGroups.map(\.set), [.mlKEM768, .mlKEM1024])
        var checked = 0
        for group in file.testGroups {
            let set = try XCTUnwrap(group.set)
            for test in group.tests {
                let seed = try Vectors.bytes(test.d) + Vectors.bytes(test.z), ek = try Vectors.bytes(test.ek)
                let key = try LatticeKey.privateKey(set, seed: SecureBytes(seed))
                XCTAssertEqual(key.publicKey, ek, "tcId \(test.tcId)")
                XCTAssertNoThrow(try LatticeKey.privateKey(set, seed: SecureBytes(seed), expectedPublicKey: ek), "tcId \(test.tcId)")
                checked += 1
            }
        }
        XCTAssertEqual(checked, 6)
    }

    /// External interface, pure ML-DSA, each case with its own key and context (empty in tcId 39,
    /// 255 bytes in tcId 67); the failing cases alter the signature's z, hint or commitment, or
    /// the message.
    func test_mldsa_verification_matches_acvp_test_passed() throws {
        let file = try Vectors.decode(Vectors.mlDSASigVer, as: Vectors.MLDSASigVer.self)
        XCTAssertEqual([file.algorithm, file.mode, file.revision], ["ML-DSA", "sigVer", "FIPS204"])
        XCTAssertEqual(file.testGroups.map(\.set), [.mlDSA65, .mlDSA87])
        var outcomes: [Bool] = []
        for group in file.testGroups {
            let set = try XCTUnwrap(group.set)
            for test in group.tests {
                let key = try LatticeKey.publicKey(set, encoded: Vectors.bytes(test.pk))
                let message = try Vectors.bytes(test.message), signature = try Vectors.bytes(test.signature)
                let context = try Vectors.bytes(test.context)
                let verified = try message.withUnsafeBytes { try key.verify(signature, message: $0, context: context) }
                XCTAssertEqual(verified, test.testPassed, "tcId \(test.tcId): \(test.reason)")
                if test.testPassed {
                    // The context is part of what is signed: another one must not verify.
                    let other = context.isEmpty ? [0] : [context[0] ^ 1] + context.dropFirst()
                    XCTAssertFalse(try message.withUnsafeBytes { try key.verify(signature, message: $0, context: other) }, "tcId \(test.tcId)")
                }
                outcomes.append(test.testPassed)
            }
        }
        XCTAssertEqual(outcomes.filter { $0 }.count, 4)
        XCTAssertEqual(outcomes.filter { !$0 }.count, 9)
    }

    /// ACVP's FIPS203-tr1 decapsulation groups with keyFormat "seed" give d and z beside the
    /// ciphertext, so the key is made as LatticeKey makes every ML-KEM private key. A modified
    /// ciphertext gives the implicit-rejection secret J(z ‖ c), never an error.
    func test_mlkem_decapsulation_with_a_seed_key_gives_the_acvp_shared_secret() throws {
        let file = try Vectors.decode(Vectors.mlKEMDecapsulation, as: Vectors.MLKEMDecapsulation.self)
        XCTAssertEqual([file.algorithm, file.mode, file.revision], ["ML-KEM", "encapDecap", "FIPS203-tr1"])
        XCTAssertEqual(file.testGroups.map(\.set), [.mlKEM768, .mlKEM1024])
        var reasons: [String] = []
        for group in file.testGroups {
            let set = try XCTUnwrap(group.set)
            for test in group.tests {
                let seed = try Vectors.bytes(test.d) + Vectors.bytes(test.z)
                let key = try LatticeKey.privateKey(set, seed: SecureBytes(seed), expectedPublicKey: Vectors.bytes(test.ek))
                let secret = try Vectors.bytes(test.c).withUnsafeBytes { try key.decapsulate($0) }
                XCTAssertEqual(secret.bytes, try Vectors.bytes(test.k), "tcId \(test.tcId): \(test.reason)")
                reasons.append(test.reason)
            }
        }
        XCTAssertEqual(reasons.filter { $0 == "valid decapsulation" }.count, 4)
        XCTAssertEqual(reasons.filter { $0 == "modified ciphertext" }.count, 4)
    }

    /// FIPS 203 §7.2: an encapsulation key with a coefficient of q or more is refused.
    func test_mlkem_public_key_check_matches_acvp_test_passed() throws {
        let file = try Vectors.decode(Vectors.mlKEMEncapsulationKeyCheck, as: Vectors.MLKEMEncapsulationKeyCheck.self)
        XCTAssertEqual(file.testGroups.map(\.set), [.mlKEM768, .mlKEM1024])
        var outcomes: [Bool] = []
        for group in file.testGroups {
            let set = try XCTUnwrap(group.set)
            for test in group.tests {
                let ek = try Vectors.bytes(test.ek)
                if test.testPassed {
                    XCTAssertEqual(try LatticeKey.publicKey(set, encoded: ek).publicKey, ek, "tcId \(test.tcId)")
                } else {
                    assertInvalidInput(try LatticeKey.publicKey(set, encoded: ek), "tcId \(test.tcId): \(test.reason)")
                }
                outcomes.append(test.testPassed)
            }
        }
        XCTAssertEqual(outcomes, [false, true, true, false])
    }

    /// Not a known answer (signing is hedged, encapsulation random): the ACVP keys sign and
    /// encapsulate in a way their own public halves accept.
    func test_acvp_keys_sign_and_encapsulate_for_their_public_halves() throws {
        for group in try Vectors.decode(Vectors.mlDSAKeyGen, as: Vectors.MLDSAKeyGen.self).testGroups {
            let set = try XCTUnwrap(group.set), test = try XCTUnwrap(group.tests.first)
            let key = try LatticeKey.privateKey(set, seed: SecureBytes(Vectors.bytes(test.seed)))
            let message = Array("message".utf8), context = Array("context".utf8)
            let signature = try message.withUnsafeBytes { try key.sign($0, context: context) }
            XCTAssertEqual(signature.count, set.signatureLength)
            let publicKey = try LatticeKey.publicKey(set, encoded: Vectors.bytes(test.pk))
            XCTAssertTrue(try message.withUnsafeBytes { try publicKey.verify(signature, message: $0, context: context) })
            XCTAssertFalse(try message.withUnsafeBytes { try publicKey.verify(signature, message: $0, context: []) })
        }
        for group in try Vectors.decode(Vectors.mlKEMKeyGen, as: Vectors.MLKEMKeyGen.self).testGroups {
            let set = try XCTUnwrap(group.set), test = try XCTUnwrap(group.tests.first)
            let key = try LatticeKey.privateKey(set, seed: SecureBytes(Vectors.bytes(test.d) + Vectors.bytes(test.z)))
            let sent = try LatticeKey.publicKey(set, encoded: Vectors.bytes(test.ek)).encapsulate()
            XCTAssertEqual(sent.ciphertext.count, set.ciphertextLength)
            XCTAssertEqual(try sent.ciphertext.withUnsafeBytes { try key.decapsulate($0) }.bytes, sent.sharedSecret.bytes)
        }
    }
}
