internal import COpenSSL

/// The asymmetric key types the token holds.
public enum AsymmetricKind: Equatable, Sendable {
    case rsa
    case ec(Curve)
    case ed25519, ed448
    case x25519, x448
    /// FIPS 186 DSA and PKCS #3 Diffie-Hellman over a prime field (legacy: compatible policy only).
    case dsa, dh

    var openSSLName: String {
        switch self {
        case .rsa: return "RSA"
        case .dsa: return "DSA"
        case .dh: return "DH"
        case .ec: return "EC"
        case .ed25519: return "ED25519"
        case .ed448: return "ED448"
        case .x25519: return "X25519"
        case .x448: return "X448"
        }
    }

    /// Length of the raw keys of the Edwards and Montgomery curves.
    public var rawKeyLength: Int? {
        switch self {
        case .ed25519, .x25519: return 32
        case .ed448: return 57
        case .x448: return 56
        default: return nil
        }
    }
}

/// The named prime curves OpenSSL's default provider offers, named as OpenSSL names them:
/// NIST P-192…P-521, secp256k1 and the Brainpool r1 curves (RFC 5639).
public enum Curve: String, CaseIterable, Sendable {
    case p192 = "prime192v1"
    case p224 = "secp224r1"
    case p256 = "prime256v1"
    case p384 = "secp384r1"
    case p521 = "secp521r1"
    case secp256k1 = "secp256k1"
    case brainpoolP256r1 = "brainpoolP256r1"
    case brainpoolP384r1 = "brainpoolP384r1"
    case brainpoolP512r1 = "brainpoolP512r1"

    /// Bytes of one coordinate (and of the private scalar).
    public var coordinateLength: Int { (bits + 7) / 8 }

    public var bits: Int {
        switch self {
        case .p192: return 192
        case .p224: return 224
        case .p256, .secp256k1, .brainpoolP256r1: return 256
        case .p384, .brainpoolP384r1: return 384
        case .brainpoolP512r1: return 512
        case .p521: return 521
        }
    }

    /// P-192 gives under 112 bits of security: `key_policy = modern` refuses it.
    public var isLegacy: Bool { self == .p192 }

    /// DER OBJECT IDENTIFIER of the named curve (as in CKA_EC_PARAMS).
    public var oid: [UInt8] {
        switch self {
        case .p192: return [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x01]  // 1.2.840.10045.3.1.1
        case .p224: return [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x21]  // 1.3.132.0.33
        case .p256: return [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]  // 1.2.840.10045.3.1.7
        case .p384: return [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x22]  // 1.3.132.0.34
        case .p521: return [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x23]  // 1.3.132.0.35
        case .secp256k1: return [0x06, 0x05, 0x2B, 0x81, 0x04, 0x00, 0x0A]  // 1.3.132.0.10
        case .brainpoolP256r1: return [0x06, 0x09, 0x2B, 0x24, 0x03, 0x03, 0x02, 0x08, 0x01, 0x01, 0x07]  // 1.3.36.3.3.2.8.1.1.7
        case .brainpoolP384r1: return [0x06, 0x09, 0x2B, 0x24, 0x03, 0x03, 0x02, 0x08, 0x01, 0x01, 0x0B]  // …1.1.11
        case .brainpoolP512r1: return [0x06, 0x09, 0x2B, 0x24, 0x03, 0x03, 0x02, 0x08, 0x01, 0x01, 0x0D]  // …1.1.13
        }
    }

    /// The named curve whose parameters a DER ECParameters SEQUENCE spells out explicitly (as
    /// some clients write CKA_EC_PARAMS), or nil when they match none of ours.
    public static func matching(explicitParameters der: [UInt8]) -> Curve? {
        guard der.first == 0x30 else { return nil }
        return der.withUnsafeBufferPointer { buffer -> Curve? in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            guard let group = d2i_ECPKParameters(nil, &cursor, buffer.count) else {
                OpenSSLErrorQueue.discardOwn()
                return nil
            }
            defer { EC_GROUP_free(group) }
            // d2i_ECPKParameters has no _ex form: its group has no library context, but building
            // and comparing curve parameters fetches no algorithm and draws no random number.
            // Compares the explicit parameters with every built-in curve's.
            let nid = (try? OpenSSLContext.withBigNumberContext { EC_GROUP_check_named_curve(group, 0, $0) }) ?? 0
            guard nid > 0, let name = OBJ_nid2sn(nid) else {
                OpenSSLErrorQueue.discardOwn()
                return nil
            }
            return Curve(rawValue: String(cString: name))
        }
    }
}

/// RSA key parts as unsigned big-endian integers. Private parts are nil in a public key.
public struct RSAComponents: Sendable {
    public var modulus: [UInt8]
    public var publicExponent: [UInt8]
    public var privateExponent: [UInt8]?
    public var prime1: [UInt8]?
    public var prime2: [UInt8]?
    public var exponent1: [UInt8]?
    public var exponent2: [UInt8]?
    public var coefficient: [UInt8]?

    public init(modulus: [UInt8], publicExponent: [UInt8], privateExponent: [UInt8]? = nil, prime1: [UInt8]? = nil, prime2: [UInt8]? = nil,
                exponent1: [UInt8]? = nil, exponent2: [UInt8]? = nil, coefficient: [UInt8]? = nil) {
        self.modulus = modulus
        self.publicExponent = publicExponent
        self.privateExponent = privateExponent
        self.prime1 = prime1
        self.prime2 = prime2
        self.exponent1 = exponent1
        self.exponent2 = exponent2
        self.coefficient = coefficient
    }
}

/// OpenSSL's CRT parameter names (built by string-pasting macros, which do not import).
private enum RSAParameter {
    static let factor1 = "rsa-factor1"
    static let factor2 = "rsa-factor2"
    static let exponent1 = "rsa-exponent1"
    static let exponent2 = "rsa-exponent2"
    static let coefficient1 = "rsa-coefficient1"
}

/// Selection bits of EVP_PKEY_fromdata (OSSL_KEYMGMT_SELECT_*; the composite macros do not import).
enum Selection {
    static let publicKey: Int32 = 0x02 | 0x04 | 0x80
    static let keyPair: Int32 = 0x01 | publicKey
}

/// An OpenSSL key (EVP_PKEY), freed with its owner. Parsed once and kept ready for use.
public final class AsymmetricKey: @unchecked Sendable {
    let pkey: OpaquePointer
    public let kind: AsymmetricKind
    public let isPrivate: Bool
    /// Initialised signing contexts: templates copied per operation, or idle ones taken whole (see SignatureOperation).
    let contexts = ContextTemplates()
    /// The public point or raw key and the SubjectPublicKeyInfo, once read.
    private let encodings = PublicEncodings()

    init(pkey: OpaquePointer, kind: AsymmetricKind, isPrivate: Bool) {
        self.pkey = pkey
        self.kind = kind
        self.isPrivate = isPrivate
    }

    deinit { EVP_PKEY_free(pkey) }

    // MARK: building keys

    ///
    /// Keys are decoded from DER (PKCS#1) whenever the parts allow: decoding goes straight to
    /// OpenSSL's providers, while EVP_PKEY_fromdata fails inside a host that registered an
    /// ENGINE for RSA (the OpenSSL pkcs11 engine does). A private key without its CRT parts
    /// falls back to EVP_PKEY_fromdata.
    public static func rsa(_ parts: RSAComponents) throws -> AsymmetricKey {
        let isPrivate = parts.privateExponent != nil
        guard !parts.modulus.isEmpty, !parts.publicExponent.isEmpty else { throw CryptoError(.invalidInput, "RSA modulus and exponent are required") }
        if !isPrivate {
            return try decodeRSAPublic(der: derSequence(derInteger(parts.modulus) + derInteger(parts.publicExponent)))
        }
        if let d = parts.privateExponent, let p = parts.prime1, let q = parts.prime2, let dp = parts.exponent1, let dq = parts.exponent2,
           let qinv = parts.coefficient {
            var der = derIntegerSequence([[0], parts.modulus, parts.publicExponent, d, p, q, dp, dq, qinv])
            defer { wipe(&der) }
            return try decodePrivate(EVP_PKEY_RSA, kind: .rsa, der: der)
        }
        return try withParameters { builder in
            try builder.push(OSSL_PKEY_PARAM_RSA_N, unsigned: parts.modulus)
            try builder.push(OSSL_PKEY_PARAM_RSA_E, unsigned: parts.publicExponent)
            if let d = parts.privateExponent { try builder.push(OSSL_PKEY_PARAM_RSA_D, unsigned: d) }
            if let p = parts.prime1, let q = parts.prime2 {
                try builder.push(RSAParameter.factor1, unsigned: p)
                try builder.push(RSAParameter.factor2, unsigned: q)
                if let dp = parts.exponent1, let dq = parts.exponent2, let qinv = parts.coefficient {
                    try builder.push(RSAParameter.exponent1, unsigned: dp)
                    try builder.push(RSAParameter.exponent2, unsigned: dq)
                    try builder.push(RSAParameter.coefficient1, unsigned: qinv)
                }
            }
        } build: { params in
            try fromData(kind: .rsa, params: params, isPrivate: isPrivate)
        }
    }

    /// An EC key from its curve, uncompressed point 04‖X‖Y and, for a private key, its scalar.
    public static func ec(_ curve: Curve, point: [UInt8]?, scalar: [UInt8]?) throws -> AsymmetricKey {
        var publicPoint = point
        if publicPoint == nil, let scalar {
            publicPoint = try derivePoint(curve: curve, scalar: scalar)
        }
        guard let publicPoint, publicPoint.count == 1 + 2 * curve.coordinateLength, publicPoint.first == 0x04 else {
            throw CryptoError(.invalidInput, "EC point must be uncompressed 04‖X‖Y for \(curve.rawValue)")
        }
        // SEC1 ECPrivateKey or SubjectPublicKeyInfo, decoded by OpenSSL (which also checks
        // that the point is on the curve).
        let bitString: [UInt8] = [0x03] + DER.lengthBytes(publicPoint.count + 1) + [0x00] + publicPoint
        if var scalar {
            guard scalar.count <= curve.coordinateLength else { throw CryptoError(.invalidInput, "EC private scalar too long") }
            scalar = [UInt8](repeating: 0, count: curve.coordinateLength - scalar.count) + scalar
            var body = derInteger([1]) + DER.octetString(scalar) + [0xA0] + DER.lengthBytes(curve.oid.count) + curve.oid
            body += [0xA1] + DER.lengthBytes(bitString.count) + bitString
            var der = derSequence(body)
            defer {
                wipe(&scalar)
                wipe(&body)
                wipe(&der)
            }
            let key = try decodePrivate(EVP_PKEY_EC, kind: .ec(curve), der: der)
            guard try key.ecPoint() == publicPoint else { throw CryptoError(.invalidInput, "the EC point does not belong to the private key") }
            return key
        }
        let ecPublicKeyOID: [UInt8] = [0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01]
        let spki = derSequence(derSequence(ecPublicKeyOID + curve.oid) + bitString)
        let key = try publicKey(subjectPublicKeyInfo: spki)
        guard key.kind == .ec(curve) else { throw CryptoError(.invalidInput, "not a key of \(curve.rawValue)") }
        return key
    }

    /// An Ed25519/Ed448/X25519/X448 key from its raw private or public bytes.
    public static func raw(_ kind: AsymmetricKind, privateKey: [UInt8]?, publicKey: [UInt8]?) throws -> AsymmetricKey {
        guard let length = kind.rawKeyLength else { throw CryptoError(.invalidInput, "not a raw-key algorithm") }
        if let privateKey {
            OpenSSLSecureHeap.prepare()
            guard privateKey.count == length else { throw CryptoError(.invalidInput, "\(kind.openSSLName) private key must have \(length) bytes") }
            guard let pkey = EVP_PKEY_new_raw_private_key_ex(try OpenSSLContext.get(), kind.openSSLName, nil, privateKey, privateKey.count) else {
                throw CryptoError.library("EVP_PKEY_new_raw_private_key_ex")
            }
            let key = AsymmetricKey(pkey: pkey, kind: kind, isPrivate: true)
            if let publicKey, publicKey != (try key.rawPublicKey()) {
                throw CryptoError(.invalidInput, "the public key does not belong to the private key")
            }
            return key
        }
        guard let publicKey, publicKey.count == length else { throw CryptoError(.invalidInput, "\(kind.openSSLName) public key must have \(length) bytes") }
        guard let pkey = EVP_PKEY_new_raw_public_key_ex(try OpenSSLContext.get(), kind.openSSLName, nil, publicKey, publicKey.count) else {
            throw CryptoError.library("EVP_PKEY_new_raw_public_key_ex")
        }
        return AsymmetricKey(pkey: pkey, kind: kind, isPrivate: false)
    }

    /// A key from DER SubjectPublicKeyInfo.
    public static func publicKey(subjectPublicKeyInfo der: [UInt8]) throws -> AsymmetricKey {
        let context = try OpenSSLContext.get()
        let parsed = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            var pointer: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_PUBKEY_ex(nil, &pointer, buffer.count, context, nil)
        }
        guard let pkey = parsed else { throw CryptoError(.invalidInput, "not a SubjectPublicKeyInfo") }
        guard let kind = kindOf(pkey) else {
            EVP_PKEY_free(pkey)
            throw CryptoError(.invalidInput, "unsupported public key algorithm")
        }
        return AsymmetricKey(pkey: pkey, kind: kind, isPrivate: false)
    }

    /// Generates a key pair. RSA takes `bits` and the public exponent (default 65537).
    public static func generate(_ kind: AsymmetricKind, bits: Int = 0, publicExponent: [UInt8]? = nil) throws -> AsymmetricKey {
        OpenSSLSecureHeap.prepare()
        guard let ctx = EVP_PKEY_CTX_new_from_name(try OpenSSLContext.get(), kind.openSSLName, nil) else { throw CryptoError.library("EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_keygen_init(ctx) == 1 else { throw CryptoError.library("EVP_PKEY_keygen_init") }
        switch kind {
        case .rsa:
            guard EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, Int32(bits)) == 1 else { throw CryptoError.library("RSA key size") }
            if let publicExponent {
                guard let e = BN_bin2bn(publicExponent, Int32(publicExponent.count), nil) else { throw CryptoError.library("BN_bin2bn") }
                defer { BN_free(e) }
                guard EVP_PKEY_CTX_set1_rsa_keygen_pubexp(ctx, e) == 1 else { throw CryptoError.library("RSA public exponent") }
            }
        case .ec(let curve):
            guard EVP_PKEY_CTX_set_group_name(ctx, curve.rawValue) == 1 else { throw CryptoError.library("EC curve") }
        default:
            break
        }
        var pkey: OpaquePointer?
        guard EVP_PKEY_generate(ctx, &pkey) == 1, let pkey else { throw CryptoError.library("EVP_PKEY_generate") }
        return AsymmetricKey(pkey: pkey, kind: kind, isPrivate: true)
    }

    // MARK: reading keys

    /// DER SubjectPublicKeyInfo of the public half.
    public func subjectPublicKeyInfo() throws -> [UInt8] {
        try encodings.value(.subjectPublicKeyInfo) {
            if let built = try builtSubjectPublicKeyInfo() { return built }
            return try encodedSubjectPublicKeyInfo()
        }
    }

    /// The SubjectPublicKeyInfo as OpenSSL's encoder writes it.
    func encodedSubjectPublicKeyInfo() throws -> [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_PUBKEY(pkey, &out)
        guard length > 0, let out else { throw CryptoError.library("i2d_PUBKEY") }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }

    /// The modulus and public exponent only: reading the private parts leaves copies of them on
    /// the heap, which code that needs just the public key must not do.
    public func rsaPublicComponents() throws -> RSAComponents {
        RSAComponents(modulus: try bigNumber(OSSL_PKEY_PARAM_RSA_N), publicExponent: try bigNumber(OSSL_PKEY_PARAM_RSA_E))
    }

    public func rsaComponents() throws -> RSAComponents {
        var parts = try rsaPublicComponents()
        if isPrivate {
            parts.privateExponent = try bigNumber(OSSL_PKEY_PARAM_RSA_D)
            parts.prime1 = try? bigNumber(RSAParameter.factor1)
            parts.prime2 = try? bigNumber(RSAParameter.factor2)
            parts.exponent1 = try? bigNumber(RSAParameter.exponent1)
            parts.exponent2 = try? bigNumber(RSAParameter.exponent2)
            parts.coefficient = try? bigNumber(RSAParameter.coefficient1)
        }
        return parts
    }

    /// RSA modulus size in bits, or the curve size.
    public var bits: Int { Int(EVP_PKEY_get_bits(pkey)) }

    /// Uncompressed EC point 04‖X‖Y.
    public func ecPoint() throws -> [UInt8] {
        try encodings.value(.ecPoint) { try readECPoint() }
    }

    private func readECPoint() throws -> [UInt8] {
        var length = 0
        guard EVP_PKEY_get_octet_string_param(pkey, OSSL_PKEY_PARAM_PUB_KEY, nil, 0, &length) == 1, length > 0 else {
            throw CryptoError.library("EC public key")
        }
        var point = [UInt8](repeating: 0, count: length)
        guard EVP_PKEY_get_octet_string_param(pkey, OSSL_PKEY_PARAM_PUB_KEY, &point, length, &length) == 1 else {
            throw CryptoError.library("EC public key")
        }
        return Array(point.prefix(length))
    }

    /// EC private scalar, fixed to the curve's length.
    public func ecScalar() throws -> SecureBytes {
        guard case .ec(let curve) = kind else { throw CryptoError(.invalidInput, "not an EC key") }
        var value = try bigNumber(OSSL_PKEY_PARAM_PRIV_KEY)
        defer { wipe(&value) }
        return SecureBytes([UInt8](repeating: 0, count: max(0, curve.coordinateLength - value.count)) + value)
    }

    public func rawPublicKey() throws -> [UInt8] {
        try encodings.value(.rawPublicKey) { try readRawPublicKey() }
    }

    private func readRawPublicKey() throws -> [UInt8] {
        var length = 0
        guard EVP_PKEY_get_raw_public_key(pkey, nil, &length) == 1 else { throw CryptoError.library("raw public key") }
        var bytes = [UInt8](repeating: 0, count: length)
        guard EVP_PKEY_get_raw_public_key(pkey, &bytes, &length) == 1 else { throw CryptoError.library("raw public key") }
        return bytes
    }

    public func rawPrivateKey() throws -> SecureBytes {
        var length = 0
        guard EVP_PKEY_get_raw_private_key(pkey, nil, &length) == 1 else { throw CryptoError.library("raw private key") }
        let bytes = SecureBytes(count: length)
        let ok = bytes.withUnsafeMutableBytes { EVP_PKEY_get_raw_private_key(pkey, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), &length) }
        guard ok == 1 else { throw CryptoError.library("raw private key") }
        return bytes
    }

    /// Whether `other` is the public half of this key (same public parameters).
    public func hasSamePublicKey(as other: AsymmetricKey) -> Bool {
        EVP_PKEY_eq(pkey, other.pkey) == 1
    }

    // MARK: helpers

    func bigNumber(_ name: String) throws -> [UInt8] {
        var bn: OpaquePointer?
        guard EVP_PKEY_get_bn_param(pkey, name, &bn) == 1, let bn else { throw CryptoError.library("parameter \(name)") }
        defer { BN_clear_free(bn) }
        var bytes = [UInt8](repeating: 0, count: Int((BN_num_bits(bn) + 7) / 8))
        _ = BN_bn2bin(bn, &bytes)
        return bytes
    }

    /// A private key from its type-specific DER (PKCS#1 RSAPrivateKey, SEC1 ECPrivateKey).
    private static func decodePrivate(_ type: Int32, kind: AsymmetricKind, der: [UInt8]) throws -> AsymmetricKey {
        OpenSSLSecureHeap.prepare()
        let context = try OpenSSLContext.get()
        let parsed = der.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            guard let base = buffer.baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            return d2i_PrivateKey_ex(type, nil, &cursor, buffer.count, context, nil)
        }
        guard let pkey = parsed else {
            OpenSSLErrorQueue.discardOwn()
            throw CryptoError(.invalidInput, "\(kind.openSSLName) key parts rejected")
        }
        return AsymmetricKey(pkey: pkey, kind: kind, isPrivate: true)
    }

    /// A public key from PKCS#1 RSAPublicKey DER, decoded as the SubjectPublicKeyInfo that wraps
    /// it (d2i_PublicKey has no form that takes a library context).
    private static func decodeRSAPublic(der: [UInt8]) throws -> AsymmetricKey {
        guard let spki = subjectPublicKeyInfo(rsaPublicKey: der), let key = try? publicKey(subjectPublicKeyInfo: spki), key.kind == .rsa else {
            OpenSSLErrorQueue.discardOwn()
            throw CryptoError(.invalidInput, "RSA public key rejected")
        }
        return key
    }

    /// The DER SubjectPublicKeyInfo (rsaEncryption, NULL parameters) around a PKCS#1
    /// RSAPublicKey, which must be one DER SEQUENCE spanning all of `der`; nil otherwise.
    static func subjectPublicKeyInfo(rsaPublicKey der: [UInt8]) -> [UInt8]? {
        guard DER.content(of: der, tag: 0x30) != nil else { return nil }
        let rsaEncryption: [UInt8] = [0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01, 0x05, 0x00]
        return derSequence(derSequence(rsaEncryption) + [0x03] + DER.lengthBytes(der.count + 1) + [0x00] + der)
    }

    /// A key from Apple's external representations (SecKeyCreateWithData): PKCS#1 DER for RSA,
    /// X9.63 04‖X‖Y for EC public keys and 04‖X‖Y‖K for EC private keys.
    public static func fromExternalRepresentation(_ data: [UInt8], rsa: Bool, isPrivate: Bool) throws -> AsymmetricKey {
        if rsa {
            return isPrivate ? try decodePrivate(EVP_PKEY_RSA, kind: .rsa, der: data) : try decodeRSAPublic(der: data)
        }
        for curve in Curve.allCases {
            let pointLength = 1 + 2 * curve.coordinateLength
            if !isPrivate, data.count == pointLength { return try ec(curve, point: data, scalar: nil) }
            if isPrivate, data.count == pointLength + curve.coordinateLength {
                return try ec(curve, point: Array(data.prefix(pointLength)), scalar: Array(data.suffix(curve.coordinateLength)))
            }
        }
        throw CryptoError(.invalidInput, "not an X9.63 key of a supported curve")
    }

    /// Apple's external representation of this key (SecKeyCopyExternalRepresentation).
    public func externalRepresentation() throws -> SecureBytes {
        switch kind {
        case .rsa where isPrivate:
            let parts = try rsaComponents()
            guard let d = parts.privateExponent, let p = parts.prime1, let q = parts.prime2, let dp = parts.exponent1, let dq = parts.exponent2,
                  let qinv = parts.coefficient else { throw CryptoError(.invalidInput, "RSA key without CRT parts") }
            var der = Self.derIntegerSequence([[0], parts.modulus, parts.publicExponent, d, p, q, dp, dq, qinv])
            defer { wipe(&der) }
            return SecureBytes(der)
        case .ec where isPrivate:
            var scalar = try ecScalar().bytes
            defer { wipe(&scalar) }
            return SecureBytes(try ecPoint() + scalar)
        case .rsa, .ec:
            return SecureBytes(try publicKeyBytes())
        default:
            return isPrivate ? try rawPrivateKey() : SecureBytes(try rawPublicKey())
        }
    }

    /// The public half as a key of its own.
    public func publicKey() throws -> AsymmetricKey {
        try Self.publicKey(subjectPublicKeyInfo: try subjectPublicKeyInfo())
    }

    /// Checks that the parts of a key agree (for private keys: the pairwise check). Where a host's
    /// ENGINE leaves OpenSSL unable to run the check (result -2) the decoders' own checks stand.
    public func validate() throws {
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(try OpenSSLContext.get(), pkey, nil) else { throw CryptoError.library("EVP_PKEY_CTX_new_from_pkey") }
        defer { EVP_PKEY_CTX_free(ctx) }
        let ok = isPrivate ? EVP_PKEY_pairwise_check(ctx) : EVP_PKEY_public_check(ctx)
        if ok == -2 {
            OpenSSLErrorQueue.discardOwn()
            return
        }
        guard ok == 1 else {
            OpenSSLErrorQueue.discardOwn()
            throw CryptoError(.invalidInput, "the key's parts are inconsistent")
        }
    }

    private static func derivePoint(curve: Curve, scalar: [UInt8]) throws -> [UInt8] {
        guard let group = EC_GROUP_new_by_curve_name_ex(try OpenSSLContext.get(), nil, OBJ_sn2nid(curve.rawValue)) else {
            throw CryptoError.library("EC group")
        }
        defer { EC_GROUP_free(group) }
        guard let k = BN_bin2bn(scalar, Int32(scalar.count), nil) else { throw CryptoError.library("BN_bin2bn") }
        defer { BN_clear_free(k) }
        guard let point = EC_POINT_new(group) else { throw CryptoError.library("EC_POINT_new") }
        defer { EC_POINT_free(point) }
        // The blinding of the scalar multiplication draws from the BN_CTX's library context.
        return try OpenSSLContext.withBigNumberContext { bn in
            guard EC_POINT_mul(group, point, k, nil, nil, bn) == 1 else { throw CryptoError(.invalidInput, "EC private scalar") }
            var out = [UInt8](repeating: 0, count: 1 + 2 * curve.coordinateLength)
            guard EC_POINT_point2oct(group, point, POINT_CONVERSION_UNCOMPRESSED, &out, out.count, bn) == out.count else {
                throw CryptoError.library("EC_POINT_point2oct")
            }
            return out
        }
    }

    static func kindOf(_ pkey: OpaquePointer) -> AsymmetricKind? {
        switch EVP_PKEY_get_base_id(pkey) {
        case EVP_PKEY_RSA: return .rsa
        case EVP_PKEY_DSA: return .dsa
        case EVP_PKEY_DH, EVP_PKEY_DHX: return .dh
        case EVP_PKEY_ED25519: return .ed25519
        case EVP_PKEY_ED448: return .ed448
        case EVP_PKEY_X25519: return .x25519
        case EVP_PKEY_X448: return .x448
        case EVP_PKEY_EC:
            var name = [CChar](repeating: 0, count: 64)
            var length = 0
            guard EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, &name, name.count, &length) == 1 else { return nil }
            let text = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            return Curve(rawValue: text).map { .ec($0) }
        default: return nil
        }
    }

    static func fromData(kind: AsymmetricKind, params: UnsafeMutablePointer<OSSL_PARAM>, isPrivate: Bool) throws -> AsymmetricKey {
        if isPrivate { OpenSSLSecureHeap.prepare() }
        guard let ctx = EVP_PKEY_CTX_new_from_name(try OpenSSLContext.get(), kind.openSSLName, nil) else { throw CryptoError.library("EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var pkey: OpaquePointer?
        guard EVP_PKEY_fromdata_init(ctx) == 1,
              EVP_PKEY_fromdata(ctx, &pkey, isPrivate ? Selection.keyPair : Selection.publicKey, params) == 1, let pkey else {
            OpenSSLErrorQueue.discardOwn()
            throw CryptoError(.invalidInput, "\(kind.openSSLName) key parts rejected")
        }
        return AsymmetricKey(pkey: pkey, kind: kind, isPrivate: isPrivate)
    }

    static func withParameters(_ fill: (ParameterBuilder) throws -> Void, build: (UnsafeMutablePointer<OSSL_PARAM>) throws -> AsymmetricKey) throws -> AsymmetricKey {
        let builder = try ParameterBuilder()
        try fill(builder)
        guard let params = OSSL_PARAM_BLD_to_param(builder.handle) else { throw CryptoError.library("OSSL_PARAM_BLD_to_param") }
        defer {
            // OpenSSL 3.0 has no OSSL_PARAM_clear_free: the block holds copies of the key's
            // numbers, wiped here before it goes back to the heap.
            var entry = params
            while entry.pointee.key != nil {
                if let data = entry.pointee.data { OPENSSL_cleanse(data, entry.pointee.data_size) }
                entry += 1
            }
            OSSL_PARAM_free(params)
        }
        // The parameters point at the builder's name strings: keep them alive until built.
        return try withExtendedLifetime(builder) { try build(params) }
    }
}

/// OSSL_PARAM_BLD with what it references — big numbers (cleared when freed) and the parameter
/// names, which OpenSSL stores by pointer — kept alive as long as the builder.
final class ParameterBuilder {
    let handle: OpaquePointer
    private var numbers: [OpaquePointer] = []
    private var strings: [UnsafeMutablePointer<CChar>] = []
    private var buffers: [UnsafeMutableRawPointer] = []

    init() throws {
        guard let handle = OSSL_PARAM_BLD_new() else { throw CryptoError.library("OSSL_PARAM_BLD_new") }
        self.handle = handle
    }

    deinit {
        OSSL_PARAM_BLD_free(handle)
        numbers.forEach { BN_clear_free($0) }
        strings.forEach { free($0) }
        buffers.forEach { $0.deallocate() }
    }

    private func keep(_ text: String) throws -> UnsafeMutablePointer<CChar> {
        guard let copy = strdup(text) else { throw CryptoError.library("strdup") }
        strings.append(copy)
        return copy
    }

    func push(_ name: String, unsigned bytes: [UInt8]) throws {
        guard !bytes.isEmpty, bytes.count <= 1 << 16, let bn = BN_bin2bn(bytes, Int32(bytes.count), nil) else {
            throw CryptoError(.invalidInput, "\(name) is empty or too large")
        }
        numbers.append(bn)
        guard OSSL_PARAM_BLD_push_BN(handle, try keep(name), bn) == 1 else { throw CryptoError.library("OSSL_PARAM_BLD_push_BN") }
    }

    func push(_ name: String, utf8 value: String) throws {
        guard OSSL_PARAM_BLD_push_utf8_string(handle, try keep(name), try keep(value), 0) == 1 else {
            throw CryptoError.library("OSSL_PARAM_BLD_push_utf8_string")
        }
    }

    /// OpenSSL copies the bytes only in OSSL_PARAM_BLD_to_param: keep a copy until then.
    func push(_ name: String, octets: [UInt8]) throws {
        let copy = UnsafeMutableRawPointer.allocate(byteCount: max(octets.count, 1), alignment: 1)
        octets.withUnsafeBytes { copy.copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(copy), byteCount: $0.count) }
        buffers.append(copy)
        guard OSSL_PARAM_BLD_push_octet_string(handle, try keep(name), copy, octets.count) == 1 else {
            throw CryptoError.library("OSSL_PARAM_BLD_push_octet_string")
        }
    }
}
