import Foundation
import KeychainCore
import KeychainCrypto

/// An X.509 certificate (Apple's SecCertificate).
public final class SecCertificate: NSObject, @unchecked Sendable {
    let der: [UInt8]
    let parsed: Certificate
    let attributes: ObjectAttributes?

    init(der: [UInt8], parsed: Certificate, attributes: ObjectAttributes?) {
        self.der = der
        self.parsed = parsed
        self.attributes = attributes
    }
}

/// A certificate and the private key with the same application label (Apple's SecIdentity).
public final class SecIdentity: NSObject, @unchecked Sendable {
    let certificate: SecCertificate
    let privateKey: SecKey

    init(certificate: SecCertificate, privateKey: SecKey) {
        self.certificate = certificate
        self.privateKey = privateKey
    }
}

/// A certificate from DER, or nil when the data is not one.
public func SecCertificateCreateWithData(_ allocator: AnyObject?, _ data: CFData) -> SecCertificate? {
    let der = Array(data as Data)
    guard let parsed = try? Certificate(der: der) else { return nil }
    return SecCertificate(der: der, parsed: parsed, attributes: nil)
}

public func SecCertificateCopyData(_ certificate: SecCertificate) -> CFData {
    Data(certificate.der) as NSData
}

/// The subject's common name (or, without one, the whole subject in one line).
public func SecCertificateCopySubjectSummary(_ certificate: SecCertificate) -> CFString? {
    certificate.parsed.subjectSummary.map { NSString(string: $0) }
}

/// The certificate's public key.
public func SecCertificateCopyKey(_ certificate: SecCertificate) -> SecKey? {
    guard let key = try? AsymmetricKey.publicKey(subjectPublicKeyInfo: certificate.parsed.subjectPublicKeyInfo),
          let uid = try? UniqueID.random(), let attributes = try? keyObject(key, extra: [(.isPrivate, AttributeValue.bool(false))], uniqueID: uid.text)
    else { return nil }
    return SecKey(key: key, attributes: attributes)
}

/// The subject's common name (SecCertificate.h): errSecSuccess with the name, or without one
/// errSecSuccess and nil, as Apple answers.
public func SecCertificateCopyCommonName(_ certificate: SecCertificate, _ commonName: UnsafeMutablePointer<CFString?>) -> OSStatus {
    commonName.pointee = certificate.parsed.commonName.map { NSString(string: $0) }
    return errSecSuccess
}

/// The certificate's e-mail addresses (subject emailAddress and rfc822Name alternative names).
public func SecCertificateCopyEmailAddresses(_ certificate: SecCertificate, _ emailAddresses: UnsafeMutablePointer<CFArray?>) -> OSStatus {
    emailAddresses.pointee = certificate.parsed.emailAddresses as NSArray
    return errSecSuccess
}

/// The serial number's bytes (the INTEGER's content).
public func SecCertificateCopySerialNumberData(_ certificate: SecCertificate, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData? {
    guard var content = DER.content(of: certificate.parsed.serialNumber, tag: 0x02) else {
        fail(error, errSecDecode, "the serial number cannot be read")
        return nil
    }
    if content.count > 1, content.first == 0 { content.removeFirst() }
    return Data(content) as NSData
}

/// The DER of the issuer and subject names (Apple normalises them first; here they are as stored).
public func SecCertificateCopyNormalizedIssuerSequence(_ certificate: SecCertificate) -> CFData? { Data(certificate.parsed.issuer) as NSData }
public func SecCertificateCopyNormalizedSubjectSequence(_ certificate: SecCertificate) -> CFData? { Data(certificate.parsed.subject) as NSData }

public func SecIdentityCopyCertificate(_ identity: SecIdentity, _ certificate: UnsafeMutablePointer<SecCertificate?>) -> OSStatus {
    certificate.pointee = identity.certificate
    return errSecSuccess
}

public func SecIdentityCopyPrivateKey(_ identity: SecIdentity, _ privateKey: UnsafeMutablePointer<SecKey?>) -> OSStatus {
    privateKey.pointee = identity.privateKey
    return errSecSuccess
}

/// Certificate attributes for SecItem results.
func certificateAttributeDictionary(_ attributes: ObjectAttributes) -> [String: Any] {
    var dictionary: [String: Any] = [kSecClass as String: kSecClassCertificate as String]
    let storedAsData = ItemMapping.storedAsData(attributes)
    for (key, mapping) in ItemMapping.mappings(for: .certificate) {
        guard let bytes = attributes[mapping.attribute],
              let value = ItemMapping.decode(bytes, as: mapping, storedAsData: storedAsData.contains(mapping.attribute)) else { continue }
        if mapping.kind == .string, bytes.isEmpty { continue }
        dictionary[key] = value
    }
    return dictionary
}
