internal import COpenSSL
import Glibc

/// The parts of a DSA (FIPS 186) or PKCS #3 Diffie-Hellman key, as unsigned big-endian integers:
/// the domain (prime p, for DSA the subprime q, base g), the public value y = g^x mod p and, in a
/// private key, x.
public struct FiniteFieldComponents: Sendable {
    public var prime: [UInt8]
    public var subprime: [UInt8]?
    public var base: [UInt8]
    public var publicValue: [UInt8]?
    public var privateValue: [UInt8]?

    public init(prime: [UInt8], subprime: [UInt8]? = nil, base: [UInt8], publicValue: [UInt8]? = nil, privateValue: [UInt8]? = nil) {
        self.prime = prime
        self.subprime = subprime
        self.base = base
        self.publicValue = publicValue
        self.privateValue = privateValue
    }

    /// Bits of the prime p.
    public var primeBits: Int { DER.bitLength(ofUnsigned: prime) }
}

/// OSSL_PKEY_PARAM_FFC_* names (string macros that import, kept here for one spelling).
private enum FFCParameter {
    static let p = "p", q = "q", g = "g", publicValue = "pub", privateValue = "priv"
    static let primeBits = "pbits", subprimeBits = "qbits", type = "type"
}

extension AsymmetricKey {
    /// Prime sizes accepted for DSA and DH keys and domain parameters (bits).
    public static let finiteFieldPrimeBits = 512...8192

    /// A DSA or DH key from its parts. A private key given without its public value gets
    /// y = g^x mod p computed.
    public static func finiteField(_ kind: AsymmetricKind, _ parts: FiniteFieldComponents) throws -> AsymmetricKey {
        guard kind == .dsa || kind == .dh else { throw CryptoError(.invalidInput, "not a DSA or DH key") }
        guard finiteFieldPrimeBits.contains(parts.primeBits) else { throw CryptoError(.invalidInput, "a \(parts.primeBits)-bit prime") }
        if kind == .dsa, parts.subprime == nil { throw CryptoError(.invalidInput, "DSA needs its subprime q") }
        if let q = parts.subprime, q.drop(while: { $0 == 0 }).count > parts.prime.drop(while: { $0 == 0 }).count {
            throw CryptoError(.invalidInput, "the subprime is longer than the prime")
        }
        if let x = parts.privateValue {
            // x < q (DSA) or < p: a longer value is not a key, and would make g^x cost without bound.
            let bound = (kind == .dsa ? parts.subprime : nil) ?? parts.prime
            guard x.drop(while: { $0 == 0 }).count <= bound.drop(while: { $0 == 0 }).count else {
                throw CryptoError(.invalidInput, "the private value is longer than the group's order")
            }
        }
        var publicValue = parts.publicValue
        if publicValue == nil, let x = parts.privateValue {
            publicValue = try modularPower(base: parts.base, exponent: x, modulus: parts.prime)
        }
        guard let publicValue else { throw CryptoError(.invalidInput, "neither a public nor a private value") }
        return try withParameters { builder in
            try builder.push(FFCParameter.p, unsigned: parts.prime)
            if let q = parts.subprime { try builder.push(FFCParameter.q, unsigned: q) }
            try builder.push(FFCParameter.g, unsigned: parts.base)
            try builder.push(FFCParameter.publicValue, unsigned: publicValue)
            if let x = parts.privateValue { try builder.push(FFCParameter.privateValue, unsigned: x) }
        } build: { params in
            try fromData(kind: kind, params: params, isPrivate: parts.privateValue != nil)
        }
    }

    /// The key's parts (x only for a private key).
    public func finiteFieldComponents() throws -> FiniteFieldComponents {
        guard kind == .dsa || kind == .dh else { throw CryptoError(.invalidInput, "not a DSA or DH key") }
        var parts = FiniteFieldComponents(prime: try bigNumber(FFCParameter.p), subprime: try? bigNumber(FFCParameter.q),
                                          base: try bigNumber(FFCParameter.g), publicValue: try bigNumber(FFCParameter.publicValue))
        if isPrivate { parts.privateValue = try bigNumber(FFCParameter.privateValue) }
        return parts
    }

    /// Bytes of the subprime q: the width of r and s in a DSA signature.
    var subprimeLength: Int {
        (try? bigNumber(FFCParameter.q))?.count ?? 0
    }

    /// Prime sizes offered for domain parameter generation: generation time grows fast with the
    /// prime (about 5 s for 4096 bits here), and it runs inside the host's process.
    public static let generatedPrimeBits = 512...4096

    /// New domain parameters with a `primeBits`-bit prime and a `subprimeBits`-bit q (default
    /// 160 below 2048 bits, 256 from 2048): DSA's (p, q, g), and for DH the same kind of group,
    /// which OpenSSL makes in well under a second where a safe prime of PKCS #3's generator method
    /// takes many (DH keys need only p and g; q is dropped). FIPS 186-4 where it defines the sizes,
    /// FIPS 186-2's method for the others.
    public static func generateDomainParameters(_ kind: AsymmetricKind, primeBits: Int, subprimeBits: Int? = nil) throws -> FiniteFieldComponents {
        guard kind == .dsa || kind == .dh else { throw CryptoError(.invalidInput, "not a DSA or DH key") }
        guard generatedPrimeBits.contains(primeBits), primeBits % 64 == 0 else { throw CryptoError(.invalidInput, "a \(primeBits)-bit prime") }
        let qbitsWanted = subprimeBits ?? (primeBits >= 2048 ? 256 : 160)
        guard [160, 224, 256].contains(qbitsWanted), qbitsWanted < primeBits else { throw CryptoError(.invalidInput, "a \(qbitsWanted)-bit subprime") }
        let fips186_4: Set<[Int]> = [[1024, 160], [2048, 224], [2048, 256], [3072, 256]]
        // OpenSSL makes FIPS 186 groups for DH under its X9.42 name (DHX).
        guard let ctx = EVP_PKEY_CTX_new_from_name(try OpenSSLContext.get(), kind == .dh ? "DHX" : kind.openSSLName, nil) else { throw CryptoError.library("EVP_PKEY_CTX_new_from_name") }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_paramgen_init(ctx) == 1 else { throw CryptoError.library("EVP_PKEY_paramgen_init") }
        // OSSL_PARAM keeps its keys, strings and values by pointer: all of them live until
        // EVP_PKEY_CTX_set_params has read them.
        let names: [String] = [FFCParameter.primeBits, FFCParameter.subprimeBits, FFCParameter.type,
                               fips186_4.contains([primeBits, qbitsWanted]) ? "fips186_4" : "fips186_2"]
        let strings = names.map { strdup($0) }
        defer { strings.forEach { free($0) } }
        guard let pbitsName = strings[0], let qbitsName = strings[1], let typeName = strings[2], let typeValue = strings[3] else {
            throw CryptoError.library("strdup")
        }
        let sizes = UnsafeMutablePointer<Int>.allocate(capacity: 2)
        defer { sizes.deallocate() }
        sizes[0] = primeBits
        sizes[1] = qbitsWanted
        var params = [OSSL_PARAM_construct_size_t(pbitsName, sizes), OSSL_PARAM_construct_size_t(qbitsName, sizes + 1),
                      OSSL_PARAM_construct_utf8_string(typeName, typeValue, 0), OSSL_PARAM_construct_end()]
        guard EVP_PKEY_CTX_set_params(ctx, &params) == 1 else { throw CryptoError.library("domain parameter sizes") }
        var pkey: OpaquePointer?
        guard EVP_PKEY_generate(ctx, &pkey) == 1, let pkey else { throw CryptoError.library("EVP_PKEY_generate(parameters)") }
        let generated = AsymmetricKey(pkey: pkey, kind: kind, isPrivate: false)
        return FiniteFieldComponents(prime: try generated.bigNumber(FFCParameter.p), subprime: kind == .dsa ? try generated.bigNumber(FFCParameter.q) : nil,
                                     base: try generated.bigNumber(FFCParameter.g))
    }

    /// A key pair over the given domain.
    public static func generate(_ kind: AsymmetricKind, domain: FiniteFieldComponents) throws -> AsymmetricKey {
        OpenSSLSecureHeap.prepare()
        guard kind == .dsa || kind == .dh else { throw CryptoError(.invalidInput, "not a DSA or DH key") }
        guard finiteFieldPrimeBits.contains(domain.primeBits) else { throw CryptoError(.invalidInput, "a \(domain.primeBits)-bit prime") }
        if kind == .dsa, domain.subprime == nil { throw CryptoError(.invalidInput, "DSA needs its subprime q") }
        let template = try withParameters { builder in
            try builder.push(FFCParameter.p, unsigned: domain.prime)
            if kind == .dsa, let q = domain.subprime { try builder.push(FFCParameter.q, unsigned: q) }
            try builder.push(FFCParameter.g, unsigned: domain.base)
        } build: { params in
            guard let ctx = EVP_PKEY_CTX_new_from_name(try OpenSSLContext.get(), kind.openSSLName, nil) else { throw CryptoError.library("EVP_PKEY_CTX_new_from_name") }
            defer { EVP_PKEY_CTX_free(ctx) }
            var pkey: OpaquePointer?
            guard EVP_PKEY_fromdata_init(ctx) == 1, EVP_PKEY_fromdata(ctx, &pkey, Selection.domainParameters, params) == 1, let pkey else {
                OpenSSLErrorQueue.discardOwn()
                throw CryptoError(.invalidInput, "\(kind.openSSLName) domain parameters rejected")
            }
            return AsymmetricKey(pkey: pkey, kind: kind, isPrivate: false)
        }
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(try OpenSSLContext.get(), template.pkey, nil) else { throw CryptoError.library("EVP_PKEY_CTX_new_from_pkey") }
        defer { EVP_PKEY_CTX_free(ctx) }
        var pkey: OpaquePointer?
        guard EVP_PKEY_keygen_init(ctx) == 1, EVP_PKEY_generate(ctx, &pkey) == 1, let pkey else {
            OpenSSLErrorQueue.discardOwn()
            throw CryptoError(.invalidInput, "\(kind.openSSLName) key generation over these parameters failed")
        }
        return AsymmetricKey(pkey: pkey, kind: kind, isPrivate: true)
    }

    /// PKCS #3 key agreement: (peer's y)^x mod p, left-padded to the prime's length.
    public func diffieHellmanSecret(peerPublicValue: [UInt8]) throws -> SecureBytes {
        guard kind == .dh, isPrivate else { throw CryptoError(.invalidInput, "not a DH private key") }
        let peer = try Self.finiteField(.dh, FiniteFieldComponents(prime: try bigNumber(FFCParameter.p), subprime: try? bigNumber(FFCParameter.q),
                                                                   base: try bigNumber(FFCParameter.g), publicValue: peerPublicValue))
        guard let ctx = EVP_PKEY_CTX_new_from_pkey(try OpenSSLContext.get(), pkey, nil) else { throw CryptoError.library("EVP_PKEY_CTX_new_from_pkey") }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_derive_init(ctx) == 1, EVP_PKEY_CTX_set_dh_pad(ctx, 1) == 1 else { throw CryptoError.library("EVP_PKEY_derive_init") }
        guard EVP_PKEY_derive_set_peer(ctx, peer.pkey) == 1 else {
            OpenSSLErrorQueue.discardOwn()
            throw CryptoError(.invalidInput, "the peer's public value is not in the group")
        }
        var length = 0
        guard EVP_PKEY_derive(ctx, nil, &length) == 1, length > 0 else { throw CryptoError.library("EVP_PKEY_derive") }
        let secret = SecureBytes(count: length)
        let ok = secret.withUnsafeMutableBytes { EVP_PKEY_derive(ctx, $0.baseAddress?.assumingMemoryBound(to: UInt8.self), &length) }
        guard ok == 1, length == secret.count else { throw CryptoError.library("EVP_PKEY_derive") }
        return secret
    }

    /// base^exponent mod modulus, in constant time for the secret exponent.
    private static func modularPower(base: [UInt8], exponent: [UInt8], modulus: [UInt8]) throws -> [UInt8] {
        guard let context = BN_CTX_new_ex(try OpenSSLContext.get()) else { throw CryptoError.library("BN_CTX_new_ex") }
        defer { BN_CTX_free(context) }
        guard let g = BN_bin2bn(base, Int32(base.count), nil) else { throw CryptoError.library("BN_bin2bn") }
        defer { BN_free(g) }
        guard let x = BN_secure_new() ?? BN_new() else { throw CryptoError.library("BN_new") }
        defer { BN_clear_free(x) }
        guard BN_bin2bn(exponent, Int32(exponent.count), x) != nil else { throw CryptoError.library("BN_bin2bn") }
        BN_set_flags(x, Int32(BN_FLG_CONSTTIME))
        guard let p = BN_bin2bn(modulus, Int32(modulus.count), nil) else { throw CryptoError.library("BN_bin2bn") }
        defer { BN_free(p) }
        // Montgomery arithmetic (the constant-time path) needs an odd modulus: a prime.
        guard BN_is_odd(p) == 1 else { throw CryptoError(.invalidInput, "the prime is even") }
        guard let y = BN_new() else { throw CryptoError.library("BN_new") }
        defer { BN_free(y) }
        guard BN_mod_exp(y, g, x, p, context) == 1 else { throw CryptoError.library("BN_mod_exp") }
        var bytes = [UInt8](repeating: 0, count: Int((BN_num_bits(y) + 7) / 8))
        _ = BN_bn2bin(y, &bytes)
        return bytes
    }
}

extension Selection {
    /// OSSL_KEYMGMT_SELECT_DOMAIN_PARAMETERS | OSSL_KEYMGMT_SELECT_OTHER_PARAMETERS.
    static let domainParameters: Int32 = 0x04 | 0x80
}
