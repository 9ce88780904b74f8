internal import COpenSSL

/// AES, triple DES, single DES and ChaCha20 in the modes PKCS#11 offers, through EVP_CIPHER_CTX.
/// Three kinds of mode: block modes (ECB, CBC) give whole blocks as they come; stream modes (CTR,
/// OFB, CFB, ChaCha20) give every byte as it comes; AEAD modes (GCM, ChaCha20-Poly1305) stream
/// when encrypting and hold the ciphertext until the tag checks when decrypting; and the modes
/// that need the whole message at once (CCM, XTS, CTS) hold their input and run at the end.
public final class SymmetricCipher {
    /// The block cipher. Triple DES takes two-key (16-byte) and three-key (24-byte) keys; single
    /// DES lives in OpenSSL's legacy provider, loaded the first time it is used.
    public enum Algorithm: Sendable, Hashable {
        case aes, tripleDES, des, chacha20

        public var blockSize: Int {
            switch self {
            case .aes: return 16
            case .tripleDES, .des: return 8
            case .chacha20: return 1
            }
        }

        public func accepts(keyLength: Int) -> Bool {
            switch self {
            case .chacha20: return keyLength == 32
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
        /// OFB, CFB with 8-bit and with 128-bit feedback (SP 800-38A §6.3–6.4).
        case ofb, cfb8, cfb128
        /// CBC with ciphertext stealing, variant CS1 of the SP 800-38A addendum (the partial
        /// next-to-last block first, no swap; a whole number of blocks is plain CBC) — what NSS,
        /// OpenSSL's CTS default and Kryoptic take PKCS#11's CKM_AES_CTS to be. Output as long
        /// as the input, at least one block.
        case cts
        /// XTS (IEEE 1619, SP 800-38E) with a 16-byte tweak; the key is both AES keys.
        case xts
        /// CCM (SP 800-38C) with a 7–13-byte nonce, a 4–16-byte tag, and the message length
        /// fixed in advance (it is part of the first block).
        case ccm(tagLength: Int, dataLength: Int)
        /// ChaCha20 (RFC 8439 §2.4 with a 32-bit counter and a 96-bit nonce, or the original
        /// 64-bit counter and 64-bit nonce); the IV is the state's last 16 bytes, counter first.
        case chacha20(counterBits: Int)
        /// ChaCha20-Poly1305 (RFC 8439 §2.8) with a 12-byte nonce and a 16-byte tag.
        case chacha20Poly1305

        /// The tag length of the AEAD modes that stream when encrypting.
        var aeadTagLength: Int? {
            switch self {
            case .gcm(let length): return length
            case .chacha20Poly1305: return 16
            default: return nil
            }
        }

        /// Modes whose whole input is needed before any output.
        var holdsAllInput: Bool {
            switch self {
            case .ccm, .xts, .cts: return true
            default: return false
            }
        }

        /// Modes whose output is as long as the input, byte for byte, as it comes.
        var isStream: Bool {
            switch self {
            case .ctr, .ofb, .cfb8, .cfb128, .chacha20: return true
            default: return false
            }
        }

        /// The IV lengths the mode takes.
        func ivLengths(_ algorithm: Algorithm) -> ClosedRange<Int> {
            switch self {
            case .ecb: return 0...0
            case .gcm: return 1...256
            case .ccm: return 7...13
            case .chacha20: return 16...16
            case .chacha20Poly1305: return 12...12
            default: return algorithm.blockSize...algorithm.blockSize
            }
        }
    }

    public let mode: Mode
    public let algorithm: Algorithm
    public let encrypting: Bool
    private var ctx: OpaquePointer
    /// AEAD decryption holds all ciphertext until the tag is checked at the end; CCM, XTS and
    /// CTS hold all input in both directions.
    private var heldCiphertext: [UInt8] = []
    /// CCM's additional data, absorbed once the message length is known (at the end).
    private var ccmAssociatedData: [UInt8] = []
    /// CTS decryption's ECB context with the same key (the next-to-last block is decrypted alone).
    private var blockDecryptor: OpaquePointer?
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

    /// Whether updates only collect input (AEAD decryption, CCM, XTS, CTS): they cannot fail
    /// half-way or produce output, so they need no trial copy.
    public var updatesHoldInput: Bool { mode.holdsAllInput || (tagLength != nil && !encrypting) }

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
        guard mode.ivLengths(algorithm).contains(iv.count) else {
            throw CryptoError(.invalidInput, "the IV must have \(mode.ivLengths(algorithm)) bytes, not \(iv.count)")
        }
        switch mode {
        case .gcm, .ccm:
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN, Int32(iv.count), nil) == 1 else {
                throw CryptoError(.invalidInput, "\(mode) IV length")
            }
        default: break
        }
        if case .ccm(let tagLength, let dataLength) = mode {
            guard (4...16).contains(tagLength), tagLength % 2 == 0, dataLength >= 0,
                  15 - iv.count >= 8 || dataLength < 1 << (8 * (15 - iv.count)),
                  EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(tagLength), nil) == 1 else {
                throw CryptoError(.invalidInput, "CCM tag length or message length")
            }
        }
        let ok = key.withUnsafeBytes { k in
            EVP_CipherInit_ex(ctx, nil, nil, k.baseAddress?.assumingMemoryBound(to: UInt8.self), iv.isEmpty ? nil : iv, encrypting ? 1 : 0)
        }
        guard ok == 1 else {
            OpenSSLErrorQueue.discardOwn()
            throw CryptoError(.invalidInput, "the key does not fit \(mode)")
        }
        EVP_CIPHER_CTX_set_padding(ctx, mode == .cbcPad ? 1 : 0)
        if mode == .cts, !encrypting {
            guard let ecbName = Self.algorithmName(algorithm, mode: .ecb, keyLength: key.count), let ecb = Self.cipher(named: ecbName),
                  let decryptor = EVP_CIPHER_CTX_new() else { throw CryptoError.library("CTS block context") }
            blockDecryptor = decryptor
            let ready = key.withUnsafeBytes { k in EVP_CipherInit_ex(decryptor, ecb, nil, k.baseAddress?.assumingMemoryBound(to: UInt8.self), nil, 0) }
            guard ready == 1 else { throw CryptoError.library("EVP_CipherInit_ex(CTS)") }
            EVP_CIPHER_CTX_set_padding(decryptor, 0)
        }
        ivLength = iv.count
        counterBudget = try Self.counterBudget(mode: mode, block: iv)
        try associatedData.withUnsafeBytes { try absorbAssociatedData($0) }
    }

    /// The bytes a CTR operation may process before its counter bits wrap: 16 × (2^bits − counter);
    /// for ChaCha20 with a 32-bit counter, 64 × (2^32 − counter) (OpenSSL would carry into the nonce).
    static func counterBudget(mode: Mode, block: [UInt8]) throws -> UInt64? {
        if case .chacha20(let bits) = mode {
            guard bits == 32, block.count == 16 else { return nil }
            let counter = UInt64(block[0]) | UInt64(block[1]) << 8 | UInt64(block[2]) << 16 | UInt64(block[3]) << 24
            return ((1 << 32) - counter) * 64
        }
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
        if case .ccm = mode {
            wipe(&ccmAssociatedData)
            ccmAssociatedData = Array(associatedData)
            return
        }
        if mode.aeadTagLength != nil, associatedData.count > 0 {
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
        guard mode.ivLengths(algorithm).contains(iv.count) else {
            throw CryptoError(.invalidInput, "the IV must have \(mode.ivLengths(algorithm)) bytes, not \(iv.count)")
        }
        switch mode {
        case .gcm, .ccm:
            if iv.count != ivLength {
                guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_IVLEN, Int32(iv.count), nil) == 1 else {
                    throw CryptoError(.invalidInput, "\(mode) IV length")
                }
                ivLength = iv.count
            }
        default: break
        }
        if !heldCiphertext.isEmpty {
            wipe(&heldCiphertext)
            heldCiphertext = []
        }
        buffered = 0
        counterBudget = try Self.counterBudget(mode: mode, block: Array(iv))
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
        ccmAssociatedData = other.ccmAssociatedData
        guard EVP_CIPHER_CTX_copy(ctx, other.ctx) == 1 else { throw CryptoError.library("EVP_CIPHER_CTX_copy") }
        if let source = other.blockDecryptor {
            guard let decryptor = EVP_CIPHER_CTX_new() else { throw CryptoError.library("EVP_CIPHER_CTX_new") }
            blockDecryptor = decryptor
            guard EVP_CIPHER_CTX_copy(decryptor, source) == 1 else { throw CryptoError.library("EVP_CIPHER_CTX_copy") }
        }
    }

    deinit {
        EVP_CIPHER_CTX_free(ctx)
        if let blockDecryptor { EVP_CIPHER_CTX_free(blockDecryptor) }
        wipe(&heldCiphertext)
        wipe(&ccmAssociatedData)
    }

    /// An independent copy of the state: a step run on the copy leaves this one untouched.
    public func copy() throws -> SymmetricCipher { try SymmetricCipher(copying: self) }

    /// Adopts the state of `other` (a copy that ran ahead).
    public func adopt(_ other: SymmetricCipher) {
        swap(&ctx, &other.ctx)
        swap(&blockDecryptor, &other.blockDecryptor)
        heldCiphertext = other.heldCiphertext
        buffered = other.buffered
        counterBudget = other.counterBudget
    }

    private var tagLength: Int? { mode.aeadTagLength }

    /// The most an update of `count` bytes can produce.
    public func maximumUpdateOutput(_ count: Int) -> Int {
        if updatesHoldInput { return 0 }
        if mode.isStream || tagLength != nil { return count }
        return ((buffered + count) / blockSize) * blockSize
    }

    /// The most the final step can produce.
    public var maximumFinalOutput: Int {
        if let tagLength { return encrypting ? tagLength : max(0, heldCiphertext.count - tagLength) }
        switch mode {
        case .cbcPad: return blockSize
        case .ccm(let tagLength, _): return encrypting ? heldCiphertext.count + tagLength : max(0, heldCiphertext.count - tagLength)
        case .xts, .cts: return heldCiphertext.count
        default: return 0
        }
    }

    public func update(_ input: UnsafeRawBufferPointer) throws -> [UInt8] {
        guard input.count > 0 else { return [] }
        guard input.count <= Int(Int32.max) - Self.blockSize else { throw CryptoError(.invalidInput, "input too large") }
        if updatesHoldInput {
            guard heldCiphertext.count + input.count <= Self.maximumHeldInput else {
                throw CryptoError(.invalidInput, "\(mode) holds at most \(Self.maximumHeldInput) bytes")
            }
            hold(input)
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

    /// Appends to the held input (plaintext for CCM, XTS and CTS encryption): a growing array is
    /// moved by hand, so the storage it leaves is wiped rather than freed as it is.
    private func hold(_ input: UnsafeRawBufferPointer) {
        let needed = heldCiphertext.count + input.count
        if needed > heldCiphertext.capacity {
            var grown: [UInt8] = []
            grown.reserveCapacity(max(needed, heldCiphertext.capacity * 2))
            grown += heldCiphertext
            wipe(&heldCiphertext)
            heldCiphertext = grown
        }
        heldCiphertext += input
    }

    /// Ends the operation. Block modes without padding need whole blocks; GCM decryption fails
    /// with `.authenticationFailed` if the tag does not verify (and returns no plaintext).
    public func finish() throws -> [UInt8] {
        if let tagLength {
            return encrypting ? try finishGCMEncryption(tagLength) : try finishGCMDecryption(tagLength)
        }
        if mode.holdsAllInput {
            var out = [UInt8](repeating: 0, count: oneShotBound(heldCiphertext.count))
            let held = heldCiphertext
            let written = try out.withUnsafeMutableBytes { buffer in
                try held.withUnsafeBytes { input in try runWhole(input, into: buffer) }
            }
            let result = Array(out.prefix(written))
            wipe(&out)
            return result
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
    public func oneShotBound(_ count: Int) -> Int { count + Self.blockSize + 16 }

    /// The whole single-part operation (update, then finish) written straight into `output`,
    /// which must hold `oneShotBound(input.count)` bytes: no intermediate buffers, which for
    /// large inputs cost more than the cipher. Only for an operation that has had no update.
    /// A GCM tag that does not verify wipes what was written and fails `.authenticationFailed`.
    public func oneShot(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws -> Int {
        guard heldCiphertext.isEmpty, buffered == 0, output.count >= oneShotBound(input.count), let out = output.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            throw CryptoError(.invalidInput, "one-shot needs a fresh operation and room for its output")
        }
        guard input.count <= Int(Int32.max) - Self.blockSize else { throw CryptoError(.invalidInput, "input too large") }
        if mode.holdsAllInput {
            guard input.count <= Self.maximumHeldInput else { throw CryptoError(.invalidInput, "\(mode) takes at most \(Self.maximumHeldInput) bytes") }
            return try runWhole(input, into: output)
        }
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

    /// CCM, XTS or CTS over the whole message, written into `output` (room: `oneShotBound`).
    private func runWhole(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer) throws -> Int {
        guard output.count >= oneShotBound(input.count), let out = output.baseAddress?.assumingMemoryBound(to: UInt8.self) else {
            throw CryptoError(.invalidInput, "no room for the output")
        }
        // A non-NULL pointer even for an empty message (OpenSSL reads NULL input as "finish").
        var empty: UInt8 = 0
        let source = input.baseAddress?.assumingMemoryBound(to: UInt8.self) ?? withUnsafeMutablePointer(to: &empty) { UnsafePointer($0) }
        switch mode {
        case .ccm(let tagLength, let dataLength):
            return try runCCM(source, count: input.count, into: out, tagLength: tagLength, dataLength: dataLength, output: output)
        case .xts:
            guard input.count >= 16 else { throw CryptoError(.invalidInput, "XTS needs at least 16 bytes") }
            var written: Int32 = 0
            guard EVP_CipherUpdate(ctx, out, &written, source, Int32(input.count)) == 1 else {
                OpenSSLErrorQueue.discardOwn()
                throw CryptoError(.invalidInput, "XTS refused the data")
            }
            var tail: Int32 = 0
            guard EVP_CipherFinal_ex(ctx, out + Int(written), &tail) == 1 else { throw CryptoError.library("XTS final") }
            return Int(written + tail)
        case .cts:
            return try runCTS(source, count: input.count, into: out)
        default:
            throw CryptoError(.invalidInput, "not a whole-message mode")
        }
    }

    private func runCCM(_ source: UnsafePointer<UInt8>, count: Int, into out: UnsafeMutablePointer<UInt8>, tagLength: Int, dataLength: Int,
                        output: UnsafeMutableRawBufferPointer) throws -> Int {
        var body = count
        if !encrypting {
            guard count >= tagLength else { throw CryptoError(.invalidInput, "shorter than the CCM tag") }
            body = count - tagLength
            var tag = Array(UnsafeBufferPointer(start: source + body, count: tagLength))
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, Int32(tagLength), &tag) == 1 else { throw CryptoError.library("CCM tag") }
        }
        guard body == dataLength else {
            throw CryptoError(.invalidInput, "CCM was told \(dataLength) bytes of data and given \(body)")
        }
        var length: Int32 = 0
        guard EVP_CipherUpdate(ctx, nil, &length, nil, Int32(body)) == 1 else { throw CryptoError.library("CCM length") }
        if !ccmAssociatedData.isEmpty {
            guard EVP_CipherUpdate(ctx, nil, &length, ccmAssociatedData, Int32(ccmAssociatedData.count)) == 1 else { throw CryptoError.library("CCM AAD") }
        }
        var written: Int32 = 0
        guard EVP_CipherUpdate(ctx, out, &written, source, Int32(body)) == 1 else {
            OpenSSLErrorQueue.discardOwn()
            output.initializeMemory(as: UInt8.self, repeating: 0)
            if encrypting { throw CryptoError.library("CCM update") }
            throw CryptoError(.authenticationFailed, "the CCM tag does not verify")
        }
        var tail: Int32 = 0
        guard EVP_CipherFinal_ex(ctx, out + Int(written), &tail) == 1 else {
            OpenSSLErrorQueue.discardOwn()
            output.initializeMemory(as: UInt8.self, repeating: 0)
            if encrypting { throw CryptoError.library("CCM final") }
            throw CryptoError(.authenticationFailed, "the CCM tag does not verify")
        }
        var total = Int(written + tail)
        if encrypting {
            guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, Int32(tagLength), out + total) == 1 else { throw CryptoError.library("CCM tag") }
            total += tagLength
        }
        return total
    }

    /// CBC-CS1: CBC up to the last full block before the tail (C_{n-1}); encrypting, the
    /// zero-padded tail is chained after it (E), and the output ends C_{n-1} cut to the tail's
    /// length, then E; decrypting, E is deciphered alone to recover the bytes cut from C_{n-1},
    /// then the chain goes on with the rebuilt C_{n-1}.
    private func runCTS(_ source: UnsafePointer<UInt8>, count: Int, into out: UnsafeMutablePointer<UInt8>) throws -> Int {
        guard count >= 16 else { throw CryptoError(.invalidInput, "CTS needs at least one block (16 bytes)") }
        func cbc(_ input: UnsafePointer<UInt8>, _ length: Int, _ output: UnsafeMutablePointer<UInt8>) throws {
            guard length > 0 else { return }
            var written: Int32 = 0
            guard EVP_CipherUpdate(ctx, output, &written, input, Int32(length)) == 1, Int(written) == length else { throw CryptoError.library("CTS CBC") }
        }
        if count == 16 {
            try cbc(source, 16, out)
            return 16
        }
        let tailLength = count % 16 == 0 ? 16 : count % 16
        let head = count - tailLength  // ≥ 16
        var last = [UInt8](repeating: 0, count: 16)
        defer { wipe(&last) }
        if encrypting {
            // C_1 … C_{n-1} as CBC; E = CBC-next(tail ‖ 0…); out = … ‖ C_{n-1}[0..<tail] ‖ E.
            try cbc(source, head, out)
            var padded = [UInt8](repeating: 0, count: 16)
            defer { wipe(&padded) }
            for i in 0..<tailLength { padded[i] = source[head + i] }
            try padded.withUnsafeBufferPointer { p in
                guard let base = p.baseAddress else { throw CryptoError.library("CTS buffer") }
                try cbc(base, 16, &last)
            }
            for i in 0..<16 { out[head - 16 + tailLength + i] = last[i] }
            return count
        }
        guard let blockDecryptor else { throw CryptoError.library("CTS block context") }
        // The blocks before C_{n-1}, as CBC (the chain value stays in the context).
        try cbc(source, head - 16, out)
        // Input: … ‖ C_{n-1}[0..<tail] ‖ E. Z = D(E) = (P_n ‖ 0…) ⊕ C_{n-1}, so
        // C_{n-1} = C_{n-1}[0..<tail] ‖ Z[tail...] and P_n = Z[0..<tail] ⊕ C_{n-1}[0..<tail].
        let cut = source + head - 16, e = cut + tailLength
        var z = [UInt8](repeating: 0, count: 16)
        defer { wipe(&z) }
        var written: Int32 = 0
        guard EVP_CipherUpdate(blockDecryptor, &z, &written, e, 16) == 1 else { throw CryptoError.library("CTS block") }
        var previous = [UInt8](repeating: 0, count: 16)
        defer { wipe(&previous) }
        for i in 0..<16 { previous[i] = i < tailLength ? cut[i] : z[i] }
        try previous.withUnsafeBufferPointer { p in
            guard let base = p.baseAddress else { throw CryptoError.library("CTS buffer") }
            try cbc(base, 16, &last)
        }
        for i in 0..<tailLength { out[head + i] = z[i] ^ previous[i] }
        for i in 0..<16 { out[head - 16 + i] = last[i] }
        return count
    }

    /// The OpenSSL algorithm name for `mode` with a key of `keyLength` bytes.
    static func algorithmName(_ algorithm: Algorithm, mode: Mode, keyLength: Int) -> String? {
        if mode == .xts {
            guard algorithm == .aes, keyLength == 32 || keyLength == 64 else { return nil }
            return "AES-\(keyLength * 4)-XTS"
        }
        guard algorithm.accepts(keyLength: keyLength) else { return nil }
        switch algorithm {
        case .aes:
            let suffix: String
            switch mode {
            case .ecb: suffix = "ECB"
            case .cbc, .cbcPad, .cts: suffix = "CBC"
            case .ctr: suffix = "CTR"
            case .gcm: suffix = "GCM"
            case .ccm: suffix = "CCM"
            case .ofb: suffix = "OFB"
            case .cfb8: suffix = "CFB8"
            case .cfb128: suffix = "CFB"
            case .xts, .chacha20, .chacha20Poly1305: return nil
            }
            return "AES-\(keyLength * 8)-\(suffix)"
        case .chacha20:
            switch mode {
            case .chacha20: return "ChaCha20"
            case .chacha20Poly1305: return "ChaCha20-Poly1305"
            default: return nil
            }
        case .tripleDES, .des:
            let prefix = algorithm == .des ? "DES" : keyLength == 16 ? "DES-EDE" : "DES-EDE3"
            switch mode {
            case .ecb: return prefix + "-ECB"
            case .cbc, .cbcPad: return prefix + "-CBC"
            default: return nil
            }
        }
    }

    /// Every AES and triple-DES cipher fetched from our library context once for the process: a
    /// legacy `EVP_aes_*()` handle makes each new context fetch its implementation again (about
    /// 3,000 instructions per C_EncryptInit), from the host's default context. Single DES is
    /// fetched when first used (after the legacy provider loads into our context).
    nonisolated(unsafe) private static let fetched: [String: OpaquePointer] = {
        var table: [String: OpaquePointer] = [:]
        var names: [String] = []
        for bits in [128, 192, 256] {
            for suffix in ["ECB", "CBC", "CTR", "GCM", "CCM", "OFB", "CFB8", "CFB"] { names.append("AES-\(bits)-\(suffix)") }
        }
        names += ["AES-128-XTS", "AES-256-XTS", "ChaCha20", "ChaCha20-Poly1305"]
        names += ["DES-EDE-ECB", "DES-EDE-CBC", "DES-EDE3-ECB", "DES-EDE3-CBC"]
        for name in names {
            if let cipher = Fetched.cipher(name) { table[name] = cipher }
        }
        return table
    }()

    static func cipher(named name: String) -> OpaquePointer? {
        fetched[name] ?? Fetched.cipher(name)
    }

    /// A secret key's CKA_CHECK_VALUE source: one zero block encrypted in ECB mode.
    public static func encryptZeroBlock(key: SecureBytes, algorithm: Algorithm) throws -> [UInt8] {
        let cipher = try SymmetricCipher(mode: .ecb, key: key, iv: [], encrypting: true, algorithm: algorithm)
        let zeros = [UInt8](repeating: 0, count: algorithm.blockSize)
        return try zeros.withUnsafeBytes { try cipher.update($0) } + cipher.finish()
    }
}
