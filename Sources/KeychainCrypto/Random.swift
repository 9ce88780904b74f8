internal import COpenSSL

/// OpenSSL's CSPRNG, the DRBGs of our library context (`OpenSSLContext`), not the host's.
public enum Random {
    /// Fills `buffer` from the public DRBG (nonces, salts, IVs, identifiers).
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws {
        try fill(buffer, secret: false)
    }

    /// Fills `buffer` from the private DRBG, kept apart from the one whose output is seen, for
    /// key material (RAND_priv_bytes).
    public static func fillSecret(_ buffer: UnsafeMutableRawBufferPointer) throws {
        try fill(buffer, secret: true)
    }

    /// In chunks, so that no caller-sized length reaches OpenSSL in one request.
    private static func fill(_ buffer: UnsafeMutableRawBufferPointer, secret: Bool) throws {
        guard let base = buffer.baseAddress else { return }
        let context = try OpenSSLContext.get()
        var offset = 0
        while offset < buffer.count {
            let chunk = min(buffer.count - offset, 1 << 20)
            let start = base.advanced(by: offset).assumingMemoryBound(to: UInt8.self)
            let ok = secret ? RAND_priv_bytes_ex(context, start, chunk, 0) : RAND_bytes_ex(context, start, chunk, 0)
            guard ok == 1 else { throw CryptoError.library(secret ? "RAND_priv_bytes_ex" : "RAND_bytes_ex") }
            offset += chunk
        }
    }

    public static func bytes(_ count: Int) throws -> [UInt8] {
        var result = [UInt8](repeating: 0, count: count)
        try result.withUnsafeMutableBytes { try fill($0) }
        return result
    }

    /// Fresh key material from the private DRBG; the caller wipes it when done.
    public static func secretBytes(_ count: Int) throws -> [UInt8] {
        var result = [UInt8](repeating: 0, count: count)
        try result.withUnsafeMutableBytes { try fillSecret($0) }
        return result
    }

    /// Mixes caller-supplied entropy into the generator (C_SeedRandom), as RAND_add does for the
    /// default context: additional input to a reseed of our primary DRBG, which also draws fresh
    /// entropy of its own, so a hostile seed cannot make output predictable.
    public static func addSeed(_ seed: UnsafeRawBufferPointer) {
        guard let base = seed.baseAddress, let context = try? OpenSSLContext.get(), let primary = RAND_get0_primary(context) else {
            OpenSSLErrorQueue.discardOwn()
            return
        }
        var offset = 0
        while offset < seed.count {
            let chunk = min(seed.count - offset, 1 << 16)
            if EVP_RAND_reseed(primary, 0, nil, 0, base.advanced(by: offset).assumingMemoryBound(to: UInt8.self), chunk) != 1 {
                OpenSSLErrorQueue.discardOwn()
                return
            }
            offset += chunk
        }
    }
}
