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

/// A PKCS12 (PFX, RFC 7292) object, freed with its owner. Made in our library context
/// (`DERParser.pkcs12`, PKCS12_create_ex): OpenSSL 3.0's PKCS12_verify_mac and PKCS12_set_mac take
/// no context of their own and use the bundle's.
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
    /// Bags in RC2 (or another algorithm of OpenSSL's legacy provider) load that provider into
    /// our library context on the first such bundle.
    func contents(_ passphrase: PassphraseSource) throws(KeyFile.Failure) -> KeyFileContents {
        // Without a MAC nothing vouches for the bags' key-derivation costs (a damaged or hostile
        // file could ask for billions of iterations): such bundles are refused before decryption.
        guard PKCS12_mac_present(handle) == 1 else { throw .unsupported(Self.noMACMessage) }
        var iterations: UnsafePointer<ASN1_INTEGER>?
        PKCS12_get0_mac(nil, nil, nil, &iterations, handle)
        if let iterations {
            let count = ASN1_INTEGER_get(iterations)
            guard count >= 1, count <= Self.maximumIterations else { throw .unsupported("a PKCS#12 MAC with \(count) iterations") }
        }
        // nil: the MAC verified with no password at all (not the same key as "" in PKCS#12).
        var password: SecureBytes?
        if PKCS12_verify_mac(handle, nil, 0) != 1 {
            if PKCS12_verify_mac(handle, "", 0) == 1 {
                password = SecureBytes(count: 1)
            } else {
                let (text, length) = try passphrase.obtain()
                let verified = text.withUnsafeBytes { PKCS12_verify_mac(handle, $0.baseAddress?.assumingMemoryBound(to: CChar.self), Int32(length)) }
                guard verified == 1 else { throw .passphraseIncorrect }
                password = text
            }
        }
        guard let contents = try read(password) else { throw .malformed("the PKCS#12 contents cannot be read") }
        return contents
    }

    /// What PKCS12_parse gives — the first private key, the certificates (the one that matches
    /// the key first) and that certificate's friendlyName — read bag by bag with the `_ex`
    /// functions in our library context: OpenSSL 3.0's PKCS12_parse decrypts and decodes in the
    /// host's default one. nil if a part cannot be read or decrypted.
    private func read(_ password: SecureBytes?) throws(KeyFile.Failure) -> KeyFileContents? {
        guard let context = try? OpenSSLContext.get() else { throw .unsupported("OpenSSL's library context could not be made") }
        guard let safes = PKCS12_unpack_authsafes(handle) else { return nil }
        defer { OPENSSL_sk_pop_free(safes) { PKCS7_free($0?.assumingMemoryBound(to: PKCS7.self)) } }
        var found = FoundBags()
        defer { if let key = found.key { EVP_PKEY_free(key) } }
        for index in 0..<max(0, OPENSSL_sk_num(safes)) {
            guard let safe = OPENSSL_sk_value(safes, index)?.assumingMemoryBound(to: PKCS7.self) else { return nil }
            let bags: OpaquePointer
            switch OBJ_obj2nid(safe.pointee.type) {
            case NID_pkcs7_data:
                guard let clear = PKCS12_unpack_p7data(safe) else { return nil }
                bags = clear
            case NID_pkcs7_encrypted:
                guard let content = safe.pointee.d.encrypted?.pointee.enc_data, let algorithm = content.pointee.algorithm,
                      let encrypted = content.pointee.enc_data else { return nil }
                try prepare(algorithm)
                let decrypted = withPassword(password) { pass, length in
                    PKCS12_item_decrypt_d2i_ex(algorithm, PKCS12_SAFEBAGS_it(), pass, length, encrypted, 1, context, nil)
                }
                guard let decrypted else { return nil }
                bags = OpaquePointer(decrypted)
            default:
                continue
            }
            defer { OPENSSL_sk_pop_free(bags) { PKCS12_SAFEBAG_free(OpaquePointer($0)) } }
            guard try collect(bags, password, context, into: &found) else { return nil }
        }
        var contents = KeyFileContents(format: .pkcs12)
        if let pkey = found.key {
            found.key = nil
            contents.privateKey = try DERParser.key(pkey, isPrivate: true)
        }
        var certificates: [(x509: OpaquePointer, name: String?)] = []
        defer { certificates.forEach { X509_free($0.x509) } }
        for (der, name) in found.certificates {
            guard let x509 = DERParser.whole(der, DERParser.certificate, free: X509_free) else { return nil }
            certificates.append((x509, name))
        }
        // PKCS12_parse's rule: the first certificate whose public key is the private key's is
        // the key's certificate; it goes first, the others follow in the bundle's order.
        if let key = contents.privateKey, let index = certificates.firstIndex(where: { X509_check_private_key($0.x509, key.pkey) == 1 }) {
            certificates.insert(certificates.remove(at: index), at: 0)
        }
        OpenSSLErrorQueue.discardOwn()
        for certificate in certificates {
            var out: UnsafeMutablePointer<UInt8>?
            let length = i2d_X509(certificate.x509, &out)
            guard length > 0, let out else { throw .malformed("a certificate of the PKCS#12 bundle cannot be encoded") }
            contents.certificates.append(Array(UnsafeBufferPointer(start: out, count: Int(length))))
            CRYPTO_free(out, #fileID, #line)
        }
        contents.name = certificates.first?.name
        return contents
    }

    /// What the bags hold so far: the first private key and every X.509 certificate (DER, with
    /// its bag's friendlyName).
    private struct FoundBags {
        var key: OpaquePointer?
        var certificates: [(der: [UInt8], name: String?)] = []
    }

    /// Reads a SafeContents (and the SafeContents nested in it); false when a bag cannot be read.
    private func collect(_ bags: OpaquePointer, _ password: SecureBytes?, _ context: OpaquePointer,
                         into found: inout FoundBags) throws(KeyFile.Failure) -> Bool {
        for index in 0..<max(0, OPENSSL_sk_num(bags)) {
            guard let bag = OPENSSL_sk_value(bags, index).map(OpaquePointer.init) else { return false }
            switch PKCS12_SAFEBAG_get_nid(bag) {
            case NID_keyBag:
                guard found.key == nil else { continue }
                guard let info = PKCS12_SAFEBAG_get0_p8inf(bag), let pkey = EVP_PKCS82PKEY_ex(info, context, nil) else { return false }
                found.key = pkey
            case NID_pkcs8ShroudedKeyBag:
                guard found.key == nil else { continue }
                guard let shrouded = PKCS12_SAFEBAG_get0_pkcs8(bag) else { return false }
                var algorithm: UnsafePointer<X509_ALGOR>?
                X509_SIG_get0(shrouded, &algorithm, nil)
                guard let algorithm else { return false }
                try prepare(algorithm)
                let info = withPassword(password) { pass, length in PKCS12_decrypt_skey_ex(bag, pass, length, context, nil) }
                guard let info else { return false }
                defer { PKCS8_PRIV_KEY_INFO_free(info) }
                guard let pkey = EVP_PKCS82PKEY_ex(info, context, nil) else { return false }
                found.key = pkey
            case NID_certBag:
                guard PKCS12_SAFEBAG_get_bag_nid(bag) == NID_x509Certificate else { continue }
                guard let der = Self.certificateDER(bag) else { return false }
                var name: String?
                if let text = PKCS12_get_friendlyname(bag) {
                    name = String(cString: text)
                    CRYPTO_free(text, #fileID, #line)
                }
                found.certificates.append((der, name))
            case NID_safeContentsBag:
                guard let nested = PKCS12_SAFEBAG_get0_safes(bag), try collect(nested, password, context, into: &found) else { return false }
            default:
                continue
            }
        }
        return true
    }

    /// The DER certificate of a certBag, taken from the bag's own encoding (RFC 7292 §4.2.3):
    ///     SafeBag ::= SEQUENCE { bagId, [0] EXPLICIT CertBag, bagAttributes SET OPTIONAL }
    ///     CertBag ::= SEQUENCE { certId, [0] EXPLICIT OCTET STRING }
    /// OpenSSL 3.0's one accessor (PKCS12_SAFEBAG_get1_cert) decodes it in the default context.
    private static func certificateDER(_ bag: OpaquePointer) -> [UInt8]? {
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_PKCS12_SAFEBAG(bag, &out)
        guard length > 0, let out else { return nil }
        defer { CRYPTO_free(out, #fileID, #line) }
        let der = Array(UnsafeBufferPointer(start: out, count: Int(length)))
        guard let safeBag = DER.element(der[...]), safeBag.tag == 0x30,
              let bagID = DER.element(safeBag.content), bagID.tag == 0x06,
              let explicitBag = DER.element(bagID.rest), explicitBag.tag == 0xA0,
              let certBag = DER.element(explicitBag.content), certBag.tag == 0x30,
              let certID = DER.element(certBag.content), certID.tag == 0x06,
              let explicitValue = DER.element(certID.rest), explicitValue.tag == 0xA0,
              let octets = DER.element(explicitValue.content), octets.tag == 0x04 else { return nil }
        return Array(octets.content)
    }

    /// The algorithms of one encryption available in our context (the legacy provider loaded for
    /// RC2 and its kin), else the bundle is refused as legacy.
    private func prepare(_ algorithm: UnsafePointer<X509_ALGOR>) throws(KeyFile.Failure) {
        do { try EncryptedPKCS8.prepareAlgorithms(algorithm) } catch { throw .unsupported(Self.legacyMessage) }
    }

    /// `body` with the password as OpenSSL's PKCS#12 functions take it: NULL for none, else a C string.
    private func withPassword<R>(_ password: SecureBytes?, _ body: (UnsafePointer<CChar>?, Int32) -> R) -> R {
        guard let password else { return body(nil, 0) }
        return password.withUnsafeBytes { body($0.baseAddress?.assumingMemoryBound(to: CChar.self), -1) }
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
            guard let x509 = DERParser.whole(der, DERParser.certificate, free: X509_free) else {
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

        let context = try OpenSSLContext.get()
        guard let sha256 = Fetched.digest("SHA2-256") else { throw CryptoError.library("EVP_MD_fetch(SHA2-256)") }
        let bundle = try password.withUnsafeBytes { pass -> PKCS12Bundle in
            let text = pass.baseAddress?.assumingMemoryBound(to: CChar.self)
            // mac_iter -1: no MAC from PKCS12_create_ex (it would use SHA-1); set an HMAC-SHA256 one
            // next (computed in the bundle's context, ours).
            guard let handle = PKCS12_create_ex(text, name, key.pkey, keyCertificate, chain, NID_aes_256_cbc, NID_aes_256_cbc, iterations, -1, 0,
                                                context, nil) else {
                throw CryptoError.library("PKCS12_create_ex")
            }
            let bundle = PKCS12Bundle(handle: handle)
            guard PKCS12_set_mac(handle, text, -1, nil, 0, iterations, sha256) == 1 else { throw CryptoError.library("PKCS12_set_mac") }
            return bundle
        }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_PKCS12(bundle.handle, &out)
        guard length > 0, let out else { throw CryptoError.library("i2d_PKCS12") }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }
}
