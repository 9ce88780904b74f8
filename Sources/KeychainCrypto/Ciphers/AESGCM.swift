internal import COpenSSL

/// AES-256-GCM with a 96-bit random nonce and a 128-bit tag.
///
/// Box layout: nonce (12) ‖ ciphertext ‖ tag (16).
public enum AESGCM {
    public static let keySize = 32
    public static let nonceSize = 12
    public static let tagSize = 16
    public static let overhead = nonceSize + tagSize

    public static func seal(_ plaintext: UnsafeRawBufferPointer, key: SecureBytes, associatedData: [UInt8]) throws -> [UInt8] {
        guard key.count == keySize else { throw CryptoError(.invalidInput, "AES-256-GCM key size") }
        guard plaintext.count <= Int(Int32.max) - overhead else { throw CryptoError(.invalidInput, "plaintext too large") }
        let cipher = try aes256GCM()
        let nonce = try Random.bytes(nonceSize)
        var box = [UInt8](repeating: 0, count: overhead + plaintext.count)
        try withContext { ctx in
            try key.withUnsafeBytes { k in
                guard EVP_EncryptInit_ex(ctx, cipher, nil, k.baseAddress?.assumingMemoryBound(to: UInt8.self), nonce) == 1 else {
                    throw CryptoError.library("EVP_EncryptInit_ex")
                }
            }
            var length: Int32 = 0
            if !associatedData.isEmpty {
                guard EVP_EncryptUpdate(ctx, nil, &length, associatedData, Int32(associatedData.count)) == 1 else {
                    throw CryptoError.library("EVP_EncryptUpdate(aad)")
                }
            }
            try box.withUnsafeMutableBufferPointer { out in
                guard let outBase = out.baseAddress else { return }
                for i in 0..<nonceSize { out[i] = nonce[i] }
                let body = outBase + nonceSize
                var produced: Int32 = 0
                if plaintext.count > 0 {
                    guard EVP_EncryptUpdate(ctx, body, &length, plaintext.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(plaintext.count)) == 1 else {
                        throw CryptoError.library("EVP_EncryptUpdate")
                    }
                    produced = length
                }
                guard EVP_EncryptFinal_ex(ctx, body + Int(produced), &length) == 1 else {
                    throw CryptoError.library("EVP_EncryptFinal_ex")
                }
                guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, Int32(tagSize), body + plaintext.count) == 1 else {
                    throw CryptoError.library("EVP_CTRL_GCM_GET_TAG")
                }
            }
        }
        return box
    }

    public static func seal(_ plaintext: SecureBytes, key: SecureBytes, associatedData: [UInt8]) throws -> [UInt8] {
        try plaintext.withUnsafeBytes { try seal($0, key: key, associatedData: associatedData) }
    }

    /// Opens a box; any change to the nonce, ciphertext, tag, key or associated data fails
    /// with `.authenticationFailed` and returns nothing.
    public static func open(_ box: [UInt8], key: SecureBytes, associatedData: [UInt8]) throws -> SecureBytes {
        guard key.count == keySize else { throw CryptoError(.invalidInput, "AES-256-GCM key size") }
        guard box.count >= overhead, box.count <= Int(Int32.max) else { throw CryptoError(.authenticationFailed, "sealed box too short") }
        let bodyCount = box.count - overhead
        let cipher = try aes256GCM()
        let plaintext = SecureBytes(count: bodyCount)
        try withContext { ctx in
            try box.withUnsafeBufferPointer { input in
                guard let base = input.baseAddress else { throw CryptoError(.invalidInput, "empty box") }
                try key.withUnsafeBytes { k in
                    guard EVP_DecryptInit_ex(ctx, cipher, nil, k.baseAddress?.assumingMemoryBound(to: UInt8.self), base) == 1 else {
                        throw CryptoError.library("EVP_DecryptInit_ex")
                    }
                }
                var length: Int32 = 0
                if !associatedData.isEmpty {
                    guard EVP_DecryptUpdate(ctx, nil, &length, associatedData, Int32(associatedData.count)) == 1 else {
                        throw CryptoError.library("EVP_DecryptUpdate(aad)")
                    }
                }
                try plaintext.withUnsafeMutableBytes { out in
                    let outBase = out.baseAddress?.assumingMemoryBound(to: UInt8.self)
                    var produced: Int32 = 0
                    if bodyCount > 0 {
                        guard EVP_DecryptUpdate(ctx, outBase, &length, base + nonceSize, Int32(bodyCount)) == 1 else {
                            throw CryptoError.library("EVP_DecryptUpdate")
                        }
                        produced = length
                    }
                    var tag = Array(input[(nonceSize + bodyCount)...])
                    guard EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, Int32(tagSize), &tag) == 1 else {
                        throw CryptoError.library("EVP_CTRL_GCM_SET_TAG")
                    }
                    var scratch = [UInt8](repeating: 0, count: 16)
                    let finalOK = scratch.withUnsafeMutableBufferPointer { s in
                        EVP_DecryptFinal_ex(ctx, outBase.map { $0 + Int(produced) } ?? s.baseAddress, &length)
                    }
                    guard finalOK == 1 else {
                        OpenSSLErrorQueue.discardOwn()
                        out.initializeMemory(as: UInt8.self, repeating: 0)
                        throw CryptoError(.authenticationFailed, "AES-GCM tag mismatch")
                    }
                }
            }
        }
        return plaintext
    }

    /// AES-256-GCM fetched from our library context once (`EVP_aes_256_gcm()` is fetched again,
    /// from the host's default context, by every context it initialises).
    nonisolated(unsafe) private static let fetched = Fetched.cipher("AES-256-GCM")

    private static func aes256GCM() throws -> OpaquePointer {
        guard let fetched else { throw CryptoError.library("EVP_CIPHER_fetch(AES-256-GCM)") }
        return fetched
    }

    private static func withContext<R>(_ body: (OpaquePointer) throws -> R) throws -> R {
        guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError.library("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        return try body(ctx)
    }
}
