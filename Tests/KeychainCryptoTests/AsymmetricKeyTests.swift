import XCTest
@testable import KeychainCrypto

final class AsymmetricKeyTests: XCTestCase {
    func test_rsa_components_round_trip_and_sign_verify() throws {
        let generated = try AsymmetricKey.generate(.rsa, bits: 2048)
        XCTAssertEqual(generated.bits, 2048)
        let parts = try generated.rsaComponents()
        XCTAssertEqual(parts.publicExponent, [1, 0, 1])
        let imported = try AsymmetricKey.rsa(parts)
        XCTAssertTrue(imported.isPrivate)
        let publicOnly = try AsymmetricKey.rsa(RSAComponents(modulus: parts.modulus, publicExponent: parts.publicExponent))
        XCTAssertTrue(publicOnly.hasSamePublicKey(as: imported))
        let message = Array("message".utf8)
        for scheme in [SignatureScheme.rsaPKCS1(digest: .sha256), .rsaPSS(digest: .sha256, mgf1: .sha256, saltLength: 32, hashesData: true)] {
            let signer = try SignatureOperation(key: imported, scheme: scheme, signing: true)
            try message.withUnsafeBytes { try signer.update($0) }
            let signature = try signer.sign()
            XCTAssertEqual(signature.count, 256)
            let verifier = try SignatureOperation(key: publicOnly, scheme: scheme, signing: false)
            try message.withUnsafeBytes { try verifier.update($0) }
            XCTAssertTrue(try verifier.verify(signature))
            let wrong = try SignatureOperation(key: publicOnly, scheme: scheme, signing: false)
            try Array("other".utf8).withUnsafeBytes { try wrong.update($0) }
            XCTAssertFalse(try wrong.verify(signature))
        }
    }

    func test_ec_keys_from_scalar_or_point_and_raw_signatures() throws {
        for curve in Curve.allCases {
            let generated = try AsymmetricKey.generate(.ec(curve))
            let point = try generated.ecPoint()
            XCTAssertEqual(point.count, 1 + 2 * curve.coordinateLength)
            let fromScalar = try AsymmetricKey.ec(curve, point: nil, scalar: try generated.ecScalar().bytes)
            let fromPoint = try AsymmetricKey.ec(curve, point: point, scalar: nil)
            let signer = try SignatureOperation(key: fromScalar, scheme: .ecdsa(digest: .sha256), signing: true)
            try [1, 2, 3].withUnsafeBytes { try signer.update($0) }
            let signature = try signer.sign()
            XCTAssertEqual(signature.count, 2 * curve.coordinateLength)
            let verifier = try SignatureOperation(key: fromPoint, scheme: .ecdsa(digest: .sha256), signing: false)
            try [1, 2, 3].withUnsafeBytes { try verifier.update($0) }
            XCTAssertTrue(try verifier.verify(signature))
        }
        XCTAssertThrowsError(try AsymmetricKey.ec(.p256, point: [4] + [UInt8](repeating: 1, count: 64), scalar: nil), "a point off the curve")
    }

    func test_edwards_keys_sign_and_verify() throws {
        for kind in [AsymmetricKind.ed25519, .ed448] {
            let generated = try AsymmetricKey.generate(kind)
            let raw = try AsymmetricKey.raw(kind, privateKey: try generated.rawPrivateKey().bytes, publicKey: nil)
            let publicKey = try AsymmetricKey.raw(kind, privateKey: nil, publicKey: try generated.rawPublicKey())
            let signer = try SignatureOperation(key: raw, scheme: .eddsa, signing: true)
            try [9, 9].withUnsafeBytes { try signer.update($0) }
            let signature = try signer.sign()
            let verifier = try SignatureOperation(key: publicKey, scheme: .eddsa, signing: false)
            try [9, 9].withUnsafeBytes { try verifier.update($0) }
            XCTAssertTrue(try verifier.verify(signature))
        }
    }

    /// Keys keep their initialised contexts between operations (taken whole, given back on
    /// success, freed on failure): many signatures in a row with one key, a failed signature and a
    /// failed verification in between, each checked by a separate public key object.
    func test_reused_contexts_give_correct_results_after_failures() throws {
        let rsa = try AsymmetricKey.generate(.rsa, bits: 2048)
        let cases: [(AsymmetricKey, SignatureScheme, Int)] = [
            (try AsymmetricKey.generate(.ec(.p256)), .ecdsa(digest: nil), 32),
            (try AsymmetricKey.generate(.ed25519), .eddsa, 100),
            (try AsymmetricKey.generate(.ed448), .eddsa, 7),
            (rsa, .rsaPSS(digest: .sha256, mgf1: .sha256, saltLength: 32, hashesData: false), 32),
            (rsa, .rsaPKCS1(digest: nil), 51),
        ]
        func run(_ key: AsymmetricKey, _ scheme: SignatureScheme, signing: Bool, _ data: [UInt8], signature: [UInt8] = []) throws -> (signature: [UInt8], valid: Bool) {
            let operation = try SignatureOperation(key: key, scheme: scheme, signing: signing)
            try data.withUnsafeBytes { try operation.update($0) }
            return signing ? (try operation.sign(), true) : ([], try operation.verify(signature))
        }
        for (key, scheme, length) in cases {
            let verifier = try key.publicKey()
            for round in 0..<20 {
                let data = [UInt8](repeating: UInt8(round), count: length)
                let signature = try run(key, scheme, signing: true, data).signature
                var forged = signature
                forged[forged.count / 2] ^= 0x01
                XCTAssertFalse(try run(verifier, scheme, signing: false, data, signature: forged).valid, "\(scheme) round \(round)")
                XCTAssertTrue(try run(verifier, scheme, signing: false, data, signature: signature).valid, "\(scheme) round \(round)")
                if round == 5, case .rsaPKCS1 = scheme {
                    // Longer than PKCS#1 v1.5 padding allows in a 256-byte modulus: refused.
                    XCTAssertThrowsError(try run(key, scheme, signing: true, [UInt8](repeating: 1, count: 250)))
                }
            }
        }
    }

    func test_subject_public_key_info_round_trips() throws {
        for kind in [AsymmetricKind.rsa, .ec(.p384), .ed25519, .x25519] {
            let key = try AsymmetricKey.generate(kind, bits: 2048)
            let spki = try key.subjectPublicKeyInfo()
            let parsed = try AsymmetricKey.publicKey(subjectPublicKeyInfo: spki)
            XCTAssertEqual(parsed.kind, kind)
            XCTAssertTrue(parsed.hasSamePublicKey(as: key))
        }
    }

    /// The SubjectPublicKeyInfo built by hand is byte for byte what OpenSSL's encoder writes,
    /// for every kind that has the shortcut, private and public keys alike.
    func test_built_subject_public_key_info_equals_openssls_encoding() throws {
        var kinds: [AsymmetricKind] = [.rsa, .ed25519, .ed448, .x25519, .x448]
        kinds += Curve.allCases.map { AsymmetricKind.ec($0) }
        for kind in kinds {
            let key = try AsymmetricKey.generate(kind, bits: 2048)
            let publicOnly = try AsymmetricKey.publicKey(subjectPublicKeyInfo: try key.encodedSubjectPublicKeyInfo())
            for candidate in [key, publicOnly] {
                let built = try XCTUnwrap(try candidate.builtSubjectPublicKeyInfo(), "\(kind)")
                XCTAssertEqual(built, try candidate.encodedSubjectPublicKeyInfo(), "\(kind)")
                XCTAssertEqual(try candidate.subjectPublicKeyInfo(), built, "\(kind)")
                // Read again: the cached value.
                XCTAssertEqual(try candidate.subjectPublicKeyInfo(), built, "\(kind)")
            }
        }
        let dsa = try AsymmetricKey.generate(.dsa, domain: try AsymmetricKey.generateDomainParameters(.dsa, primeBits: 1024, subprimeBits: 160))
        XCTAssertNil(try dsa.builtSubjectPublicKeyInfo())
        XCTAssertEqual(try dsa.subjectPublicKeyInfo(), try dsa.encodedSubjectPublicKeyInfo())
    }
}

/// The hand-written reader of ECDSA DER signatures agrees with OpenSSL's parser on real
/// signatures (including short r or s) and refuses what is not DER of that shape.
final class ECDSASignatureFormatTests: XCTestCase {
    func test_hand_parsed_der_matches_openssl_on_real_signatures() throws {
        for curve in [Curve.p256, .p384, .p521] {
            let key = try AsymmetricKey.generate(.ec(curve), bits: curve.bits)
            for round in 0..<300 {
                let operation = try SignatureOperation(key: key, scheme: .ecdsa(digest: nil), signing: true)
                try [UInt8](repeating: UInt8(round & 0xFF), count: 32).withUnsafeBytes { try operation.update($0) }
                let raw = try operation.sign()
                XCTAssertEqual(raw.count, 2 * curve.coordinateLength)
                let der = try XCTUnwrap(SignatureOperation.rawToDER(raw, width: curve.coordinateLength))
                XCTAssertEqual(SignatureOperation.rawFromDER(der, width: curve.coordinateLength), raw)
                let verifier = try SignatureOperation(key: key, scheme: .ecdsa(digest: nil), signing: false)
                try [UInt8](repeating: UInt8(round & 0xFF), count: 32).withUnsafeBytes { try verifier.update($0) }
                XCTAssertTrue(try verifier.verify(raw))
            }
            // Short integers and high bits, made on purpose: leading zero bytes, a top bit set.
            let width = curve.coordinateLength
            for (r0, s0) in [(UInt8(0), UInt8(0x80)), (0x80, 0), (0x01, 0x7F)] {
                var crafted = [UInt8](repeating: 0x5A, count: 2 * width)
                crafted[0] = r0
                crafted[1] = 0
                crafted[width] = s0
                let der = try XCTUnwrap(SignatureOperation.rawToDER(crafted, width: width))
                XCTAssertEqual(SignatureOperation.rawFromDER(der, width: width), crafted)
            }
        }
        for bad: [UInt8] in [[], [0x30, 0x02, 0x02, 0x00], [0x31, 0x06, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01],
                             [0x30, 0x06, 0x02, 0x01, 0x81, 0x02, 0x01, 0x01], [0x30, 0x07, 0x02, 0x01, 0x01, 0x02, 0x01, 0x01]] {
            XCTAssertNil(SignatureOperation.rawFromDER(bad, width: 32), "\(bad)")
        }
    }
}
