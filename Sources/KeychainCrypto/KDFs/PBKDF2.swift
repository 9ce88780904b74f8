internal import COpenSSL

/// PBKDF2 (RFC 8018 §5.2) with an HMAC PRF, through OpenSSL's EVP_KDF "PBKDF2" in our library
/// context (PKCS5_PBKDF2_HMAC fetches from the host's default one).
public enum PBKDF2 {
    /// More than this is a denial of service through one call.
    public static let maximumIterations = 10_000_000
    /// Iterations × output blocks: 10 M HMACs, a few seconds here — the most one call may cost.
    public static let maximumWork = 10_000_000

    public static func derive(_ digest: Digest.Algorithm, password: UnsafeRawBufferPointer, salt: [UInt8], iterations: Int, length: Int) throws -> SecureBytes {
        guard iterations >= 1, iterations <= maximumIterations else { throw CryptoError(.invalidInput, "PBKDF2 takes 1 to \(maximumIterations) iterations") }
        guard iterations * ((length + digest.outputSize - 1) / digest.outputSize) <= maximumWork else {
            throw CryptoError(.invalidInput, "PBKDF2: iterations × output blocks above \(maximumWork)")
        }
        guard length > 0, length <= 1 << 16, password.count <= Int(Int32.max), salt.count <= Int(Int32.max) else {
            throw CryptoError(.invalidInput, "PBKDF2 length")
        }
        guard let kdf = Fetched.kdf("PBKDF2") else { throw CryptoError.library("EVP_KDF_fetch(PBKDF2)") }
        let output = SecureBytes(count: length)
        let passwordStart = password.baseAddress?.assumingMemoryBound(to: CChar.self)
        let ok = output.withUnsafeMutableBytes { out in
            kc_pbkdf2_hmac(kdf, passwordStart, password.count, salt, salt.count, Int32(iterations), digest.name,
                           out.baseAddress?.assumingMemoryBound(to: UInt8.self), out.count)
        }
        guard ok == 1 else { throw CryptoError.library("PBKDF2") }
        return output
    }
}
