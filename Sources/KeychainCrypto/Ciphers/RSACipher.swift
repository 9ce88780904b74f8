internal import COpenSSL

/// RSA encryption and decryption (one shot: PKCS#11 RSA encryption is single-block).
public enum RSACipher {
    public enum Padding: Sendable {
        case pkcs1
        case raw
        case oaep(digest: Digest.Algorithm, mgf1: Digest.Algorithm, label: [UInt8])
    }

    /// The most input `padding` allows under a `modulusBytes`-byte key.
    public static func maximumInput(_ padding: Padding, modulusBytes: Int) -> Int {
        switch padding {
        case .pkcs1: return modulusBytes - 11
        case .raw: return modulusBytes
        case .oaep(let digest, _, _): return modulusBytes - 2 * digest.outputSize - 2
        }
    }

    public static func encrypt(_ input: [UInt8], key: AsymmetricKey, padding: Padding) throws -> [UInt8] {
        try run(input, key: key, padding: padding, encrypting: true).bytes
    }

    /// Fails with `.invalidInput` for a wrong length or bad padding (the caller maps both to one
    /// error, so the outcome of padding checks is not an oracle beyond what PKCS#11 requires).
    public static func decrypt(_ input: [UInt8], key: AsymmetricKey, padding: Padding) throws -> SecureBytes {
        try run(input, key: key, padding: padding, encrypting: false)
    }

    private static func run(_ given: [UInt8], key: AsymmetricKey, padding: Padding, encrypting: Bool) throws -> SecureBytes {
        // Raw RSA encryption (CKM_RSA_X_509) takes up to a modulus of bytes, left-padded with zeros.
        var input = given
        defer { if input.count != given.count { wipe(&input) } }
        if case .raw = padding, encrypting, input.count < (key.bits + 7) / 8 {
            input = [UInt8](repeating: 0, count: (key.bits + 7) / 8 - input.count) + input
        }
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(try OpenSSLContext.get(), key.pkey, nil) else { throw CryptoError.library("EVP_PKEY_CTX_new_from_pkey") }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard (encrypting ? EVP_PKEY_encrypt_init(ctx) : EVP_PKEY_decrypt_init(ctx)) == 1 else { throw CryptoError.library("RSA init") }
        switch padding {
        case .pkcs1:
            guard EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_PADDING) == 1 else { throw CryptoError.library("RSA padding") }
        case .raw:
            guard EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_NO_PADDING) == 1 else { throw CryptoError.library("RSA padding") }
        case .oaep(let digest, let mgf1, let label):
            let md = try digest.md, mgf1MD = try mgf1.md
            guard EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING) == 1,
                  EVP_PKEY_CTX_set_rsa_oaep_md(ctx, md) == 1,
                  EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, mgf1MD) == 1 else { throw CryptoError.library("OAEP parameters") }
            if !label.isEmpty {
                // OpenSSL takes ownership of the label buffer.
                guard let copy = CRYPTO_malloc(label.count, #fileID, #line) else { throw CryptoError.library("CRYPTO_malloc") }
                label.withUnsafeBytes { copy.copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(copy), byteCount: label.count) }
                guard EVP_PKEY_CTX_set0_rsa_oaep_label(ctx, copy, Int32(label.count)) == 1 else {
                    CRYPTO_free(copy, #fileID, #line)
                    throw CryptoError.library("OAEP label")
                }
            }
        }
        var length = 0
        let sizeOK = encrypting ? EVP_PKEY_encrypt(ctx, nil, &length, input, input.count) : EVP_PKEY_decrypt(ctx, nil, &length, input, input.count)
        guard sizeOK == 1 else {
            OpenSSLErrorQueue.discardOwn()
            throw CryptoError(.invalidInput, "input does not fit")
        }
        var out = [UInt8](repeating: 0, count: length)
        let ok = encrypting ? EVP_PKEY_encrypt(ctx, &out, &length, input, input.count) : EVP_PKEY_decrypt(ctx, &out, &length, input, input.count)
        guard ok == 1 else {
            OpenSSLErrorQueue.discardOwn()
            wipe(&out)
            throw CryptoError(.invalidInput, encrypting ? "input does not fit" : "decryption failed")
        }
        defer { wipe(&out) }
        return SecureBytes(out.prefix(length))
    }
}
