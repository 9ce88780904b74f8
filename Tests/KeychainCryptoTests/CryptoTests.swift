import COpenSSL
import XCTest
@testable import KeychainCrypto

final class AESGCMTests: XCTestCase {
    private let key = SecureBytes(Array(repeating: 0x42, count: 32))

    func test_seal_then_open_returns_the_plaintext() throws {
        let plaintext: [UInt8] = Array("the secret value".utf8)
        let box = try plaintext.withUnsafeBytes { try AESGCM.seal($0, key: key, associatedData: [1, 2, 3]) }
        XCTAssertEqual(box.count, plaintext.count + AESGCM.overhead)
        XCTAssertEqual(try AESGCM.open(box, key: key, associatedData: [1, 2, 3]).bytes, plaintext)
    }

    func test_empty_plaintext_round_trips() throws {
        let box = try AESGCM.seal(SecureBytes(count: 0), key: key, associatedData: [])
        XCTAssertEqual(box.count, AESGCM.overhead)
        XCTAssertEqual(try AESGCM.open(box, key: key, associatedData: []).count, 0)
    }

    func test_every_flipped_byte_fails_authentication() throws {
        let box = try [UInt8](repeating: 7, count: 40).withUnsafeBytes { try AESGCM.seal($0, key: key, associatedData: [9]) }
        for index in box.indices {
            var altered = box
            altered[index] ^= 0x01
            XCTAssertThrowsError(try AESGCM.open(altered, key: key, associatedData: [9])) { error in
                XCTAssertEqual((error as? CryptoError)?.code, .authenticationFailed, "byte \(index)")
            }
        }
    }

    func test_other_associated_data_or_key_fails() throws {
        let box = try [UInt8](repeating: 1, count: 8).withUnsafeBytes { try AESGCM.seal($0, key: key, associatedData: [1]) }
        XCTAssertThrowsError(try AESGCM.open(box, key: key, associatedData: [2]))
        XCTAssertThrowsError(try AESGCM.open(box, key: SecureBytes(Array(repeating: 0x43, count: 32)), associatedData: [1]))
    }

    func test_truncated_box_fails_without_crashing() {
        for length in 0..<AESGCM.overhead {
            XCTAssertThrowsError(try AESGCM.open([UInt8](repeating: 0, count: length), key: key, associatedData: []))
        }
    }

    func test_nonces_differ_between_seals() throws {
        let a = try [UInt8]([1]).withUnsafeBytes { try AESGCM.seal($0, key: key, associatedData: []) }
        let b = try [UInt8]([1]).withUnsafeBytes { try AESGCM.seal($0, key: key, associatedData: []) }
        XCTAssertNotEqual(Array(a.prefix(12)), Array(b.prefix(12)))
    }
}

final class KeyDerivationTests: XCTestCase {
    private func hex(_ text: String) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(UInt8(text[index..<next], radix: 16) ?? 0)
            index = next
        }
        return bytes
    }

    /// RFC 7914 §12, first test vector.
    func test_scrypt_matches_rfc7914_vector() throws {
        let key = try KeyDerivation.scrypt(password: UnsafeRawBufferPointer(start: nil, count: 0), salt: [],
                                           parameters: ScryptParameters(logN: 4, blockSize: 1, parallelism: 1), length: 64)
        XCTAssertEqual(key.bytes, hex("77d6576238657b203b19ca42c18a0497f16b4844e3074ae8dfdffa3fede21442fcd0069ded0948f8326a753a0fc81f17e8d3e0fb2e0d3628cf35e20c38d18906"))
    }

    /// RFC 7914 §12, second test vector ("password", "NaCl", N=1024, r=8, p=16).
    func test_scrypt_matches_rfc7914_password_vector() throws {
        let key = try Array("password".utf8).withUnsafeBytes {
            try KeyDerivation.scrypt(password: $0, salt: Array("NaCl".utf8), parameters: ScryptParameters(logN: 10, blockSize: 8, parallelism: 16), length: 64)
        }
        XCTAssertEqual(key.bytes, hex("fdbabe1c9d3472007856e7190d01e9fe7c6ad7cbc8237830e77376634b3731622eaf30d92e22a3886ff109279d9830dac727afb94a83ee6d8360cbdfa2cc0640"))
    }

    func test_scrypt_refuses_parameters_beyond_the_limits() {
        XCTAssertThrowsError(try KeyDerivation.scrypt(password: UnsafeRawBufferPointer(start: nil, count: 0), salt: [],
                                                      parameters: ScryptParameters(logN: 40, blockSize: 8, parallelism: 1)))
    }

    /// RFC 5869 appendix A.1.
    func test_hkdf_matches_rfc5869_vector() throws {
        let okm = try KeyDerivation.hkdf(key: SecureBytes([UInt8](repeating: 0x0b, count: 22)), salt: hex("000102030405060708090a0b0c"),
                                         info: hex("f0f1f2f3f4f5f6f7f8f9"), length: 42)
        XCTAssertEqual(okm.bytes, hex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"))
    }

    func test_hmac_sha256_matches_rfc4231_case2() throws {
        let mac = try Array("Jefe".utf8).withUnsafeBytes { k in
            try Array("what do ya want for nothing?".utf8).withUnsafeBytes { d in try Digest.hmac(.sha256, key: k, data: d) }
        }
        XCTAssertEqual(mac, hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
    }

    /// The precomputed-state HMAC-SHA-256 of KeyedMAC and Digest.hmac: RFC 4231 cases 2 (short
    /// key), 6 (a key longer than the block, hashed first) and 1 (20-byte key); then RFC 2104's
    /// formula over OpenSSL's EVP SHA-256 on keys of 0–130 bytes and messages of 0–300 bytes; the
    /// SHA-512 (EVP_MAC) path against OpenSSL's HMAC().
    func test_keyed_mac_matches_rfc4231_and_openssl() throws {
        func keyed(_ key: [UInt8], _ data: [UInt8], _ algorithm: Digest.Algorithm = .sha256) throws -> [UInt8] {
            try data.withUnsafeBytes { try KeyedMAC(key: SecureBytes(key), algorithm: algorithm).mac($0) }
        }
        XCTAssertEqual(try keyed(Array("Jefe".utf8), Array("what do ya want for nothing?".utf8)),
                       hex("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"))
        XCTAssertEqual(try keyed([UInt8](repeating: 0xaa, count: 131), Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8)),
                       hex("60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"))
        XCTAssertEqual(try keyed([UInt8](repeating: 0x0b, count: 20), Array("Hi There".utf8)),
                       hex("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"))
        for keyLength in [0, 1, 32, 63, 64, 65, 130] {
            let key = (0..<keyLength).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 1) }
            let mac = try KeyedMAC(key: SecureBytes(key), algorithm: .sha256)
            for dataLength in [0, 1, 55, 56, 64, 119, 300] {
                let data = (0..<dataLength).map { UInt8(truncatingIfNeeded: $0 &* 13) }
                // H((K' ^ opad) || H((K' ^ ipad) || m)), K' the key (hashed when over 64 bytes) padded to 64.
                var block = keyLength > 64 ? try Digest.hash(.sha256, key) : key
                block += [UInt8](repeating: 0, count: 64 - block.count)
                let inner = try Digest.hash(.sha256, block.map { $0 ^ 0x36 } + data)
                let expected = try Digest.hash(.sha256, block.map { $0 ^ 0x5c } + inner)
                XCTAssertEqual(try data.withUnsafeBytes { try mac.mac($0) }, expected, "key \(keyLength), data \(dataLength)")
                let oneShot = try key.withUnsafeBytes { k in try data.withUnsafeBytes { try Digest.hmac(.sha256, key: k, data: $0) } }
                XCTAssertEqual(oneShot, expected, "key \(keyLength), data \(dataLength)")
            }
        }
        let data = Array("message".utf8)
        let expected = try [UInt8](repeating: 9, count: 16).withUnsafeBytes { k in try data.withUnsafeBytes { try Digest.hmac(.sha512, key: k, data: $0) } }
        XCTAssertEqual(try keyed([UInt8](repeating: 9, count: 16), data, .sha512), expected)
    }
}

final class SecureBytesTests: XCTestCase {
    func test_constant_time_comparison() {
        XCTAssertTrue(SecureBytes([1, 2, 3]).constantTimeEquals(SecureBytes([1, 2, 3])))
        XCTAssertFalse(SecureBytes([1, 2, 3]).constantTimeEquals(SecureBytes([1, 2, 4])))
        XCTAssertFalse(SecureBytes([1, 2, 3]).constantTimeEquals(SecureBytes([1, 2])))
    }

    func test_random_bytes_are_not_repeated() throws {
        XCTAssertNotEqual(try SecureBytes.random(count: 32).bytes, try SecureBytes.random(count: 32).bytes)
    }

    func test_wipe_zeroes_an_array() {
        var bytes: [UInt8] = [1, 2, 3]
        wipe(&bytes)
        XCTAssertEqual(bytes, [0, 0, 0])
    }
}

final class DigestAndIdentifierTests: XCTestCase {
    // FIPS 180 examples ("abc"), and the empty input.
    func test_sha1_and_sha256_give_the_standard_digests() throws {
        XCTAssertEqual(Hex.string(try Digest.hash(.sha1, Array("abc".utf8))), "a9993e364706816aba3e25717850c26c9cd0d89d")
        XCTAssertEqual(Hex.string(try Digest.hash(.sha1, [])), "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        XCTAssertEqual(Hex.string(try Digest.hash(.sha256, Array("abc".utf8))), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(Hex.string(try Digest.hash(.sha256, [])), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    // The direct SHA-1/SHA-256 path agrees with OpenSSL's EVP over lengths around the block size.
    func test_the_direct_hashes_agree_with_evp() throws {
        for length in [1, 55, 56, 63, 64, 65, 1000] {
            let data = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 31) }
            for (algorithm, name) in [(Digest.Algorithm.sha1, "SHA1"), (.sha256, "SHA2-256")] {
                var out = [UInt8](repeating: 0, count: 64)
                var size: UInt32 = 0
                let md = try XCTUnwrap(Fetched.digest(name))
                XCTAssertEqual(data.withUnsafeBytes { EVP_Digest($0.baseAddress, $0.count, &out, &size, md, nil) }, 1)
                XCTAssertEqual(try Digest.hash(algorithm, data), Array(out.prefix(Int(size))), "\(name), \(length) bytes")
            }
        }
    }

    // Identifiers come 4 KiB of random at a time: across many refills none repeats.
    func test_identifiers_do_not_repeat_across_refills() throws {
        var seen = Set<[UInt8]>()
        for _ in 0..<2000 { XCTAssertTrue(seen.insert(try Random.identifierBytes(16)).inserted) }
        XCTAssertEqual(try Random.identifierBytes(IdentifierPool.largest + 1).count, IdentifierPool.largest + 1)
    }

    // A forked child must not hand out the parent's next identifier (the child throws away the
    // rest of the parent's buffer); without the fork handler both would take the same bytes.
    func test_a_forked_child_draws_identifiers_of_its_own() throws {
        _ = try Random.identifierBytes(16)  // the pool holds bytes the child inherits
        var fds: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&fds), 0)
        let child = fork()
        if child == 0 {
            let bytes = (try? Random.identifierBytes(16)) ?? []
            _ = bytes.withUnsafeBytes { write(fds[1], $0.baseAddress, $0.count) }
            _exit(0)
        }
        XCTAssertGreaterThan(child, 0)
        close(fds[1])
        let parent = try Random.identifierBytes(16)
        var fromChild = [UInt8](repeating: 0, count: 16)
        let count = fromChild.withUnsafeMutableBytes { read(fds[0], $0.baseAddress, 16) }
        close(fds[0])
        var status: Int32 = 0
        waitpid(child, &status, 0)
        XCTAssertEqual(count, 16)
        XCTAssertNotEqual(fromChild, parent)
    }
}

final class HexTests: XCTestCase {
    func test_bytes_become_two_lower_case_digits_each() {
        XCTAssertEqual(Hex.string([0x00, 0x09, 0x0A, 0xAB, 0xFF]), "00090aabff")
        XCTAssertEqual(Hex.digits([]), [])
    }

    func test_digits_of_either_case_become_bytes() {
        XCTAssertEqual(Hex.bytes(Array("00090AaBff".utf8)), [0x00, 0x09, 0x0A, 0xAB, 0xFF])
        XCTAssertEqual(Hex.bytes(Array("".utf8)), [])
        XCTAssertEqual(Hex.bytes("0a1b".utf8.dropFirst(2)), [0x1B])
    }

    func test_odd_counts_and_other_bytes_are_refused() {
        XCTAssertNil(Hex.bytes(Array("abc".utf8)))
        XCTAssertNil(Hex.bytes(Array("0g".utf8)))
        XCTAssertNil(Hex.bytes(Array("0:".utf8)))
        XCTAssertNil(Hex.bytes(Array(" 0".utf8)))
        for byte in UInt8.min...UInt8.max {
            let isDigit = (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
            XCTAssertEqual(Hex.value(byte) != nil, isDigit, "byte \(byte)")
        }
    }
}

final class OpenSSLSecureHeapTests: XCTestCase {
    func test_settings_read_as_byte_counts_or_off() {
        XCTAssertEqual(OpenSSLSecureHeap.parseSize("1M"), 1 << 20)
        XCTAssertEqual(OpenSSLSecureHeap.parseSize("64k"), 64 << 10)
        XCTAssertEqual(OpenSSLSecureHeap.parseSize("65536"), 65536)
        XCTAssertEqual(OpenSSLSecureHeap.parseSize("off"), 0)
        XCTAssertEqual(OpenSSLSecureHeap.parseSize("0"), 0)
        for bad in ["", "M", "-1K", "1G", "1MiB", "65M", "lots"] {
            XCTAssertNil(OpenSSLSecureHeap.parseSize(bad), bad)
        }
    }

    func test_sizes_become_powers_of_two_that_openssl_accepts() {
        XCTAssertEqual(OpenSSLSecureHeap.roundedSize(0), 0)
        XCTAssertEqual(OpenSSLSecureHeap.roundedSize(1), 16 << 10)
        XCTAssertEqual(OpenSSLSecureHeap.roundedSize(16 << 10), 16 << 10)
        XCTAssertEqual(OpenSSLSecureHeap.roundedSize((1 << 20) + 1), 2 << 20)
        XCTAssertEqual(OpenSSLSecureHeap.roundedSize(64 << 20), 64 << 20)
    }

    func test_a_private_key_lives_in_the_secure_heap() throws {
        // This test process: the first private key given to OpenSSL makes the heap.
        let key = try AsymmetricKey.generate(.ec(.p256))
        XCTAssertTrue(OpenSSLSecureHeap.isAvailable)
        XCTAssertGreaterThan(CRYPTO_secure_used(), 0)
        _ = key
    }
}
