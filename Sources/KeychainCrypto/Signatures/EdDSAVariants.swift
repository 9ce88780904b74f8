internal import CGcrypt
import Glibc

/// EdDSA with a context or prehash — Ed25519ctx, Ed25519ph, Ed448 with a context, Ed448ph (RFC
/// 8032 §5.1–§5.2, PKCS#11 3.0 CK_EDDSA_PARAMS) — through libgcrypt: OpenSSL 3.0 signs only
/// pure Ed25519 and Ed448 without a context (its "instance" parameter comes with 3.2).
///
/// The private key enters libgcrypt as a canonical S-expression in libgcrypt's secure memory,
/// so the copy it parses is secure memory too and is wiped when released.
enum EdDSAVariant {
    /// libgcrypt may be used by the host too: it is prepared once, without dropping a setuid
    /// host's privileges or writing to its stderr (kc_gcry_prepare in Sources/CGcrypt).
    private static let ready: Bool = kc_gcry_prepare() != 0

    static func sign(_ message: [UInt8], key: AsymmetricKey, prehash: Bool, context: [UInt8]) throws -> [UInt8] {
        guard ready else { throw CryptoError.library("libgcrypt 1.9 or later is needed") }
        let (curve, width) = try parameters(key)
        let publicKey = try key.rawPublicKey()
        let privateKey = try key.rawPrivateKey()
        // (private-key (ecc (curve NAME) (flags eddsa) (q PUBLIC) (d PRIVATE)))
        let head = Array("(11:private-key(3:ecc(5:curve\(curve.utf8.count):\(curve))(5:flags5:eddsa)(1:q\(publicKey.count):".utf8)
        let middle = Array(")(1:d\(privateKey.count):".utf8), tail = Array(")))".utf8)
        let length = head.count + publicKey.count + middle.count + privateKey.count + tail.count
        guard let buffer = gcry_malloc_secure(length)?.assumingMemoryBound(to: UInt8.self) else {
            throw CryptoError.library("libgcrypt secure memory")
        }
        defer {
            memset(buffer, 0, length)
            gcry_free(buffer)
        }
        var offset = 0
        func append(_ bytes: UnsafeRawBufferPointer) {
            if let base = bytes.baseAddress { memcpy(buffer + offset, base, bytes.count) }
            offset += bytes.count
        }
        head.withUnsafeBytes(append)
        publicKey.withUnsafeBytes(append)
        middle.withUnsafeBytes(append)
        privateKey.withUnsafeBytes(append)
        tail.withUnsafeBytes(append)
        var keyExpression: gcry_sexp_t?
        var errorOffset = 0
        guard gcry_sexp_sscan(&keyExpression, &errorOffset, buffer, length) == 0, let keyExpression else {
            throw CryptoError.library("libgcrypt key expression")
        }
        defer { gcry_sexp_release(keyExpression) }
        let data = try dataExpression(message, curve: curve, prehash: prehash, context: context)
        defer { gcry_sexp_release(data) }
        var signature: gcry_sexp_t?
        guard gcry_pk_sign(&signature, data, keyExpression) == 0, let signature else { throw CryptoError.library("libgcrypt EdDSA signature") }
        defer { gcry_sexp_release(signature) }
        let r = try part(signature, "r", width: width), s = try part(signature, "s", width: width)
        return r + s
    }

    static func verify(_ signature: [UInt8], message: [UInt8], key: AsymmetricKey, prehash: Bool, context: [UInt8]) throws -> Bool {
        guard ready else { throw CryptoError.library("libgcrypt 1.9 or later is needed") }
        let (curve, width) = try parameters(key)
        guard signature.count == 2 * width else { return false }
        let publicKey = try key.rawPublicKey()
        var keyBytes = Array("(10:public-key(3:ecc(5:curve\(curve.utf8.count):\(curve))(5:flags5:eddsa)(1:q\(publicKey.count):".utf8)
        keyBytes += publicKey + Array(")))".utf8)
        var keyExpression: gcry_sexp_t?
        var errorOffset = 0
        guard gcry_sexp_sscan(&keyExpression, &errorOffset, keyBytes, keyBytes.count) == 0, let keyExpression else {
            throw CryptoError.library("libgcrypt key expression")
        }
        defer { gcry_sexp_release(keyExpression) }
        var signatureBytes = Array("(7:sig-val(5:eddsa(1:r\(width):".utf8) + signature.prefix(width) + Array(")(1:s\(width):".utf8)
        signatureBytes += signature.suffix(width) + Array(")))".utf8)
        var signatureExpression: gcry_sexp_t?
        guard gcry_sexp_sscan(&signatureExpression, &errorOffset, signatureBytes, signatureBytes.count) == 0, let signatureExpression else { return false }
        defer { gcry_sexp_release(signatureExpression) }
        let data = try dataExpression(message, curve: curve, prehash: prehash, context: context)
        defer { gcry_sexp_release(data) }
        return gcry_pk_verify(signatureExpression, data, keyExpression) == 0
    }

    private static func parameters(_ key: AsymmetricKey) throws -> (curve: String, width: Int) {
        switch key.kind {
        case .ed25519: return ("Ed25519", 32)
        case .ed448: return ("Ed448", 57)
        default: throw CryptoError(.invalidInput, "not an Edwards key")
        }
    }

    /// (data (flags eddsa [prehash]) (hash-algo sha512|shake256) [(label CONTEXT)] (value MESSAGE)):
    /// a context (1–255 bytes) or the prehash flag makes libgcrypt add dom2/dom4.
    private static func dataExpression(_ message: [UInt8], curve: String, prehash: Bool, context: [UInt8]) throws -> gcry_sexp_t {
        guard context.count <= 255 else { throw CryptoError(.invalidInput, "an EdDSA context has at most 255 bytes") }
        let hash = curve == "Ed448" ? "8:shake256" : "6:sha512"
        var bytes = Array("(4:data(5:flags5:eddsa\(prehash ? "7:prehash" : ""))(9:hash-algo\(hash))".utf8)
        if !context.isEmpty { bytes += Array("(5:label\(context.count):".utf8) + context + Array(")".utf8) }
        bytes += Array("(5:value\(message.count):".utf8) + message + Array("))".utf8)
        defer { wipe(&bytes) }
        var expression: gcry_sexp_t?
        var errorOffset = 0
        guard gcry_sexp_sscan(&expression, &errorOffset, bytes, bytes.count) == 0, let expression else { throw CryptoError.library("libgcrypt data expression") }
        return expression
    }

    private static func part(_ signature: gcry_sexp_t, _ name: String, width: Int) throws -> [UInt8] {
        guard let token = gcry_sexp_find_token(signature, name, 0) else { throw CryptoError.library("libgcrypt signature \(name)") }
        defer { gcry_sexp_release(token) }
        var length = 0
        // r and s are opaque little-endian strings of the curve's width.
        guard let data = gcry_sexp_nth_data(token, 1, &length), length == width else { throw CryptoError.library("libgcrypt signature \(name)") }
        return Array(UnsafeRawBufferPointer(start: data, count: length))
    }
}
