import KeychainCrypto

/// X.509 certificate objects: the attributes PKCS#11 derives from the DER value.
enum CertificateFactory {
    /// Parses CKA_VALUE and fills CKA_SUBJECT, CKA_ISSUER, CKA_SERIAL_NUMBER,
    /// CKA_PUBLIC_KEY_INFO, CKA_CHECK_VALUE, and CKA_ID (SHA-1 of the certificate's public key,
    /// so that it pairs with its private key) when the template gave none. A derived attribute
    /// the template did give must match the certificate. CKA_SERIAL_NUMBER may also be given as
    /// the INTEGER's bare content bytes, as Java's SunPKCS11 writes it; the DER INTEGER is stored.
    static func complete(_ object: inout ObjectAttributes, given: Set<AttributeType>) throws(KeychainError) {
        let value = object[.value] ?? []
        let certificate: Certificate
        do { certificate = try Certificate(der: value) } catch {
            throw KeychainError(.attributeValueInvalid, "CKA_VALUE is not a DER X.509 certificate")
        }
        var derived: [AttributeType: [UInt8]] = [.subject: certificate.subject, .issuer: certificate.issuer,
                                                 .serialNumber: certificate.serialNumber, .publicKeyInfo: certificate.subjectPublicKeyInfo]
        do { derived[.checkValue] = Array(try Digest.hash(.sha1, value).prefix(3)) } catch {
            throw KeychainError(.storageFailure, "cannot hash the certificate")
        }
        for (type, expected) in derived {
            if given.contains(type), object[type] != expected, !(type == .serialNumber && object[type] == DER.content(of: expected, tag: 0x02)) {
                throw KeychainError(.attributeValueInvalid, "attribute \(type) does not match the certificate")
            }
            object[type] = expected
        }
        if !given.contains(.id) {
            object[.id] = (try? certificate.publicKeyBytes.map { try Digest.hash(.sha1, $0) }) ?? []
        }
    }
}
