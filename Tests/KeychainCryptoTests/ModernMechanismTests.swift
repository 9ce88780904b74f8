import XCTest
@testable import KeychainCrypto

/// Known answers for the PKCS#11 3.0 mechanisms' building blocks, from the RFCs or computed
/// by PyCryptodome (its own AES and EdDSA code, not OpenSSL or libgcrypt).
final class ModernMechanismTests: XCTestCase {
    private func hex(_ text: String) -> [UInt8] { Hex.bytes(Array(text.utf8)) ?? [] }

    func test_hkdf_extract_and_expand_match_rfc5869_case1() throws {
        let prk = try HKDF.extract(.sha256, salt: hex("000102030405060708090a0b0c"), inputKey: SecureBytes([UInt8](repeating: 0x0b, count: 22)))
        XCTAssertEqual(prk.bytes, hex("077709362c2e32df0ddc3f0dc47bba6390b6c73bb50f9c3122ec844ad7c2b3e5"))
        let okm = try HKDF.expand(.sha256, pseudorandomKey: prk, info: hex("f0f1f2f3f4f5f6f7f8f9"), length: 42)
        XCTAssertEqual(okm.bytes, hex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"))
        XCTAssertThrowsError(try HKDF.expand(.sha256, pseudorandomKey: prk, info: [], length: 255 * 32 + 1))
    }

    func test_pbkdf2_hmac_sha1_matches_rfc6070() throws {
        let vectors: [(Int, String)] = [(1, "0c60c80f961f0e71f3a9b524af6012062fe037a6"), (2, "ea6c014dc72d6f8ccd1ed92ace1d41f0d8de8957"),
                                        (4096, "4b007901b765489abead49d926f721d065a429c1")]
        for (iterations, expected) in vectors {
            let key = try Array("password".utf8).withUnsafeBytes { try PBKDF2.derive(.sha1, password: $0, salt: Array("salt".utf8), iterations: iterations, length: 20) }
            XCTAssertEqual(key.bytes, hex(expected), "c = \(iterations)")
        }
        XCTAssertThrowsError(try [UInt8]().withUnsafeBytes { try PBKDF2.derive(.sha256, password: $0, salt: [], iterations: 0, length: 16) })
    }

    /// CBC-CS1 against PyCryptodome's AES-CBC and AES-ECB composed by hand (37, 32 and 17 bytes;
    /// 32 is plain CBC in CS1).
    func test_cts_is_cbc_cs1() throws {
        let key = SecureBytes(Array(0..<16)), iv = Array<UInt8>(16..<32), plain = Array<UInt8>(100..<137)
        let expected = ["bbedd27aedb27c515396335ea59cdcb7a0441da14b284999d085d3b03be155ab650eb0db20",
                        "bbedd27aedb27c515396335ea59cdcb7a0441da14b84c8261d8a99271088166f", "bbf0cee3e8c2768630c9807f7a7d5215fc"]
        for (count, hexText) in zip([37, 32, 17], expected) {
            let input = Array(plain.prefix(count))
            let encryptor = try SymmetricCipher(mode: .cts, key: key, iv: iv, encrypting: true)
            let sealed = try input.withUnsafeBytes { try encryptor.update($0) } + encryptor.finish()
            XCTAssertEqual(sealed, hex(hexText), "\(count) bytes")
            let decryptor = try SymmetricCipher(mode: .cts, key: key, iv: iv, encrypting: false)
            XCTAssertEqual(try sealed.withUnsafeBytes { try decryptor.update($0) } + decryptor.finish(), input)
        }
        let short = try SymmetricCipher(mode: .cts, key: key, iv: iv, encrypting: true)
        XCTAssertThrowsError(try [UInt8](repeating: 1, count: 15).withUnsafeBytes { try short.update($0) } + short.finish())
    }

    /// RFC 8032 §7.3: Ed25519ph over "abc" (libgcrypt path), verified and refused when changed.
    func test_ed25519ph_matches_rfc8032() throws {
        let key = try AsymmetricKey.raw(.ed25519, privateKey: hex("833fe62409237b9d62ec77587520911e9a759cec1d19755b7da901b96dca3d42"), publicKey: nil)
        let signature = try EdDSAVariant.sign(Array("abc".utf8), key: key, prehash: true, context: [])
        XCTAssertEqual(signature, hex("98a70222f0b8121aa9d30f813d683f809e462b469c7ff87639499bb94e6dae41" +
                                      "31f85042463c2a355a2003d062adf5aaa10b8c61e636062aaad11c2a26083406"))
        XCTAssertTrue(try EdDSAVariant.verify(signature, message: Array("abc".utf8), key: key, prehash: true, context: []))
        XCTAssertFalse(try EdDSAVariant.verify(signature, message: Array("abd".utf8), key: key, prehash: true, context: []))
        XCTAssertFalse(try EdDSAVariant.verify(signature, message: Array("abc".utf8), key: key, prehash: false, context: [1]))
    }

    /// SP 800-108 counter mode, HMAC-SHA-256, [i]₃₂ ‖ label ‖ 0x00 ‖ context ‖ [L]₃₂ — the layout
    /// OpenSSL's KBKDF uses, computed here with EVP_KDF as the independent side.
    func test_sp800108_counter_matches_openssl_kbkdf() throws {
        let key = SecureBytes(Array(repeating: 0x11, count: 32))
        let fields: [SP800108.Field] = [.iteration(.init(bits: 32, littleEndian: false)), .bytes(Array("label".utf8) + [0] + Array("context".utf8)),
                                        .length(.sumOfKeys, .init(bits: 32, littleEndian: false))]
        let ours = try SP800108.derive(.counter, prf: .hmac(.sha256), key: key, fields: fields, keyLengths: [42])
        XCTAssertEqual(ours.first?.bytes, try kbkdf(key: key.bytes, label: Array("label".utf8), context: Array("context".utf8), length: 42))
    }

    private func kbkdf(key: [UInt8], label: [UInt8], context: [UInt8], length: Int) throws -> [UInt8] {
        let command = Process()
        command.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        command.arguments = ["kdf", "-keylen", "\(length)", "-kdfopt", "mac:HMAC", "-kdfopt", "digest:SHA2-256", "-kdfopt", "hexkey:\(Hex.string(key))",
                             "-kdfopt", "hexsalt:\(Hex.string(label))", "-kdfopt", "hexinfo:\(Hex.string(context))", "-binary", "KBKDF"]
        let pipe = Pipe()
        command.standardOutput = pipe
        try command.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        command.waitUntilExit()
        return Array(output)
    }
}
