internal import COpenSSL

/// An X.509 certificate parsed by OpenSSL: the parts PKCS#11 certificate objects expose.
public struct Certificate: Sendable {
    /// DER of the subject Name.
    public let subject: [UInt8]
    /// DER of the issuer Name.
    public let issuer: [UInt8]
    /// DER of the serialNumber INTEGER (tag, length and value).
    public let serialNumber: [UInt8]
    /// DER SubjectPublicKeyInfo.
    public let subjectPublicKeyInfo: [UInt8]
    /// The public key as Apple exports it (see AsymmetricKey.publicKeyBytes), if the algorithm
    /// is one this token knows.
    public let publicKeyBytes: [UInt8]?
    /// The subject's common name, else the subject as one line (SecCertificateCopySubjectSummary).
    public let subjectSummary: String?
    /// The subject's common name, if it has one.
    public let commonName: String?
    /// The values of the subject's attributes (common name, organisation, …), as text.
    public let subjectValues: [String]
    /// The e-mail addresses of the subject (its emailAddress attributes and rfc822Name alternative names).
    public let emailAddresses: [String]
    /// notBefore and notAfter, in seconds since 1970 (nil if OpenSSL cannot read them).
    public let validity: (notBefore: Int64, notAfter: Int64)?

    /// Parses `der`, which must be exactly one certificate.
    public init(der: [UInt8]) throws {
        guard !der.isEmpty, der.count <= 1 << 20 else { throw CryptoError(.invalidInput, "certificate size") }
        // Made in our library context (DERParser.certificate), like everything the module parses.
        let parsed = der.withUnsafeBufferPointer { buffer -> (OpaquePointer?, Int) in
            guard let base = buffer.baseAddress else { return (nil, 0) }
            var cursor: UnsafePointer<UInt8>? = base
            let certificate = DERParser.certificate(&cursor, buffer.count)
            return (certificate, cursor.map { $0 - base } ?? 0)
        }
        guard let x509 = parsed.0 else {
            OpenSSLErrorQueue.discardOwn()
            throw CryptoError(.invalidInput, "not a DER X.509 certificate")
        }
        defer { X509_free(x509) }
        guard parsed.1 == der.count else { throw CryptoError(.invalidInput, "trailing bytes after the certificate") }
        subject = try Self.encode { i2d_X509_NAME(X509_get_subject_name(x509), $0) }
        subjectSummary = Self.summary(X509_get_subject_name(x509))
        commonName = Self.commonName(X509_get_subject_name(x509))
        subjectValues = Self.values(X509_get_subject_name(x509))
        emailAddresses = Self.emails(x509)
        if let from = Self.seconds(X509_get0_notBefore(x509)), let until = Self.seconds(X509_get0_notAfter(x509)) {
            validity = (from, until)
        } else {
            validity = nil
        }
        issuer = try Self.encode { i2d_X509_NAME(X509_get_issuer_name(x509), $0) }
        serialNumber = try Self.encode { i2d_ASN1_INTEGER(X509_get0_serialNumber(x509), $0) }
        guard let pkey = X509_get0_pubkey(x509) else { throw CryptoError(.invalidInput, "the certificate's public key cannot be read") }
        subjectPublicKeyInfo = try Self.encode { i2d_PUBKEY(pkey, $0) }
        publicKeyBytes = try? AsymmetricKey.publicKey(subjectPublicKeyInfo: subjectPublicKeyInfo).publicKeyBytes()
    }

    private static func summary(_ name: OpaquePointer?) -> String? {
        guard let name else { return nil }
        var buffer = [CChar](repeating: 0, count: 256)
        let length = X509_NAME_get_text_by_NID(name, NID_commonName, &buffer, Int32(buffer.count))
        if length > 0 { return String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        guard let line = X509_NAME_oneline(name, nil, 0) else { return nil }
        defer { CRYPTO_free(line, #fileID, #line) }
        return String(cString: line)
    }

    private static func commonName(_ name: OpaquePointer?) -> String? {
        guard let name else { return nil }
        var buffer = [CChar](repeating: 0, count: 256)
        let length = X509_NAME_get_text_by_NID(name, NID_commonName, &buffer, Int32(buffer.count))
        return length > 0 ? String(decoding: buffer.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
    }

    private static func values(_ name: OpaquePointer?) -> [String] {
        guard let name else { return [] }
        var result: [String] = []
        for index in 0..<X509_NAME_entry_count(name) {
            guard let entry = X509_NAME_get_entry(name, index), let data = X509_NAME_ENTRY_get_data(entry) else { continue }
            var utf8: UnsafeMutablePointer<UInt8>?
            let length = ASN1_STRING_to_UTF8(&utf8, data)
            guard length >= 0, let utf8 else { continue }
            result.append(String(decoding: UnsafeBufferPointer(start: utf8, count: Int(length)), as: UTF8.self))
            CRYPTO_free(utf8, #fileID, #line)
        }
        return result
    }

    private static func emails(_ x509: OpaquePointer) -> [String] {
        guard let stack = X509_get1_email(x509) else { return [] }
        defer { X509_email_free(stack) }
        var result: [String] = []
        for index in 0..<OPENSSL_sk_num(stack) {
            guard let value = OPENSSL_sk_value(stack, index) else { continue }
            result.append(String(cString: value.assumingMemoryBound(to: CChar.self)))
        }
        return result
    }

    private static func seconds(_ time: UnsafePointer<ASN1_TIME>?) -> Int64? {
        guard let time else { return nil }
        var parts = tm()
        guard ASN1_TIME_to_tm(time, &parts) == 1 else { return nil }
        return Int64(timegm(&parts))
    }

    private static func encode(_ body: (UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>) -> Int32) throws -> [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        let length = body(&out)
        guard length > 0, let out else { throw CryptoError.library("i2d") }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }
}
