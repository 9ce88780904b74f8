internal import COpenSSL

/// AES, triple DES and single DES in the modes PKCS#11 offers, streaming through EVP_CIPHER_CTX.
public final class SymmetricCipher {
    /// The block cipher. Triple DES takes two-key (16-byte) and three-key (24-byte) keys; single
    /// DES lives in OpenSSL's legacy provider, loaded the first time it is used.
    public enum Algorithm: Sendable, Hashable {
        case aes, tripleDES, des

        public var blockSize: Int { self == .aes ? 16 : 8 }

        public func accepts(keyLength: Int) -> Bool {
            switch self {
            case .aes: return [16, 24, 32].contains(keyLength)
            case .tripleDES: return keyLength == 16 || keyLength == 24
            case .des: return keyLength == 8
            }
        }
    }

    public enum Mode: Sendable, Hashable {
        case ecb, cbc, cbcPad
        /// Counter mode whose counter is the low `counterBits` (1–128) bits of the counter block;
        /// the bits above it are a nonce that never changes.
        case ctr(counterBits: Int)
        /// GCM with its 12-byte-or-longer IV, additional data and tag length in bytes.
        case gcm(tagLength: Int)
    }

    public let mode: Mode
    public let algorithm: Algorithm
    public let encrypting: Bool
    private var ctx: OpaquePointer
    /// GCM decryption holds all ciphertext until the tag is checked at the end.
    private var heldCiphertext: [UInt8] = []
    /// Bytes given to OpenSSL that it has not yet turned into output (block modes: less than a
    /// block, or a whole block held back for CBC-PAD decryption).
    private var buffered = 0
    /// CTR: the bytes left before the counter would wrap (nil when that is beyond any input).
    /// OpenSSL increments the whole block, which is the same as incrementing only the counter
    /// bits for as long as the counter does not wrap: so the input is bounded, never wrapped.
    private var counterBudget: UInt64?

    /// AES's block size, the largest of the three.
    public static let blockSize = 16
    /// This cipher's block size.
    public var blockSize: Int { algorithm.blockSize }
    /// GCM decryption returns nothing before the tag checks, so it holds the ciphertext: this much.
    public static let maximumHeldInput = 64 << 20

    /// Whether updates only collect input (GCM decryption): they cannot fail half-way or
    /// produce output, so they need no trial copy.
    public var updatesHoldInput: Bool { tagLength != nil && !encrypting }

    public init(mode: Mode, key: SecureBytes, iv: [UInt8], associatedData: [UInt8] = [], encrypting: Bool, algorithm: Algorithm = .aes) throws {
        guard let name = Self.algorithmName(algorithm, mode: mode, keyLength: key.count) else {
            throw CryptoError(.invalidInput, "no \(algorithm) cipher for a \(key.count)-byte key in \(mode)")
        }
        guard algorithm != .des || LegacyProvider.load() else { throw CryptoError(.library, "OpenSSL's legacy provider (single DES) does not load") }
        guard let cipher = Self.cipher(named: name) else { throw CryptoError(.invalidInput, "OpenSSL has no cipher \(name)") }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError.library("EVP_CIPHER_CTX_new") }
        self.ctx = ctx
        self.mode = mode
        self.algorithm = algorithm
        self.encrypting = encrypting
        guard EVP_CipherInit_ex(ctx, cipher, nil, nil, nil, encrypting ? 1 : 0) == 1 else { throw CryptoError.library("EVP_CipherInit_ex") }
        if case .gcm = mode {
            guard iv.count >= 1, EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, Int32(iv.count), nil) == 1 else {
                throw CryptoError(.invalidInput, "GCM IV length")
            }
        } else if mode != .ecb, iv.count != algorithm.blockSize {
            throw CryptoError(.invalidInput, "the IV must have \(algorithm.blockSize) bytes")
        }
        let ok = key.withUnsafeBytes { k in
            EVP_CipherInit_ex(ctx, nil, nil, k.baseAddress?.assumingMemoryBound(to: UInt8.self), iv.isEmpty ? nil : iv, encrypting ? 1 : 0)
        }
        guard ok == 1 else { throw CryptoError.library("EVP_CipherInit_ex(key)") }
        EVP_CIPHER_CTX_set_padding(ctx, mode == .cbcPad ? 1 : 0)
        ivLength = iv.count
        counterBudget = try Self.counterBudget(mode: mode, block: iv)
        try associatedData.withUnsafeBytes { try absorbAssociatedData($0) }
    }

    /// The bytes a CTR operation may process before its counter bits wrap: 16 × (2^bits − counter).
    static func counterBudget(mode: Mode, block: [UInt8]) throws -> UInt64? {
        guard case .ctr(let bits) = mode else { return nil }
        guard (1...128).contains(bits), block.count == blockSize else { throw CryptoError(.invalidInput, "CTR counter of \(bits) bits") }
        let value = block.reduce(UInt128(0)) { $0 << 8 | UInt128($1) }
        let mask: UInt128 = bits == 128 ? .max : (UInt128(1) << bits) - 1
        let blocksAfterFirst = mask - (value & mask)
        guard blocksAfterFirst < UInt128(UInt64.max / UInt64(blockSize)) else { return nil }
        return (UInt64(blocksAfterFirst) + 1) * UInt64(blockSize)
    }

    /// Spends `count` bytes of a CTR counter's range, or refuses them all.
    private func spendCounter(_ count: Int) throws {
        guard let budget = counterBudget else { return }
        guard UInt64(count) <= budget else {
            throw CryptoError(.limitExceeded, "the CTR counter would run past its range (\(budget) more bytes allowed)")
        }
        counterBudget = budget - UInt64(count)
    }

    /// The IV length set in the context (GCM accepts any).
    private var ivLength = 0

    private func absorbAssociatedData(_ associatedData: UnsafeRawBufferPointer) throws {
        if case .gcm = mode, associatedData.count > 0 {
            var length: Int32 = 0
            guard associatedData.count <= Int(Int32.max),
                  EVP_CipherUpdate(ctx, nil, &length, associatedData.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(associatedData.count)) == 1 else {
                throw CryptoError.library("GCM AAD")
            }
        }
    }

    /// Starts a new operation with the same key, mode and direction and a new IV, keeping the
    /// key schedule: what a host encrypting many small messages under one key pays per message
    /// drops to the IV set-up. Whatever state the previous operation left is discarded.
    public func restart(iv: [UInt8], associatedData: [UInt8] = []) throws {
        try iv.withUnsafeBytes { iv in
            try associatedData.withUnsafeBytes { associatedData in try restart(iv: iv, associatedData: associatedData) }
        }
    }

    /// `restart` with the IV and additional data read where they are (a caller's parameter).
    public func restart(iv: UnsafeRawBufferPointer, associatedData: UnsafeRawBufferPointer) throws {
        if case .gcm = mode {
            guard iv.count >= 1, iv.count <= Int(Int32.max) else { throw CryptoError(.invalidInput, "GCM IV length") }
            if iv.count != ivLength {
                guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, Int32(iv.count), nil) == 1 else {
                    throw CryptoError(.invalidInput, "GCM IV length")
                }
                ivLength = iv.count
            }
        } else if mode != .ecb, iv.count != blockSize {
            throw CryptoError(.invalidInput, "the IV must have \(blockSize) bytes")
        }
        if !heldCiphertext.isEmpty {
            wipe(&heldCiphertext)
            heldCiphertext = []
        }
        buffered = 0
        if case .ctr = mode { counterBudget = try Self.counterBudget(mode: mode, block: Array(iv)) }
        let start = iv.count == 0 ? nil : iv.baseAddress?.assumingMemoryBound(to: UInt8.self)
        guard EVP_CipherInit_ex(ctx, nil, nil, nil, start, encrypting ? 1 : 0) == 1 else {
            throw CryptoError.library("EVP_CipherInit_ex(iv)")
        }
        try absorbAssociatedData(associatedData)
    }

    private init(copying other: SymmetricCipher) throws {
        guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError.library("EVP_CIPHER_CTX_new") }
        self.ctx = ctx
        mode = other.mode
        algorithm = other.algorithm
        encrypting = other.encrypting
        heldCiphertext = other.heldCiphertext
        buffered = other.buffered
        ivLength = other.ivLength
        counterBudget = other.counterBudget
        guard EVP_CIPHER_CTX_copy(ctx, other.ctx) == 1 else { throw CryptoError.library("EVP_CIPHER_CTX_copy") }
    }

    deinit {
        EVP_CIPHER_CTX_free(ctx)
        wipe(&heldCiphertext)
    }

    /// An independent copy of the state: a step run on the copy leaves this one untouched.
    public func copy() throws -> SymmetricCipher { try SymmetricCipher(copying: self) }

    /// Adopts the state of `other` (a copy that ran ahead).
    public func adopt(_ other: SymmetricCipher) {
        swap(&ctx, &other.ctx)
        heldCiphertext = other.heldCiphertext
        buffered = other.buffered
        counterBudget = other.counterBudget
    }

    private var tagLength: Int? {
        if case .gcm(let length) = mode { return length }
        return nil
    }

    /// The most an update of `count` bytes can produce.
    public func maximumUpdateOutput(_ count: Int) -> Int {
        if tagLength != nil && !encrypting { return 0 }
        if case .ctr = mode { return count }
        if tagLength != nil { return count }
        return ((buffered + count) / blockSize) * blockSize
    }

    /// The most the final step can produce.
    public var maximumFinalOutput: Int {
        if let tagLength { return encrypting ? tagLength : max(0, heldCiphertext.count - tagLength) }
        switch mode {
        case .cbcPad: return blockSize
        default: return 0
        }
    }

    public func update(_ input: UnsafeRawBufferPointer) throws -> [UInt8] {
        guard input.count > 0 else { return [] }
        guard input.count <= Int(Int32.max) - Self.blockSize else { throw CryptoError(.invalidInput, "input too large") }
        if tagLength != nil && !encrypting {
            guard heldCiphertext.count + input.count <= Self.maximumHeldInput else {
                throw CryptoError(.invalidInput, "GCM decryption holds at most \(Self.maximumHeldInput) bytes")
            }
            heldCiphertext += input
            return []
        }
        try spendCounter(input.count)
        var out = [UInt8](repeating: 0, count: input.count + Self.blockSize)
        var length: Int32 = 0
        guard EVP_CipherUpdate(ctx, &out, &length, input.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(input.count)) == 1 else {
            throw CryptoError.library("EVP_CipherUpdate")
        }
        buffered += input.count - Int(length)
        return Array(out.prefix(Int(length)))
    }

    /// Ends the operation. Block modes without padding need whole blocks; GCM decryption fails
    /// with `.authenticationFailed` if the tag does not verify (and returns no plaintext).
    public func finish() throws -> [UInt8] {
        if let tagLength {
            return encrypting ? try finishGCMEncryption(tagLength) : try finishGCMDecryption(tagLength)
        }
        var out = [UInt8](repeating: 0, count: Self.blockSize)
        var length: Int32 = 0
        guard EVP_CipherFinal_ex(ctx, &out, &length) == 1 else {
            OpenSSLErrorQueue.discardOwn()
            throw CryptoError(.invalidInput, encrypting ? "the data is not a whole number of blocks" : "bad padding or length")
        }
        return Array(out.prefix(Int(length)))
    }

    /// The room `oneShot` needs for `count` input bytes.
    public func oneShotBound(_ count: Int) -> Int { count + Self.blockSize + (tagLength ?? 0) }

    /// The whole single-part operation (update, then finish) written straight into `output`,
    /// which must hold `oneShotBound(input.count)` bytes: no intermediate buffers, which for
    /// large inputs cost more than the cipher. Only for an operation that has had no update.
    /// A GCM tag that does not verify wipes what was written and fails `.authenticationFailed`.
    public func oneShot(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws -> Int {
        guard heldCiphertext.isEmpty, buffered == 0, output.count >= oneShotBound(input.count), let out = output.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            throw CryptoError(.invalidInput, "one-shot needs a fresh operation and room for its output")
        }
        guard input.count <= Int(Int32.max) - Self.blockSize else { throw CryptoError(.invalidInput, "input too large") }
        try spendCounter(input.count)
        let source = input.baseAddress?.assumingMemoryBound(to: UInt8.self)
        var body = input.count
        var tag: [UInt8] = []
        if let tagLength, !encrypting {
            guard input.count >= tagLength else { throw CryptoError(.invalidInput, "shorter than the GCM tag") }
            body = input.count - tagLength
            tag = Array(input[body...])
        }
        var written: Int32 = 0
        if body > 0 {
            guard EVP_CipherUpdate(ctx, out, &written, source, Int32(body)) == 1 else { throw CryptoError.library("EVP_CipherUpdate") }
        }
        if let tagLength, !encrypting {
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, Int32(tagLength), &tag) == 1 else { throw CryptoError.library("GCM tag") }
        }
        var tail: Int32 = 0
        guard EVP_CipherFinal_ex(ctx, out + Int(written), &tail) == 1 else {
            OpenSSLErrorQueue.discardOwn()
            if tagLength != nil, !encrypting {
                UnsafeMutableRawBufferPointer(output).initializeMemory(as: UInt8.self, repeating: 0)
                throw CryptoError(.authenticationFailed, "the GCM tag does not verify")
            }
            throw CryptoError(.invalidInput, encrypting ? "the data is not a whole number of blocks" : "bad padding or length")
        }
        var total = Int(written + tail)
        if let tagLength, encrypting {
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, Int32(tagLength), out + total) == 1 else { throw CryptoError.library("GCM tag") }
            total += tagLength
        }
        return total
    }

    private func finishGCMEncryption(_ tagLength: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Self.blockSize)
        var length: Int32 = 0
        guard EVP_CipherFinal_ex(ctx, &out, &length) == 1 else { throw CryptoError.library("GCM final") }
        var tag = [UInt8](repeating: 0, count: tagLength)
        guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, Int32(tagLength), &tag) == 1 else { throw CryptoError.library("GCM tag") }
        return Array(out.prefix(Int(length))) + tag
    }

    private func finishGCMDecryption(_ tagLength: Int) throws -> [UInt8] {
        guard heldCiphertext.count >= tagLength else { throw CryptoError(.invalidInput, "shorter than the GCM tag") }
        let bodyLength = heldCiphertext.count - tagLength
        var tag = Array(heldCiphertext[bodyLength...])
        var out = [UInt8](repeating: 0, count: bodyLength + Self.blockSize)
        var length: Int32 = 0
        if bodyLength > 0 {
            guard EVP_CipherUpdate(ctx, &out, &length, heldCiphertext, Int32(bodyLength)) == 1 else { throw CryptoError.library("GCM update") }
        }
        guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, Int32(tagLength), &tag) == 1 else { throw CryptoError.library("GCM tag") }
        var tail: Int32 = 0
        let ok = out.withUnsafeMutableBufferPointer { EVP_CipherFinal_ex(ctx, $0.baseAddress.map { $0 + Int(length) }, &tail) }
        guard ok == 1 else {
            OpenSSLErrorQueue.discardOwn()
            wipe(&out)
            throw CryptoError(.authenticationFailed, "the GCM tag does not verify")
        }
        return Array(out.prefix(Int(length + tail)))
    }

    /// The OpenSSL algorithm name for `mode` with a key of `keyLength` bytes.
    static func algorithmName(_ algorithm: Algorithm, mode: Mode, keyLength: Int) -> String? {
        guard algorithm.accepts(keyLength: keyLength) else { return nil }
        switch algorithm {
        case .aes:
            let suffix: String
            switch mode {
            case .ecb: suffix = "ECB"
            case .cbc, .cbcPad: suffix = "CBC"
            case .ctr: suffix = "CTR"
            case .gcm: suffix = "GCM"
            }
            return "AES-\(keyLength * 8)-\(suffix)"
        case .tripleDES, .des:
            let prefix = algorithm == .des ? "DES" : keyLength == 16 ? "DES-EDE" : "DES-EDE3"
            switch mode {
            case .ecb: return prefix + "-ECB"
            case .cbc, .cbcPad: return prefix + "-CBC"
            case .ctr, .gcm: return nil
            }
        }
    }

    /// Every AES and triple-DES cipher fetched once for the process: a legacy `EVP_aes_*()`
    /// handle makes each new context fetch its implementation again (about 3,000 instructions per
    /// C_EncryptInit). Single DES is fetched when first used (after its provider loads).
    nonisolated(unsafe) private static let fetched: [String: OpaquePointer] = {
        var table: [String: OpaquePointer] = [:]
        var names: [String] = []
        for bits in [128, 192, 256] {
            for suffix in ["ECB", "CBC", "CTR", "GCM"] { names.append("AES-\(bits)-\(suffix)") }
        }
        names += ["DES-EDE-ECB", "DES-EDE-CBC", "DES-EDE3-ECB", "DES-EDE3-CBC"]
        for name in names {
            if let cipher = EVP_CIPHER_fetch(nil, name, nil) { table[name] = cipher }
        }
        return table
    }()

    static func cipher(named name: String) -> OpaquePointer? {
        if let cipher = fetched[name] { return cipher }
        let cipher = EVP_get_cipherbyname(name)
        if cipher == nil { OpenSSLErrorQueue.discardOwn() }
        return cipher
    }

    /// A secret key's CKA_CHECK_VALUE source: one zero block encrypted in ECB mode.
    public static func encryptZeroBlock(key: SecureBytes, algorithm: Algorithm) throws -> [UInt8] {
        let cipher = try SymmetricCipher(mode: .ecb, key: key, iv: [], encrypting: true, algorithm: algorithm)
        let zeros = [UInt8](repeating: 0, count: algorithm.blockSize)
        return try zeros.withUnsafeBytes { try cipher.update($0) } + cipher.finish()
    }
}
