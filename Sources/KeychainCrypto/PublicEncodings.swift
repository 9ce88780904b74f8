internal import COpenSSL
import Glibc

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
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// The value of `slot`, made by `make` the first time (outside the lock: two threads may
    /// both make it, and the first kept is returned).
    func value(_ slot: Slot, _ make: () throws -> [UInt8]) rethrows -> [UInt8] {
        pthread_mutex_lock(mutex)
        let cached = values[slot.rawValue]
        pthread_mutex_unlock(mutex)
        if let cached { return cached }
        let made = try make()
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        if let kept = values[slot.rawValue] { return kept }
        values[slot.rawValue] = made
        return made
    }
}

extension AsymmetricKey {
    /// The DER SubjectPublicKeyInfo (RFC 5280) built from the public key's parts, as OpenSSL
    /// writes it: RSA with NULL parameters, EC with the named curve and the uncompressed point,
    /// the Edwards and Montgomery curves with absent parameters (RFC 8410). DSA and DH through
    /// OpenSSL's encoder. `nil` when this kind has no such shortcut.
    func builtSubjectPublicKeyInfo() throws -> [UInt8]? {
        let algorithm: [UInt8]
        let key: [UInt8]
        switch kind {
        case .rsa:
            let parts = try rsaPublicComponents()
            algorithm = [0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01, 0x05, 0x00]  // rsaEncryption, NULL
            key = Self.derSequence(Self.derInteger(parts.modulus) + Self.derInteger(parts.publicExponent))
        case .ec(let curve):
            algorithm = [0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01] + curve.oid  // id-ecPublicKey, namedCurve
            key = try ecPoint()
        case .ed25519, .x25519, .ed448, .x448:
            let arc: UInt8
            switch kind {
            case .x25519: arc = 110
            case .x448: arc = 111
            case .ed25519: arc = 112
            default: arc = 113
            }
            algorithm = [0x06, 0x03, 0x2B, 0x65, arc]  // 1.3.101.arc
            key = try rawPublicKey()
        case .dsa, .dh:
            return nil
        }
        let bitString: [UInt8] = [0x03] + DER.lengthBytes(key.count + 1) + [0x00] + key
        return Self.derSequence(Self.derSequence(algorithm) + bitString)
    }
}
