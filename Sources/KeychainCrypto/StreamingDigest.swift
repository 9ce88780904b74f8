internal import COpenSSL

/// A digest fed in parts (C_DigestUpdate), finished once.
public final class StreamingDigest {
    private let ctx: OpaquePointer
    public let algorithm: Digest.Algorithm

    public init(_ algorithm: Digest.Algorithm) throws {
        guard let ctx = EVP_MD_CTX_new() else { throw CryptoError.library("EVP_MD_CTX_new") }
        self.ctx = ctx
        self.algorithm = algorithm
        guard EVP_DigestInit_ex(ctx, algorithm.md, nil) == 1 else { throw CryptoError.library("EVP_DigestInit_ex") }
    }

    deinit { EVP_MD_CTX_free(ctx) }

    public func update(_ data: UnsafeRawBufferPointer) throws {
        guard data.count > 0 else { return }
        guard EVP_DigestUpdate(ctx, data.baseAddress, data.count) == 1 else { throw CryptoError.library("EVP_DigestUpdate") }
    }

    public func finish() throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        guard EVP_DigestFinal_ex(ctx, &out, &length) == 1 else { throw CryptoError.library("EVP_DigestFinal_ex") }
        return Array(out.prefix(Int(length)))
    }
}

/// A MAC fed in parts (C_SignUpdate with an HMAC or CMAC mechanism).
public final class StreamingMAC {
    public enum Algorithm: Sendable, Equatable {
        case hmac(Digest.Algorithm)
        case aesCMAC
        /// CMAC over triple DES (SP 800-38B), keys of 16 (two-key) or 24 bytes.
        case tripleDESCMAC

        public var outputSize: Int {
            switch self {
            case .hmac(let digest): return digest.outputSize
            case .aesCMAC: return 16
            case .tripleDESCMAC: return 8
            }
        }
    }

    private let ctx: OpaquePointer
    public let algorithm: Algorithm

    public init(_ algorithm: Algorithm, key: SecureBytes) throws {
        self.algorithm = algorithm
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
        }
        guard let mac = EVP_MAC_fetch(nil, macName, nil) else { throw CryptoError.library("EVP_MAC_fetch") }
        defer { EVP_MAC_free(mac) }
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

    deinit { EVP_MAC_CTX_free(ctx) }

    public func update(_ data: UnsafeRawBufferPointer) throws {
        guard data.count > 0 else { return }
        guard EVP_MAC_update(ctx, data.baseAddress?.assumingMemoryBound(to: UInt8.self), data.count) == 1 else { throw CryptoError.library("EVP_MAC_update") }
    }

    public func finish() throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 64)
        var length = 0
        guard EVP_MAC_final(ctx, &out, &length, out.count) == 1 else { throw CryptoError.library("EVP_MAC_final") }
        return Array(out.prefix(length))
    }
}
