internal import COpenSSL

/// OpenSSL's CSPRNG.
public enum Random {
    /// Fills `buffer` in chunks so that no caller-sized length is passed to OpenSSL as an `Int32`.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws {
        guard let base = buffer.baseAddress else { return }
        var offset = 0
        while offset < buffer.count {
            let chunk = min(buffer.count - offset, 1 << 20)
            guard RAND_bytes(base.advanced(by: offset).assumingMemoryBound(to: UInt8.self), Int32(chunk)) == 1 else {
                throw CryptoError.library("RAND_bytes")
            }
            offset += chunk
        }
    }

    public static func bytes(_ count: Int) throws -> [UInt8] {
        var result = [UInt8](repeating: 0, count: count)
        try result.withUnsafeMutableBytes { try fill($0) }
        return result
    }

    /// Mixes caller-supplied entropy into the generator (C_SeedRandom). OpenSSL never lets it
    /// replace its own seeding, so a hostile seed cannot make output predictable.
    public static func addSeed(_ seed: UnsafeRawBufferPointer) {
        guard let base = seed.baseAddress else { return }
        var offset = 0
        while offset < seed.count {
            let chunk = min(seed.count - offset, 1 << 20)
            RAND_add(base.advanced(by: offset), Int32(chunk), 0)
            offset += chunk
        }
    }
}
