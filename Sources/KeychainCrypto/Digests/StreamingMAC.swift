internal import COpenSSL

/// A MAC fed in parts (C_SignUpdate with an HMAC, CMAC or CBC-MAC mechanism).
public final class StreamingMAC {
    public enum Algorithm: Sendable, Equatable {
        case hmac(Digest.Algorithm)
        case aesCMAC
        /// CMAC over triple DES (SP 800-38B), keys of 16 (two-key) or 24 bytes.
        case tripleDESCMAC
        /// CBC-MAC with a zero IV over the data zero-padded to whole blocks (FIPS 113; PKCS#11's
        /// CKM_AES_MAC, CKM_DES3_MAC and their _GENERAL forms), the first `length` bytes of the
        /// last block.
        case cbcMAC(SymmetricCipher.Algorithm, length: Int)

        public var outputSize: Int {
            switch self {
            case .hmac(let digest): return digest.outputSize
            case .aesCMAC: return 16
            case .tripleDESCMAC: return 8
            case .cbcMAC(_, let length): return length
            }
        }
    }

    private let ctx: OpaquePointer?
    public let algorithm: Algorithm
    /// CBC-MAC: the cipher, the last ciphertext block, and how many bytes went in.
    private let chain: SymmetricCipher?
    private var lastBlock: [UInt8] = []
    private var absorbed = 0
    /// A _GENERAL mechanism's MAC length: the MAC's first bytes (nil: all of it).
    public var truncatedLength: Int?

    public init(_ algorithm: Algorithm, key: SecureBytes) throws {
        self.algorithm = algorithm
        if case .cbcMAC(let cipher, let length) = algorithm {
            guard (1...cipher.blockSize).contains(length) else { throw CryptoError(.invalidInput, "a CBC-MAC of \(length) bytes") }
            chain = try SymmetricCipher(mode: .cbc, key: key, iv: [UInt8](repeating: 0, count: cipher.blockSize), encrypting: true, algorithm: cipher)
            ctx = nil
            return
        }
        chain = nil
        let (macName, parameterName, parameterValue): (String, String, String)
        switch algorithm {
        case .hmac(let digest):
            (macName, parameterName, parameterValue) = ("HMAC", "digest", digest.name)
        case .aesCMAC:
            guard [16, 24, 32].contains(key.count) else { throw CryptoError(.invalidInput, "AES key length \(key.count)") }
            (macName, parameterName, parameterValue) = ("CMAC", "cipher", "AES-\(key.count * 8)-CBC")
        case .tripleDESCMAC:
            guard [16, 24].contains(key.count) else { throw CryptoError(.invalidInput, "DES3 key length \(key.count)") }
            (macName, parameterName, parameterValue) = ("CMAC", "cipher", key.count == 16 ? "DES-EDE-CBC" : "DES-EDE3-CBC")
        case .cbcMAC:
            throw CryptoError(.invalidInput, "CBC-MAC has no EVP_MAC")
        }
        // From our library context; the MAC fetches its digest or cipher from the same one.
        guard let mac = Fetched.mac(macName) else { throw CryptoError.library("EVP_MAC_fetch(\(macName))") }
        guard let ctx = EVP_MAC_CTX_new(mac) else { throw CryptoError.library("EVP_MAC_CTX_new") }
        self.ctx = ctx
        let name = strdup(parameterName), value = strdup(parameterValue)
        defer {
            free(name)
            free(value)
        }
        var params = [OSSL_PARAM_construct_utf8_string(name, value, 0), OSSL_PARAM_construct_end()]
        let ok = key.withUnsafeBytes { k in
            EVP_MAC_init(ctx, k.baseAddress?.assumingMemoryBound(to: UInt8.self), k.count, &params)
        }
        guard ok == 1 else { throw CryptoError.library("EVP_MAC_init") }
    }

    deinit {
        if let ctx { EVP_MAC_CTX_free(ctx) }
        wipe(&lastBlock)
    }

    public func update(_ data: UnsafeRawBufferPointer) throws {
        guard data.count > 0 else { return }
        if let chain {
            try absorbIntoChain(chain, data)
            return
        }
        guard EVP_MAC_update(ctx, data.baseAddress?.assumingMemoryBound(to: UInt8.self), data.count) == 1 else { throw CryptoError.library("EVP_MAC_update") }
    }

    private func absorbIntoChain(_ chain: SymmetricCipher, _ data: UnsafeRawBufferPointer) throws {
        var produced = try chain.update(data)
        defer { wipe(&produced) }
        absorbed += data.count
        if produced.count >= chain.blockSize { lastBlock = Array(produced.suffix(chain.blockSize)) }
    }

    public func finish() throws -> [UInt8] {
        if let chain, case .cbcMAC(_, let length) = algorithm {
            // Zero padding to a whole block (one zero block for no data at all).
            let partial = absorbed % chain.blockSize
            if partial != 0 || absorbed == 0 {
                let zeros = [UInt8](repeating: 0, count: chain.blockSize - partial)
                try zeros.withUnsafeBytes { try absorbIntoChain(chain, $0) }
            }
            return Array(lastBlock.prefix(length))
        }
        var out = [UInt8](repeating: 0, count: 64)
        var length = 0
        guard EVP_MAC_final(ctx, &out, &length, out.count) == 1 else { throw CryptoError.library("EVP_MAC_final") }
        defer { wipe(&out) }
        return Array(out.prefix(min(length, truncatedLength ?? length)))
    }
}
