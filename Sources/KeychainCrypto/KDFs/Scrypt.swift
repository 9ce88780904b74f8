internal import COpenSSL

/// Cost parameters of scrypt (RFC 7914), stored per keychain so they can be raised later.
public struct ScryptParameters: Equatable, Sendable {
    /// log2 of N, the CPU/memory cost.
    public var logN: UInt8
    /// Block size r.
    public var blockSize: UInt32
    /// Parallelism p.
    public var parallelism: UInt32

    public init(logN: UInt8, blockSize: UInt32, parallelism: UInt32) {
        self.logN = logN
        self.blockSize = blockSize
        self.parallelism = parallelism
    }

    /// About 0.1 s and 32 MiB per derivation on this project's reference machine.
    public static let interactive = ScryptParameters(logN: 15, blockSize: 8, parallelism: 1)

    /// Whether deriving with these parameters costs less than with `other`.
    public func isWeaker(than other: ScryptParameters) -> Bool {
        requiredMemory < other.requiredMemory
    }

    /// Bounds that keep a tampered parameter record from exhausting memory or time.
    public var isWithinLimits: Bool {
        logN >= 1 && logN <= 22 && blockSize >= 1 && blockSize <= 32 && parallelism >= 1 && parallelism <= 16
            && requiredMemory <= 1 << 31
    }

    var requiredMemory: UInt64 { 128 * UInt64(blockSize) * (UInt64(1) << UInt64(logN)) * UInt64(parallelism) + (1 << 20) }
}

public enum KeyDerivation {
    /// Derives `length` bytes from a PIN with scrypt; the PIN never leaves its buffer.
    public static func scrypt(password: UnsafeRawBufferPointer, salt: [UInt8], parameters: ScryptParameters, length: Int = 32) throws -> SecureBytes {
        guard parameters.isWithinLimits else { throw CryptoError(.invalidInput, "scrypt parameters out of bounds") }
        let context = try OpenSSLContext.get()
        let key = SecureBytes(count: length)
        let emptyPassword: [CChar] = [0]
        let ok = key.withUnsafeMutableBytes { out in
            salt.withUnsafeBytes { s in emptyPassword.withUnsafeBufferPointer { empty in
                EVP_PBE_scrypt_ex(
                    password.baseAddress?.assumingMemoryBound(to: CChar.self) ?? empty.baseAddress, password.count,
                    s.baseAddress?.assumingMemoryBound(to: UInt8.self), s.count,
                    UInt64(1) << UInt64(parameters.logN), UInt64(parameters.blockSize), UInt64(parameters.parallelism),
                    parameters.requiredMemory,
                    out.baseAddress?.assumingMemoryBound(to: UInt8.self), out.count, context, nil)
            } }
        }
        guard ok == 1 else { throw CryptoError.library("EVP_PBE_scrypt_ex") }
        return key
    }

    /// HKDF-SHA-256 (RFC 5869): extract with `salt`, expand with `info` to `length` bytes.
    public static func hkdf(key: SecureBytes, salt: [UInt8], info: [UInt8], length: Int = 32) throws -> SecureBytes {
        let prk = try HKDF.extract(.sha256, salt: salt, inputKey: key)
        return try HKDF.expand(.sha256, pseudorandomKey: prk, info: info, length: length)
    }
}
