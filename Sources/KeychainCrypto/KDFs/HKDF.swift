internal import COpenSSL

/// HKDF (RFC 5869) with any of the hashes PKCS#11 names, in its three forms.
public enum HKDF {
    /// PRK = HMAC-Hash(salt, IKM); an empty salt is a string of HashLen zeros (RFC 5869 §2.2).
    public static func extract(_ digest: Digest.Algorithm, salt: [UInt8], inputKey: SecureBytes) throws -> SecureBytes {
        try salt.withUnsafeBytes { try extract(digest, salt: $0, inputKey: inputKey) }
    }

    /// `extract` with the salt where it is (a salt key's value stays in its SecureBytes).
    public static func extract(_ digest: Digest.Algorithm, salt: UnsafeRawBufferPointer, inputKey: SecureBytes) throws -> SecureBytes {
        let zeros = [UInt8](repeating: 0, count: digest.outputSize)
        var prk = try inputKey.withUnsafeBytes { ikm in
            try zeros.withUnsafeBytes { zero in try Digest.hmac(digest, key: salt.isEmpty ? zero : salt, data: ikm) }
        }
        defer { wipe(&prk) }
        return SecureBytes(prk)
    }

    /// OKM = T(1) ‖ T(2) ‖ … cut to `length` (at most 255 × HashLen), T(i) = HMAC(PRK, T(i−1) ‖ info ‖ i).
    public static func expand(_ digest: Digest.Algorithm, pseudorandomKey: SecureBytes, info: [UInt8], length: Int) throws -> SecureBytes {
        guard length > 0, length <= 255 * digest.outputSize else {
            throw CryptoError(.invalidInput, "HKDF-Expand gives 1 to \(255 * digest.outputSize) bytes with this hash")
        }
        let output = SecureBytes(count: length)
        var previous: [UInt8] = []
        defer { wipe(&previous) }
        var written = 0
        var counter: UInt8 = 1
        while written < length {
            var block: [UInt8] = []
            block.reserveCapacity(previous.count + info.count + 1)
            block += previous
            block += info
            block.append(counter)
            defer { wipe(&block) }
            let next = try pseudorandomKey.withUnsafeBytes { p in try block.withUnsafeBytes { b in try Digest.hmac(digest, key: p, data: b) } }
            wipe(&previous)
            previous = next
            let take = min(previous.count, length - written)
            let source = previous
            output.withUnsafeMutableBytes { out in for i in 0..<take { out[written + i] = source[i] } }
            written += take
            counter &+= 1
        }
        return output
    }
}
