import Foundation
import KeychainCore
import KeychainCrypto

/// The dictionary keys of SecKeyCopyKeyExchangeResult's parameters (Apple's SecKeyKeyExchangeParameter).
public struct SecKeyKeyExchangeParameter: RawRepresentable, Hashable, @unchecked Sendable {
    public let rawValue: CFString
    public init(rawValue: CFString) { self.rawValue = rawValue }

    public static func == (lhs: Self, rhs: Self) -> Bool { (lhs.rawValue as String) == (rhs.rawValue as String) }
    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue as String) }

    /// The number of bytes the X9.63 KDF derives (a number; required by the KDF algorithms).
    public static let requestedSize = SecKeyKeyExchangeParameter(rawValue: ConstantString("requestedSize"))
    /// The KDF's SharedInfo (Data; optional).
    public static let sharedInfo = SecKeyKeyExchangeParameter(rawValue: ConstantString("sharedInfo"))
}

// The C names, for code written against them.
public nonisolated(unsafe) let kSecKeyKeyExchangeParameterRequestedSize: CFString = SecKeyKeyExchangeParameter.requestedSize.rawValue
public nonisolated(unsafe) let kSecKeyKeyExchangeParameterSharedInfo: CFString = SecKeyKeyExchangeParameter.sharedInfo.rawValue

/// An ECDH key-exchange algorithm: cofactor or not (the same on the NIST curves, whose cofactor
/// is 1) and the ANSI X9.63 KDF's hash, nil for the raw shared secret.
struct KeyExchangeAlgorithm {
    let cofactor: Bool
    let kdf: Digest.Algorithm?

    /// "algid:keyexchange:ECDH[C][:KDFX963:SHAn]".
    static func named(_ name: String) -> KeyExchangeAlgorithm? {
        let digests: [String: Digest.Algorithm] = ["SHA1": .sha1, "SHA224": .sha224, "SHA256": .sha256, "SHA384": .sha384, "SHA512": .sha512]
        let parts = name.split(separator: ":").map(String.init)
        guard parts.count == 3 || parts.count == 5, parts[0] == "algid", parts[1] == "keyexchange", parts[2] == "ECDH" || parts[2] == "ECDHC" else { return nil }
        guard parts.count == 5 else { return KeyExchangeAlgorithm(cofactor: parts[2] == "ECDHC", kdf: nil) }
        guard parts[3] == "KDFX963", let digest = digests[parts[4]] else { return nil }
        return KeyExchangeAlgorithm(cofactor: parts[2] == "ECDHC", kdf: digest)
    }
}

/// ECDH between an EC private key (in the keychain's software, or a Secure Enclave key in the TPM)
/// and a public key of the same curve, as Apple defines the algorithms: `ecdhKeyExchangeStandard`
/// and `…Cofactor` give the shared secret (the x-coordinate; parameters are not used); the
/// `…X963SHAn` variants derive `kSecKeyKeyExchangeParameterRequestedSize` bytes from it with the
/// ANSI X9.63 KDF and the optional `kSecKeyKeyExchangeParameterSharedInfo` (missing size, wrong
/// types: errSecParam). Other keys and algorithms: errSecParam.
public func SecKeyCopyKeyExchangeResult(_ privateKey: SecKey, _ algorithm: SecKeyAlgorithm, _ publicKey: SecKey, _ parameters: CFDictionary,
                                        _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData? {
    do {
        return Data(try keyExchange(privateKey, algorithm, publicKey, parameters).bytes) as NSData
    } catch let failure as ItemError {
        fail(error, failure.status, failure.reason)
        return nil
    } catch let failure {
        fail(error, errSecParam, "\(failure)")
        return nil
    }
}

private func keyExchange(_ privateKey: SecKey, _ algorithm: SecKeyAlgorithm, _ publicKey: SecKey, _ parameters: CFDictionary) throws -> SecureBytes {
    guard let chosen = KeyExchangeAlgorithm.named(algorithm.name) else { throw ItemError(errSecParam, "\(algorithm.name) is not a key-exchange algorithm") }
    guard privateKey.isPrivate, case .ec(let curve) = privateKey.key.kind else { throw ItemError(errSecParam, "key exchange needs an elliptic-curve private key") }
    guard case .ec(let peerCurve) = publicKey.key.kind, peerCurve == curve else { throw ItemError(errSecParam, "the public key is not on the private key's curve") }
    var requestedSize: Int?
    var sharedInfo: [UInt8] = []
    if chosen.kdf != nil {
        var given: [String: Any] = [:]
        for (key, value) in parameters { if let key = ItemMapping.string(key) { given[key] = value } }
        guard let size = given[SecKeyKeyExchangeParameter.requestedSize.rawValue as String].flatMap(ItemMapping.integer) else {
            throw ItemError(errSecParam, "kSecKeyKeyExchangeParameterRequestedSize is missing")
        }
        requestedSize = Int(size)
        if let info = given[SecKeyKeyExchangeParameter.sharedInfo.rawValue as String] {
            guard let data = info as? Data else { throw ItemError(errSecParam, "kSecKeyKeyExchangeParameterSharedInfo must be Data") }
            sharedInfo = Array(data)
        }
    }
    try privateKey.confirmPresence()
    let secret: SecureBytes
    do {
        let peer = publicKey.isPrivate && publicKey.enclave == nil ? try publicKey.key.publicKey() : publicKey.key
        if let enclave = privateKey.enclave {
            secret = try translateKeychain { () throws(KeychainError) in try enclave.sharedSecret(peerPoint: try ecPoint(peer)) }
        } else {
            secret = try privateKey.key.sharedSecret(with: peer, cofactor: chosen.cofactor)
        }
    } catch let failure as ItemError {
        throw failure
    } catch {
        throw ItemError(errSecParam, "the keys do not agree: \(error)")
    }
    guard let digest = chosen.kdf, let requestedSize else { return secret }
    do { return try X963KDF.derive(digest, secret: secret, sharedInfo: sharedInfo, length: requestedSize) } catch {
        throw ItemError(errSecParam, "ECDH key exchange: the X9.63 KDF cannot derive \(requestedSize) bytes with this hash")
    }
}

/// The uncompressed point of an EC public key, in KeychainError terms.
private func ecPoint(_ key: AsymmetricKey) throws(KeychainError) -> [UInt8] {
    do { return try key.ecPoint() } catch { throw KeychainError(.argumentsBad, "the public key has no point: \(error)") }
}
