import XCTest
import TPMTestSupport
import KeychainCrypto
@testable import KeychainTPM

/// Keys made in a swtpm: signatures OpenSSL verifies, key agreement equal to OpenSSL's, blobs
/// that load again on the same TPM and on no other.
final class TPMKeyTests: XCTestCase {
    private var tpm: SoftwareTPM?
    private let timeouts = TPMConnection.Timeouts(commandMilliseconds: 10_000, keyGenerationMilliseconds: 60_000)

    override func setUpWithError() throws { tpm = try SoftwareTPM() }
    override func tearDown() { tpm?.stop() }

    private func connect(_ tpm: SoftwareTPM? = nil) throws -> TPMConnection {
        guard let tpm = tpm ?? self.tpm else { throw SoftwareTPMFailure(description: "no swtpm") }
        return try TPMConnection(tcti: tpm.tcti, timeouts: timeouts)
    }

    private let authValue = SecureBytes([UInt8](repeating: 0xA5, count: 32))
    private let digest = try? Digest.hash(.sha256, Array("message".utf8))

    private func verifier(_ key: TPMPublicKey) throws -> AsymmetricKey {
        switch key {
        case .ec(let type, let point): return try AsymmetricKey.ec(type == .ecP256 ? .p256 : .p384, point: point, scalar: nil)
        case .rsa(let modulus, let exponent): return try AsymmetricKey.rsa(RSAComponents(modulus: modulus, publicExponent: exponent))
        }
    }

    private func verifies(_ signature: [UInt8], _ digest: [UInt8], key: AsymmetricKey, scheme: SignatureScheme) throws -> Bool {
        let operation = try SignatureOperation(key: key, scheme: scheme, signing: false)
        try digest.withUnsafeBytes { try operation.update($0) }
        return try operation.verify(signature)
    }

    func test_p256_signature_over_a_digest_verifies_with_openssl_raw_and_der() throws {
        let connection = try connect()
        let blob = try connection.createKey(.ecP256, authValue: authValue)
        XCTAssertEqual(blob.kind, .key)
        XCTAssertEqual(blob.keyType, .ecP256)
        let point = try XCTUnwrap(blob.publicKey?.ecPoint)
        XCTAssertEqual(point.count, 65)
        XCTAssertEqual(point.first, 0x04)
        let key = try connection.loadKey(blob, authValue: authValue)
        XCTAssertEqual(key.publicKey, blob.publicKey)
        let digest = try XCTUnwrap(digest)
        let publicKey = try verifier(key.publicKey)

        let raw = try key.sign(digest: digest)
        XCTAssertEqual(raw.count, 64)
        XCTAssertTrue(try verifies(raw, digest, key: publicKey, scheme: .ecdsa(digest: nil)))
        XCTAssertFalse(try verifies(raw, try Digest.hash(.sha256, Array("other".utf8)), key: publicKey, scheme: .ecdsa(digest: nil)))

        let der = try key.signDER(digest: digest)
        XCTAssertEqual(der.first, 0x30)
        let fromDER = try SignatureOperation.ecdsaRaw(fromDER: der, key: publicKey)
        XCTAssertTrue(try verifies(fromDER, digest, key: publicKey, scheme: .ecdsa(digest: nil)))
    }

    func test_ecdh_with_a_peer_equals_openssl_ecdh() throws {
        let connection = try connect()
        let key = try connection.loadKey(try connection.createKey(.ecP256, authValue: authValue), authValue: authValue)
        let peer = try AsymmetricKey.generate(.ec(.p256))
        let inTPM = try key.sharedSecret(peerPoint: try peer.ecPoint())
        let inSoftware = try peer.sharedSecret(with: try verifier(key.publicKey))
        XCTAssertEqual(inTPM.count, 32)
        XCTAssertTrue(inTPM.constantTimeEquals(inSoftware))
    }

    func test_ecdh_refuses_a_point_that_is_not_uncompressed_p256() throws {
        let connection = try connect()
        let key = try connection.loadKey(try connection.createKey(.ecP256, authValue: authValue), authValue: authValue)
        let point = try AsymmetricKey.generate(.ec(.p256)).ecPoint()
        XCTAssertThrowsError(try key.sharedSecret(peerPoint: Array(point.dropLast()))) {
            XCTAssertEqual(($0 as? TPMError)?.code, .invalidInput)
        }
        // The right length but not on the curve: the TPM says so (TPM2_RC_ECC_POINT, parameter 1).
        var offCurve = point
        offCurve[64] ^= 1
        XCTAssertThrowsError(try key.sharedSecret(peerPoint: offCurve)) {
            XCTAssertEqual(($0 as? TPMError)?.code.rawValue, 0x1E7)
        }
    }

    func test_wrong_authValue_is_bad_auth_and_the_key_still_works_after() throws {
        let connection = try connect()
        let blob = try connection.createKey(.ecP256, authValue: authValue)
        let wrong = try connection.loadKey(blob, authValue: SecureBytes([UInt8](repeating: 0x5A, count: 32)))
        let digest = try XCTUnwrap(digest)
        XCTAssertThrowsError(try wrong.sign(digest: digest)) {
            let error = $0 as? TPMError
            // TPM2_RC_BAD_AUTH for session 1 (0x9A2): noDA objects do not count toward lockout.
            XCTAssertEqual(error?.code.rawValue, 0x9A2, "\(String(describing: error))")
            XCTAssertEqual(error?.code.response, .badAuthorization)
        }
        XCTAssertThrowsError(try wrong.sharedSecret(peerPoint: try AsymmetricKey.generate(.ec(.p256)).ecPoint())) {
            XCTAssertEqual(($0 as? TPMError)?.code.rawValue, 0x9A2)
        }
        let right = try connection.loadKey(blob, authValue: authValue)
        XCTAssertEqual(try right.sign(digest: digest).count, 64)
    }

    func test_a_digest_of_no_hash_length_is_refused_before_the_tpm() throws {
        let connection = try connect()
        let key = try connection.loadKey(try connection.createKey(.ecP256, authValue: authValue), authValue: authValue)
        XCTAssertThrowsError(try key.sign(digest: [UInt8](repeating: 1, count: 31))) {
            XCTAssertEqual(($0 as? TPMError)?.code, .invalidInput)
        }
        XCTAssertThrowsError(try connection.createKey(.ecP256, authValue: SecureBytes(count: 33))) {
            XCTAssertEqual(($0 as? TPMError)?.code, .invalidInput)
        }
    }

    func test_blob_loads_in_a_new_connection_to_the_same_tpm() throws {
        let blob = try connect().createKey(.ecP256, authValue: authValue)
        let stored = blob.bytes
        let key = try connect().loadKey(try TPMBlob(bytes: stored), authValue: authValue)
        let digest = try XCTUnwrap(digest)
        XCTAssertTrue(try verifies(try key.sign(digest: digest), digest, key: try verifier(key.publicKey), scheme: .ecdsa(digest: nil)))
    }

    func test_blob_from_one_tpm_does_not_load_on_another() throws {
        let blob = try connect().createKey(.ecP256, authValue: authValue)
        let other = try SoftwareTPM()
        defer { other.stop() }
        let elsewhere = try connect(other)
        XCTAssertThrowsError(try elsewhere.loadKey(blob, authValue: authValue)) {
            let error = $0 as? TPMError
            // TPM2_RC_INTEGRITY + TPM2_RC_P + TPM2_RC_1 (0x1DF): parameter 1, inPrivate, fails
            // its integrity check under the other TPM's primary key.
            XCTAssertEqual(error?.code.rawValue, 0x1DF, "\(String(describing: error))")
            XCTAssertEqual(error?.code.response, .integrity)
        }
        // The connection is still good for its own keys.
        XCTAssertNoThrow(try elsewhere.loadKey(try elsewhere.createKey(.ecP256, authValue: authValue), authValue: authValue))
    }

    func test_malformed_blobs_are_refused() throws {
        let blob = try connect().createKey(.ecP256, authValue: authValue)
        let damaged: [[UInt8]] = [[], [1], [2] + blob.bytes.dropFirst(), Array(blob.bytes.dropLast()), blob.bytes + [0], [1, 9] + blob.bytes.dropFirst(2)]
        for bytes in damaged {
            XCTAssertThrowsError(try TPMBlob(bytes: bytes)) { XCTAssertEqual(($0 as? TPMError)?.code, .invalidInput) }
        }
        XCTAssertEqual(try TPMBlob(bytes: blob.bytes), blob)
    }

    func test_swtpm_offers_p384_and_rsa2048_and_they_sign() throws {
        let connection = try connect()
        XCTAssertEqual(try connection.supportedKeyTypes(), [.ecP256, .ecP384, .rsa2048])
        let digest384 = try Digest.hash(.sha384, Array("message".utf8))
        let p384 = try connection.loadKey(try connection.createKey(.ecP384, authValue: authValue), authValue: authValue)
        let signature384 = try p384.sign(digest: digest384)
        XCTAssertEqual(signature384.count, 96)
        XCTAssertTrue(try verifies(signature384, digest384, key: try verifier(p384.publicKey), scheme: .ecdsa(digest: nil)))
        let peer = try AsymmetricKey.generate(.ec(.p384))
        XCTAssertTrue(try p384.sharedSecret(peerPoint: try peer.ecPoint()).constantTimeEquals(try peer.sharedSecret(with: try verifier(p384.publicKey))))

        let digest = try XCTUnwrap(digest)
        let rsa = try connection.loadKey(try connection.createKey(.rsa2048, authValue: authValue), authValue: authValue)
        guard case .rsa(let modulus, let exponent) = rsa.publicKey else { return XCTFail("not RSA") }
        XCTAssertEqual(modulus.count, 256)
        XCTAssertEqual(exponent, [1, 0, 1])
        let signature = try rsa.sign(digest: digest)
        XCTAssertEqual(signature.count, 256)
        XCTAssertTrue(try verifies(signature, digest, key: try verifier(rsa.publicKey), scheme: .rsaPKCS1Prehashed(.sha256)))
        XCTAssertThrowsError(try rsa.signDER(digest: digest)) { XCTAssertEqual(($0 as? TPMError)?.code, .invalidInput) }
    }
}
