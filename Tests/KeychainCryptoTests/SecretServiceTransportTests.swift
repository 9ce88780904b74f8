import XCTest
@testable import KeychainCrypto

/// The Secret Service's dh-ietf1024-sha256-aes128-cbc-pkcs7 transfer against vectors computed
/// independently (Python: pow() over the RFC 2409 group, RFC 5869 HKDF, AES-CBC from the
/// cryptography package), including a shared value with a leading zero byte, which must be
/// left-padded to 128 bytes before HKDF (libsecret ≥ 0.18.6 and gnome-keyring do so).
final class SecretServiceTransportTests: XCTestCase {
    private func hex(_ text: String) -> [UInt8] { Hex.bytes(Array(text.utf8)) ?? [] }

    private func key(private x: [UInt8]) throws -> AsymmetricKey {
        try AsymmetricKey.finiteField(.dh, FiniteFieldComponents(prime: SecretServiceTransport.prime, base: [2], privateValue: x))
    }

    let clientPublic = "6750f347a1c8f704b702067cc558eb6b4b82bf17af7fcb07868f802b66d10534b62f9bea7e382cc86f6150f8c1599c7d16cf54482363fe9dc6fb018648a37ed4f829104e6c54414ff52d8f0bf73d56d4f070952361b0c6d1557483ff304822075edd301424a7ee3200cb8a13d53d013eec582fc3f5d19f12b999efe8dd82b833"

    func test_session_key_matches_the_independent_vector() throws {
        // Server private 0xfedcba9876543210, client public 2^0x0123456789abcdef mod p.
        let server = try key(private: hex("fedcba9876543210"))
        XCTAssertEqual(try server.finiteFieldComponents().publicValue.map { Hex.string($0) },
                       "22f4d41fa2d5cafa5f621454f9320317c5c394b85dbf1e381417f9499ad860b00e59cf32e887c7f695c736b73fd72406af2a6ebadc95b6570c84b747ed5ee3290f8d6b6238c26adc3a32368b757db1a677d40519c94a7440fd938c294e98aa165a0dd4931b961697c6cd5de182669a2cbc26b6f1322b3bd6720d65a83c7b817b")
        let sessionKey = try SecretServiceTransport.sessionKey(server, peerPublic: hex(clientPublic))
        XCTAssertEqual(Hex.string(sessionKey.bytes), "2abf6914ac05853f683f24ee915c0b2f")
        // A public value sent without leading zeros (as libsecret does) derives the same key.
        XCTAssertEqual(try SecretServiceTransport.sessionKey(server, peerPublic: [0, 0] + hex(clientPublic)).bytes, sessionKey.bytes)
        // The vector's ciphertexts: IV 00…0f.
        let iv = Array(0..<16).map(UInt8.init)
        XCTAssertEqual(try SecretServiceTransport.decrypt(hex("018924c135daf59ebe2cb2f01b4e6682"), iv: iv, key: sessionKey).bytes, Array("hunter2".utf8))
        XCTAssertEqual(try SecretServiceTransport.decrypt(hex("384060644403597c8bf5dba752b335ed03c644061b0785c21b8b6f091d821fdd"), iv: iv, key: sessionKey).bytes,
                       Array(repeating: UInt8(ascii: "a"), count: 16))
    }

    func test_a_shared_value_with_a_leading_zero_is_padded_before_hkdf() throws {
        let server = try key(private: [86])
        let sessionKey = try SecretServiceTransport.sessionKey(server, peerPublic: hex(clientPublic))
        XCTAssertEqual(Hex.string(sessionKey.bytes), "bc827e8f8cf62569ba20babfe49e55e7")
        XCTAssertNotEqual(Hex.string(sessionKey.bytes), "ef59504f9c5a37dfeeba6eb2b427fe8c", "the unpadded derivation")
    }

    func test_round_trip_and_refusals() throws {
        let client = try SecretServiceTransport.keyPair()
        let agreed = try SecretServiceTransport.agree(clientPublic: client.publicValue)
        let clientKey = try SecretServiceTransport.sessionKey(client.key, peerPublic: agreed.publicValue)
        XCTAssertEqual(clientKey.bytes, agreed.key.bytes)
        for secret in [[UInt8](), Array("x".utf8), [UInt8](repeating: 7, count: 16), [UInt8](repeating: 9, count: 65536)] {
            let sealed = try SecretServiceTransport.encrypt(secret, key: agreed.key)
            XCTAssertEqual(sealed.iv.count, 16)
            XCTAssertEqual(sealed.value.count, (secret.count / 16 + 1) * 16, "PKCS#7 always pads")
            XCTAssertEqual(try SecretServiceTransport.decrypt(sealed.value, iv: sealed.iv, key: clientKey).bytes, secret)
        }
        let p = SecretServiceTransport.prime
        var pMinusOne = p
        pMinusOne[pMinusOne.count - 1] -= 1
        for bad in [[UInt8](), [0], [1], pMinusOne, p, [1] + p] {
            XCTAssertThrowsError(try SecretServiceTransport.agree(clientPublic: bad), "public value \(Hex.string(bad.prefix(4)))…")
        }
        let sealed = try SecretServiceTransport.encrypt(Array("secret".utf8), key: agreed.key)
        XCTAssertThrowsError(try SecretServiceTransport.decrypt(sealed.value, iv: Array(sealed.iv.prefix(8)), key: agreed.key))
        XCTAssertThrowsError(try SecretServiceTransport.decrypt(Array(sealed.value.prefix(15)), iv: sealed.iv, key: agreed.key))
        XCTAssertThrowsError(try SecretServiceTransport.decrypt([], iv: sealed.iv, key: agreed.key))
    }
}
