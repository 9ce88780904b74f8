import CPKCS11
import KeychainCore
import KeychainCrypto

/// What a mechanism does, as data: C_GetMechanismList/Info and every *Init read this table.
struct Mechanism: Sendable {
    /// What an operation with this mechanism does with its key.
    enum Role: Sendable {
        case digest(Digest.Algorithm)
        /// Sign/verify; the scheme is built from the mechanism parameter and the key.
        case signature(keyTypes: Set<KeyType>, scheme: @Sendable (MechanismParameter, AsymmetricKey) throws(CKError) -> SignatureScheme)
        case keyPairGeneration(KeyType)
    }

    let type: CK_MECHANISM_TYPE
    let minimumKeySize: CK_ULONG
    let maximumKeySize: CK_ULONG
    let flags: CK_FLAGS
    let role: Role

    /// CKF_HW is set on every mechanism: the operation runs inside the token (the module), with
    /// its keys, never in the calling application — which is what clients test the flag for.
    var info: CK_MECHANISM_INFO {
        CK_MECHANISM_INFO(ulMinKeySize: minimumKeySize, ulMaxKeySize: maximumKeySize, flags: flags | CK_FLAGS(CKF_HW))
    }
}

/// The mechanism parameter as the caller passed it (pointer and length, checked when read).
struct MechanismParameter {
    let pointer: UnsafeRawPointer?
    let length: Int

    var isEmpty: Bool { pointer == nil || length == 0 }

    /// The parameter as a `T`, which requires exactly `MemoryLayout<T>.size` bytes.
    func read<T>(_ type: T.Type) throws(CKError) -> T {
        guard let pointer, length == MemoryLayout<T>.size else {
            throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "the mechanism parameter must be a \(T.self) (\(MemoryLayout<T>.size) bytes)")
        }
        return pointer.loadUnaligned(as: T.self)
    }

    func requireEmpty() throws(CKError) {
        guard isEmpty else { throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "this mechanism takes no parameter") }
    }
}

enum Mechanisms {
    // PKCS#11 3.0 values the 2.40 header lacks.
    static let sha3_224: CK_MECHANISM_TYPE = 0x2B5
    static let sha3_256: CK_MECHANISM_TYPE = 0x2B0
    static let sha3_384: CK_MECHANISM_TYPE = 0x2C0
    static let sha3_512: CK_MECHANISM_TYPE = 0x2D0
    static let ecEdwardsKeyPairGen: CK_MECHANISM_TYPE = 0x1055
    static let ecMontgomeryKeyPairGen: CK_MECHANISM_TYPE = 0x1056
    static let eddsa: CK_MECHANISM_TYPE = 0x1057

    static let all: [CK_MECHANISM_TYPE: Mechanism] = {
        var table: [CK_MECHANISM_TYPE: Mechanism] = [:]
        func add(_ type: UInt, _ min: CK_ULONG, _ max: CK_ULONG, _ flags: UInt, _ role: Mechanism.Role) {
            table[CK_MECHANISM_TYPE(type)] = Mechanism(type: CK_MECHANISM_TYPE(type), minimumKeySize: min, maximumKeySize: max, flags: CK_FLAGS(flags), role: role)
        }
        // Digests (§6.17–§6.22 of the current mechanisms document).
        let digests: [(UInt, Digest.Algorithm)] = [(UInt(CKM_SHA_1), .sha1), (UInt(CKM_SHA224), .sha224), (UInt(CKM_SHA256), .sha256),
                                                    (UInt(CKM_SHA384), .sha384), (UInt(CKM_SHA512), .sha512), (sha3_224, .sha3_224),
                                                    (sha3_256, .sha3_256), (sha3_384, .sha3_384), (sha3_512, .sha3_512)]
        for (type, algorithm) in digests { add(type, 0, 0, UInt(CKF_DIGEST), .digest(algorithm)) }

        // RSA (§2.1).
        let rsaBits = (CK_ULONG(KeyFactory.rsaImportBits.lowerBound), CK_ULONG(KeyFactory.rsaImportBits.upperBound))
        let signVerify = UInt(CKF_SIGN | CKF_VERIFY)
        add(UInt(CKM_RSA_PKCS_KEY_PAIR_GEN), CK_ULONG(KeyFactory.rsaGenerationBits.lowerBound), CK_ULONG(KeyFactory.rsaGenerationBits.upperBound),
            UInt(CKF_GENERATE_KEY_PAIR), .keyPairGeneration(.rsa))
        add(UInt(CKM_RSA_PKCS), rsaBits.0, rsaBits.1, signVerify, .signature(keyTypes: [.rsa]) { p, _ throws(CKError) in
            try p.requireEmpty()
            return .rsaPKCS1(digest: nil)
        })
        add(UInt(CKM_RSA_X_509), rsaBits.0, rsaBits.1, signVerify, .signature(keyTypes: [.rsa]) { p, _ throws(CKError) in
            try p.requireEmpty()
            return .rsaRaw
        })
        let rsaHashes: [(UInt, UInt, Digest.Algorithm)] = [
            (UInt(CKM_SHA1_RSA_PKCS), UInt(CKM_SHA1_RSA_PKCS_PSS), .sha1), (UInt(CKM_SHA224_RSA_PKCS), UInt(CKM_SHA224_RSA_PKCS_PSS), .sha224),
            (UInt(CKM_SHA256_RSA_PKCS), UInt(CKM_SHA256_RSA_PKCS_PSS), .sha256), (UInt(CKM_SHA384_RSA_PKCS), UInt(CKM_SHA384_RSA_PKCS_PSS), .sha384),
            (UInt(CKM_SHA512_RSA_PKCS), UInt(CKM_SHA512_RSA_PKCS_PSS), .sha512),
        ]
        for (pkcs1, pss, digest) in rsaHashes {
            add(pkcs1, rsaBits.0, rsaBits.1, signVerify, .signature(keyTypes: [.rsa]) { p, _ throws(CKError) in
                try p.requireEmpty()
                return .rsaPKCS1(digest: digest)
            })
            add(pss, rsaBits.0, rsaBits.1, signVerify, .signature(keyTypes: [.rsa]) { p, key throws(CKError) in
                try pssScheme(p, key: key, mechanismDigest: digest)
            })
        }
        add(UInt(CKM_RSA_PKCS_PSS), rsaBits.0, rsaBits.1, signVerify, .signature(keyTypes: [.rsa]) { p, key throws(CKError) in
            try pssScheme(p, key: key, mechanismDigest: nil)
        })

        // Elliptic curves (§2.3).
        let ecFlags = UInt(CKF_EC_F_P | CKF_EC_NAMEDCURVE | CKF_EC_UNCOMPRESS)
        add(UInt(CKM_EC_KEY_PAIR_GEN), 256, 521, UInt(CKF_GENERATE_KEY_PAIR) | ecFlags, .keyPairGeneration(.ec))
        add(UInt(CKM_ECDSA), 256, 521, signVerify | ecFlags, .signature(keyTypes: [.ec]) { p, _ throws(CKError) in
            try p.requireEmpty()
            return .ecdsa(digest: nil)
        })
        let ecdsaHashes: [(UInt, Digest.Algorithm)] = [(UInt(CKM_ECDSA_SHA1), .sha1), (UInt(CKM_ECDSA_SHA224), .sha224), (UInt(CKM_ECDSA_SHA256), .sha256),
                                                        (UInt(CKM_ECDSA_SHA384), .sha384), (UInt(CKM_ECDSA_SHA512), .sha512)]
        for (type, digest) in ecdsaHashes {
            add(type, 256, 521, signVerify | ecFlags, .signature(keyTypes: [.ec]) { p, _ throws(CKError) in
                try p.requireEmpty()
                return .ecdsa(digest: digest)
            })
        }
        add(ecEdwardsKeyPairGen, 255, 448, UInt(CKF_GENERATE_KEY_PAIR), .keyPairGeneration(.ecEdwards))
        add(ecMontgomeryKeyPairGen, 255, 448, UInt(CKF_GENERATE_KEY_PAIR), .keyPairGeneration(.ecMontgomery))
        add(eddsa, 255, 448, signVerify, .signature(keyTypes: [.ecEdwards]) { p, _ throws(CKError) in
            try eddsaScheme(p)
        })
        return table
    }()

    static func mechanism(_ type: CK_MECHANISM_TYPE) throws(CKError) -> Mechanism {
        guard let mechanism = all[type] else { throw CKError(CK_RV(CKR_MECHANISM_INVALID), "mechanism 0x\(String(type, radix: 16)) is not supported") }
        return mechanism
    }

    // MARK: parameters

    /// CKG_MGF1_* → the MGF1 hash.
    private static func mgf1(_ value: CK_ULONG) -> Digest.Algorithm? {
        switch value {
        case CK_ULONG(CKG_MGF1_SHA1): return .sha1
        case CK_ULONG(CKG_MGF1_SHA224): return .sha224
        case CK_ULONG(CKG_MGF1_SHA256): return .sha256
        case CK_ULONG(CKG_MGF1_SHA384): return .sha384
        case CK_ULONG(CKG_MGF1_SHA512): return .sha512
        default: return nil
        }
    }

    private static func digest(_ mechanism: CK_MECHANISM_TYPE) -> Digest.Algorithm? {
        if case .digest(let algorithm)? = all[mechanism]?.role { return algorithm }
        return nil
    }

    /// CK_RSA_PKCS_PSS_PARAMS: hash, MGF1 hash and salt length; with a hashing mechanism the
    /// parameter's hash must be the mechanism's.
    private static func pssScheme(_ parameter: MechanismParameter, key: AsymmetricKey, mechanismDigest: Digest.Algorithm?) throws(CKError) -> SignatureScheme {
        let params = try parameter.read(CK_RSA_PKCS_PSS_PARAMS.self)
        guard let hash = digest(params.hashAlg), let mgf = mgf1(params.mgf), Digest.Algorithm.sha3_224 != hash else {
            throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "unsupported PSS hash or MGF")
        }
        if let mechanismDigest, mechanismDigest != hash {
            throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "the PSS hash must be the mechanism's hash")
        }
        let maximumSalt = (key.bits + 7) / 8 - hash.outputSize - 2
        guard params.sLen <= CK_ULONG(max(maximumSalt, 0)) else {
            throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "PSS salt of \(params.sLen) bytes is too long for this key")
        }
        return .rsaPSS(digest: hash, mgf1: mgf, saltLength: Int(params.sLen), hashesData: mechanismDigest != nil)
    }

    /// CKM_EDDSA takes no parameter or CK_EDDSA_PARAMS { phFlag, ulContextDataLen, pContextData };
    /// only pure EdDSA without a context is offered (Ed25519, and Ed448 with an empty context).
    private static func eddsaScheme(_ parameter: MechanismParameter) throws(CKError) -> SignatureScheme {
        if parameter.isEmpty { return .eddsa }
        let params = try parameter.read(EdDSAParameters.self)
        guard params.prehash == 0, params.contextLength == 0 else {
            throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "pre-hashed EdDSA and contexts are not supported")
        }
        return .eddsa
    }
}

/// CK_EDDSA_PARAMS (PKCS#11 3.0), which the 2.40 header lacks: CK_BBOOL, CK_ULONG, CK_BYTE_PTR.
struct EdDSAParameters {
    var prehash: CK_BBOOL
    var contextLength: CK_ULONG
    var context: UnsafeMutablePointer<CK_BYTE>?
}
