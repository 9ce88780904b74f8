internal import COpenSSL

extension KeyFile {
    /// The private and public keys and the certificates of a PEM file's blocks; other blocks
    /// (EC PARAMETERS, …) are skipped. The format is that of the key block.
    static func decodePEM(_ blocks: [PEMBlock], _ passphrase: PassphraseSource) throws(Failure) -> KeyFileContents {
        var contents = KeyFileContents(format: .certificatePEM)
        var publicKeyFound = false
        var skipped: [String] = []
        for block in blocks {
            switch block.label {
            case "CERTIFICATE", "X509 CERTIFICATE":
                guard DERParser.isCertificate(block.body) else {
                    throw .malformed("PEM certificate \(contents.certificates.count + 1) is not an X.509 certificate")
                }
                contents.certificates.append(block.body)
            case "PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY":
                guard contents.privateKey == nil else { throw .unsupported("the file holds more than one private key") }
                try decodePEMPrivateKey(block, into: &contents, passphrase)
            case "PUBLIC KEY", "RSA PUBLIC KEY":
                guard !publicKeyFound else { throw .unsupported("the file holds more than one public key") }
                publicKeyFound = true
                // PKCS#1 RSAPublicKey through the SubjectPublicKeyInfo around it: d2i_PublicKey
                // has no form that takes a library context.
                let spki = block.label == "PUBLIC KEY" ? block.body : AsymmetricKey.subjectPublicKeyInfo(rsaPublicKey: block.body)
                let pkey = spki.flatMap { DERParser.whole($0, DERParser.publicKey) }
                guard let pkey else { throw .malformed("PEM block \(block.label) is not a public key") }
                contents.publicKey = try DERParser.key(pkey, isPrivate: false)
            case "DSA PRIVATE KEY":
                throw .unsupported("DSA keys")
            default:
                skipped.append(block.label)
            }
        }
        if contents.privateKey != nil {
            contents.publicKey = nil  // the key's own public half
        } else if contents.publicKey != nil {
            contents.format = .publicKeyPEM
        } else if contents.certificates.isEmpty {
            throw .unsupported("no key or certificate in the PEM file, only \(skipped.joined(separator: ", "))")
        }
        return contents
    }

    private static func decodePEMPrivateKey(_ block: PEMBlock, into contents: inout KeyFileContents,
                                            _ passphrase: PassphraseSource) throws(Failure) {
        switch block.label {
        case "PRIVATE KEY":
            contents.format = .pkcs8
            guard let key = try DERParser.pkcs8(block.body) else { throw .malformed("PEM block PRIVATE KEY is not a PKCS#8 key") }
            contents.privateKey = key
        case "ENCRYPTED PRIVATE KEY":
            contents.format = .encryptedPKCS8
            contents.privateKey = try EncryptedPKCS8.decrypt(block.body, passphrase)
        case "OPENSSH PRIVATE KEY":
            contents.format = .openSSH
            let (key, comment) = try OpenSSHKey.privateKey(block.body, passphrase)
            contents.privateKey = key
            contents.name = comment
        default:
            let rsa = block.label == "RSA PRIVATE KEY"
            contents.format = rsa ? .pkcs1 : .sec1
            let type = rsa ? EVP_PKEY_RSA : EVP_PKEY_EC
            if block.headers["Proc-Type"]?.hasSuffix("ENCRYPTED") == true {
                let plaintext = try LegacyPEMEncryption.decrypt(block.body, dekInfo: block.headers["DEK-Info"], passphrase)
                // A wrong passphrase passes the padding check one time in 256, and then does not parse.
                guard let key = try plaintext.withUnsafeBytes({ bytes throws(Failure) in try DERParser.traditional(bytes, type: type) }) else {
                    throw .passphraseIncorrect
                }
                contents.privateKey = key
            } else {
                guard let key = try block.body.withFailingBytes({ bytes throws(Failure) in try DERParser.traditional(bytes, type: type) }) else {
                    throw .malformed("PEM block \(block.label) is not a \(rsa ? "PKCS#1" : "SEC1") key")
                }
                contents.privateKey = key
            }
        }
    }

    /// DER is tried as each structure in turn; only one that spans every byte counts.
    static func decodeDER(_ der: [UInt8], _ passphrase: PassphraseSource) throws(Failure) -> KeyFileContents {
        guard der.first == 0x30 else { throw .malformed("neither PEM, DER nor an OpenSSH key") }
        OpenSSLSecureHeap.prepare()
        if let bundle = DERParser.whole(der, DERParser.pkcs12, free: PKCS12_free) {
            return try PKCS12Bundle(handle: bundle).contents(passphrase)
        }
        if DERParser.isCertificate(der) { return KeyFileContents(format: .certificateDER, certificates: [der]) }
        if let key = try DERParser.pkcs8(der) { return KeyFileContents(format: .pkcs8, privateKey: key) }
        if DERParser.isEncryptedPKCS8(der) {
            return KeyFileContents(format: .encryptedPKCS8, privateKey: try EncryptedPKCS8.decrypt(der, passphrase))
        }
        if let key = try der.withFailingBytes({ bytes throws(Failure) in try DERParser.traditional(bytes, type: EVP_PKEY_RSA) }) {
            return KeyFileContents(format: .pkcs1, privateKey: key)
        }
        if let key = try der.withFailingBytes({ bytes throws(Failure) in try DERParser.traditional(bytes, type: EVP_PKEY_EC) }) {
            return KeyFileContents(format: .sec1, privateKey: key)
        }
        if let pkey = DERParser.whole(der, DERParser.publicKey) {
            return KeyFileContents(format: .publicKeyDER, publicKey: try DERParser.key(pkey, isPrivate: false))
        }
        throw .malformed("not a certificate, key or PKCS#12 file")
    }
}

/// Trial decoding with OpenSSL's d2i functions. Errors they queue are left to the caller's
/// OpenSSLErrorQueue.preserving (KeyFile.decode runs inside one).
enum DERParser {
    /// The object `d2i` makes of `bytes`, or nil unless it parsed and consumed every byte.
    static func whole<T>(_ bytes: UnsafeRawBufferPointer, _ d2i: (UnsafeMutablePointer<UnsafePointer<UInt8>?>, Int) -> T?,
                         free: (T) -> Void) -> T? {
        guard let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self), bytes.count > 0 else { return nil }
        var cursor: UnsafePointer<UInt8>? = base
        guard let object = d2i(&cursor, bytes.count) else { return nil }
        guard let cursor, cursor - base == bytes.count else {
            free(object)
            return nil
        }
        return object
    }

    static func whole<T>(_ bytes: [UInt8], _ d2i: (UnsafeMutablePointer<UnsafePointer<UInt8>?>, Int) -> T?, free: (T) -> Void) -> T? {
        bytes.withUnsafeBytes { whole($0, d2i, free: free) }
    }

    /// EVP_PKEY results, freed with EVP_PKEY_free when bytes are left over.
    static func whole(_ bytes: [UInt8], _ d2i: (UnsafeMutablePointer<UnsafePointer<UInt8>?>, Int) -> OpaquePointer?) -> OpaquePointer? {
        whole(bytes, d2i, free: EVP_PKEY_free)
    }

    // The decoders below make their objects in our library context (OpenSSLContext): whatever
    // the object fetches later (a certificate's SHA-1 fingerprint, a key's encoder, the PBE
    // algorithms of a PKCS#12 bundle) comes from there, not from the host's default context.

    /// d2i_X509 into an X509 made by X509_new_ex in our context.
    static func certificate(_ cursor: UnsafeMutablePointer<UnsafePointer<UInt8>?>, _ length: Int) -> OpaquePointer? {
        guard let context = try? OpenSSLContext.get() else { return nil }
        var x509 = X509_new_ex(context, nil)
        guard x509 != nil else { return nil }
        if let parsed = d2i_X509(&x509, cursor, length) { return parsed }
        if let x509 { X509_free(x509) }  // d2i frees it on failure and clears the pointer
        return nil
    }

    /// d2i_PKCS12 into a PKCS12 made by PKCS12_init_ex in our context (OpenSSL 3.0's
    /// PKCS12_verify_mac takes no context: it uses the bundle's).
    static func pkcs12(_ cursor: UnsafeMutablePointer<UnsafePointer<UInt8>?>, _ length: Int) -> OpaquePointer? {
        guard let context = try? OpenSSLContext.get() else { return nil }
        var bundle = PKCS12_init_ex(NID_pkcs7_data, context, nil)
        guard bundle != nil else { return nil }
        if let parsed = d2i_PKCS12(&bundle, cursor, length) { return parsed }
        if let bundle { PKCS12_free(bundle) }
        return nil
    }

    /// d2i_PUBKEY_ex in our context.
    static func publicKey(_ cursor: UnsafeMutablePointer<UnsafePointer<UInt8>?>, _ length: Int) -> OpaquePointer? {
        guard let context = try? OpenSSLContext.get() else { return nil }
        return d2i_PUBKEY_ex(nil, cursor, length, context, nil)
    }

    static func isCertificate(_ der: [UInt8]) -> Bool {
        guard let certificate = whole(der, certificate, free: X509_free) else { return false }
        X509_free(certificate)
        return true
    }

    static func isEncryptedPKCS8(_ der: [UInt8]) -> Bool {
        guard let info = whole(der, { d2i_X509_SIG(nil, $0, $1) }, free: X509_SIG_free) else { return false }
        X509_SIG_free(info)
        return true
    }

    /// A PKCS#8 PrivateKeyInfo, or nil if `der` is not one.
    static func pkcs8(_ der: [UInt8]) throws(KeyFile.Failure) -> AsymmetricKey? {
        try der.withFailingBytes({ bytes throws(KeyFile.Failure) in try pkcs8(bytes) })
    }

    static func pkcs8(_ der: UnsafeRawBufferPointer) throws(KeyFile.Failure) -> AsymmetricKey? {
        OpenSSLSecureHeap.prepare()
        // PKCS8_PRIV_KEY_INFO_free cleanses the key octets.
        guard let info = whole(der, { d2i_PKCS8_PRIV_KEY_INFO(nil, $0, $1) }, free: PKCS8_PRIV_KEY_INFO_free) else { return nil }
        defer { PKCS8_PRIV_KEY_INFO_free(info) }
        guard let context = try? OpenSSLContext.get() else { throw .unsupported("OpenSSL's library context could not be made") }
        guard let pkey = EVP_PKCS82PKEY_ex(info, context, nil) else {
            var algorithm: OpaquePointer?
            _ = PKCS8_pkey_get0(&algorithm, nil, nil, nil, info)
            throw .unsupported("PKCS#8 keys of algorithm \(objectName(algorithm))")
        }
        return try key(pkey, isPrivate: true)
    }

    /// A PKCS#1 RSAPrivateKey (type EVP_PKEY_RSA) or SEC1 ECPrivateKey (EVP_PKEY_EC), or nil.
    static func traditional(_ der: UnsafeRawBufferPointer, type: Int32) throws(KeyFile.Failure) -> AsymmetricKey? {
        OpenSSLSecureHeap.prepare()
        guard let context = try? OpenSSLContext.get() else { throw .unsupported("OpenSSL's library context could not be made") }
        guard let pkey = whole(der, { d2i_PrivateKey_ex(type, nil, $0, $1, context, nil) }, free: EVP_PKEY_free) else { return nil }
        return try key(pkey, isPrivate: true)
    }

    /// Takes ownership of `pkey`: an AsymmetricKey, or freed if the token holds no such keys.
    static func key(_ pkey: OpaquePointer, isPrivate: Bool) throws(KeyFile.Failure) -> AsymmetricKey {
        guard let kind = AsymmetricKey.kindOf(pkey) else {
            var description = EVP_PKEY_get0_type_name(pkey).map { String(cString: $0) } ?? "unknown"
            var group = [CChar](repeating: 0, count: 64)
            var length = 0
            if EVP_PKEY_get_base_id(pkey) == EVP_PKEY_EC,
               EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, &group, group.count - 1, &length) == 1 {
                description += " on curve " + String(decoding: group.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            }
            EVP_PKEY_free(pkey)
            throw .unsupported("\(description) keys")
        }
        return AsymmetricKey(pkey: pkey, kind: kind, isPrivate: isPrivate)
    }

    static func objectName(_ object: OpaquePointer?) -> String {
        var text = [CChar](repeating: 0, count: 80)
        let length = OBJ_obj2txt(&text, Int32(text.count), object, 0)
        guard length > 0 else { return "unknown" }
        return String(decoding: text.prefix(min(Int(length), text.count - 1)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Runs an initialised EVP_CIPHER_CTX over a whole input.
enum CipherRun {
    /// The output (with padding removed when decrypting), or nil if OpenSSL refused — for a
    /// decryption with a wrong key, usually the padding check.
    static func run(_ ctx: OpaquePointer, _ input: UnsafeRawBufferPointer) -> SecureBytes? {
        guard input.count <= KeyFile.maximumFileSize else { return nil }
        let output = SecureBytes(count: input.count + Int(EVP_MAX_BLOCK_LENGTH))
        var total = 0
        let ok = output.withUnsafeMutableBytes { out -> Bool in
            guard let base = out.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return false }
            var written: Int32 = 0
            if let source = input.baseAddress?.assumingMemoryBound(to: UInt8.self), input.count > 0 {
                guard EVP_CipherUpdate(ctx, base, &written, source, Int32(input.count)) == 1 else { return false }
                total = Int(written)
            }
            guard EVP_CipherFinal_ex(ctx, base + total, &written) == 1 else { return false }
            total += Int(written)
            return true
        }
        guard ok else { return nil }
        return output.withUnsafeBytes { SecureBytes($0[0..<total]) }
    }
}

/// RFC 1421 encryption of traditional PEM keys ("Proc-Type: 4,ENCRYPTED", "DEK-Info: AES-256-CBC,IV"):
/// the key is OpenSSL's EVP_BytesToKey with MD5, one round, salted with the IV's first 8 bytes.
enum LegacyPEMEncryption {
    static func decrypt(_ body: [UInt8], dekInfo: String?, _ passphrase: PassphraseSource) throws(KeyFile.Failure) -> SecureBytes {
        guard let dekInfo, let comma = dekInfo.firstIndex(of: ",") else { throw .malformed("encrypted PEM key without DEK-Info") }
        let name = String(dekInfo[..<comma])
        guard let iv = hexBytes(dekInfo[dekInfo.index(after: comma)...]) else { throw .malformed("bad IV in DEK-Info") }
        guard let cipher = Fetched.cipher(name) else { throw .unsupported("PEM encryption \(name)") }
        guard let md5 = Fetched.digest("MD5") else { throw .unsupported("PEM encryption \(name) (no MD5 for its key)") }
        let keyLength = Int(EVP_CIPHER_get_key_length(cipher))
        guard iv.count >= 8, iv.count == Int(EVP_CIPHER_get_iv_length(cipher)), EVP_CIPHER_get_block_size(cipher) > 1,
              keyLength > 0, keyLength <= Int(EVP_MAX_KEY_LENGTH) else { throw .unsupported("PEM encryption \(name)") }
        let (pass, passLength) = try passphrase.obtain()
        let key = SecureBytes(count: keyLength)
        let derived = key.withUnsafeMutableBytes { keyBytes in
            pass.withUnsafeBytes { passBytes in
                EVP_BytesToKey(cipher, md5, iv, passBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(passLength), 1,
                               keyBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), nil)
            }
        }
        guard derived == Int32(keyLength), let ctx = EVP_CIPHER_CTX_new() else { throw .unsupported("PEM encryption \(name) (key derivation)") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        let ready = key.withUnsafeBytes { EVP_CipherInit_ex(ctx, cipher, nil, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), iv, 0) }
        guard ready == 1 else { throw .unsupported("PEM encryption \(name)") }
        guard let plaintext = body.withUnsafeBytes({ CipherRun.run(ctx, $0) }) else { throw .passphraseIncorrect }
        return plaintext
    }

    private static func hexBytes(_ text: Substring) -> [UInt8]? {
        text.utf8.count <= 64 ? Hex.bytes(text.utf8) : nil
    }
}
