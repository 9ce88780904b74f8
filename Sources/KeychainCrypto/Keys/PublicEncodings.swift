internal import COpenSSL

/// A key's public encodings, each computed once. OpenSSL 3 converts an EC point to affine form
/// on every read and looks up an encoder in every provider for each `i2d_PUBKEY`: callgrind
/// showed 1.5 M instructions of them per P-256 key pair made by C_GenerateKeyPair (the
/// generation itself: 0.3 M), which reads the point and the SubjectPublicKeyInfo of the same
/// key for each of its two objects.
final class PublicEncodings: @unchecked Sendable {
    enum Slot: Int, CaseIterable {
        case ecPoint, rawPublicKey, subjectPublicKeyInfo
    }

    private var values = [[UInt8]?](repeating: nil, count: Slot.allCases.count)
    private let mutex = PThreadMutex()

    /// The value of `slot`, made by `make` the first time (outside the lock: two threads may
    /// both make it, and the first kept is returned).
    func value(_ slot: Slot, _ make: () throws -> [UInt8]) rethrows -> [UInt8] {
        if let cached = mutex.withLock({ values[slot.rawValue] }) { return cached }
        let made = try make()
        return mutex.withLock {
            if let kept = values[slot.rawValue] { return kept }
            values[slot.rawValue] = made
            return made
        }
    }
}

extension AsymmetricKey {
    /// The DER SubjectPublicKeyInfo (RFC 5280) built from the public key's parts, as OpenSSL
    /// writes it: RSA with NULL parameters, EC with the named curve and the uncompressed point,
    /// the Edwards and Montgomery curves with absent parameters (RFC 8410). DSA and DH through
    /// OpenSSL's encoder. `nil` when this kind has no such shortcut.
    func builtSubjectPublicKeyInfo() throws -> [UInt8]? {
        let algorithm: [UInt8]
        switch kind {
        case .rsa: algorithm = [0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01, 0x05, 0x00]  // rsaEncryption, NULL
        case .ec(let curve): algorithm = [0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01] + curve.oid  // id-ecPublicKey, namedCurve
        case .x25519: algorithm = [0x06, 0x03, 0x2B, 0x65, 110]  // 1.3.101.110
        case .x448: algorithm = [0x06, 0x03, 0x2B, 0x65, 111]
        case .ed25519: algorithm = [0x06, 0x03, 0x2B, 0x65, 112]
        case .ed448: algorithm = [0x06, 0x03, 0x2B, 0x65, 113]
        case .dsa, .dh: return nil
        }
        // RSAPublicKey, the EC point, or the raw key: what Apple's external representation holds.
        let key = try publicKeyBytes()
        let bitString: [UInt8] = [0x03] + DER.lengthBytes(key.count + 1) + [0x00] + key
        return Self.derSequence(Self.derSequence(algorithm) + bitString)
    }
}
