internal import COpenSSL

extension KeyFile {
    /// An authorized_keys line, without a newline: "ssh-rsa AAAA… comment", "ecdsa-sha2-nistp256 …",
    /// "ssh-ed25519 …" (RFC 4253 §6.6, RFC 5656 §3.1, RFC 8709 §4).
    public static func openSSHPublicKey(_ key: AsymmetricKey, comment: String?) throws -> String {
        let (type, blob) = try OpenSSHKey.publicKeyBlob(key)
        var line = "\(type) \(Base64.encodeString(blob))"
        if let comment, !comment.isEmpty {
            line += " " + String(comment.map { $0 == "\n" || $0 == "\r" ? " " : $0 })
        }
        return line
    }
}

/// OpenSSH's key formats: the "openssh-key-v1" private key file (PROTOCOL.key in OpenSSH) and
/// the public key blob of the SSH wire format.
enum OpenSSHKey {
    static let magic = Array("openssh-key-v1\0".utf8)
    /// Larger RSA moduli are refused before any arithmetic (OpenSSH itself stops at 16384 bits).
    static let maximumModulusBytes = 16384 / 8

    // MARK: private keys

    /// The key and comment of an openssh-key-v1 file (the decoded base64 of its PEM armour):
    ///     "openssh-key-v1\0" string ciphername, string kdfname, string kdfoptions, uint32 N (= 1),
    ///     string publickey, string encrypted-section, [tag of an AEAD cipher]
    /// `passphrase` is asked for only when the cipher is not "none" (see `Encryption`).
    static func privateKey(_ data: [UInt8], _ passphrase: PassphraseSource) throws(KeyFile.Failure) -> (AsymmetricKey, String?) {
        try data.withFailingBytes({ bytes throws(KeyFile.Failure) in
            guard bytes.starts(with: magic) else { throw .malformed("not an openssh-key-v1 key") }
            var reader = SSHReader(buffer: bytes, offset: magic.count)
            let cipher = try reader.text()
            let kdf = try reader.text()
            let kdfOptions = try reader.string()
            let encryption = try Encryption(cipher: cipher, kdf: kdf, options: kdfOptions)
            let count = try reader.uint32()
            guard count == 1 else { throw .unsupported("OpenSSH key files holding \(count) keys") }
            let publicBlob = try reader.string()
            let section = try reader.string()
            guard let encryption else {
                guard reader.isAtEnd else { throw .malformed("bytes after the OpenSSH key") }
                return try privateSection(section, blockSize: 8, encrypted: false, publicBlob: publicBlob)
            }
            let tag = try reader.bytes(encryption.cipher.tagLength)
            guard reader.isAtEnd else { throw .malformed("bytes after the OpenSSH key") }
            let plaintext = try encryption.decrypt(section, tag: tag, passphrase)
            return try plaintext.withUnsafeBytes { (plaintext) throws(KeyFile.Failure) in
                try privateSection(plaintext, blockSize: encryption.cipher.blockSize, encrypted: true, publicBlob: publicBlob)
            }
        })
    }

    /// The private section, decrypted:
    ///     uint32 check, uint32 check, string type, <key fields>, string comment, padding 1 2 3 … to the block size
    /// Check integers that differ after decryption mean the key came from a wrong passphrase.
    private static func privateSection(_ bytes: UnsafeRawBufferPointer, blockSize: Int, encrypted: Bool,
                                       publicBlob: UnsafeRawBufferPointer) throws(KeyFile.Failure) -> (AsymmetricKey, String?) {
        var section = SSHReader(buffer: bytes)
        guard section.buffer.count % blockSize == 0 else { throw .malformed("OpenSSH private section not padded to \(blockSize) bytes") }
        guard try section.uint32() == section.uint32() else {
            throw encrypted ? .passphraseIncorrect : .malformed("OpenSSH check integers differ")
        }
        let key = try privateKeyFields(&section)
        let comment = try section.text()
        var padding: UInt8 = 1
        while !section.isAtEnd {
            guard try section.byte() == padding else { throw .malformed("bad OpenSSH padding") }
            padding &+= 1
        }
        guard key.hasSamePublicKey(as: try publicKey(blob: publicBlob)) else {
            throw .malformed("the public and private parts of the OpenSSH key differ")
        }
        return (key, comment.isEmpty ? nil : comment)
    }

    private static func privateKeyFields(_ reader: inout SSHReader) throws(KeyFile.Failure) -> AsymmetricKey {
        let type = try reader.text()
        switch type {
        case "ssh-ed25519":
            // pub(32), then priv(64) = seed ‖ pub.
            let publicKey = Array(try reader.string())
            let both = try reader.string()
            guard publicKey.count == 32, both.count == 64, both[32...].elementsEqual(publicKey) else { throw .malformed("Ed25519 key lengths") }
            var seed = Array(both[0..<32])
            defer { wipe(&seed) }
            return try building(type) { try AsymmetricKey.raw(.ed25519, privateKey: seed, publicKey: publicKey) }
        case _ where type.hasPrefix("ecdsa-sha2-"):
            guard let curve = curve(named: try reader.text()), type == "ecdsa-sha2-" + (sshName(curve) ?? "") else {
                throw .unsupported("OpenSSH key type \(type)")
            }
            let point = Array(try reader.string())
            var scalar = Array(try reader.mpint())
            defer { wipe(&scalar) }
            return try building(type) { try AsymmetricKey.ec(curve, point: point, scalar: scalar) }
        case "ssh-rsa":
            // n, e, d, iqmp, p, q.
            let modulus = Array(try reader.mpint())
            let exponent = Array(try reader.mpint())
            guard modulus.count <= maximumModulusBytes, exponent.count <= 8 else { throw .unsupported("RSA keys above 16384 bits") }
            let secrets = [try reader.mpint(), try reader.mpint(), try reader.mpint(), try reader.mpint()]
            guard secrets.allSatisfy({ !$0.isEmpty && $0.count <= maximumModulusBytes }) else { throw .malformed("RSA private key parts") }
            // One owner per secret copy, so that the wipes below act on the only copy.
            var d = Array(secrets[0]), coefficient = Array(secrets[1]), p = Array(secrets[2]), q = Array(secrets[3])
            defer {
                wipe(&d)
                wipe(&coefficient)
                wipe(&p)
                wipe(&q)
            }
            var dp = try crtExponent(d, prime: p)
            defer { wipe(&dp) }
            var dq = try crtExponent(d, prime: q)
            defer { wipe(&dq) }
            let key = try building(type) {
                try AsymmetricKey.rsa(RSAComponents(modulus: modulus, publicExponent: exponent, privateExponent: d, prime1: p, prime2: q,
                                                    exponent1: dp, exponent2: dq, coefficient: coefficient))
            }
            // OpenSSH's file carries no check that the parts agree: OpenSSL's pairwise check is it.
            do { try key.validate() } catch { throw .malformed("the RSA key's parts are inconsistent") }
            return key
        case "ssh-dss":
            throw .unsupported("DSA keys")
        default:
            throw .unsupported(type.hasPrefix("sk-") ? "security-key (\(type)) keys, which stay on the authenticator" : "OpenSSH key type \(type)")
        }
    }

    /// d mod (prime − 1), the CRT exponent OpenSSH does not store.
    private static func crtExponent(_ d: [UInt8], prime: [UInt8]) throws(KeyFile.Failure) -> [UInt8] {
        guard let context = try? OpenSSLContext.get(), let ctx = BN_CTX_secure_new_ex(context) else { throw .malformed("OpenSSL could not allocate") }
        defer { BN_CTX_free(ctx) }
        let exponent = BN_secure_new(), modulus = BN_secure_new(), remainder = BN_secure_new()
        defer { [exponent, modulus, remainder].forEach { BN_clear_free($0) } }
        guard let exponent, let modulus, let remainder, BN_bin2bn(d, Int32(d.count), exponent) != nil,
              BN_bin2bn(prime, Int32(prime.count), modulus) != nil, BN_sub_word(modulus, 1) == 1, BN_is_zero(modulus) == 0,
              BN_div(nil, remainder, exponent, modulus, ctx) == 1 else { throw .malformed("RSA private key parts") }
        var bytes = [UInt8](repeating: 0, count: Int((BN_num_bits(remainder) + 7) / 8))
        _ = BN_bn2bin(remainder, &bytes)
        return bytes
    }

    /// Runs one of AsymmetricKey's builders, whose refusals mean the file's key parts are bad.
    private static func building(_ type: String, _ body: () throws -> AsymmetricKey) throws(KeyFile.Failure) -> AsymmetricKey {
        do { return try body() } catch { throw .malformed("\(type) key parts rejected: \(error)") }
    }

    // MARK: public keys

    /// An SSH public key blob: string type, then e and n (RSA), curve name and Q (ECDSA) or the raw key (EdDSA).
    static func publicKey(blob: UnsafeRawBufferPointer) throws(KeyFile.Failure) -> AsymmetricKey {
        var reader = SSHReader(buffer: blob)
        let type = try reader.text()
        let key: AsymmetricKey
        switch type {
        case "ssh-ed25519", "ssh-ed448":
            let raw = Array(try reader.string())
            key = try building(type) { try AsymmetricKey.raw(type == "ssh-ed25519" ? .ed25519 : .ed448, privateKey: nil, publicKey: raw) }
        case _ where type.hasPrefix("ecdsa-sha2-"):
            guard let curve = curve(named: try reader.text()), type == "ecdsa-sha2-" + (sshName(curve) ?? "") else {
                throw .unsupported("OpenSSH key type \(type)")
            }
            let point = Array(try reader.string())
            key = try building(type) { try AsymmetricKey.ec(curve, point: point, scalar: nil) }
        case "ssh-rsa":
            let exponent = Array(try reader.mpint())
            let modulus = Array(try reader.mpint())
            guard modulus.count <= maximumModulusBytes, exponent.count <= 8 else { throw .unsupported("RSA keys above 16384 bits") }
            key = try building(type) { try AsymmetricKey.rsa(RSAComponents(modulus: modulus, publicExponent: exponent)) }
        case "ssh-dss":
            throw .unsupported("DSA keys")
        default:
            throw .unsupported(type.hasPrefix("sk-") ? "security-key (\(type)) keys" : "OpenSSH key type \(type)")
        }
        guard reader.isAtEnd else { throw .malformed("bytes after the \(type) public key") }
        return key
    }

    /// The first line of `data` that is not blank or a "#" comment, if it reads as "type base64 [comment]"
    /// with an SSH key type (authorized_keys options before the type are not read).
    static func publicKeyLine(in data: [UInt8]) -> ArraySlice<UInt8>? {
        var start = 0
        while start < data.count {
            let end = data[start...].firstIndex(of: 0x0A) ?? data.count
            let line = PEMBlock.trimmed(data[start..<end])
            start = end + 1
            if line.isEmpty || line.first == 0x23 { continue }
            let prefixes = ["ssh-", "ecdsa-sha2-", "sk-"].map { Array($0.utf8) }
            return prefixes.contains { line.starts(with: $0) } ? line : nil
        }
        return nil
    }

    /// The key and comment of an authorized_keys-style line.
    static func publicKey(line: ArraySlice<UInt8>) throws(KeyFile.Failure) -> (AsymmetricKey, String?) {
        let fields = line.split(maxSplits: 2, omittingEmptySubsequences: true) { $0 == 0x20 || $0 == 0x09 }
        guard fields.count >= 2 else { throw .malformed("an OpenSSH public key line needs a type and a base64 key") }
        guard let blob = Base64.decode(fields[1]) else { throw .malformed("bad base64 in the OpenSSH public key") }
        let key = try blob.withFailingBytes({ bytes throws(KeyFile.Failure) -> AsymmetricKey in
            var reader = SSHReader(buffer: bytes)
            guard try reader.string().elementsEqual(fields[0]) else { throw .malformed("the key type differs from the line's") }
            return try publicKey(blob: bytes)
        })
        let comment = fields.count > 2 ? String(decoding: PEMBlock.trimmed(fields[2]), as: UTF8.self) : ""
        return (key, comment.isEmpty ? nil : comment)
    }

    /// The SSH type name and wire blob of a public key.
    static func publicKeyBlob(_ key: AsymmetricKey) throws -> (String, [UInt8]) {
        var writer = SSHWriter()
        let type: String
        switch key.kind {
        case .rsa:
            type = "ssh-rsa"
            // From the public half: rsaComponents of a private key would copy its secret parts.
            let parts = try (key.isPrivate ? key.publicKey() : key).rsaComponents()
            writer.string(Array(type.utf8))
            writer.mpint(parts.publicExponent)
            writer.mpint(parts.modulus)
        case .ec(let curve):
            guard let name = sshName(curve) else { throw CryptoError(.invalidInput, "SSH has no public key format for \(curve.rawValue) keys") }
            type = "ecdsa-sha2-" + name
            writer.string(Array(type.utf8))
            writer.string(Array(name.utf8))
            writer.string(try key.ecPoint())
        case .ed25519, .ed448:
            type = key.kind == .ed25519 ? "ssh-ed25519" : "ssh-ed448"
            writer.string(Array(type.utf8))
            writer.string(try key.rawPublicKey())
        case .x25519, .x448, .dh:
            throw CryptoError(.invalidInput, "SSH has no public key format for key-agreement keys")
        case .dsa:
            throw CryptoError(.invalidInput, "ssh-dss keys are no longer accepted by OpenSSH")
        }
        return (type, writer.bytes)
    }

    /// SSH names only the three NIST curves of RFC 5656 that OpenSSH implements.
    static func sshName(_ curve: Curve) -> String? {
        switch curve {
        case .p256: return "nistp256"
        case .p384: return "nistp384"
        case .p521: return "nistp521"
        default: return nil
        }
    }

    private static func curve(named name: String) -> Curve? {
        Curve.allCases.first { sshName($0) == name }
    }
}

extension OpenSSHKey {
    /// How a private section is encrypted (PROTOCOL.key, OpenSSH sshkey.c): the key and IV are the
    /// first and next bytes of bcrypt_pbkdf(passphrase, salt, rounds), kdfoptions being
    ///     string salt, uint32 rounds
    /// An AEAD cipher's tag follows the section, outside its string.
    struct Encryption {
        let cipher: Cipher
        /// Borrowed from the file being read.
        let salt: UnsafeRawBufferPointer
        let rounds: Int

        /// ssh-keygen writes 16 rounds; 1024 already take 7 s (as in OpenSSH's own C), and more would let
        /// a file hold a reader for minutes. The fuzz build (scripts/fuzz.sh) stops at 4, so that a
        /// mutated round count is not reported as a hang (libFuzzer's 10 s) and every input stays quick.
        #if FUZZING
        static let maximumRounds = 4
        #else
        static let maximumRounds = 1024
        #endif
        /// ssh-keygen writes 16 bytes; bcrypt_pbkdf itself takes up to 1 MiB.
        static let maximumSaltLength = 1024

        /// Nil for an unencrypted key; refuses what it cannot decrypt before any passphrase is asked for.
        init?(cipher name: String, kdf: String, options: UnsafeRawBufferPointer) throws(KeyFile.Failure) {
            guard name != "none" else {
                guard kdf == "none" else { throw .malformed("an unencrypted OpenSSH key with KDF \(kdf.prefix(40))") }
                return nil
            }
            // chacha20-poly1305@openssh.com among them. (Names from the file are cut short in messages.)
            guard let cipher = Cipher.all.first(where: { $0.name == name }) else {
                throw .unsupported("OpenSSH keys encrypted with \(name.prefix(40)); re-encrypt it with ssh-keygen -p -Z aes256-ctr")
            }
            guard kdf == "bcrypt" else {
                throw kdf == "none" ? .malformed("an encrypted OpenSSH key without a KDF") : .unsupported("OpenSSH key derivation \(kdf.prefix(40))")
            }
            var reader = SSHReader(buffer: options)
            let salt = try reader.string()
            let rounds = try reader.uint32()
            guard reader.isAtEnd, !salt.isEmpty, salt.count <= Self.maximumSaltLength else { throw .malformed("OpenSSH bcrypt parameters") }
            guard rounds >= 1, rounds <= Self.maximumRounds else { throw .unsupported("OpenSSH keys with \(rounds) bcrypt rounds (at most \(Self.maximumRounds))") }
            self.cipher = cipher
            self.salt = salt
            self.rounds = Int(rounds)
        }

        /// The private section in clear. A wrong passphrase fails the AEAD tag or, for the other
        /// ciphers, shows as differing check integers in the plaintext (the caller's test).
        func decrypt(_ section: UnsafeRawBufferPointer, tag: UnsafeRawBufferPointer,
                     _ passphrase: PassphraseSource) throws(KeyFile.Failure) -> SecureBytes {
            guard section.count >= cipher.blockSize, section.count % cipher.blockSize == 0 else {
                throw .malformed("OpenSSH encrypted section not a whole number of \(cipher.name) blocks")
            }
            guard let evp = Fetched.cipher(cipher.openSSLName) else { throw .unsupported("\(cipher.name): not in this OpenSSL") }
            guard Int(EVP_CIPHER_get_key_length(evp)) == cipher.keyLength, Int(EVP_CIPHER_get_iv_length(evp)) == cipher.ivLength else {
                throw .unsupported("\(cipher.name): OpenSSL's \(cipher.openSSLName) differs")
            }
            let (text, length) = try passphrase.obtain()
            // ssh-keygen never encrypts with an empty passphrase, and bcrypt_pbkdf refuses one.
            guard length > 0 else { throw .passphraseIncorrect }
            let material: SecureBytes
            do {
                material = try text.withUnsafeBytes { (text) throws(CryptoError) in
                    try BcryptPBKDF.derive(passphrase: UnsafeRawBufferPointer(rebasing: text[0..<length]), salt: salt, rounds: rounds,
                                           length: cipher.keyLength + cipher.ivLength)
                }
            } catch {
                throw .malformed("OpenSSH key derivation: \(error.reason)")
            }
            guard let ctx = EVP_CIPHER_CTX_new() else { throw .malformed("OpenSSL could not allocate a cipher context") }
            defer { EVP_CIPHER_CTX_free(ctx) }  // which cleanses the key schedule
            let ready = material.withUnsafeBytes { material -> Bool in
                guard let key = material.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return false }
                return EVP_CipherInit_ex(ctx, evp, nil, key, key + cipher.keyLength, 0) == 1
            }
            guard ready, EVP_CIPHER_CTX_set_padding(ctx, 0) == 1 else { throw .unsupported("\(cipher.name) (OpenSSL refused the key)") }
            if cipher.tagLength > 0 {
                guard tag.count == cipher.tagLength,
                      EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(tag.count), UnsafeMutableRawPointer(mutating: tag.baseAddress)) == 1 else {
                    throw .malformed("OpenSSH \(cipher.name) tag")
                }
            }
            // Whole blocks and no padding: only a tag that does not verify fails here.
            guard let plaintext = CipherRun.run(ctx, section) else {
                throw cipher.tagLength > 0 ? .passphraseIncorrect : .malformed("OpenSSH \(cipher.name) decryption failed")
            }
            return plaintext
        }
    }

    /// The ciphers ssh-keygen -Z offers, as OpenSSH's cipher.c defines them, but ChaCha20-Poly1305
    /// (OpenSSH's own construction, which EVP does not offer).
    struct Cipher {
        let name: String
        let openSSLName: String
        let keyLength: Int
        let ivLength: Int
        let blockSize: Int
        let tagLength: Int

        static let all = [
            Cipher(name: "aes256-ctr", openSSLName: "AES-256-CTR", keyLength: 32, ivLength: 16, blockSize: 16, tagLength: 0),
            Cipher(name: "aes192-ctr", openSSLName: "AES-192-CTR", keyLength: 24, ivLength: 16, blockSize: 16, tagLength: 0),
            Cipher(name: "aes128-ctr", openSSLName: "AES-128-CTR", keyLength: 16, ivLength: 16, blockSize: 16, tagLength: 0),
            Cipher(name: "aes256-cbc", openSSLName: "AES-256-CBC", keyLength: 32, ivLength: 16, blockSize: 16, tagLength: 0),
            Cipher(name: "aes192-cbc", openSSLName: "AES-192-CBC", keyLength: 24, ivLength: 16, blockSize: 16, tagLength: 0),
            Cipher(name: "aes128-cbc", openSSLName: "AES-128-CBC", keyLength: 16, ivLength: 16, blockSize: 16, tagLength: 0),
            Cipher(name: "aes256-gcm@openssh.com", openSSLName: "AES-256-GCM", keyLength: 32, ivLength: 12, blockSize: 16, tagLength: 16),
            Cipher(name: "aes128-gcm@openssh.com", openSSLName: "AES-128-GCM", keyLength: 16, ivLength: 12, blockSize: 16, tagLength: 16),
            Cipher(name: "3des-cbc", openSSLName: "DES-EDE3-CBC", keyLength: 24, ivLength: 8, blockSize: 8, tagLength: 0),
        ]
    }
}

/// Reads the SSH wire format (RFC 4251 §5) from a buffer it does not own; every length is checked
/// against what is left.
struct SSHReader {
    let buffer: UnsafeRawBufferPointer
    var offset = 0

    var isAtEnd: Bool { offset == buffer.count }

    private static let truncated = KeyFile.Failure.malformed("truncated OpenSSH key")

    mutating func byte() throws(KeyFile.Failure) -> UInt8 {
        guard offset < buffer.count else { throw Self.truncated }
        defer { offset += 1 }
        return buffer[offset]
    }

    mutating func uint32() throws(KeyFile.Failure) -> UInt32 {
        guard buffer.count - offset >= 4 else { throw Self.truncated }
        defer { offset += 4 }
        return buffer[offset..<offset + 4].reduce(0) { $0 << 8 | UInt32($1) }
    }

    /// The bytes of a string, in place.
    mutating func string() throws(KeyFile.Failure) -> UnsafeRawBufferPointer {
        let length = Int(try uint32())
        guard length <= buffer.count - offset else { throw Self.truncated }
        defer { offset += length }
        return UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + length])
    }

    /// `count` raw bytes, in place.
    mutating func bytes(_ count: Int) throws(KeyFile.Failure) -> UnsafeRawBufferPointer {
        guard count >= 0, count <= buffer.count - offset else { throw Self.truncated }
        defer { offset += count }
        return UnsafeRawBufferPointer(rebasing: buffer[offset..<offset + count])
    }

    mutating func text() throws(KeyFile.Failure) -> String {
        String(decoding: try string(), as: UTF8.self)
    }

    /// An mpint's magnitude, big-endian without leading zeros; negative values are refused.
    mutating func mpint() throws(KeyFile.Failure) -> UnsafeRawBufferPointer {
        let value = try string()
        if let first = value.first, first & 0x80 != 0 { throw .malformed("negative mpint in the OpenSSH key") }
        let start = value.firstIndex { $0 != 0 } ?? value.count
        return UnsafeRawBufferPointer(rebasing: value[start...])
    }
}

/// Writes the SSH wire format.
struct SSHWriter {
    var bytes: [UInt8] = []

    mutating func uint32(_ value: Int) {
        for shift in [24, 16, 8, 0] { bytes.append(UInt8(truncatingIfNeeded: value >> shift)) }
    }

    mutating func string(_ value: [UInt8]) {
        uint32(value.count)
        bytes += value
    }

    /// A non-negative mpint: no leading zeros, except one where the high bit is set.
    mutating func mpint(_ magnitude: [UInt8]) {
        var value = Array(magnitude.drop { $0 == 0 })
        if let first = value.first, first & 0x80 != 0 { value.insert(0, at: 0) }
        string(value)
    }
}
