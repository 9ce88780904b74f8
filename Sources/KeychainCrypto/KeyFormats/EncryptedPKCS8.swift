internal import COpenSSL

extension KeyFile {
    /// Encrypted PKCS#8 PEM ("ENCRYPTED PRIVATE KEY"): PBES2 with PBKDF2-HMAC-SHA256 and AES-256-CBC.
    public static func encryptedPKCS8PEM(_ key: AsymmetricKey, passphrase: UnsafeRawBufferPointer) throws -> String {
        try OpenSSLErrorQueue.preserving { Result { try pem("ENCRYPTED PRIVATE KEY", EncryptedPKCS8.encrypt(key, passphrase: passphrase)) } }.get()
    }
}

/// PKCS#8 EncryptedPrivateKeyInfo (RFC 5958 §3) with PBES2 (RFC 8018 §6.2):
///     EncryptedPrivateKeyInfo ::= SEQUENCE { encryptionAlgorithm AlgorithmIdentifier, encryptedData OCTET STRING }
enum EncryptedPKCS8 {
    /// PBKDF2-HMAC-SHA256 rounds for keys we write (OWASP's 2023 figure).
    static let iterations: Int32 = 600_000
    /// Work factors above these are refused before any key derivation runs: a file cannot hold a
    /// reader for hours. PBKDF2 rounds, and scrypt's N·r·p (OpenSSL's default is 2^17).
    static let maximumIterations = 2_000_000
    static let maximumScryptCost = 1 << 21

    static func encrypt(_ key: AsymmetricKey, passphrase: UnsafeRawBufferPointer) throws -> [UInt8] {
        guard key.isPrivate else { throw CryptoError(.invalidInput, "not a private key") }
        guard passphrase.count <= Int(Int32.max) else { throw CryptoError(.invalidInput, "passphrase too long") }
        guard let info = EVP_PKEY2PKCS8(key.pkey) else { throw CryptoError.library("EVP_PKEY2PKCS8") }
        defer { PKCS8_PRIV_KEY_INFO_free(info) }
        let length = i2d_PKCS8_PRIV_KEY_INFO(info, nil)
        guard length > 0 else { throw CryptoError.library("i2d_PKCS8_PRIV_KEY_INFO") }
        let plaintext = SecureBytes(count: Int(length))
        let written = plaintext.withUnsafeMutableBytes { bytes -> Int32 in
            var cursor = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
            return i2d_PKCS8_PRIV_KEY_INFO(info, &cursor)
        }
        guard written == length else { throw CryptoError.library("i2d_PKCS8_PRIV_KEY_INFO") }

        // A random 16-byte salt and IV are chosen by OpenSSL (from our context's generator).
        let context = try OpenSSLContext.get()
        guard let cipher = Fetched.cipher("AES-256-CBC") else { throw CryptoError.library("EVP_CIPHER_fetch(AES-256-CBC)") }
        guard let algorithm = PKCS5_pbe2_set_iv_ex(cipher, iterations, nil, 16, nil, NID_hmacWithSHA256, context) else {
            throw CryptoError.library("PKCS5_pbe2_set_iv_ex")
        }
        defer { X509_ALGOR_free(algorithm) }
        guard let ctx = EVP_CIPHER_CTX_new() else { throw CryptoError.library("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        let ready = EVP_PBE_CipherInit_ex(algorithm.pointee.algorithm, passphrase.baseAddress?.assumingMemoryBound(to: CChar.self),
                                          Int32(passphrase.count), algorithm.pointee.parameter, ctx, 1, context, nil)
        guard ready == 1 else { throw CryptoError.library("EVP_PBE_CipherInit_ex") }
        guard let ciphertext = plaintext.withUnsafeBytes({ CipherRun.run(ctx, $0) }) else { throw CryptoError.library("AES-256-CBC") }

        var out: UnsafeMutablePointer<UInt8>?
        let algorithmLength = i2d_X509_ALGOR(algorithm, &out)
        guard algorithmLength > 0, let out else { throw CryptoError.library("i2d_X509_ALGOR") }
        defer { CRYPTO_free(out, #fileID, #line) }
        let algorithmDER = Array(UnsafeBufferPointer(start: out, count: Int(algorithmLength)))
        return AsymmetricKey.derSequence(algorithmDER + DER.octetString(ciphertext.bytes))
    }

    /// The key of an EncryptedPrivateKeyInfo. A wrong passphrase fails the padding check or, one
    /// time in 256, leaves bytes that are not a PrivateKeyInfo: both are `.passphraseIncorrect`.
    static func decrypt(_ der: [UInt8], _ passphrase: PassphraseSource) throws(KeyFile.Failure) -> AsymmetricKey {
        guard let info = DERParser.whole(der, { d2i_X509_SIG(nil, $0, $1) }, free: X509_SIG_free) else {
            throw .malformed("not a PKCS#8 EncryptedPrivateKeyInfo")
        }
        defer { X509_SIG_free(info) }
        var algorithm: UnsafePointer<X509_ALGOR>?
        var encrypted: UnsafePointer<ASN1_OCTET_STRING>?
        X509_SIG_get0(info, &algorithm, &encrypted)
        guard let algorithm, let encrypted, let object = algorithm.pointee.algorithm else { throw .malformed("EncryptedPrivateKeyInfo") }
        try checkWorkFactor(algorithm)
        try prepareAlgorithms(algorithm)
        guard let context = try? OpenSSLContext.get() else { throw .unsupported("OpenSSL's library context could not be made") }
        let (pass, passLength) = try passphrase.obtain()
        guard let ctx = EVP_CIPHER_CTX_new() else { throw .malformed("OpenSSL could not allocate a cipher context") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        let ready = pass.withUnsafeBytes {
            EVP_PBE_CipherInit_ex(object, $0.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(passLength), algorithm.pointee.parameter, ctx, 0,
                                  context, nil)
        }
        guard ready == 1 else { throw .unsupported("PKCS#8 encryption \(DERParser.objectName(object)) or its parameters") }
        let input = UnsafeRawBufferPointer(start: ASN1_STRING_get0_data(encrypted), count: Int(max(0, ASN1_STRING_length(encrypted))))
        guard let plaintext = CipherRun.run(ctx, input),
              let key = try plaintext.withUnsafeBytes({ bytes throws(KeyFile.Failure) in try DERParser.pkcs8(bytes) }) else {
            throw .passphraseIncorrect
        }
        return key
    }

    /// Refuses key-derivation parameters that would run for minutes (a damaged or hostile file),
    /// and any it cannot read the cost of: PBES1 and PKCS#12 PBE iterations, PBES2 with PBKDF2 or
    /// scrypt; nothing else is handed to OpenSSL.
    static func checkWorkFactor(_ algorithm: UnsafePointer<X509_ALGOR>) throws(KeyFile.Failure) {
        guard let parameters = sequence(algorithm.pointee.parameter) else { throw .malformed("password-based encryption without parameters") }
        guard OBJ_obj2nid(algorithm.pointee.algorithm) == NID_pbes2 else {
            // PBES1 and the PKCS#12 schemes: PBEParameter ::= SEQUENCE { salt, iterationCount }.
            guard let pbe = DERParser.whole(parameters, { d2i_PBEPARAM(nil, $0, $1) }, free: PBEPARAM_free) else {
                throw .malformed("password-based encryption parameters")
            }
            defer { PBEPARAM_free(pbe) }
            let rounds = ASN1_INTEGER_get(pbe.pointee.iter)
            guard rounds >= 1, rounds <= maximumIterations else { throw .unsupported("password-based encryption with \(rounds) iterations") }
            return
        }
        guard let scheme = DERParser.whole(parameters, { d2i_PBE2PARAM(nil, $0, $1) }, free: PBE2PARAM_free) else { throw .malformed("PBES2 parameters") }
        defer { PBE2PARAM_free(scheme) }
        guard let function = scheme.pointee.keyfunc, let functionParameters = sequence(function.pointee.parameter) else {
            throw .malformed("PBES2 key derivation parameters")
        }
        switch OBJ_obj2nid(function.pointee.algorithm) {
        case NID_id_pbkdf2:
            guard let pbkdf2 = DERParser.whole(functionParameters, { d2i_PBKDF2PARAM(nil, $0, $1) }, free: PBKDF2PARAM_free) else {
                throw .malformed("PBKDF2 parameters")
            }
            defer { PBKDF2PARAM_free(pbkdf2) }
            let rounds = ASN1_INTEGER_get(pbkdf2.pointee.iter)
            guard rounds >= 1, rounds <= maximumIterations else { throw .unsupported("PBKDF2 with \(rounds) iterations") }
        case NID_id_scrypt:
            guard let scrypt = DERParser.whole(functionParameters, { d2i_SCRYPT_PARAMS(nil, $0, $1) }, free: SCRYPT_PARAMS_free) else {
                throw .malformed("scrypt parameters")
            }
            defer { SCRYPT_PARAMS_free(scrypt) }
            var cost = 1
            for factor in [scrypt.pointee.costParameter, scrypt.pointee.blockSize, scrypt.pointee.parallelizationParameter] {
                let value = ASN1_INTEGER_get(factor)
                guard value >= 1, value <= maximumScryptCost else { throw .unsupported("scrypt parameter \(value)") }
                cost *= value
                guard cost <= maximumScryptCost else { throw .unsupported("scrypt with N·r·p above \(maximumScryptCost)") }
            }
        default:
            throw .unsupported("PBES2 key derivation \(DERParser.objectName(function.pointee.algorithm))")
        }
    }

    /// Makes sure the cipher and digest a password-based encryption names are in our library
    /// context, loading the legacy provider into it for RC2, RC4 and single DES. OpenSSL's PBE
    /// functions look them up there first, but fall back to legacy handles whose use fetches from
    /// the host's default context: such a scheme is refused here instead.
    static func prepareAlgorithms(_ algorithm: UnsafePointer<X509_ALGOR>) throws(KeyFile.Failure) {
        var cipher: Int32 = NID_undef, digest: Int32 = NID_undef
        let scheme = OBJ_obj2nid(algorithm.pointee.algorithm)
        if scheme == NID_pbes2 {
            guard let parameters = sequence(algorithm.pointee.parameter),
                  let pbes2 = DERParser.whole(parameters, { d2i_PBE2PARAM(nil, $0, $1) }, free: PBE2PARAM_free) else {
                throw .malformed("PBES2 parameters")
            }
            defer { PBE2PARAM_free(pbes2) }
            cipher = pbes2.pointee.encryption.map { OBJ_obj2nid($0.pointee.algorithm) } ?? NID_undef
            guard cipher != NID_undef else { throw .unsupported("PBES2 encryption \(DERParser.objectName(pbes2.pointee.encryption?.pointee.algorithm))") }
        } else {
            guard EVP_PBE_find(EVP_PBE_TYPE_OUTER, scheme, &cipher, &digest, nil) == 1 else {
                throw .unsupported("password-based encryption \(DERParser.objectName(algorithm.pointee.algorithm))")
            }
        }
        try need(cipher) { Fetched.cipher($0) }
        try need(digest) { Fetched.digest($0) }
    }

    /// The algorithm `nid` from our context, after loading the legacy provider if it is not in the default one.
    private static func need(_ nid: Int32, _ fetch: (String) -> OpaquePointer?) throws(KeyFile.Failure) {
        guard nid != NID_undef else { return }
        guard let shortName = OBJ_nid2sn(nid) else { throw .unsupported("password-based encryption with algorithm \(nid)") }
        let name = String(cString: shortName)
        if fetch(name) != nil { return }
        guard LegacyProvider.load(), fetch(name) != nil else { throw .unsupported("password-based encryption with \(name)") }
    }

    /// The DER content of an ASN1_TYPE holding a SEQUENCE (as algorithm parameters are kept).
    private static func sequence(_ type: UnsafeMutablePointer<ASN1_TYPE>?) -> UnsafeRawBufferPointer? {
        guard let type, type.pointee.type == V_ASN1_SEQUENCE, let string = type.pointee.value.sequence,
              let data = ASN1_STRING_get0_data(string) else { return nil }
        return UnsafeRawBufferPointer(start: data, count: Int(max(0, ASN1_STRING_length(string))))
    }
}
