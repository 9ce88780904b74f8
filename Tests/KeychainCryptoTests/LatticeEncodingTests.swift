import XCTest
@testable import KeychainCrypto

/// LatticeKey's SubjectPublicKeyInfo and PKCS#8 forms (RFC 9881 for ML-DSA, RFC 9935 for
/// ML-KEM), built here byte by byte from the ACVP keys, and the inputs it must refuse.
final class LatticeEncodingTests: XCTestCase {
    private typealias Vectors = ACVPVectors

    /// The algorithm identifiers' OIDs with their tag, written out here rather than read from the
    /// module: id-ml-dsa-65/87 (2.16.840.1.101.3.4.3.18/19), id-alg-ml-kem-768/1024 (…4.4.2/3).
    private let oids: [LatticeParameterSet: [UInt8]] = [
        .mlDSA65: [0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x03, 0x12],
        .mlDSA87: [0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x03, 0x13],
        .mlKEM768: [0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x04, 0x02],
        .mlKEM1024: [0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x04, 0x03],
    ]

    /// One ACVP key per case: the set, the seed (ξ, or d ‖ z), the public key and the expanded
    /// private key (sk, dk).
    private struct KnownKey {
        let set: LatticeParameterSet
        let tcId: Int
        let seed: [UInt8]
        let publicKey: [UInt8]
        let expanded: [UInt8]
    }

    private func knownKeys() throws -> [KnownKey] {
        var keys: [KnownKey] = []
        for group in try Vectors.decode(Vectors.mlDSAKeyGen, as: Vectors.MLDSAKeyGen.self).testGroups {
            for test in group.tests {
                keys.append(KnownKey(set: try XCTUnwrap(group.set), tcId: test.tcId, seed: try Vectors.bytes(test.seed),
                                     publicKey: try Vectors.bytes(test.pk), expanded: try Vectors.bytes(test.sk)))
            }
        }
        for group in try Vectors.decode(Vectors.mlKEMKeyGen, as: Vectors.MLKEMKeyGen.self).testGroups {
            for test in group.tests {
                keys.append(KnownKey(set: try XCTUnwrap(group.set), tcId: test.tcId, seed: try Vectors.bytes(test.d) + Vectors.bytes(test.z),
                                     publicKey: try Vectors.bytes(test.ek), expanded: try Vectors.bytes(test.dk)))
            }
        }
        XCTAssertEqual(keys.count, 12)
        return keys
    }

    private func tlv(_ tag: UInt8, _ content: [UInt8]) -> [UInt8] {
        let count = content.count
        let length: [UInt8] = count < 0x80 ? [UInt8(count)] : count < 0x100 ? [0x81, UInt8(count)] : [0x82, UInt8(count >> 8), UInt8(count & 0xFF)]
        return [tag] + length + content
    }

    /// OneAsymmetricKey v0 with `privateKey` (the OCTET STRING's content) as given.
    private func privateKeyInfo(_ set: LatticeParameterSet, privateKey: [UInt8]) -> [UInt8] {
        tlv(0x30, [0x02, 0x01, 0x00] + tlv(0x30, oids[set]!) + tlv(0x04, privateKey))
    }

    /// The "both" choice: SEQUENCE { seed OCTET STRING, expandedKey OCTET STRING }.
    private func bothForm(_ set: LatticeParameterSet, seed: [UInt8], expanded: [UInt8]) -> [UInt8] {
        privateKeyInfo(set, privateKey: tlv(0x30, tlv(0x04, seed) + tlv(0x04, expanded)))
    }

    private func readPrivateKey(_ info: [UInt8]) throws -> LatticeKey {
        try info.withUnsafeBytes { try LatticeKey.privateKey(privateKeyInfo: $0) }
    }

    func test_subject_public_key_info_is_the_lamps_encoding_and_reads_back() throws {
        for known in try knownKeys() {
            let key = try LatticeKey.privateKey(known.set, seed: SecureBytes(known.seed))
            let expected = tlv(0x30, tlv(0x30, oids[known.set]!) + tlv(0x03, [0x00] + known.publicKey))
            XCTAssertEqual(key.subjectPublicKeyInfo(), expected, "\(known.set.name) tcId \(known.tcId)")
            XCTAssertEqual(try key.publicOnly().subjectPublicKeyInfo(), expected)
            let read = try LatticeKey.publicKey(subjectPublicKeyInfo: expected)
            XCTAssertEqual(read.parameterSet, known.set)
            XCTAssertEqual(read.publicKey, known.publicKey)
            XCTAssertFalse(read.isPrivate)
        }
    }

    func test_pkcs8_seed_form_is_the_lamps_encoding_and_reads_back() throws {
        for known in try knownKeys() {
            let key = try LatticeKey.privateKey(known.set, seed: SecureBytes(known.seed))
            let expected = privateKeyInfo(known.set, privateKey: tlv(0x80, known.seed))
            XCTAssertEqual(try key.privateKeyInfo().bytes, expected, "\(known.set.name) tcId \(known.tcId)")
            let read = try readPrivateKey(expected)
            XCTAssertEqual(read.parameterSet, known.set)
            XCTAssertEqual(read.publicKey, known.publicKey)
            XCTAssertEqual(read.seedBytes()?.bytes, known.seed)
            assertInvalidInput(try key.publicOnly().privateKeyInfo(), "a public key has no PKCS#8 form")
        }
    }

    /// A key holding both its seed and ACVP's expanded key for that seed is read.
    func test_pkcs8_with_the_seed_and_its_acvp_expanded_key_is_read() throws {
        for known in try knownKeys() {
            let read = try readPrivateKey(bothForm(known.set, seed: known.seed, expanded: known.expanded))
            XCTAssertEqual(read.publicKey, known.publicKey, "\(known.set.name) tcId \(known.tcId)")
            XCTAssertEqual(read.seedBytes()?.bytes, known.seed)
        }
    }

    /// An expanded key that is another seed's, or whose public parts were altered (ρ and tr for
    /// ML-DSA; ek, H(ek) and z for ML-KEM), is refused.
    func test_pkcs8_with_an_expanded_key_not_of_the_seed_is_refused() throws {
        let keys = try knownKeys()
        for known in keys {
            let name = "\(known.set.name) tcId \(known.tcId)"
            let other = try XCTUnwrap(keys.first { $0.set == known.set && $0.tcId != known.tcId })
            assertInvalidInput(try readPrivateKey(bothForm(known.set, seed: known.seed, expanded: other.expanded)), "\(name) with tcId \(other.tcId)'s key")
            let publicParts: [Int]
            if known.set.isSignature {
                publicParts = [0, 31, 64, 127]  // ρ = sk[0..<32], tr = sk[64..<128] (FIPS 204 Algorithm 24)
            } else {
                let pke = known.expanded.count - known.publicKey.count - 64  // dk = dk_PKE ‖ ek ‖ H(ek) ‖ z
                publicParts = [pke, pke + known.publicKey.count - 1, pke + known.publicKey.count, known.expanded.count - 1]
            }
            for index in publicParts {
                var altered = known.expanded
                altered[index] ^= 0x01
                assertInvalidInput(try readPrivateKey(bothForm(known.set, seed: known.seed, expanded: altered)), "\(name), byte \(index) altered")
            }
        }
    }

    /// `expandedPrivateKeyAgrees` (what C_CreateObject checks when CKA_VALUE comes beside
    /// CKA_SEED): ACVP's expanded key for the seed agrees; another seed's, a truncated one, or one
    /// given to a public key does not.
    func test_expanded_private_key_agrees_only_with_its_own_seed() throws {
        let keys = try knownKeys()
        for known in keys {
            let name = "\(known.set.name) tcId \(known.tcId)"
            let key = try LatticeKey.privateKey(known.set, seed: SecureBytes(known.seed))
            XCTAssertTrue(known.expanded.withUnsafeBytes { key.expandedPrivateKeyAgrees($0) }, name)
            XCTAssertFalse(known.expanded.dropLast().withUnsafeBytes { key.expandedPrivateKeyAgrees($0) }, name + " truncated")
            let other = try XCTUnwrap(keys.first { $0.set == known.set && $0.tcId != known.tcId })
            XCTAssertFalse(other.expanded.withUnsafeBytes { key.expandedPrivateKeyAgrees($0) }, name + " with tcId \(other.tcId)'s key")
            let publicOnly = try key.publicOnly()
            XCTAssertFalse(known.expanded.withUnsafeBytes { publicOnly.expandedPrivateKeyAgrees($0) }, name + " given to the public key")
        }
    }

    /// The library makes keys from seeds only, so the expanded form alone cannot be read.
    func test_pkcs8_expanded_key_alone_is_refused() throws {
        for known in try knownKeys() {
            assertInvalidInput(try readPrivateKey(privateKeyInfo(known.set, privateKey: tlv(0x04, known.expanded))), known.set.name)
        }
    }

    func test_wrong_lengths_are_refused_as_invalid_input() throws {
        for known in try knownKeys() {
            let set = known.set, name = "\(known.set.name) tcId \(known.tcId)"
            for seed in [Array(known.seed.dropLast()), known.seed + [0]] {
                assertInvalidInput(try LatticeKey.privateKey(set, seed: SecureBytes(seed)), "\(name): \(seed.count)-byte seed")
                assertInvalidInput(try readPrivateKey(privateKeyInfo(set, privateKey: tlv(0x80, seed))), "\(name): \(seed.count)-byte PKCS#8 seed")
                assertInvalidInput(try readPrivateKey(bothForm(set, seed: seed, expanded: known.expanded)), "\(name): \(seed.count)-byte seed beside sk")
            }
            for publicKey in [Array(known.publicKey.dropLast()), known.publicKey + [0]] {
                assertInvalidInput(try LatticeKey.publicKey(set, encoded: publicKey), "\(name): \(publicKey.count)-byte public key")
                let info = tlv(0x30, tlv(0x30, oids[set]!) + tlv(0x03, [0x00] + publicKey))
                assertInvalidInput(try LatticeKey.publicKey(subjectPublicKeyInfo: info), "\(name): \(publicKey.count)-byte SPKI key")
            }
            for expanded in [Array(known.expanded.dropLast()), known.expanded + [0]] {
                assertInvalidInput(try readPrivateKey(bothForm(set, seed: known.seed, expanded: expanded)), "\(name): \(expanded.count)-byte expanded key")
            }
            var wrongPublicKey = known.publicKey
            wrongPublicKey[wrongPublicKey.count - 1] ^= 0x01
            assertInvalidInput(try LatticeKey.privateKey(set, seed: SecureBytes(known.seed), expectedPublicKey: wrongPublicKey), "\(name): another public key")
            let key = try LatticeKey.privateKey(set, seed: SecureBytes(known.seed))
            if set.isSignature {
                let message = Array("message".utf8), tooLong = [UInt8](repeating: 7, count: 256)
                assertInvalidInput(try message.withUnsafeBytes { try key.sign($0, context: tooLong) }, "\(name): 256-byte context")
                let signature = try message.withUnsafeBytes { try key.sign($0, context: []) }
                assertInvalidInput(try message.withUnsafeBytes { try key.verify(signature, message: $0, context: tooLong) }, "\(name): 256-byte context")
                // A signature of another length is not an error but a signature that does not verify.
                for wrong in [Array(signature.dropLast()), signature + [0]] {
                    XCTAssertFalse(try message.withUnsafeBytes { try key.verify(wrong, message: $0, context: []) }, "\(name): \(wrong.count)-byte signature")
                }
            } else {
                let ciphertext = try key.encapsulate().ciphertext
                for wrong in [Array(ciphertext.dropLast()), ciphertext + [0], []] {
                    assertInvalidInput(try wrong.withUnsafeBytes { try key.decapsulate($0) }, "\(name): \(wrong.count)-byte ciphertext")
                }
            }
        }
    }

    /// Each key does only its own kind's operations; the two sets the library lacks are refused.
    func test_other_kinds_and_unoffered_sets_are_refused() throws {
        let keys = try knownKeys()
        let dsa = try XCTUnwrap(keys.first { $0.set == .mlDSA65 }), kem = try XCTUnwrap(keys.first { $0.set == .mlKEM768 })
        let signer = try LatticeKey.privateKey(.mlDSA65, seed: SecureBytes(dsa.seed))
        let decapsulator = try LatticeKey.privateKey(.mlKEM768, seed: SecureBytes(kem.seed))
        let message = Array("message".utf8)
        assertInvalidInput(try signer.encapsulate(), "encapsulate with ML-DSA")
        assertInvalidInput(try [UInt8](repeating: 0, count: 3309).withUnsafeBytes { try signer.decapsulate($0) }, "decapsulate with ML-DSA")
        assertInvalidInput(try message.withUnsafeBytes { try decapsulator.sign($0, context: []) }, "sign with ML-KEM")
        assertInvalidInput(try message.withUnsafeBytes { try signer.publicOnly().sign($0, context: []) }, "sign with a public key")
        let ciphertext = try decapsulator.encapsulate().ciphertext
        assertInvalidInput(try ciphertext.withUnsafeBytes { try decapsulator.publicOnly().decapsulate($0) }, "decapsulate with a public key")
        for set in [LatticeParameterSet.mlDSA44, .mlKEM512] {
            XCTAssertFalse(set.isOffered)
            assertInvalidInput(try LatticeKey.generate(set), set.name)
            assertInvalidInput(try LatticeKey.privateKey(set, seed: SecureBytes(count: set.seedLength)), set.name)
            assertInvalidInput(try LatticeKey.publicKey(set, encoded: [UInt8](repeating: 0, count: set.publicKeyLength)), set.name)
        }
    }
}

/// Asserts that `expression` throws CryptoError with code .invalidInput.
func assertInvalidInput<T>(_ expression: @autoclosure () throws -> T, _ message: String = "", file: StaticString = #filePath, line: UInt = #line) {
    XCTAssertThrowsError(try expression(), message, file: file, line: line) { error in
        XCTAssertEqual((error as? CryptoError)?.code, .invalidInput, "\(message): \(error)", file: file, line: line)
    }
}
