/// The freedesktop Secret Service's `dh-ietf1024-sha256-aes128-cbc-pkcs7` transfer: Diffie-Hellman
/// over the second Oakley group (RFC 2409, 1024-bit prime, generator 2), the shared value
/// left-padded to 128 bytes, HKDF-SHA-256 with no salt and no info to a 16-byte key, and each
/// secret under AES-128-CBC with PKCS#7 padding and a fresh 16-byte IV.
public enum SecretServiceTransport {
    public static let algorithm = "dh-ietf1024-sha256-aes128-cbc-pkcs7"

    static let primeHex = "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DDEF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7EDEE386BFB5A899FA5AE9F24117C4B1FE649286651ECE65381FFFFFFFFFFFFFFFF"

    public static var prime: [UInt8] { Hex.bytes(Array(primeHex.utf8)) ?? [] }

    /// Our public value and the session key for a client's public value (big-endian, any length:
    /// libsecret sends it without leading zeros). A value outside 2…p-2 is refused.
    public static func agree(clientPublic: [UInt8]) throws -> (publicValue: [UInt8], key: SecureBytes) {
        let p = prime
        let trimmed = Array(clientPublic.drop { $0 == 0 })
        guard !trimmed.isEmpty, trimmed.count <= p.count else { throw CryptoError(.invalidInput, "the client's public value is out of range") }
        let padded = [UInt8](repeating: 0, count: p.count - trimmed.count) + trimmed
        var pMinusOne = p
        pMinusOne[pMinusOne.count - 1] -= 1  // p ends in 0xFF
        guard padded.lexicographicallyPrecedes(pMinusOne), trimmed != [1] else {
            throw CryptoError(.invalidInput, "the client's public value is out of range")
        }
        let pair = try keyPair()
        return (pair.publicValue, try sessionKey(pair.key, peerPublic: padded))
    }

    /// A fresh key pair over the group (a client's side, or the service's).
    public static func keyPair() throws -> (key: AsymmetricKey, publicValue: [UInt8]) {
        let key = try AsymmetricKey.generate(.dh, domain: FiniteFieldComponents(prime: prime, base: [2]))
        guard let mine = try key.finiteFieldComponents().publicValue else { throw CryptoError.library("DH public value") }
        return (key, mine)
    }

    /// The session key from our key and the peer's public value (any length, big-endian).
    public static func sessionKey(_ key: AsymmetricKey, peerPublic: [UInt8]) throws -> SecureBytes {
        let p = prime
        let trimmed = Array(peerPublic.drop { $0 == 0 })
        guard !trimmed.isEmpty, trimmed.count <= p.count else { throw CryptoError(.invalidInput, "the peer's public value is out of range") }
        let shared = try key.diffieHellmanSecret(peerPublicValue: [UInt8](repeating: 0, count: p.count - trimmed.count) + trimmed)
        guard shared.count == p.count else { throw CryptoError.library("DH shared value length") }
        return try KeyDerivation.hkdf(key: shared, salt: [], info: [], length: 16)
    }

    /// A secret for the client: (IV, ciphertext).
    public static func encrypt(_ secret: [UInt8], key: SecureBytes) throws -> (iv: [UInt8], value: [UInt8]) {
        let iv = try Random.bytes(16)
        let cipher = try SymmetricCipher(mode: .cbcPad, key: key, iv: iv, encrypting: true)
        var out = try secret.withUnsafeBytes { try cipher.update($0) }
        out += try cipher.finish()
        return (iv, out)
    }

    /// A secret from the client; a wrong length, IV or padding is `.invalidInput`.
    public static func decrypt(_ value: [UInt8], iv: [UInt8], key: SecureBytes) throws -> SecureBytes {
        guard iv.count == 16, !value.isEmpty, value.count % 16 == 0 else {
            throw CryptoError(.invalidInput, "the secret was not encrypted as the session's algorithm says")
        }
        let cipher = try SymmetricCipher(mode: .cbcPad, key: key, iv: iv, encrypting: false)
        var plain: [UInt8]
        do {
            plain = try value.withUnsafeBytes { try cipher.update($0) }
            plain += try cipher.finish()
        } catch {
            throw CryptoError(.invalidInput, "the secret's padding is wrong")
        }
        defer { wipe(&plain) }
        return SecureBytes(plain)
    }
}
