internal import COpenSSL
import Glibc

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

    /// `count` bytes (at most `IdentifierPool.largest`) for identifiers — unique IDs of objects
    /// and rows — from the public DRBG, drawn 4 KiB at a time: each OpenSSL request costs about a
    /// microsecond (locking, additional input through the derivation function), a tenth of what
    /// the module adds to a KEM operation. Larger requests go to OpenSSL directly.
    public static func identifierBytes(_ count: Int) throws -> [UInt8] {
        guard count <= IdentifierPool.largest, let bytes = IdentifierPool.shared.take(count) else { return try Self.bytes(count) }
        return bytes
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

/// The buffer behind `Random.identifierBytes`. Fork-safe: the lock is held across fork (as
/// `SecurePages` holds its own), and a forked child throws away what is left of the parent's bytes,
/// so parent and child never hand out the same identifier. Each byte is handed out once;
/// identifiers are not secrets, but unpredictable all the same.
final class IdentifierPool: @unchecked Sendable {
    static let shared = IdentifierPool()
    static let largest = 64
    private static let size = 4096

    private let lock = PThreadMutex(.plain)
    private let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: IdentifierPool.size, alignment: 16)
    private var next = IdentifierPool.size

    private init() {
        pthread_atfork(
            { IdentifierPool.shared.lock.lock() },
            { IdentifierPool.shared.lock.unlock() },
            {
                IdentifierPool.shared.next = IdentifierPool.size
                IdentifierPool.shared.lock.unlock()
            })
    }

    /// nil when OpenSSL fails (the caller asks OpenSSL itself, and reports its failure).
    func take(_ count: Int) -> [UInt8]? {
        lock.withLock { () -> [UInt8]? in
            if next + count > IdentifierPool.size {
                guard (try? Random.fill(buffer)) != nil else { return nil }
                next = 0
            }
            let range = next..<(next + count)
            let taken = [UInt8](UnsafeRawBufferPointer(rebasing: buffer[range]))
            // What was handed out is not kept.
            UnsafeMutableRawBufferPointer(rebasing: buffer[range]).initializeMemory(as: UInt8.self, repeating: 0)
            next += count
            return taken
        }
    }
}
