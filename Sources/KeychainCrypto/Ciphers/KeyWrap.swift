internal import COpenSSL

/// AES key wrap: RFC 3394 (KW) and RFC 5649 (KWP, with padding).
public enum KeyWrap {
    public enum Mode: Sendable {
        case kw, kwp
    }

    /// The wrapped length for `count` bytes of key material.
    public static func wrappedLength(_ mode: Mode, count: Int) -> Int {
        switch mode {
        case .kw: return count + 8
        case .kwp: return (count + 7) / 8 * 8 + 8
        }
    }

    /// The initial value's length a caller may give: KW's 8 bytes (RFC 3394 §2.2.3), KWP's 4
    /// (RFC 5649 §3, the high half of the alternative initial value).
    public static func ivLength(_ mode: Mode) -> Int { mode == .kw ? 8 : 4 }

    public static func wrap(_ mode: Mode, key: SecureBytes, material: SecureBytes, iv: [UInt8]? = nil) throws -> [UInt8] {
        if mode == .kw {
            guard material.count >= 16, material.count % 8 == 0 else { throw CryptoError(.invalidInput, "AES-KW wraps 16 or more bytes in steps of 8") }
        }
        guard material.count > 0 else { throw CryptoError(.invalidInput, "nothing to wrap") }
        return try material.withUnsafeBytes { try run(mode, key: key, input: $0, encrypting: true, iv: iv) }
    }

    /// Unwraps; an altered or wrong-key input fails with `.authenticationFailed`.
    public static func unwrap(_ mode: Mode, key: SecureBytes, wrapped: [UInt8], iv: [UInt8]? = nil) throws -> SecureBytes {
        guard wrapped.count >= 16, wrapped.count % 8 == 0 else { throw CryptoError(.invalidInput, "wrapped key length") }
        var plain = try wrapped.withUnsafeBytes { try run(mode, key: key, input: $0, encrypting: false, iv: iv) }
        defer { wipe(&plain) }
        return SecureBytes(plain)
    }

    private static func run(_ mode: Mode, key: SecureBytes, input: UnsafeRawBufferPointer, encrypting: Bool, iv: [UInt8]?) throws -> [UInt8] {
        if let iv, iv.count != ivLength(mode) { throw CryptoError(.invalidInput, "the key wrap IV must have \(ivLength(mode)) bytes") }
        guard [16, 24, 32].contains(key.count) else { throw CryptoError(.invalidInput, "AES key length \(key.count)") }
        let name = "AES-\(key.count * 8)-WRAP" + (mode == .kwp ? "-PAD" : "")
        guard let cipher = Fetched.cipher(name) else { throw CryptoError.library("EVP_CIPHER_fetch(\(name))") }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError.library("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        EVP_CIPHER_CTX_set_flags(ctx, Int32(EVP_CIPHER_CTX_FLAG_WRAP_ALLOW))
        let ok = key.withUnsafeBytes { k in
            EVP_CipherInit_ex(ctx, cipher, nil, k.baseAddress?.assumingMemoryBound(to: UInt8.self), iv, encrypting ? 1 : 0)
        }
        guard ok == 1 else { throw CryptoError.library("EVP_CipherInit_ex") }
        var out = [UInt8](repeating: 0, count: input.count + 16)
        var length: Int32 = 0
        guard EVP_CipherUpdate(ctx, &out, &length, input.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(input.count)) == 1 else {
            OpenSSLErrorQueue.discardOwn()
            wipe(&out)
            throw CryptoError(encrypting ? .invalidInput : .authenticationFailed, encrypting ? "cannot wrap" : "the wrapped key does not verify")
        }
        var tail: Int32 = 0
        let finalOK = out.withUnsafeMutableBufferPointer { EVP_CipherFinal_ex(ctx, $0.baseAddress.map { $0 + Int(length) }, &tail) }
        guard finalOK == 1 else {
            OpenSSLErrorQueue.discardOwn()
            wipe(&out)
            throw CryptoError(.authenticationFailed, "the wrapped key does not verify")
        }
        defer { wipe(&out) }
        return Array(out.prefix(Int(length + tail)))
    }
}

/// ANSI X9.63 key derivation (PKCS#11 CKD_SHA*_KDF): Hash(Z ‖ counter ‖ SharedInfo)...
public enum X963KDF {
    public static func derive(_ digest: Digest.Algorithm, secret: SecureBytes, sharedInfo: [UInt8], length: Int) throws -> SecureBytes {
        guard length > 0, length <= 255 * digest.outputSize else { throw CryptoError(.invalidInput, "KDF length") }
        let output = SecureBytes(count: length)
        var produced = 0
        var counter: UInt32 = 1
        while produced < length {
            let hasher = try StreamingDigest(digest)
            try secret.withUnsafeBytes { try hasher.update($0) }
            try withUnsafeBytes(of: counter.bigEndian) { try hasher.update($0) }
            try sharedInfo.withUnsafeBytes { try hasher.update($0) }
            var block = try hasher.finish()
            defer { wipe(&block) }
            let take = min(block.count, length - produced)
            output.withUnsafeMutableBytes { out in for i in 0..<take { out[produced + i] = block[i] } }
            produced += take
            counter += 1
        }
        return output
    }
}

extension AsymmetricKey {
    /// The private key as DER PKCS#8 PrivateKeyInfo (what C_WrapKey wraps).
    public func pkcs8() throws -> SecureBytes {
        // The encoder comes from the key's own provider, in our library context.
        guard isPrivate, let info = EVP_PKEY2PKCS8(pkey) else { throw CryptoError.library("EVP_PKEY2PKCS8") }
        defer { PKCS8_PRIV_KEY_INFO_free(info) }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_PKCS8_PRIV_KEY_INFO(info, &out)
        guard length > 0, let out else { throw CryptoError.library("i2d_PKCS8_PRIV_KEY_INFO") }
        defer { CRYPTO_clear_free(out, Int(length), #fileID, #line) }
        return SecureBytes(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    /// A private key from DER PKCS#8 (what C_UnwrapKey unwraps).
    public static func privateKey(pkcs8 der: SecureBytes) throws -> AsymmetricKey {
        OpenSSLSecureHeap.prepare()
        let context = try OpenSSLContext.get()
        let parsed = der.withUnsafeBytes { buffer -> OpaquePointer? in
            guard let base = buffer.baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = base.assumingMemoryBound(to: UInt8.self)
            return d2i_PKCS8_PRIV_KEY_INFO(nil, &cursor, buffer.count)
        }
        guard let info = parsed else {
            OpenSSLErrorQueue.discardOwn()
            throw CryptoError(.invalidInput, "not a PKCS#8 private key")
        }
        defer { PKCS8_PRIV_KEY_INFO_free(info) }
        guard let pkey = EVP_PKCS82PKEY_ex(info, context, nil) else {
            OpenSSLErrorQueue.discardOwn()
            throw CryptoError(.invalidInput, "unsupported PKCS#8 key")
        }
        guard let kind = kindOf(pkey) else {
            EVP_PKEY_free(pkey)
            throw CryptoError(.invalidInput, "unsupported key algorithm")
        }
        return AsymmetricKey(pkey: pkey, kind: kind, isPrivate: true)
    }

    /// ECDH / X25519 / X448 shared secret Z with `peer`'s public key.
    public func sharedSecret(with peer: AsymmetricKey, cofactor: Bool = false) throws -> SecureBytes {
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(try OpenSSLContext.get(), pkey, nil) else { throw CryptoError.library("EVP_PKEY_CTX_new_from_pkey") }
        defer { EVP_PKEY_CTX_free(ctx) }
        // Cofactor ECDH (SP 800-56A): only EC keys have the mode; X25519/X448 clamp instead.
        let modeSet: Bool
        if cofactor, case .ec = kind { modeSet = EVP_PKEY_derive_init(ctx) == 1 && EVP_PKEY_CTX_set_ecdh_cofactor_mode(ctx, 1) == 1 } else { modeSet = EVP_PKEY_derive_init(ctx) == 1 }
        guard modeSet, EVP_PKEY_derive_set_peer(ctx, peer.pkey) == 1 else {
            OpenSSLErrorQueue.discardOwn()
            throw CryptoError(.invalidInput, "the peer key does not fit")
        }
        var length = 0
        guard EVP_PKEY_derive(ctx, nil, &length) == 1 else { throw CryptoError.library("EVP_PKEY_derive") }
        let secret = SecureBytes(count: length)
        let ok = secret.withUnsafeMutableBytes { EVP_PKEY_derive(ctx, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), &length) }
        guard ok == 1, length == secret.count else { throw CryptoError(.invalidInput, "key agreement failed") }
        return secret
    }
}
