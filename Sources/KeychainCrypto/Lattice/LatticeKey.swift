import Crypto

/// The FIPS 204 (ML-DSA) and FIPS 203 (ML-KEM) parameter sets, with PKCS#11 3.2's CKP_ numbers.
///
/// The lattice code is swift-crypto's (BoringSSL's FIPS 203/204 implementation, through its
/// public `MLDSA65`, `MLDSA87`, `MLKEM768`, `MLKEM1024` types). Its public API has no ML-DSA-44
/// and no ML-KEM-512: those two sets are named here so that callers can be told exactly that
/// (`isOffered`), never approximated.
public enum LatticeParameterSet: Hashable, Sendable, CaseIterable {
    case mlDSA44, mlDSA65, mlDSA87
    case mlKEM512, mlKEM768, mlKEM1024

    /// A signature scheme (ML-DSA) rather than a key encapsulation mechanism (ML-KEM).
    public var isSignature: Bool { self == .mlDSA44 || self == .mlDSA65 || self == .mlDSA87 }

    /// Whether the library behind this module offers the set.
    public var isOffered: Bool { self != .mlDSA44 && self != .mlKEM512 }

    /// CKP_ML_DSA_44/65/87 and CKP_ML_KEM_512/768/1024 (PKCS#11 3.2 §6.67, §6.68): 1, 2, 3.
    public var pkcs11Value: UInt {
        switch self {
        case .mlDSA44, .mlKEM512: return 1
        case .mlDSA65, .mlKEM768: return 2
        case .mlDSA87, .mlKEM1024: return 3
        }
    }

    /// The ML-DSA set with this CKP_ value.
    public static func mlDSA(pkcs11Value value: UInt) -> LatticeParameterSet? {
        [.mlDSA44, .mlDSA65, .mlDSA87].first { $0.pkcs11Value == value }
    }

    /// The ML-KEM set with this CKP_ value.
    public static func mlKEM(pkcs11Value value: UInt) -> LatticeParameterSet? {
        [.mlKEM512, .mlKEM768, .mlKEM1024].first { $0.pkcs11Value == value }
    }

    /// "ML-DSA-65", as FIPS 204 and FIPS 203 name them.
    public var name: String {
        switch self {
        case .mlDSA44: return "ML-DSA-44"
        case .mlDSA65: return "ML-DSA-65"
        case .mlDSA87: return "ML-DSA-87"
        case .mlKEM512: return "ML-KEM-512"
        case .mlKEM768: return "ML-KEM-768"
        case .mlKEM1024: return "ML-KEM-1024"
        }
    }

    /// The encoded public key's length (FIPS 204 Table 2, FIPS 203 Table 3).
    public var publicKeyLength: Int {
        switch self {
        case .mlDSA44: return 1312
        case .mlDSA65: return 1952
        case .mlDSA87: return 2592
        case .mlKEM512: return 800
        case .mlKEM768: return 1184
        case .mlKEM1024: return 1568
        }
    }

    /// The seed a private key is made from: ξ (32 bytes) for ML-DSA, d ‖ z (64 bytes) for ML-KEM.
    public var seedLength: Int { isSignature ? 32 : 64 }

    /// An ML-DSA signature's length.
    public var signatureLength: Int {
        switch self {
        case .mlDSA44: return 2420
        case .mlDSA65: return 3309
        case .mlDSA87: return 4627
        default: return 0
        }
    }

    /// An ML-KEM ciphertext's length.
    public var ciphertextLength: Int {
        switch self {
        case .mlKEM512: return 768
        case .mlKEM768: return 1088
        case .mlKEM1024: return 1568
        default: return 0
        }
    }

    /// The length of the expanded private key (FIPS 204 sk, FIPS 203 dk), for reading PKCS#8.
    public var expandedPrivateKeyLength: Int {
        switch self {
        case .mlDSA44: return 2560
        case .mlDSA65: return 4032
        case .mlDSA87: return 4896
        case .mlKEM512: return 1632
        case .mlKEM768: return 2400
        case .mlKEM1024: return 3168
        }
    }

    /// The algorithm identifier's OID, DER-encoded with its tag: id-ml-dsa-44/65/87
    /// (2.16.840.1.101.3.4.3.17–19) and id-alg-ml-kem-512/768/1024 (2.16.840.1.101.3.4.4.1–3),
    /// as the IETF LAMPS documents (RFC 9881, RFC 9935) use them, with no parameters.
    public var objectIdentifier: [UInt8] {
        let arc: [UInt8] = isSignature ? [0x03] : [0x04]
        let last: UInt8
        switch self {
        case .mlDSA44: last = 17
        case .mlDSA65: last = 18
        case .mlDSA87: last = 19
        case .mlKEM512: last = 1
        case .mlKEM768: last = 2
        case .mlKEM1024: last = 3
        }
        return [0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04] + arc + [last]
    }

    /// The set whose OID (with its tag) is `oid`.
    public static func withObjectIdentifier(_ oid: [UInt8]) -> LatticeParameterSet? {
        allCases.first { $0.objectIdentifier == oid }
    }
}

/// An ML-DSA or ML-KEM key: the public key, and for a private key its seed and swift-crypto's
/// key made from it (kept for the key's life, so that each signature or decapsulation does not
/// expand the seed again).
///
/// Our copies of the seed are `SecureBytes` (wiped when released). swift-crypto keeps its own
/// copy of the seed and of the expanded key inside its key objects and does not wipe them when
/// they are released: a limit of the library, stated in Docs/security.md.
public final class LatticeKey: @unchecked Sendable {
    public let parameterSet: LatticeParameterSet
    /// The FIPS 204 / FIPS 203 encoding of the public key (pk, ek).
    public let publicKey: [UInt8]
    private let seed: SecureBytes?
    private let backing: Backing

    private enum Backing {
        case dsa65(MLDSA65.PrivateKey), dsa87(MLDSA87.PrivateKey), kem768(MLKEM768.PrivateKey), kem1024(MLKEM1024.PrivateKey)
        case dsa65Public(MLDSA65.PublicKey), dsa87Public(MLDSA87.PublicKey), kem768Public(MLKEM768.PublicKey), kem1024Public(MLKEM1024.PublicKey)
    }

    private init(_ parameterSet: LatticeParameterSet, publicKey: [UInt8], seed: SecureBytes?, backing: Backing) {
        self.parameterSet = parameterSet
        self.publicKey = publicKey
        self.seed = seed
        self.backing = backing
    }

    public var isPrivate: Bool { seed != nil }

    /// A copy of the private key's seed (nil for a public key).
    public func seedBytes() -> SecureBytes? { seed.map { $0.withUnsafeBytes { SecureBytes($0) } } }

    private static func refuseUnoffered(_ set: LatticeParameterSet) throws(CryptoError) {
        guard set.isOffered else { throw CryptoError(.invalidInput, "\(set.name) is not offered by the library (swift-crypto)") }
    }

    /// A new key pair from a fresh random seed.
    public static func generate(_ set: LatticeParameterSet) throws(CryptoError) -> LatticeKey {
        try refuseUnoffered(set)
        // ML-KEM: swift-crypto's own generation (BoringSSL's RNG). Its from-seed initializer also
        // encodes and hashes the public key (to compare with one given, even when none is), which
        // costs a third of a key pair; the seed it generated is then read back.
        do {
            switch set {
            case .mlKEM768:
                let key = try MLKEM768.PrivateKey()
                return LatticeKey(set, publicKey: Array(key.publicKey.rawRepresentation), seed: SecureBytes(key.seedRepresentation), backing: .kem768(key))
            case .mlKEM1024:
                let key = try MLKEM1024.PrivateKey()
                return LatticeKey(set, publicKey: Array(key.publicKey.rawRepresentation), seed: SecureBytes(key.seedRepresentation), backing: .kem1024(key))
            default:
                break
            }
        } catch {
            throw CryptoError(.library, "\(set.name) key generation failed: \(error)")
        }
        let seed: SecureBytes
        do { seed = try SecureBytes.random(count: set.seedLength) } catch { throw CryptoError(.library, "random seed: \(error)") }
        return try privateKey(set, seed: seed)
    }

    /// The private key made from `seed` (ξ, or d ‖ z), as FIPS 204 Algorithm 6 / FIPS 203
    /// Algorithm 16 make it; `expectedPublicKey`, when given, must be the key it makes.
    public static func privateKey(_ set: LatticeParameterSet, seed: SecureBytes, expectedPublicKey: [UInt8]? = nil) throws(CryptoError) -> LatticeKey {
        try refuseUnoffered(set)
        guard seed.count == set.seedLength else { throw CryptoError(.invalidInput, "a \(set.name) seed has \(set.seedLength) bytes, not \(seed.count)") }
        let ownSeed = seed.withUnsafeBytes { SecureBytes($0) }
        do {
            let made: (Backing, [UInt8]) = try ownSeed.withUnsafeBytes { raw in
                let bytes = UnsafeRawBufferPointer(raw)
                switch set {
                case .mlDSA65:
                    let key = try MLDSA65.PrivateKey(seedRepresentation: bytes, publicKey: nil)
                    return (.dsa65(key), Array(key.publicKey.rawRepresentation))
                case .mlDSA87:
                    let key = try MLDSA87.PrivateKey(seedRepresentation: bytes, publicKey: nil)
                    return (.dsa87(key), Array(key.publicKey.rawRepresentation))
                case .mlKEM768:
                    let key = try MLKEM768.PrivateKey(seedRepresentation: bytes, publicKey: nil)
                    return (.kem768(key), Array(key.publicKey.rawRepresentation))
                case .mlKEM1024:
                    let key = try MLKEM1024.PrivateKey(seedRepresentation: bytes, publicKey: nil)
                    return (.kem1024(key), Array(key.publicKey.rawRepresentation))
                default:
                    throw CryptoError(.invalidInput, "\(set.name) is not offered")
                }
            }
            if let expectedPublicKey, expectedPublicKey != made.1 {
                throw CryptoError(.invalidInput, "the seed does not make the given \(set.name) public key")
            }
            return LatticeKey(set, publicKey: made.1, seed: ownSeed, backing: made.0)
        } catch let error as CryptoError {
            throw error
        } catch {
            throw CryptoError(.invalidInput, "\(set.name) seed refused: \(error)")
        }
    }

    /// A public key from its FIPS 204 / FIPS 203 encoding (an ML-KEM key is checked as FIPS
    /// 203 §7.2 asks: every coefficient below q).
    public static func publicKey(_ set: LatticeParameterSet, encoded: [UInt8]) throws(CryptoError) -> LatticeKey {
        try refuseUnoffered(set)
        guard encoded.count == set.publicKeyLength else {
            throw CryptoError(.invalidInput, "a \(set.name) public key has \(set.publicKeyLength) bytes, not \(encoded.count)")
        }
        do {
            let backing: Backing
            switch set {
            case .mlDSA65: backing = .dsa65Public(try MLDSA65.PublicKey(rawRepresentation: encoded))
            case .mlDSA87: backing = .dsa87Public(try MLDSA87.PublicKey(rawRepresentation: encoded))
            case .mlKEM768: backing = .kem768Public(try MLKEM768.PublicKey(rawRepresentation: encoded))
            case .mlKEM1024: backing = .kem1024Public(try MLKEM1024.PublicKey(rawRepresentation: encoded))
            default: throw CryptoError(.invalidInput, "\(set.name) is not offered")
            }
            return LatticeKey(set, publicKey: encoded, seed: nil, backing: backing)
        } catch let error as CryptoError {
            throw error
        } catch {
            throw CryptoError(.invalidInput, "not a valid \(set.name) public key")
        }
    }

    /// This key's public half alone.
    public func publicOnly() throws(CryptoError) -> LatticeKey {
        try Self.publicKey(parameterSet, encoded: publicKey)
    }

    // MARK: ML-DSA

    /// FIPS 204 ML-DSA.Sign (hedged: fresh randomness in every signature) of `message` with
    /// `context` (0–255 bytes).
    public func sign(_ message: UnsafeRawBufferPointer, context: [UInt8]) throws(CryptoError) -> [UInt8] {
        guard context.count <= 255 else { throw CryptoError(.invalidInput, "an ML-DSA context has at most 255 bytes") }
        do {
            switch backing {
            case .dsa65(let key): return Array(try key.signature(for: message, context: context))
            case .dsa87(let key): return Array(try key.signature(for: message, context: context))
            default: throw CryptoError(.invalidInput, "not an ML-DSA private key")
            }
        } catch let error as CryptoError {
            throw error
        } catch {
            throw CryptoError(.library, "ML-DSA signing failed: \(error)")
        }
    }

    /// FIPS 204 ML-DSA.Verify.
    public func verify(_ signature: [UInt8], message: UnsafeRawBufferPointer, context: [UInt8]) throws(CryptoError) -> Bool {
        guard context.count <= 255 else { throw CryptoError(.invalidInput, "an ML-DSA context has at most 255 bytes") }
        guard parameterSet.isSignature else { throw CryptoError(.invalidInput, "not an ML-DSA key") }
        guard signature.count == parameterSet.signatureLength else { return false }
        switch backing {
        case .dsa65Public(let key): return key.isValidSignature(signature, for: message, context: context)
        case .dsa87Public(let key): return key.isValidSignature(signature, for: message, context: context)
        case .dsa65(let key): return key.publicKey.isValidSignature(signature, for: message, context: context)
        case .dsa87(let key): return key.publicKey.isValidSignature(signature, for: message, context: context)
        default: throw CryptoError(.invalidInput, "not an ML-DSA key")
        }
    }

    // MARK: ML-KEM

    /// FIPS 203 ML-KEM.Encaps: a ciphertext and the 32-byte shared secret.
    public func encapsulate() throws(CryptoError) -> (ciphertext: [UInt8], sharedSecret: SecureBytes) {
        let result: KEM.EncapsulationResult
        do {
            switch backing {
            case .kem768Public(let key): result = try key.encapsulate()
            case .kem1024Public(let key): result = try key.encapsulate()
            case .kem768(let key): result = try key.publicKey.encapsulate()
            case .kem1024(let key): result = try key.publicKey.encapsulate()
            default: throw CryptoError(.invalidInput, "not an ML-KEM key")
            }
        } catch let error as CryptoError {
            throw error
        } catch {
            throw CryptoError(.library, "ML-KEM encapsulation failed: \(error)")
        }
        return (Array(result.encapsulated), result.sharedSecret.withUnsafeBytes { SecureBytes($0) })
    }

    /// FIPS 203 ML-KEM.Decaps: the 32-byte shared secret (for a ciphertext that was altered,
    /// the implicit rejection value, as FIPS 203 requires: never an error).
    public func decapsulate(_ ciphertext: UnsafeRawBufferPointer) throws(CryptoError) -> SecureBytes {
        guard ciphertext.count == parameterSet.ciphertextLength else {
            throw CryptoError(.invalidInput, "a \(parameterSet.name) ciphertext has \(parameterSet.ciphertextLength) bytes, not \(ciphertext.count)")
        }
        do {
            let secret: SymmetricKey
            switch backing {
            case .kem768(let key): secret = try key.decapsulate(ciphertext)
            case .kem1024(let key): secret = try key.decapsulate(ciphertext)
            default: throw CryptoError(.invalidInput, "not an ML-KEM private key")
            }
            return secret.withUnsafeBytes { SecureBytes($0) }
        } catch let error as CryptoError {
            throw error
        } catch {
            throw CryptoError(.library, "ML-KEM decapsulation failed: \(error)")
        }
    }

    // MARK: encodings

    /// SubjectPublicKeyInfo: the algorithm's OID (no parameters) and the encoded key as the BIT
    /// STRING (RFC 9881 §4 for ML-DSA, RFC 9935 §4 for ML-KEM).
    public func subjectPublicKeyInfo() -> [UInt8] {
        let algorithm = Self.sequence(parameterSet.objectIdentifier)
        let bits = [0x03] + DER.lengthBytes(publicKey.count + 1) + [0x00] + publicKey
        return Self.sequence(algorithm + bits)
    }

    /// A public key from its SubjectPublicKeyInfo.
    public static func publicKey(subjectPublicKeyInfo info: [UInt8]) throws(CryptoError) -> LatticeKey {
        let parsed: (set: LatticeParameterSet, key: [UInt8])? = info.withUnsafeBytes { raw in
            var outer = DERCursor(raw)
            guard let body = outer.next(tag: 0x30), outer.isAtEnd else { return nil }
            var inner = DERCursor(raw, body)
            guard let algorithm = inner.next(tag: 0x30), let bits = inner.next(tag: 0x03), inner.isAtEnd, !bits.isEmpty,
                  let set = LatticeParameterSet.withObjectIdentifier(Array(raw[algorithm])), raw[bits.lowerBound] == 0x00 else { return nil }
            return (set, Array(raw[(bits.lowerBound + 1)..<bits.upperBound]))
        }
        guard let parsed else { throw CryptoError(.invalidInput, "not an ML-DSA or ML-KEM SubjectPublicKeyInfo") }
        return try publicKey(parsed.set, encoded: parsed.key)
    }

    /// PKCS#8 (OneAsymmetricKey, version 0) in the seed form: privateKey holds `[0] seed`
    /// (RFC 9881 §6, RFC 9935 §6).
    public func privateKeyInfo() throws(CryptoError) -> SecureBytes {
        guard let seed else { throw CryptoError(.invalidInput, "a public key has no PKCS#8 form") }
        // Everything but the seed is public: the header is built as plain bytes, the whole in SecureBytes.
        let algorithm = Self.sequence(parameterSet.objectIdentifier)
        let keyField = [0x04] + DER.lengthBytes(seed.count + 2) + [0x80, UInt8(seed.count)]
        let body = [0x02, 0x01, 0x00] + algorithm + keyField
        let header = [0x30] + DER.lengthBytes(body.count + seed.count) + body
        let whole = SecureBytes(count: header.count + seed.count)
        whole.withUnsafeMutableBytes { out in
            out.copyBytes(from: header)
            seed.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: out[header.count...]).copyMemory(from: $0) }
        }
        return whole
    }

    /// A private key from PKCS#8: the seed form, or the form holding both the seed and the
    /// expanded key (whose public parts must be the seed's: ρ and tr for ML-DSA, ek, H(ek) and z
    /// for ML-KEM; its secret parts cannot be checked: the library makes keys from seeds only).
    /// The expanded form alone cannot be read: `CryptoError(.invalidInput)` saying a seed is
    /// needed. The caller's buffer is read in place: the seed is copied once, into `SecureBytes`.
    public static func privateKey(privateKeyInfo info: UnsafeRawBufferPointer) throws(CryptoError) -> LatticeKey {
        var outer = DERCursor(info)
        guard let body = outer.next(tag: 0x30), outer.isAtEnd else { throw CryptoError(.invalidInput, "not a PKCS#8 private key") }
        var fields = DERCursor(info, body)
        guard let version = fields.next(tag: 0x02), version.count == 1, info[version.lowerBound] <= 1, let algorithm = fields.next(tag: 0x30),
              let keyField = fields.next(tag: 0x04) else {
            throw CryptoError(.invalidInput, "not a PKCS#8 private key")
        }
        guard let set = LatticeParameterSet.withObjectIdentifier(Array(info[algorithm])) else {
            throw CryptoError(.invalidInput, "not an ML-DSA or ML-KEM private key")
        }
        try refuseUnoffered(set)
        var choice = DERCursor(info, keyField)
        var outerChoice = DERCursor(info, keyField)
        let seedRange: Range<Int>
        var expandedRange: Range<Int>? = nil
        if let seed = choice.next(tag: 0x80), choice.isAtEnd {
            seedRange = seed
        } else if var both = outerChoice.nextCursor(tag: 0x30), outerChoice.isAtEnd, let seed = both.next(tag: 0x04), let expanded = both.next(tag: 0x04), both.isAtEnd {
            seedRange = seed
            expandedRange = expanded
        } else if DERCursor(info, keyField).peekTag == 0x04 {
            throw CryptoError(.invalidInput, "this \(set.name) key holds only the expanded private key; a key with its seed is needed")
        } else {
            throw CryptoError(.invalidInput, "the \(set.name) private key is neither a seed nor seed and expanded key")
        }
        guard seedRange.count == set.seedLength else { throw CryptoError(.invalidInput, "a \(set.name) seed has \(set.seedLength) bytes") }
        let key = try privateKey(set, seed: SecureBytes(info[seedRange]))
        if let expandedRange {
            guard expandedRange.count == set.expandedPrivateKeyLength, key.expandedKeyAgrees(UnsafeRawBufferPointer(rebasing: info[expandedRange])) else {
                throw CryptoError(.invalidInput, "the expanded \(set.name) key does not belong to the seed")
            }
        }
        return key
    }

    /// Whether `expanded` (FIPS 204 sk, FIPS 203 dk) has this set's length and this key's public
    /// parts (ρ and tr; ek, H(ek) and z). Its secret parts cannot be compared: the library makes
    /// keys from seeds and does not give the expanded form.
    public func expandedPrivateKeyAgrees(_ expanded: UnsafeRawBufferPointer) -> Bool {
        isPrivate && expanded.count == parameterSet.expandedPrivateKeyLength && expandedKeyAgrees(expanded)
    }

    /// Whether an expanded private key's public parts are this key's.
    private func expandedKeyAgrees(_ expanded: UnsafeRawBufferPointer) -> Bool {
        if parameterSet.isSignature {
            // sk = ρ ‖ K ‖ tr ‖ …, with ρ the first 32 bytes of pk and tr = H(pk, 64) (FIPS 204 Algorithm 24).
            guard expanded.count >= 128, let tr = try? Digest.shake256(publicKey, outputLength: 64) else { return false }
            return expanded[0..<32].elementsEqual(publicKey.prefix(32)) && expanded[64..<128].elementsEqual(tr)
        }
        // dk = dk_PKE ‖ ek ‖ H(ek) ‖ z (FIPS 203 Algorithm 16).
        let pkeLength = expanded.count - publicKey.count - 64
        guard pkeLength > 0, let hash = try? Digest.hash(.sha3_256, publicKey), let seed else { return false }
        let zAgrees = seed.withUnsafeBytes { own in
            ConstantTime.equals(UnsafeRawBufferPointer(rebasing: own[32..<64]), UnsafeRawBufferPointer(rebasing: expanded[(expanded.count - 32)...]))
        }
        return expanded[pkeLength..<(pkeLength + publicKey.count)].elementsEqual(publicKey)
            && expanded[(pkeLength + publicKey.count)..<(pkeLength + publicKey.count + 32)].elementsEqual(hash) && zAgrees
    }

    private static func sequence(_ content: [UInt8]) -> [UInt8] { [0x30] + DER.lengthBytes(content.count) + content }
}

/// A reader of DER TLVs (definite lengths only) over a buffer, by ranges: nothing is copied, so
/// a private key is read where the caller holds it.
struct DERCursor {
    private let base: UnsafeRawBufferPointer
    private var offset: Int
    private let end: Int

    init(_ base: UnsafeRawBufferPointer, _ range: Range<Int>? = nil) {
        self.base = base
        offset = range?.lowerBound ?? 0
        end = range?.upperBound ?? base.count
    }

    var isAtEnd: Bool { offset == end }

    var peekTag: UInt8? { offset < end ? base[offset] : nil }

    /// The range of the next element's content, if it has tag `tag`.
    mutating func next(tag: UInt8) -> Range<Int>? {
        guard end - offset >= 2, base[offset] == tag else { return nil }
        var index = offset + 1
        let first = Int(base[index])
        index += 1
        var length = 0
        if first < 0x80 {
            length = first
        } else {
            let count = first & 0x7F
            guard count >= 1, count <= 3, count <= end - index else { return nil }
            for _ in 0..<count {
                length = length << 8 | Int(base[index])
                index += 1
            }
            guard length >= 0x80, count == 1 || length >> (8 * (count - 1)) != 0 else { return nil }
        }
        guard length <= end - index else { return nil }
        offset = index + length
        return index..<offset
    }

    /// A cursor over the next element's content, if it has tag `tag`.
    mutating func nextCursor(tag: UInt8) -> DERCursor? {
        next(tag: tag).map { DERCursor(base, $0) }
    }
}
