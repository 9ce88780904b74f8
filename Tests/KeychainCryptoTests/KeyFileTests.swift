import COpenSSL
import Foundation
import XCTest
@testable import KeychainCrypto

/// Key and certificate files made by the real openssl and ssh-keygen, decoded by KeyFile; and
/// KeyFile's own output read back by those tools.
final class KeyFileTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        for tool in ["/usr/bin/openssl", "/usr/bin/ssh-keygen"] where !FileManager.default.isExecutableFile(atPath: tool) {
            throw XCTSkip("\(tool) is not installed")
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("keyfile-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        if let directory { try? FileManager.default.removeItem(at: directory) }
    }

    // MARK: helpers

    private func path(_ name: String) -> String { directory.appendingPathComponent(name).path }

    @discardableResult
    private func run(_ tool: String, _ arguments: [String], allowFailure: Bool = false) throws -> (status: Int32, output: [UInt8], errors: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/" + tool)
        process.arguments = arguments
        process.currentDirectoryURL = directory
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        let errorData = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let result = (process.terminationStatus, [UInt8](outputData), String(decoding: errorData, as: UTF8.self))
        if !allowFailure, result.0 != 0 {
            XCTFail("\(tool) \(arguments.joined(separator: " ")) exited \(result.0): \(result.2)")
            throw CryptoError(.library, tool)
        }
        return result
    }

    private func read(_ name: String) throws -> [UInt8] { [UInt8](try Data(contentsOf: directory.appendingPathComponent(name))) }
    private func write(_ name: String, _ bytes: [UInt8]) throws { try Data(bytes).write(to: directory.appendingPathComponent(name)) }
    private func write(_ name: String, _ text: String) throws { try write(name, Array(text.utf8)) }

    /// A private key made by openssl genpkey as PKCS#8 PEM; returns its SPKI DER from openssl pkey -pubout.
    @discardableResult
    private func generate(_ name: String, _ algorithm: String) throws -> [UInt8] {
        var arguments = ["genpkey", "-out", name]
        switch algorithm {
        case "rsa": arguments += ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]
        case "ed25519": arguments += ["-algorithm", "ED25519"]
        default: arguments += ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:\(algorithm)"]
        }
        try run("openssl", arguments)
        return try spki(ofKey: name)
    }

    private func spki(ofKey name: String, passphrase: String? = nil) throws -> [UInt8] {
        var arguments = ["pkey", "-in", name, "-pubout", "-outform", "DER"]
        if let passphrase { arguments += ["-passin", "pass:" + passphrase] }
        return try run("openssl", arguments).output
    }

    @discardableResult
    private func certificate(_ name: String, key: String, subject: String) throws -> [UInt8] {
        try run("openssl", ["req", "-x509", "-new", "-key", key, "-subj", "/CN=\(subject)", "-days", "2", "-out", name])
        return try run("openssl", ["x509", "-in", name, "-outform", "DER"]).output
    }

    private func decode(_ name: String, passphrase: String? = nil) throws -> KeyFileContents {
        try KeyFile.decode(try read(name), passphrase: passphrase.map { text in { SecureBytes(Array(text.utf8)) } })
    }

    private func decodeFailure(_ bytes: [UInt8], passphrase: String? = nil, file: StaticString = #filePath, line: UInt = #line) -> KeyFile.Failure? {
        do {
            _ = try KeyFile.decode(bytes, passphrase: passphrase.map { text in { SecureBytes(Array(text.utf8)) } })
            XCTFail("decoded", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    private func isMalformed(_ failure: KeyFile.Failure?) -> Bool {
        if case .malformed = failure { return true }
        return false
    }

    private static let curves = ["P-256", "P-384", "P-521"]

    // MARK: PKCS#8, PKCS#1, SEC1

    func test_pkcs8_keys_in_pem_and_der_decode_to_openssls_public_key() throws {
        for algorithm in ["rsa", "ed25519"] + Self.curves {
            let expected = try generate("key.pem", algorithm)
            let pem = try decode("key.pem")
            XCTAssertEqual(pem.format, .pkcs8, algorithm)
            XCTAssertEqual(try pem.privateKey?.subjectPublicKeyInfo(), expected, algorithm)
            XCTAssertEqual(pem.privateKey?.isPrivate, true)
            XCTAssertNil(pem.publicKey)
            // (openssl pkey -outform DER writes the type-specific structure, PKCS#1 or SEC1.)
            try run("openssl", ["pkcs8", "-topk8", "-nocrypt", "-in", "key.pem", "-outform", "DER", "-out", "key.der"])
            let der = try decode("key.der")
            XCTAssertEqual(der.format, .pkcs8, algorithm)
            XCTAssertEqual(try der.privateKey?.subjectPublicKeyInfo(), expected, algorithm)
        }
    }

    func test_pkcs1_and_sec1_keys_in_pem_and_der_decode() throws {
        let rsa = try generate("rsa.pem", "rsa")
        try run("openssl", ["rsa", "-in", "rsa.pem", "-traditional", "-out", "pkcs1.pem"])
        try run("openssl", ["rsa", "-in", "rsa.pem", "-traditional", "-outform", "DER", "-out", "pkcs1.der"])
        XCTAssertTrue(String(decoding: try read("pkcs1.pem"), as: UTF8.self).hasPrefix("-----BEGIN RSA PRIVATE KEY-----"))
        for name in ["pkcs1.pem", "pkcs1.der"] {
            let contents = try decode(name)
            XCTAssertEqual(contents.format, .pkcs1, name)
            XCTAssertEqual(try contents.privateKey?.subjectPublicKeyInfo(), rsa, name)
        }
        for curve in Self.curves {
            let ec = try generate("ec.pem", curve)
            try run("openssl", ["ec", "-in", "ec.pem", "-out", "sec1.pem"])
            try run("openssl", ["ec", "-in", "ec.pem", "-outform", "DER", "-out", "sec1.der"])
            for name in ["sec1.pem", "sec1.der"] {
                let contents = try decode(name)
                XCTAssertEqual(contents.format, .sec1, "\(curve) \(name)")
                XCTAssertEqual(try contents.privateKey?.subjectPublicKeyInfo(), ec, "\(curve) \(name)")
            }
        }
    }

    func test_ec_parameters_block_before_a_sec1_key_is_skipped() throws {
        try run("openssl", ["ecparam", "-name", "prime256v1", "-genkey", "-out", "ecparam.pem"])
        XCTAssertTrue(String(decoding: try read("ecparam.pem"), as: UTF8.self).contains("EC PARAMETERS"))
        let contents = try decode("ecparam.pem")
        XCTAssertEqual(contents.format, .sec1)
        XCTAssertEqual(try contents.privateKey?.subjectPublicKeyInfo(), try spki(ofKey: "ecparam.pem"))
    }

    func test_unsupported_key_algorithms_are_reported_as_unsupported() throws {
        try run("openssl", ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:brainpoolP320r1", "-out", "bp320.pem"])
        guard case .unsupported(let reason) = decodeFailure(try read("bp320.pem")) else { return XCTFail("brainpoolP320r1 accepted") }
        XCTAssertTrue(reason.contains("brainpoolP320r1"), reason)
    }

    // MARK: encrypted keys

    func test_encrypted_pkcs8_decodes_with_its_passphrase() throws {
        for algorithm in ["rsa", "P-384", "ed25519"] {
            let expected = try generate("key.pem", algorithm)
            try run("openssl", ["pkey", "-in", "key.pem", "-aes256", "-passout", "pass:correct horse", "-out", "encrypted.pem"])
            try run("openssl", ["pkcs8", "-topk8", "-in", "key.pem", "-v2", "aes-128-cbc", "-outform", "DER", "-passout", "pass:correct horse",
                                "-out", "encrypted.der"])
            for name in ["encrypted.pem", "encrypted.der"] {
                let contents = try decode(name, passphrase: "correct horse")
                XCTAssertEqual(contents.format, .encryptedPKCS8, name)
                XCTAssertEqual(try contents.privateKey?.subjectPublicKeyInfo(), expected, "\(algorithm) \(name)")
            }
        }
    }

    func test_encrypted_pkcs8_with_scrypt_decodes() throws {
        let expected = try generate("key.pem", "P-256")
        try run("openssl", ["pkcs8", "-topk8", "-in", "key.pem", "-scrypt", "-passout", "pass:secret", "-out", "scrypt.pem"])
        XCTAssertEqual(try decode("scrypt.pem", passphrase: "secret").privateKey?.subjectPublicKeyInfo(), expected)
    }

    func test_encrypted_pkcs8_with_wrong_passphrase_is_refused() throws {
        try generate("key.pem", "P-256")
        try run("openssl", ["pkey", "-in", "key.pem", "-aes256", "-passout", "pass:right", "-out", "encrypted.pem"])
        XCTAssertEqual(decodeFailure(try read("encrypted.pem"), passphrase: "wrong"), .passphraseIncorrect)
    }

    func test_encrypted_pkcs8_without_a_passphrase_requires_one() throws {
        try generate("key.pem", "ed25519")
        try run("openssl", ["pkey", "-in", "key.pem", "-aes256", "-passout", "pass:right", "-out", "encrypted.pem"])
        XCTAssertEqual(decodeFailure(try read("encrypted.pem")), .passphraseRequired)
        // A passphrase source that gives up counts as no passphrase.
        struct Cancelled: Error {}
        XCTAssertThrowsError(try KeyFile.decode(try read("encrypted.pem"), passphrase: { throw Cancelled() })) {
            XCTAssertEqual($0 as? KeyFile.Failure, .passphraseRequired)
        }
    }

    func test_passphrase_is_not_asked_for_unencrypted_files() throws {
        try generate("key.pem", "P-256")
        var asked = 0
        let contents = try KeyFile.decode(try read("key.pem"), passphrase: {
            asked += 1
            return SecureBytes(Array("unused".utf8))
        })
        XCTAssertEqual(contents.format, .pkcs8)
        XCTAssertEqual(asked, 0)
    }

    func test_legacy_encrypted_pem_decodes_and_refuses_a_wrong_passphrase() throws {
        let rsa = try generate("rsa.pem", "rsa")
        try run("openssl", ["rsa", "-in", "rsa.pem", "-traditional", "-aes256", "-passout", "pass:legacy", "-out", "legacy-rsa.pem"])
        XCTAssertTrue(String(decoding: try read("legacy-rsa.pem"), as: UTF8.self).contains("Proc-Type: 4,ENCRYPTED"))
        let ec = try generate("ec.pem", "P-256")
        try run("openssl", ["ec", "-in", "ec.pem", "-des3", "-passout", "pass:legacy", "-out", "legacy-ec.pem"])
        for (name, expected, format) in [("legacy-rsa.pem", rsa, KeyFileFormat.pkcs1), ("legacy-ec.pem", ec, .sec1)] {
            let contents = try decode(name, passphrase: "legacy")
            XCTAssertEqual(contents.format, format)
            XCTAssertEqual(try contents.privateKey?.subjectPublicKeyInfo(), expected, name)
            XCTAssertEqual(decodeFailure(try read(name), passphrase: "not it"), .passphraseIncorrect, name)
            XCTAssertEqual(decodeFailure(try read(name)), .passphraseRequired, name)
        }
    }

    // MARK: OpenSSH

    func test_openssh_private_keys_decode_with_their_comment() throws {
        for (type, bits) in [("ed25519", ""), ("ecdsa", "256"), ("ecdsa", "384"), ("ecdsa", "521"), ("rsa", "2048")] {
            let name = "id_\(type)\(bits)"
            try run("ssh-keygen", ["-q", "-t", type] + (bits.isEmpty ? [] : ["-b", bits]) + ["-N", "", "-C", "me@host", "-f", name])
            let contents = try decode(name)
            XCTAssertEqual(contents.format, .openSSH, name)
            XCTAssertEqual(contents.name, "me@host", name)
            let key = try XCTUnwrap(contents.privateKey, name)
            XCTAssertTrue(key.isPrivate)
            // The public half as ssh-keygen exports it (SPKI PEM; it has no such export for Ed25519).
            if type != "ed25519" {
                try write("\(name).spki", try run("ssh-keygen", ["-e", "-m", "PKCS8", "-f", "\(name).pub"]).output)
                let exported = try decode("\(name).spki")
                XCTAssertEqual(exported.format, .publicKeyPEM)
                XCTAssertEqual(try key.subjectPublicKeyInfo(), try exported.publicKey?.subjectPublicKeyInfo(), name)
            }
            // Our authorized_keys line is ssh-keygen's.
            let derived = String(decoding: try run("ssh-keygen", ["-y", "-f", name]).output, as: UTF8.self)
            let ours = try KeyFile.openSSHPublicKey(key, comment: contents.name)
            XCTAssertEqual(ours.split(separator: " ").prefix(2), derived.split(separator: " ").prefix(2), name)
            XCTAssertEqual(ours + "\n", String(decoding: try read("\(name).pub"), as: UTF8.self), name)
            // RSA keys also sign: the CRT parts computed from d, p and q are right.
            try key.validate()
        }
    }

    // MARK: encrypted OpenSSH keys

    /// The openssh-key-v1 bytes inside an OpenSSH PEM file.
    private func openSSHBinary(_ name: String) throws -> [UInt8] {
        let lines = String(decoding: try read(name), as: UTF8.self).split(separator: "\n")
        return try XCTUnwrap(Base64.decode(lines.dropFirst().dropLast().joined().utf8))
    }

    /// Offset of the bcrypt rounds (uint32) and the salt length in an encrypted openssh-key-v1 file.
    private func bcryptRoundsOffset(_ binary: [UInt8]) -> (offset: Int, saltLength: Int) {
        func length(at offset: Int) -> Int { binary[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) } }
        var offset = OpenSSHKey.magic.count
        for _ in 0..<2 { offset += 4 + length(at: offset) }  // cipher, kdf
        let saltLength = length(at: offset + 4)
        return (offset + 8 + saltLength, saltLength)
    }

    private func pem(_ binary: [UInt8]) -> [UInt8] { Array(KeyFile.pem("OPENSSH PRIVATE KEY", binary).utf8) }

    private func hex(_ text: String) -> [UInt8] {
        stride(from: 0, to: text.count, by: 2).map { UInt8(text.dropFirst($0).prefix(2), radix: 16) ?? 0 }
    }

    func test_bcrypt_pbkdf_matches_openbsds_regress_vectors() throws {
        // OpenBSD's bcrypt_pbkdf regress vectors, as RustCrypto's bcrypt-pbkdf tests carry them: (password, salt, rounds, output).
        let vectors: [(String, [UInt8], Int, String)] = [
            ("password", Array("salt".utf8), 4, "5bbf0cc293587f1c3635555c27796598d47e579071bf427e9d8fbe842aba34d9"),
            ("password", [0], 4, "c12b566235eee04c212598970a579a67"),
            ("\0", Array("salt".utf8), 4, "6051be18c2f4f82cbf0efee5471b4bb9"),
            ("password\0", Array("salt\0".utf8), 4, "7410e44cf4fa07bfaac8a928b1727fac001375e7bf7384370f48efd121743050"),
            ("pass\0wor", Array("sa\0l".utf8), 4, "c2bffd9db38f6569efef4372f4de83c0"),
            ("pass\0word", Array("sa\0lt".utf8), 4, "4ba4ac3925c0e8d7f0cdb6bb1684a56f"),
            // 64 bytes: two blocks, their bytes interleaved.
            ("password", Array("salt".utf8), 8,
             "e1367ec5151a33faac4cc1c144cd23fa15d5548493ecc99b9b5d9c0d3b27bec76227ea66088b849b20ab7aa478010246e74bba51723fefa9f9474d6508845e8d"),
            ("password", Array("salt".utf8), 42, "833cf0dcf56db65608e8f0dc0ce882bd"),
            ("Lorem ipsum dolor sit amet, consectetur adipisicing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. "
                + "Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. "
                + "Duis aute irure dolor in reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla pariatur. "
                + "Excepteur sint occaecat cupidatat non proident, sunt in culpa qui officia deserunt mollit anim id est laborum.",
             Array("salis\0".utf8), 8, "10978b07253df57f71a162eb0e8ad30a"),
        ]
        for (password, salt, rounds, output) in vectors {
            let expected = hex(output)
            let key = try Array(password.utf8).withUnsafeBytes { password in
                try salt.withUnsafeBytes { try BcryptPBKDF.derive(passphrase: password, salt: $0, rounds: rounds, length: expected.count) }
            }
            XCTAssertEqual(key.bytes, expected, "\(password.prefix(12)) \(rounds)")
        }
    }

    func test_bcrypt_pbkdf_refuses_what_the_reference_refuses() throws {
        let password = Array("password".utf8), salt = Array("salt".utf8), empty: [UInt8] = []
        for (password, salt, rounds, length) in [(password, salt, 0, 32), (empty, salt, 1, 32), (password, empty, 1, 32),
                                                 (password, salt, 1, 0), (password, salt, 1, 1025)] {
            XCTAssertThrowsError(try password.withUnsafeBytes { password in
                try salt.withUnsafeBytes { try BcryptPBKDF.derive(passphrase: password, salt: $0, rounds: rounds, length: length) }
            }) { XCTAssertEqual($0 as? CryptoError, CryptoError(.invalidInput, "")) }
        }
    }

    func test_encrypted_openssh_keys_decode_with_their_passphrase() throws {
        // nil: ssh-keygen's default cipher, aes256-ctr.
        let cases: [(String, String, String?)] = [
            ("ed25519", "", nil), ("ecdsa", "384", nil), ("rsa", "2048", nil),
            ("ecdsa", "256", "aes256-gcm@openssh.com"), ("ed25519", "", "aes128-ctr"), ("ecdsa", "521", "aes192-ctr"),
            ("ed25519", "", "aes128-gcm@openssh.com"), ("ecdsa", "256", "aes256-cbc"), ("ed25519", "", "aes128-cbc"),
            ("ed25519", "", "3des-cbc"),
        ]
        for (type, bits, cipher) in cases {
            let name = "id_\(type)\(bits)_\(cipher ?? "default")"
            try run("ssh-keygen", ["-q", "-t", type] + (bits.isEmpty ? [] : ["-b", bits]) + (cipher.map { ["-Z", $0] } ?? [])
                    + ["-N", "secret-pass", "-C", "me@host", "-f", name])
            // The file is encrypted with the cipher the case names.
            let header = String(decoding: try openSSHBinary(name).prefix(64), as: UTF8.self)
            XCTAssertTrue(header.contains(cipher ?? "aes256-ctr") && header.contains("bcrypt"), name)
            let contents = try decode(name, passphrase: "secret-pass")
            XCTAssertEqual(contents.format, .openSSH, name)
            XCTAssertEqual(contents.name, "me@host", name)
            let key = try XCTUnwrap(contents.privateKey, name)
            XCTAssertTrue(key.isPrivate, name)
            let derived = String(decoding: try run("ssh-keygen", ["-y", "-P", "secret-pass", "-f", name]).output, as: UTF8.self)
            XCTAssertEqual(try KeyFile.openSSHPublicKey(key, comment: nil), derived.split(separator: " ").prefix(2).joined(separator: " "), name)
            try key.validate()
        }
    }

    func test_encrypted_openssh_key_with_a_wrong_or_no_passphrase_is_refused() throws {
        for cipher in ["aes256-ctr", "aes256-gcm@openssh.com", "aes128-cbc"] {
            try run("ssh-keygen", ["-q", "-t", "ecdsa", "-Z", cipher, "-N", "secret-pass", "-f", cipher])
            let file = try read(cipher)
            XCTAssertEqual(decodeFailure(file, passphrase: "secret-pasS"), .passphraseIncorrect, cipher)
            XCTAssertEqual(decodeFailure(file, passphrase: ""), .passphraseIncorrect, cipher)
            XCTAssertEqual(decodeFailure(file), .passphraseRequired, cipher)
            // The binary form (no PEM armour) too.
            XCTAssertEqual(decodeFailure(try openSSHBinary(cipher), passphrase: "wrong"), .passphraseIncorrect, cipher)
        }
    }

    func test_chacha20_poly1305_openssh_key_is_unsupported_without_asking() throws {
        try run("ssh-keygen", ["-q", "-t", "ed25519", "-Z", "chacha20-poly1305@openssh.com", "-N", "secret-pass", "-f", "id_chacha"])
        var asked = 0
        XCTAssertThrowsError(try KeyFile.decode(try read("id_chacha"), passphrase: {
            asked += 1
            return SecureBytes(Array("secret-pass".utf8))
        })) { error in
            guard case .unsupported(let reason) = error as? KeyFile.Failure else { return XCTFail("\(error)") }
            XCTAssertTrue(reason.contains("chacha20-poly1305@openssh.com") && reason.hasSuffix("re-encrypt it with ssh-keygen -p -Z aes256-ctr"), reason)
        }
        XCTAssertEqual(asked, 0)
    }

    func test_openssh_bcrypt_rounds_outside_1_to_1024_are_refused_before_any_derivation() throws {
        // ssh-keygen -a sets the rounds: 1 is read; 1024, the other bound, is accepted (not run: 11 s in a debug build).
        try run("ssh-keygen", ["-q", "-t", "ed25519", "-a", "1", "-N", "ab", "-f", "id_1"])
        XCTAssertNotNil(try decode("id_1", passphrase: "ab").privateKey)
        let options: [UInt8] = [0, 0, 0, 16] + [UInt8](repeating: 7, count: 16) + [0, 0, 4, 0]
        let encryption = try options.withUnsafeBytes { try OpenSSHKey.Encryption(cipher: "aes256-ctr", kdf: "bcrypt", options: $0) }
        XCTAssertEqual(encryption?.rounds, 1024)
        let binary = try openSSHBinary("id_1")
        let (offset, saltLength) = bcryptRoundsOffset(binary)
        XCTAssertEqual(saltLength, 16)
        XCTAssertEqual(Array(binary[offset..<offset + 4]), [0, 0, 0, 1])
        for rounds: [UInt8] in [[0, 0, 0, 0], [0, 0, 4, 1], [0xFF, 0xFF, 0xFF, 0xFF], [0x80, 0, 0, 0]] {
            var hostile = binary
            hostile.replaceSubrange(offset..<offset + 4, with: rounds)
            var asked = 0
            for file in [hostile, pem(hostile)] {
                XCTAssertThrowsError(try KeyFile.decode(file, passphrase: {
                    asked += 1
                    return SecureBytes(Array("ab".utf8))
                })) { error in
                    guard case .unsupported(let reason) = error as? KeyFile.Failure else { return XCTFail("\(rounds): \(error)") }
                    XCTAssertTrue(reason.contains("bcrypt rounds"), reason)
                }
            }
            XCTAssertEqual(asked, 0, "\(rounds)")
        }
        // A salt length past the options, a cut-off tag, a section not in whole blocks: malformed, never a crash.
        var longSalt = binary
        longSalt[offset - saltLength - 1] = 0xFF
        XCTAssertTrue(isMalformed(decodeFailure(longSalt, passphrase: "ab")))
        try run("ssh-keygen", ["-q", "-t", "ed25519", "-a", "1", "-Z", "aes256-gcm@openssh.com", "-N", "ab", "-f", "id_gcm"])
        let gcm = try openSSHBinary("id_gcm")
        XCTAssertNotNil(try KeyFile.decode(gcm, passphrase: { SecureBytes(Array("ab".utf8)) }).privateKey)
        XCTAssertTrue(isMalformed(decodeFailure(Array(gcm.dropLast()), passphrase: "ab")))
        XCTAssertTrue(isMalformed(decodeFailure(gcm + [0], passphrase: "ab")))
        var flipped = gcm
        flipped[flipped.count - 1] ^= 1
        XCTAssertEqual(decodeFailure(flipped, passphrase: "ab"), .passphraseIncorrect)
    }

    func test_openssh_public_key_lines_decode() throws {
        for (type, bits) in [("ed25519", ""), ("ecdsa", "384"), ("rsa", "3072")] {
            try run("ssh-keygen", ["-q", "-t", type] + (bits.isEmpty ? [] : ["-b", bits]) + ["-N", "", "-C", "a comment", "-f", "id"])
            let contents = try decode("id.pub")
            XCTAssertEqual(contents.format, .openSSHPublicKey, type)
            XCTAssertEqual(contents.name, "a comment")
            XCTAssertNil(contents.privateKey)
            let key = try XCTUnwrap(contents.publicKey)
            XCTAssertFalse(key.isPrivate)
            XCTAssertTrue(key.hasSamePublicKey(as: try XCTUnwrap(try decode("id").privateKey)), type)
            // As the first key of an authorized_keys file.
            try write("authorized_keys", "# keys\n\n" + String(decoding: try read("id.pub"), as: UTF8.self) + "ssh-ed25519 AAAA another\n")
            XCTAssertTrue(try XCTUnwrap(try decode("authorized_keys").publicKey).hasSamePublicKey(as: key), type)
            try FileManager.default.removeItem(atPath: path("id"))
            try FileManager.default.removeItem(atPath: path("id.pub"))
        }
    }

    func test_openssh_public_key_lines_of_openssl_keys_are_accepted_by_ssh_keygen() throws {
        for algorithm in ["rsa", "ed25519"] + Self.curves {
            try generate("key.pem", algorithm)
            let key = try XCTUnwrap(try decode("key.pem").privateKey)
            let line = try KeyFile.openSSHPublicKey(key, comment: "exported \(algorithm)")
            try write("key.pub", line + "\n")
            let fingerprint = String(decoding: try run("ssh-keygen", ["-l", "-f", "key.pub"]).output, as: UTF8.self)
            XCTAssertTrue(fingerprint.contains("exported \(algorithm)"), fingerprint)
            // And back: the line decodes to the same public key.
            XCTAssertTrue(try XCTUnwrap(try decode("key.pub").publicKey).hasSamePublicKey(as: key), algorithm)
            XCTAssertEqual(try KeyFile.openSSHPublicKey(try key.publicKey(), comment: nil).split(separator: " ").count, 2)
        }
    }

    // MARK: certificates and public keys

    func test_certificates_in_pem_and_der_decode() throws {
        try generate("key.pem", "P-256")
        let der = try certificate("cert.pem", key: "key.pem", subject: "leaf")
        let pem = try decode("cert.pem")
        XCTAssertEqual(pem.format, .certificatePEM)
        XCTAssertEqual(pem.certificates, [der])
        XCTAssertNil(pem.privateKey)
        try write("cert.der", der)
        let fromDER = try decode("cert.der")
        XCTAssertEqual(fromDER.format, .certificateDER)
        XCTAssertEqual(fromDER.certificates, [der])
        // Our PEM armour is openssl's, byte for byte.
        XCTAssertEqual(KeyFile.pem("CERTIFICATE", der), String(decoding: try read("cert.pem"), as: UTF8.self))
    }

    func test_pem_file_with_key_and_certificate_chain_collects_all() throws {
        let spki = try generate("key.pem", "rsa")
        try generate("ca.pem", "P-384")
        let leaf = try certificate("leaf.pem", key: "key.pem", subject: "leaf")
        let ca = try certificate("cacert.pem", key: "ca.pem", subject: "ca")
        let text = "Bag Attributes: some text openssl writes\n" + String(decoding: try read("key.pem"), as: UTF8.self)
            + String(decoding: try read("leaf.pem"), as: UTF8.self) + String(decoding: try read("cacert.pem"), as: UTF8.self)
        try write("bundle.pem", text)
        let contents = try decode("bundle.pem")
        XCTAssertEqual(contents.format, .pkcs8)
        XCTAssertEqual(try contents.privateKey?.subjectPublicKeyInfo(), spki)
        XCTAssertEqual(contents.certificates, [leaf, ca])
        try write("chain.pem", String(decoding: try read("leaf.pem"), as: UTF8.self) + String(decoding: try read("cacert.pem"), as: UTF8.self))
        XCTAssertEqual(try decode("chain.pem").certificates, [leaf, ca])
        // Two private keys are ambiguous.
        try write("two.pem", String(decoding: try read("key.pem") + read("ca.pem"), as: UTF8.self))
        guard case .unsupported = decodeFailure(try read("two.pem")) else { return XCTFail("two keys accepted") }
    }

    func test_public_keys_in_pem_and_der_decode() throws {
        let expected = try generate("key.pem", "P-521")
        try run("openssl", ["pkey", "-in", "key.pem", "-pubout", "-out", "pub.pem"])
        try write("pub.der", expected)
        let rsa = try generate("rsa.pem", "rsa")
        try run("openssl", ["rsa", "-in", "rsa.pem", "-RSAPublicKey_out", "-out", "rsapub.pem"])
        XCTAssertEqual(try decode("rsapub.pem").publicKey?.subjectPublicKeyInfo(), rsa)
        for (name, format) in [("pub.pem", KeyFileFormat.publicKeyPEM), ("pub.der", .publicKeyDER)] {
            let contents = try decode(name)
            XCTAssertEqual(contents.format, format)
            XCTAssertNil(contents.privateKey)
            XCTAssertEqual(try contents.publicKey?.subjectPublicKeyInfo(), expected)
        }
    }

    // MARK: PKCS#12

    func test_pkcs12_decodes_key_certificate_chain_and_name() throws {
        let spki = try generate("key.pem", "rsa")
        try generate("ca.pem", "P-256")
        let leaf = try certificate("leaf.pem", key: "key.pem", subject: "leaf")
        let ca = try certificate("cacert.pem", key: "ca.pem", subject: "ca")
        try run("openssl", ["pkcs12", "-export", "-inkey", "key.pem", "-in", "leaf.pem", "-certfile", "cacert.pem", "-name", "my key",
                            "-passout", "pass:bundle", "-out", "bundle.p12"])
        let contents = try decode("bundle.p12", passphrase: "bundle")
        XCTAssertEqual(contents.format, .pkcs12)
        XCTAssertEqual(try contents.privateKey?.subjectPublicKeyInfo(), spki)
        XCTAssertEqual(contents.certificates, [leaf, ca])
        XCTAssertEqual(contents.name, "my key")
    }

    func test_pkcs12_with_wrong_passphrase_is_refused() throws {
        try generate("key.pem", "P-256")
        try certificate("cert.pem", key: "key.pem", subject: "leaf")
        try run("openssl", ["pkcs12", "-export", "-inkey", "key.pem", "-in", "cert.pem", "-passout", "pass:right", "-out", "bundle.p12"])
        XCTAssertEqual(decodeFailure(try read("bundle.p12"), passphrase: "wrong"), .passphraseIncorrect)
        XCTAssertEqual(decodeFailure(try read("bundle.p12")), .passphraseRequired)
    }

    func test_pkcs12_with_empty_password_does_not_ask_for_one() throws {
        let spki = try generate("key.pem", "ed25519")
        try certificate("cert.pem", key: "key.pem", subject: "leaf")
        try run("openssl", ["pkcs12", "-export", "-inkey", "key.pem", "-in", "cert.pem", "-passout", "pass:", "-out", "bundle.p12"])
        let contents = try KeyFile.decode(try read("bundle.p12"), passphrase: nil)
        XCTAssertEqual(try contents.privateKey?.subjectPublicKeyInfo(), spki)
        XCTAssertEqual(contents.certificates.count, 1)
    }

    func test_pkcs12_without_mac_is_refused_before_decryption() throws {
        try generate("key.pem", "P-256")
        try certificate("cert.pem", key: "key.pem", subject: "leaf")
        try run("openssl", ["pkcs12", "-export", "-nomac", "-inkey", "key.pem", "-in", "cert.pem", "-passout", "pass:", "-out", "open.p12"])
        XCTAssertEqual(decodeFailure(try read("open.p12"), passphrase: nil), .unsupported(PKCS12Bundle.noMACMessage))
        try run("openssl", ["pkcs12", "-export", "-nomac", "-inkey", "key.pem", "-in", "cert.pem", "-passout", "pass:right", "-out", "nomac.p12"])
        XCTAssertEqual(decodeFailure(try read("nomac.p12"), passphrase: "right"), .unsupported(PKCS12Bundle.noMACMessage))
    }

    func test_pkcs12_of_certificates_only_decodes() throws {
        try generate("key.pem", "P-256")
        let der = try certificate("cert.pem", key: "key.pem", subject: "leaf")
        try run("openssl", ["pkcs12", "-export", "-nokeys", "-in", "cert.pem", "-passout", "pass:x", "-out", "certs.p12"])
        let contents = try decode("certs.p12", passphrase: "x")
        XCTAssertEqual(contents.format, .pkcs12)
        XCTAssertNil(contents.privateKey)
        XCTAssertEqual(contents.certificates, [der])
    }

    func test_legacy_pkcs12_decodes_through_the_legacy_provider() throws {
        let spki = try generate("key.pem", "P-256")
        let der = try certificate("cert.pem", key: "key.pem", subject: "leaf")
        let made = try run("openssl", ["pkcs12", "-export", "-legacy", "-inkey", "key.pem", "-in", "cert.pem", "-name", "old",
                                       "-passout", "pass:legacy", "-out", "legacy.p12"], allowFailure: true)
        guard made.status == 0 else { throw XCTSkip("openssl pkcs12 -legacy is not available: \(made.errors)") }
        do {
            let contents = try decode("legacy.p12", passphrase: "legacy")
            XCTAssertEqual(try contents.privateKey?.subjectPublicKeyInfo(), spki)
            XCTAssertEqual(contents.certificates, [der])
            XCTAssertEqual(contents.name, "old")
        } catch let failure as KeyFile.Failure {
            XCTAssertEqual(failure, .unsupported(PKCS12Bundle.legacyMessage))
        }
        XCTAssertEqual(decodeFailure(try read("legacy.p12"), passphrase: "wrong"), .passphraseIncorrect)
    }

    // MARK: our output read by the tools

    func test_our_encrypted_pkcs8_is_read_by_openssl() throws {
        for algorithm in ["rsa", "P-256", "ed25519"] {
            let spki = try generate("key.pem", algorithm)
            let key = try XCTUnwrap(try decode("key.pem").privateKey)
            let pem = try Array("pass phrase".utf8).withUnsafeBytes { try KeyFile.encryptedPKCS8PEM(key, passphrase: $0) }
            XCTAssertTrue(pem.hasPrefix("-----BEGIN ENCRYPTED PRIVATE KEY-----\n"))
            try write("ours.pem", pem)
            XCTAssertEqual(try self.spki(ofKey: "ours.pem", passphrase: "pass phrase"), spki, algorithm)
            let structure = String(decoding: try run("openssl", ["asn1parse", "-in", "ours.pem"]).output, as: UTF8.self)
            for part in ["PBES2", "PBKDF2", "hmacWithSHA256", "aes-256-cbc"] { XCTAssertTrue(structure.contains(part), part) }
            XCTAssertEqual(try decode("ours.pem", passphrase: "pass phrase").privateKey?.subjectPublicKeyInfo(), spki)
            XCTAssertEqual(decodeFailure(try read("ours.pem"), passphrase: "pass phrasE"), .passphraseIncorrect)
        }
    }

    func test_our_pkcs12_is_read_by_openssl_and_decoded_again() throws {
        let spki = try generate("key.pem", "P-384")
        try generate("ca.pem", "rsa")
        let leaf = try certificate("leaf.pem", key: "key.pem", subject: "leaf")
        let ca = try certificate("cacert.pem", key: "ca.pem", subject: "ca")
        let key = try XCTUnwrap(try decode("key.pem").privateKey)
        // The chain comes first here: the key's own certificate is found by its public key.
        let bundle = try Array("p12 secret".utf8).withUnsafeBytes {
            try KeyFile.pkcs12(key: key, certificates: [ca, leaf], name: "exported key", passphrase: $0)
        }
        try write("ours.p12", bundle)
        let info = try run("openssl", ["pkcs12", "-in", "ours.p12", "-info", "-nokeys", "-passin", "pass:p12 secret"])
        XCTAssertTrue(info.errors.contains("MAC: sha256"), info.errors)
        XCTAssertTrue(info.errors.contains("AES-256-CBC"), info.errors)
        XCTAssertFalse(info.errors.contains("RC2") || info.errors.contains("3DES"), info.errors)
        try run("openssl", ["pkcs12", "-in", "ours.p12", "-info", "-noout", "-passin", "pass:p12 secret"])
        let contents = try decode("ours.p12", passphrase: "p12 secret")
        XCTAssertEqual(contents.format, .pkcs12)
        XCTAssertEqual(try contents.privateKey?.subjectPublicKeyInfo(), spki)
        XCTAssertEqual(contents.certificates, [leaf, ca])
        XCTAssertEqual(contents.name, "exported key")
        XCTAssertEqual(decodeFailure(bundle, passphrase: "p12 Secret"), .passphraseIncorrect)
    }

    // MARK: damaged input

    func test_garbage_and_truncated_files_are_malformed_never_a_crash() throws {
        XCTAssertTrue(isMalformed(decodeFailure([])))
        XCTAssertTrue(isMalformed(decodeFailure(Array("hello, world\n".utf8))))
        var generator = SystemRandomNumberGenerator()
        for length in [1, 2, 17, 300, 5000] {
            let noise = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            XCTAssertNotNil(decodeFailure([0x30] + noise, passphrase: "x"))
        }
        try generate("key.pem", "rsa")
        try certificate("cert.pem", key: "key.pem", subject: "leaf")
        try run("openssl", ["pkey", "-in", "key.pem", "-outform", "DER", "-out", "key.der"])
        try run("openssl", ["x509", "-in", "cert.pem", "-outform", "DER", "-out", "cert.der"])
        try run("openssl", ["pkcs12", "-export", "-inkey", "key.pem", "-in", "cert.pem", "-passout", "pass:x", "-out", "bundle.p12"])
        try run("ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", "id"])
        let sshBinary = try XCTUnwrap(Base64.decode(String(decoding: try read("id"), as: UTF8.self).split(separator: "\n").dropFirst().dropLast().joined().utf8))
        try write("id.bin", sshBinary)
        for name in ["key.der", "cert.der", "bundle.p12", "id.bin", "id", "key.pem", "id.pub"] {
            let whole = try read(name)
            XCTAssertNoThrow(try KeyFile.decode(whole, passphrase: { SecureBytes(Array("x".utf8)) }), name)
            // Text files still decode without their last newline or a comment's last letter: cut them in the base64.
            let isBinary = name.hasSuffix(".der") || name.hasSuffix(".bin") || name.hasSuffix(".p12")
            let cuts = [1, 2, 10, whole.count / 3, whole.count / 2, whole.count - 40] + (isBinary ? [whole.count - 2, whole.count - 1] : [])
            for cut in Set(cuts) where cut > 0 && cut < whole.count {
                let failure = decodeFailure(Array(whole.prefix(cut)), passphrase: "x")
                XCTAssertNotNil(failure, "\(name) cut at \(cut)")
                if isBinary { XCTAssertTrue(isMalformed(failure), "\(name) cut at \(cut): \(String(describing: failure))") }
            }
            // Single flipped bytes: refused or decoded, never a crash.
            for position in stride(from: 0, to: whole.count, by: max(1, whole.count / 64)) {
                var damaged = whole
                damaged[position] ^= 0x41
                _ = try? KeyFile.decode(damaged, passphrase: { SecureBytes(Array("x".utf8)) })
            }
        }
        XCTAssertTrue(isMalformed(decodeFailure(Array("-----BEGIN CERTIFICATE-----\nMII%%%\n-----END CERTIFICATE-----\n".utf8))))
        XCTAssertTrue(isMalformed(decodeFailure(Array("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA== x\n".utf8))))
    }

    func test_decoding_leaves_the_openssl_error_queue_empty() throws {
        ERR_clear_error()
        try generate("key.pem", "P-256")
        try run("openssl", ["pkey", "-in", "key.pem", "-aes256", "-passout", "pass:right", "-out", "encrypted.pem"])
        try run("openssl", ["pkey", "-in", "key.pem", "-outform", "DER", "-out", "key.der"])
        _ = try decode("key.der")
        XCTAssertEqual(ERR_peek_error(), 0)
        _ = decodeFailure(try read("encrypted.pem"), passphrase: "wrong")
        XCTAssertEqual(ERR_peek_error(), 0)
        _ = decodeFailure([0x30, 0x03, 0x02, 0x01, 0x00])
        XCTAssertEqual(ERR_peek_error(), 0)
    }

    func test_base64_round_trips_and_rejects_bad_text() {
        for length in 0..<20 {
            let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
            XCTAssertEqual(Base64.decode(Base64.encode(bytes)), bytes)
        }
        XCTAssertEqual(Base64.encodeString(Array("foobar".utf8)), "Zm9vYmFy")
        XCTAssertEqual(Base64.encodeString(Array("fo".utf8)), "Zm8=")
        XCTAssertNil(Base64.decode(Array("Zm9v=YmFy".utf8)))
        XCTAssertNil(Base64.decode(Array("Z".utf8)))
        XCTAssertNil(Base64.decode(Array("Zm9*".utf8)))
    }
}
