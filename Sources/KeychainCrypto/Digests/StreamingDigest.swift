internal import COpenSSL

/// A digest fed in parts (C_DigestUpdate), finished once.
public final class StreamingDigest {
    private let ctx: OpaquePointer
    public let algorithm: Digest.Algorithm

    public init(_ algorithm: Digest.Algorithm) throws {
        guard let ctx = EVP_MD_CTX_new() else { throw CryptoError.library("EVP_MD_CTX_new") }
        self.ctx = ctx
        self.algorithm = algorithm
        guard EVP_DigestInit_ex(ctx, try algorithm.md, nil) == 1 else { throw CryptoError.library("EVP_DigestInit_ex") }
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
