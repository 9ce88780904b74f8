internal import COpenSSL
import Glibc

extension KeyFile {
    /// A PKCS#12 bundle of the key and certificates (the one matching the key becomes the key's
    /// certificate, the others its chain), as `openssl pkcs12 -export` writes it in OpenSSL 3:
    /// key and certificates in PBES2 (PBKDF2-HMAC-SHA256, AES-256-CBC), an HMAC-SHA256 MAC.
    public static func pkcs12(key: AsymmetricKey, certificates: [[UInt8]], name: String?, passphrase: UnsafeRawBufferPointer) throws -> [UInt8] {
        try OpenSSLErrorQueue.preserving {
            Result { try PKCS12Bundle.make(key: key, certificates: certificates, name: name, passphrase: passphrase) }
        }.get()
    }
}

/// A PKCS12 (PFX, RFC 7292) object, freed with its owner.
final class PKCS12Bundle {
    private let handle: OpaquePointer

    /// OpenSSL 3's `pkcs12 -export` counts, for the bag encryption and the MAC alike.
    static let iterations: Int32 = 2048
    /// A MAC iteration count above this is refused before the first (slow) verification.
    static let maximumIterations = 2_000_000
    static let legacyMessage = "legacy PKCS#12 encryption (RC2/3DES); re-export it with openssl pkcs12 -export"
    static let noMACMessage = "a PKCS#12 bundle without a MAC (pkcs12 -nomac): its integrity and its bags' costs cannot be checked; re-export it with openssl pkcs12 -export"

    init(handle: OpaquePointer) {
        self.handle = handle
    }

    deinit { PKCS12_free(handle) }


    // MARK: reading

    /// The key, certificates and friendlyName. The empty password is tried first (both its
    /// encodings, as OpenSSL does); the passphrase is asked for only if the MAC refuses it.
    /// Bags in RC2/3DES are read by loading OpenSSL's legacy provider on the first such bundle.
    func contents(_ passphrase: PassphraseSource) throws(KeyFile.Failure) -> KeyFileContents {
        let empty = SecureBytes(count: 1)
        var password = empty
        // Without a MAC nothing vouches for the bags' key-derivation costs (a damaged or hostile
        // file could ask for billions of iterations): such bundles are refused before decryption.
        guard PKCS12_mac_present(handle) == 1 else { throw .unsupported(Self.noMACMessage) }
        var iterations: UnsafePointer<ASN1_INTEGER>?
        PKCS12_get0_mac(nil, nil, nil, &iterations, handle)
        if let iterations {
            let count = ASN1_INTEGER_get(iterations)
            guard count >= 1, count <= Self.maximumIterations else { throw .unsupported("a PKCS#12 MAC with \(count) iterations") }
        }
        if PKCS12_verify_mac(handle, nil, 0) != 1, PKCS12_verify_mac(handle, "", 0) != 1 {
            let (text, length) = try passphrase.obtain()
            let verified = text.withUnsafeBytes { PKCS12_verify_mac(handle, $0.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(length)) }
            guard verified == 1 else { throw .passphraseIncorrect }
            password = text
        }
        if let contents = try parse(password) { return contents }
        if Self.lastErrorIsUnsupportedAlgorithm() {
            guard LegacyProvider.load() else { throw .unsupported(Self.legacyMessage) }
            if let contents = try parse(password) { return contents }
            if Self.lastErrorIsUnsupportedAlgorithm() { throw .unsupported(Self.legacyMessage) }
        }
        throw .malformed("the PKCS#12 contents cannot be read")
    }

    /// PKCS12_parse with a NUL-terminated password; nil if it fails.
    private func parse(_ password: SecureBytes) throws(KeyFile.Failure) -> KeyFileContents? {
        var pkey: OpaquePointer?
        var certificate: OpaquePointer?
        var chain: OpaquePointer?
        let ok = password.withUnsafeBytes { PKCS12_parse(handle, $0.baseAddress?.assumingMemoryBound(to: CChar.self), &pkey, &certificate, &chain) }
        var certificates: [OpaquePointer] = certificate.map { [$0] } ?? []
        if let chain {
            for index in 0..<max(0, OPENSSL_sk_num(chain)) {
                if let entry = OPENSSL_sk_value(chain, index) { certificates.append(OpaquePointer(entry)) }
            }
            OPENSSL_sk_free(chain)
        }
        defer { certificates.forEach { X509_free($0) } }
        guard ok == 1 else {
            if let pkey { EVP_PKEY_free(pkey) }
            return nil
        }
        var contents = KeyFileContents(format: .pkcs12)
        if let pkey { contents.privateKey = try DERParser.key(pkey, isPrivate: true) }
        for x509 in certificates {
            var out: UnsafeMutablePointer<UInt8>?
            let length = i2d_X509(x509, &out)
            guard length > 0, let out else { throw .malformed("a certificate of the PKCS#12 bundle cannot be encoded") }
            contents.certificates.append(Array(UnsafeBufferPointer(start: out, count: Int(length))))
            CRYPTO_free(out, #fileID, #line)
        }
        // PKCS12_parse copies each bag's friendlyName to its certificate's alias.
        if let first = certificates.first {
            var length: Int32 = 0
            if let alias = X509_alias_get0(first, &length), length > 0 {
                contents.name = String(decoding: UnsafeBufferPointer(start: alias, count: Int(length)), as: UTF8.self)
            }
        }
        return contents
    }

    /// Whether OpenSSL's last error says an algorithm is not available (RC2, DES without the legacy provider).
    private static func lastErrorIsUnsupportedAlgorithm() -> Bool {
        let code = ERR_peek_last_error()
        let reason = ERR_GET_REASON(code)
        return reason == ERR_R_UNSUPPORTED || (ERR_GET_LIB(code) == ERR_LIB_EVP && reason == EVP_R_UNSUPPORTED_ALGORITHM)
    }

    // MARK: writing

    static func make(key: AsymmetricKey, certificates: [[UInt8]], name: String?, passphrase: UnsafeRawBufferPointer) throws -> [UInt8] {
        guard key.isPrivate else { throw CryptoError(.invalidInput, "not a private key") }
        guard !passphrase.contains(0), passphrase.count < Int(Int32.max) else { throw CryptoError(.invalidInput, "the passphrase contains a NUL byte") }
        // PKCS12_create takes the password as a C string.
        let password = SecureBytes(count: passphrase.count + 1)
        password.withUnsafeMutableBytes { $0.copyMemory(from: passphrase) }

        var parsed: [OpaquePointer] = []
        defer { parsed.forEach { X509_free($0) } }
        for (index, der) in certificates.enumerated() {
            guard let x509 = DERParser.whole(der, { d2i_X509(nil, $0, $1) }, free: X509_free) else {
                throw CryptoError(.invalidInput, "certificate \(index + 1) is not a DER X.509 certificate")
            }
            parsed.append(x509)
        }
        let keyCertificate = parsed.first { X509_check_private_key($0, key.pkey) == 1 }
        guard let chain = OPENSSL_sk_new_null() else { throw CryptoError.library("OPENSSL_sk_new_null") }
        defer { OPENSSL_sk_free(chain) }
        for x509 in parsed where x509 != keyCertificate {
            guard OPENSSL_sk_push(chain, UnsafeRawPointer(x509)) > 0 else { throw CryptoError.library("OPENSSL_sk_push") }
        }

        let bundle = try password.withUnsafeBytes { pass -> PKCS12Bundle in
            let text = pass.baseAddress?.assumingMemoryBound(to: CChar.self)
            // mac_iter -1: no MAC from PKCS12_create (it would use SHA-1); set an HMAC-SHA256 one next.
            guard let handle = PKCS12_create(text, name, key.pkey, keyCertificate, chain, NID_aes_256_cbc, NID_aes_256_cbc, iterations, -1, 0) else {
                throw CryptoError.library("PKCS12_create")
            }
            let bundle = PKCS12Bundle(handle: handle)
            guard PKCS12_set_mac(handle, text, -1, nil, 0, iterations, EVP_sha256()) == 1 else { throw CryptoError.library("PKCS12_set_mac") }
            return bundle
        }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_PKCS12(bundle.handle, &out)
        guard length > 0, let out else { throw CryptoError.library("i2d_PKCS12") }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }
}
