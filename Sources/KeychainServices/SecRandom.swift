import Foundation
import KeychainCrypto

// SecRandom.h: Security's randomness call, which keychain code uses for keys, salts and tokens.

/// A random number generator (Apple's `const struct __SecRandom *`); only the default exists.
public typealias SecRandomRef = OpaquePointer

/// The system's cryptographically secure generator: nil, as Apple's is NULL.
public nonisolated(unsafe) let kSecRandomDefault: SecRandomRef? = nil

/// Fills `bytes` with `count` bytes from the system CSPRNG (OpenSSL's, seeded by the kernel's
/// getrandom). As Apple's header says, any generator argument means the default one. Returns
/// errSecSuccess; a negative count is errSecParam (Apple's size_t cannot be negative), and a
/// generator failure errSecInternalComponent, with the buffer then left unspecified.
public func SecRandomCopyBytes(_ rnd: SecRandomRef?, _ count: Int, _ bytes: UnsafeMutableRawPointer) -> Int32 {
    guard count >= 0 else { return errSecParam }
    do {
        try Random.fill(UnsafeMutableRawBufferPointer(start: bytes, count: count))
        return errSecSuccess
    } catch {
        return errSecInternalComponent
    }
}
