internal import COpenSSL

/// Secret bytes that are wiped when the last reference goes away.
///
/// Keys, PINs and decrypted records live here, never in a plain `[UInt8]` that the
/// allocator might hand out again with the secret still in it. The bytes are on `SecurePages`:
/// left out of core dumps and, within RLIMIT_MEMLOCK, locked out of swap (the ordinary heap only
/// when no page can be mapped).
public final class SecureBytes: @unchecked Sendable {
    private let storage: UnsafeMutableRawBufferPointer
    /// The capacity of the SecurePages buffer, or nil for the heap fallback.
    private let pageCapacity: Int?

    /// Allocates `count` zero bytes.
    public init(count: Int) {
        if let buffer = SecurePages.shared.allocate(max(count, 1)) {
            storage = UnsafeMutableRawBufferPointer(start: buffer.pointer, count: buffer.capacity)
            pageCapacity = buffer.capacity
        } else {
            storage = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
            storage.initializeMemory(as: UInt8.self, repeating: 0)
            pageCapacity = nil
        }
        self.count = count
    }

    /// Copies `bytes`; the caller should wipe its own copy if it holds one.
    public convenience init<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        self.init(count: bytes.count)
        UnsafeMutableRawBufferPointer(rebasing: storage[0..<count]).copyBytes(from: bytes)
    }

    /// Fresh random bytes from OpenSSL's CSPRNG (its private DRBG: these are keys).
    public static func random(count: Int) throws -> SecureBytes {
        let bytes = SecureBytes(count: count)
        try bytes.withUnsafeMutableBytes { try Random.fillSecret($0) }
        return bytes
    }

    public let count: Int

    deinit {
        if let pageCapacity, let base = storage.baseAddress {
            SecurePages.shared.release(base, capacity: pageCapacity)
        } else {
            OPENSSL_cleanse(storage.baseAddress, storage.count)
            storage.deallocate()
        }
    }

    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(rebasing: storage[0..<count]))
    }

    public func withUnsafeMutableBytes<R, E: Error>(_ body: (UnsafeMutableRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeMutableRawBufferPointer(rebasing: storage[0..<count]))
    }

    /// A plain copy, for values that are not secret once they leave (for example a public record).
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    /// Constant-time comparison; lengths are not secret.
    public func constantTimeEquals(_ other: SecureBytes) -> Bool {
        guard count == other.count else { return false }
        return withUnsafeBytes { a in other.withUnsafeBytes { b in ConstantTime.equals(a, b) } }
    }
}

public enum ConstantTime {
    /// Compares two buffers without an early exit (OpenSSL's CRYPTO_memcmp).
    public static func equals(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        if a.count == 0 { return true }
        return CRYPTO_memcmp(a.baseAddress, b.baseAddress, a.count) == 0
    }

    public static func equals(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        a.withUnsafeBytes { pa in b.withUnsafeBytes { pb in equals(pa, pb) } }
    }
}

/// Wipes a byte array in place (for transient copies of secrets).
public func wipe(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { OPENSSL_cleanse($0.baseAddress, $0.count) }
}

/// Wipes a buffer.
public func wipe(_ buffer: UnsafeMutableRawBufferPointer) {
    OPENSSL_cleanse(buffer.baseAddress, buffer.count)
}
