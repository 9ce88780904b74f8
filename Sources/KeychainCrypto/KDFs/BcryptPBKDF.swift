internal import COpenSSL

/// bcrypt_pbkdf, the key derivation of OpenSSH's encrypted private keys (OpenBSD libutil
/// bcrypt_pbkdf.c, PROTOCOL.key): PBKDF2's outer loop with bcrypt_hash as the pseudo-random
/// function, the passphrase and each salt pre-hashed with SHA-512.
enum BcryptPBKDF {
    /// Bytes of one bcrypt_hash output.
    static let blockLength = 32
    /// The reference refuses longer outputs (32 blocks), and salts above 1 MiB.
    static let maximumLength = blockLength * blockLength
    static let maximumSaltLength = 1 << 20

    /// `length` bytes derived from `passphrase` and `salt` in `rounds` rounds. Unlike PBKDF2, output
    /// byte i of block b lands at i · (number of blocks) + b, so no part of the key costs less than the rest.
    static func derive(passphrase: UnsafeRawBufferPointer, salt: UnsafeRawBufferPointer, rounds: Int,
                       length: Int) throws(CryptoError) -> SecureBytes {
        guard rounds >= 1 else { throw CryptoError(.invalidInput, "bcrypt_pbkdf needs at least one round") }
        guard !passphrase.isEmpty, !salt.isEmpty, salt.count <= maximumSaltLength, length >= 1, length <= maximumLength else {
            throw CryptoError(.invalidInput, "bcrypt_pbkdf passphrase, salt or output length")
        }
        // The reference's "stride": the number of blocks, each giving every stride-th key byte.
        let blockCount = (length + blockLength - 1) / blockLength
        let bytesPerBlock = (length + blockCount - 1) / blockCount
        let key = SecureBytes(count: length)
        // SHA-512(passphrase), SHA-512 of the round's salt, bcrypt_hash's output, their XOR over the rounds, the block number.
        let scratch = SecureBytes(count: 64 + 64 + blockLength + blockLength + 4)
        let cipher = Eksblowfish()
        let sha512 = try SHA512Context()
        try key.withUnsafeMutableBytes { (key) throws(CryptoError) in
            try scratch.withUnsafeMutableBytes { (scratch) throws(CryptoError) in
                let hashedPassphrase = UnsafeMutableRawBufferPointer(rebasing: scratch[0..<64])
                let hashedSalt = UnsafeMutableRawBufferPointer(rebasing: scratch[64..<128])
                let output = UnsafeMutableRawBufferPointer(rebasing: scratch[128..<(128 + blockLength)])
                let sum = UnsafeMutableRawBufferPointer(rebasing: scratch[(128 + blockLength)..<(128 + 2 * blockLength)])
                let counter = UnsafeMutableRawBufferPointer(rebasing: scratch[(128 + 2 * blockLength)...])
                try sha512.hash(passphrase, into: hashedPassphrase)
                for block in 0..<blockCount {
                    // The first round's salt is the salt and the block number, 1 up, as a big-endian uint32.
                    for (index, shift) in [24, 16, 8, 0].enumerated() { counter[index] = UInt8(truncatingIfNeeded: (block + 1) >> shift) }
                    try sha512.hash(salt, UnsafeRawBufferPointer(counter), into: hashedSalt)
                    cipher.hash(password: UnsafeRawBufferPointer(hashedPassphrase), salt: UnsafeRawBufferPointer(hashedSalt), into: output)
                    sum.copyMemory(from: UnsafeRawBufferPointer(output))
                    for _ in 1..<rounds {
                        // Later rounds salt with the previous round's output.
                        try sha512.hash(UnsafeRawBufferPointer(output), into: hashedSalt)
                        cipher.hash(password: UnsafeRawBufferPointer(hashedPassphrase), salt: UnsafeRawBufferPointer(hashedSalt), into: output)
                        for index in 0..<blockLength { sum[index] ^= output[index] }
                    }
                    for index in 0..<bytesPerBlock {
                        let destination = index * blockCount + block
                        guard destination < length else { break }
                        key[destination] = sum[index]
                    }
                }
            }
        }
        return key
    }
}

/// One EVP_MD_CTX for SHA-512, reused for every hash of a derivation.
private final class SHA512Context {
    private let context: OpaquePointer
    private let sha512: OpaquePointer

    init() throws(CryptoError) {
        guard let sha512 = Fetched.digest("SHA2-512") else { throw CryptoError.library("EVP_MD_fetch(SHA2-512)") }
        guard let context = EVP_MD_CTX_new() else { throw CryptoError.library("EVP_MD_CTX_new") }
        self.context = context
        self.sha512 = sha512
    }

    deinit { EVP_MD_CTX_free(context) }

    /// SHA-512 of the concatenated parts, into the 64 bytes of `digest`.
    func hash(_ parts: UnsafeRawBufferPointer..., into digest: UnsafeMutableRawBufferPointer) throws(CryptoError) {
        guard digest.count == 64, let out = digest.baseAddress?.assumingMemoryBound(to: UInt8.self),
              EVP_DigestInit_ex(context, sha512, nil) == 1 else { throw CryptoError.library("SHA-512") }
        for part in parts where !part.isEmpty {
            guard EVP_DigestUpdate(context, part.baseAddress, part.count) == 1 else { throw CryptoError.library("SHA-512") }
        }
        var written: UInt32 = 0
        guard EVP_DigestFinal_ex(context, out, &written) == 1, written == 64 else { throw CryptoError.library("SHA-512") }
    }
}

/// Blowfish with bcrypt's expensive key schedule (Provos and Mazières, "A Future-Adaptable
/// Password Scheme", 1999), as bcrypt_pbkdf's bcrypt_hash runs it: keys are always two SHA-512
/// digests, 16 big-endian words each.
final class Eksblowfish {
    /// P (18 words), then S-boxes 0 to 3 (256 words each): the key schedules below fill them in this order.
    private static let stateWords = 18 + 4 * 256
    private static let pristine: [UInt32] = BlowfishTables.initialP + BlowfishTables.initialS
    /// bcrypt_hash's plaintext, "OxychromaticBlowfishSwatDynamite", as 8 big-endian words.
    private static let plaintext: [UInt32] = bigEndianWords(Array("OxychromaticBlowfishSwatDynamite".utf8))

    /// The cipher state, then the password and salt as words, then the 8 words being encrypted.
    private let words: UnsafeMutablePointer<UInt32>
    private static let wordCount = stateWords + 16 + 16 + 8

    init() {
        words = UnsafeMutablePointer<UInt32>.allocate(capacity: Self.wordCount)
        words.initialize(repeating: 0, count: Self.wordCount)
    }

    deinit {
        OPENSSL_cleanse(words, Self.wordCount * MemoryLayout<UInt32>.size)
        words.deallocate()
    }

    /// bcrypt_hash(SHA-512(password), SHA-512(salt)): the state is keyed with salt and password,
    /// then with each alone 64 times over; the plaintext is encrypted 64 times; its words come
    /// out little-endian.
    func hash(password: UnsafeRawBufferPointer, salt: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) {
        let state = words
        let passwordWords = words + Self.stateWords
        let saltWords = passwordWords + 16
        let text = saltWords + 16
        Self.pristine.withUnsafeBufferPointer { pristine in
            for index in 0..<Self.stateWords { state[index] = pristine[index] }
        }
        Self.load(password, into: passwordWords)
        Self.load(salt, into: saltWords)

        Self.expand(state, key: passwordWords, data: saltWords)
        for _ in 0..<64 {
            Self.expand(state, key: saltWords, data: nil)
            Self.expand(state, key: passwordWords, data: nil)
        }

        Self.plaintext.withUnsafeBufferPointer { plaintext in
            for index in 0..<8 { text[index] = plaintext[index] }
        }
        for _ in 0..<64 {
            var block = 0
            while block < 8 {
                Self.encrypt(state, &text[block], &text[block + 1])
                block += 2
            }
        }
        for index in 0..<min(8, output.count / 4) {
            let word = text[index]
            for byte in 0..<4 { output[4 * index + byte] = UInt8(truncatingIfNeeded: word >> (8 * byte)) }
        }
    }

    /// Blowfish's key schedule: P is XORed with the 16-word key (repeated), then P and the S-boxes
    /// are replaced, two words at a time, by the chained encryption of zero — with the 16-word
    /// `data` (repeated) XORed in before each encryption when given (Eksblowfish's ExpandKey).
    private static func expand(_ state: UnsafeMutablePointer<UInt32>, key: UnsafeMutablePointer<UInt32>,
                               data: UnsafeMutablePointer<UInt32>?) {
        for index in 0..<18 { state[index] ^= key[index & 15] }
        var left: UInt32 = 0, right: UInt32 = 0
        var index = 0
        if let data {
            var position = 0
            while index < stateWords {
                left ^= data[position]
                right ^= data[position + 1]
                position = (position + 2) & 15
                encrypt(state, &left, &right)
                state[index] = left
                state[index + 1] = right
                index += 2
            }
        } else {
            while index < stateWords {
                encrypt(state, &left, &right)
                state[index] = left
                state[index + 1] = right
                index += 2
            }
        }
    }

    /// One Blowfish block: 16 Feistel rounds, F(x) = ((S0[a] + S1[b]) ⊕ S2[c]) + S3[d] on x's bytes a b c d.
    /// Written out for debug builds, where this is nearly all of bcrypt_pbkdf's time: masking
    /// shifts, one pointer per S-box, no loop counter.
    @inline(__always)
    private static func encrypt(_ state: UnsafeMutablePointer<UInt32>, _ left: inout UInt32, _ right: inout UInt32) {
        let p = state, s0 = state + 18, s1 = state + 274, s2 = state + 530, s3 = state + 786
        var l = left ^ p[0], r = right
        r ^= (((s0[Int(l &>> 24)] &+ s1[Int((l &>> 16) & 0xFF)]) ^ s2[Int((l &>> 8) & 0xFF)]) &+ s3[Int(l & 0xFF)]) ^ p[1]
        l ^= (((s0[Int(r &>> 24)] &+ s1[Int((r &>> 16) & 0xFF)]) ^ s2[Int((r &>> 8) & 0xFF)]) &+ s3[Int(r & 0xFF)]) ^ p[2]
        r ^= (((s0[Int(l &>> 24)] &+ s1[Int((l &>> 16) & 0xFF)]) ^ s2[Int((l &>> 8) & 0xFF)]) &+ s3[Int(l & 0xFF)]) ^ p[3]
        l ^= (((s0[Int(r &>> 24)] &+ s1[Int((r &>> 16) & 0xFF)]) ^ s2[Int((r &>> 8) & 0xFF)]) &+ s3[Int(r & 0xFF)]) ^ p[4]
        r ^= (((s0[Int(l &>> 24)] &+ s1[Int((l &>> 16) & 0xFF)]) ^ s2[Int((l &>> 8) & 0xFF)]) &+ s3[Int(l & 0xFF)]) ^ p[5]
        l ^= (((s0[Int(r &>> 24)] &+ s1[Int((r &>> 16) & 0xFF)]) ^ s2[Int((r &>> 8) & 0xFF)]) &+ s3[Int(r & 0xFF)]) ^ p[6]
        r ^= (((s0[Int(l &>> 24)] &+ s1[Int((l &>> 16) & 0xFF)]) ^ s2[Int((l &>> 8) & 0xFF)]) &+ s3[Int(l & 0xFF)]) ^ p[7]
        l ^= (((s0[Int(r &>> 24)] &+ s1[Int((r &>> 16) & 0xFF)]) ^ s2[Int((r &>> 8) & 0xFF)]) &+ s3[Int(r & 0xFF)]) ^ p[8]
        r ^= (((s0[Int(l &>> 24)] &+ s1[Int((l &>> 16) & 0xFF)]) ^ s2[Int((l &>> 8) & 0xFF)]) &+ s3[Int(l & 0xFF)]) ^ p[9]
        l ^= (((s0[Int(r &>> 24)] &+ s1[Int((r &>> 16) & 0xFF)]) ^ s2[Int((r &>> 8) & 0xFF)]) &+ s3[Int(r & 0xFF)]) ^ p[10]
        r ^= (((s0[Int(l &>> 24)] &+ s1[Int((l &>> 16) & 0xFF)]) ^ s2[Int((l &>> 8) & 0xFF)]) &+ s3[Int(l & 0xFF)]) ^ p[11]
        l ^= (((s0[Int(r &>> 24)] &+ s1[Int((r &>> 16) & 0xFF)]) ^ s2[Int((r &>> 8) & 0xFF)]) &+ s3[Int(r & 0xFF)]) ^ p[12]
        r ^= (((s0[Int(l &>> 24)] &+ s1[Int((l &>> 16) & 0xFF)]) ^ s2[Int((l &>> 8) & 0xFF)]) &+ s3[Int(l & 0xFF)]) ^ p[13]
        l ^= (((s0[Int(r &>> 24)] &+ s1[Int((r &>> 16) & 0xFF)]) ^ s2[Int((r &>> 8) & 0xFF)]) &+ s3[Int(r & 0xFF)]) ^ p[14]
        r ^= (((s0[Int(l &>> 24)] &+ s1[Int((l &>> 16) & 0xFF)]) ^ s2[Int((l &>> 8) & 0xFF)]) &+ s3[Int(l & 0xFF)]) ^ p[15]
        l ^= (((s0[Int(r &>> 24)] &+ s1[Int((r &>> 16) & 0xFF)]) ^ s2[Int((r &>> 8) & 0xFF)]) &+ s3[Int(r & 0xFF)]) ^ p[16]
        left = r ^ p[17]
        right = l
    }

    private static func load(_ bytes: UnsafeRawBufferPointer, into words: UnsafeMutablePointer<UInt32>) {
        for index in 0..<16 {
            var word: UInt32 = 0
            for byte in 0..<4 where 4 * index + byte < bytes.count { word |= UInt32(bytes[4 * index + byte]) << (24 - 8 * byte) }
            words[index] = word
        }
    }

    private static func bigEndianWords(_ bytes: [UInt8]) -> [UInt32] {
        stride(from: 0, to: bytes.count - 3, by: 4).map { index in
            bytes[index..<index + 4].reduce(0) { $0 << 8 | UInt32($1) }
        }
    }
}
