import CPKCS11
import KeychainCore
import KeychainCrypto

enum Mechanisms {
    /// The mechanisms of each key policy (DESIGN §10): the compatible table offers RSA from
    /// 1,024 bits, P-192 and the legacy algorithms; the modern one does not.
    static let compatible = table(.compatible)
    static let modern = table(.modern)

    static func table(for policy: KeyPolicy) -> [CK_MECHANISM_TYPE: Mechanism] {
        policy == .modern ? modern : compatible
    }

    /// The same tables for every *Init's lookup by mechanism type, without SipHash.
    private static let compatibleIndex = index(compatible)
    private static let modernIndex = index(modern)

    static func index(for policy: KeyPolicy) -> HandleMap<Mechanism> {
        policy == .modern ? modernIndex : compatibleIndex
    }

    private static func index(_ table: [CK_MECHANISM_TYPE: Mechanism]) -> HandleMap<Mechanism> {
        var index = HandleMap<Mechanism>()
        for (type, mechanism) in table { index[type] = mechanism }
        return index
    }

    private static func table(_ policy: KeyPolicy) -> [CK_MECHANISM_TYPE: Mechanism] {
        var table: [CK_MECHANISM_TYPE: Mechanism] = [:]
        let signVerify = UInt(CKF_SIGN | CKF_VERIFY)
        let encryptDecrypt = UInt(CKF_ENCRYPT | CKF_DECRYPT)
        let wrapUnwrap = UInt(CKF_WRAP | CKF_UNWRAP)

        // Digests and HMAC (current mechanisms §2.16–§2.25).
        let digests: [(UInt, UInt, UInt, Digest.Algorithm)] = [
            (UInt(CKM_SHA_1), UInt(CKM_SHA_1_HMAC), UInt(CKM_SHA_1_HMAC_GENERAL), .sha1),
            (UInt(CKM_SHA224), UInt(CKM_SHA224_HMAC), UInt(CKM_SHA224_HMAC_GENERAL), .sha224),
            (UInt(CKM_SHA256), UInt(CKM_SHA256_HMAC), UInt(CKM_SHA256_HMAC_GENERAL), .sha256),
            (UInt(CKM_SHA384), UInt(CKM_SHA384_HMAC), UInt(CKM_SHA384_HMAC_GENERAL), .sha384),
            (UInt(CKM_SHA512), UInt(CKM_SHA512_HMAC), UInt(CKM_SHA512_HMAC_GENERAL), .sha512),
            (UInt(CKM_SHA3_224), UInt(CKM_SHA3_224_HMAC), UInt(CKM_SHA3_224_HMAC) + 1, .sha3_224), (UInt(CKM_SHA3_256), UInt(CKM_SHA3_256_HMAC), UInt(CKM_SHA3_256_HMAC) + 1, .sha3_256),
            (UInt(CKM_SHA3_384), UInt(CKM_SHA3_384_HMAC), UInt(CKM_SHA3_384_HMAC) + 1, .sha3_384), (UInt(CKM_SHA3_512), UInt(CKM_SHA3_512_HMAC), UInt(CKM_SHA3_512_HMAC) + 1, .sha3_512),
        ]
        // An HMAC takes generic secrets and the key type dedicated to it (CKK_SHA256_HMAC…).
        let dedicated: [Digest.Algorithm: KeyType] = [.sha1: .sha1HMAC, .sha224: .sha224HMAC, .sha256: .sha256HMAC, .sha384: .sha384HMAC,
                                                      .sha512: .sha512HMAC, .md5: .md5HMAC, .sha3_224: .sha3_224HMAC, .sha3_256: .sha3_256HMAC,
                                                      .sha3_384: .sha3_384HMAC, .sha3_512: .sha3_512HMAC]
        func addHMAC(_ hmac: UInt, _ general: UInt, _ algorithm: Digest.Algorithm) {
            for (type, isGeneral) in [(hmac, false), (general, true)] {
                table.add(type, 1, 512, signVerify) {
                    $0.keyTypes = [.genericSecret] + [dedicated[algorithm]].compactMap { $0 }
                    $0.mac = .hmac(algorithm)
                    $0.macLengthIsParameter = isGeneral
                }
            }
        }
        for (digest, hmac, general, algorithm) in digests {
            table.add(digest, 0, 0, UInt(CKF_DIGEST)) { $0.digest = algorithm }
            addHMAC(hmac, general, algorithm)
        }
        table.add(UInt(CKM_GENERIC_SECRET_KEY_GEN), 8, 4096, UInt(CKF_GENERATE)) { $0.generates = .genericSecret }
        if policy.allowsLegacyAlgorithms {
            table.add(UInt(CKM_MD5), 0, 0, UInt(CKF_DIGEST)) { $0.digest = .md5 }
            addHMAC(UInt(CKM_MD5_HMAC), UInt(CKM_MD5_HMAC_GENERAL), .md5)
        }

        // RSA (§2.1).
        // Operations take any key the policy stores (public keys from 512 bits when compatible).
        let rsaMin = policy.rsaPublicBits.lowerBound, rsaMax = policy.rsaPublicBits.upperBound
        table.add(UInt(CKM_RSA_PKCS_KEY_PAIR_GEN), policy.rsaBits.lowerBound, policy.rsaBits.upperBound, UInt(CKF_GENERATE_KEY_PAIR)) {
            $0.generates = .rsa
        }
        table.add(UInt(CKM_RSA_PKCS), rsaMin, rsaMax, signVerify | encryptDecrypt | wrapUnwrap) {
            $0.keyTypes = [.rsa]
            $0.signature = { p, _ throws(CKError) in try p.requireEmpty(); return .rsaPKCS1(digest: nil) }
            $0.cipher = { p throws(CKError) in try p.requireEmpty(); return .rsa(.pkcs1) }
        }
        table.add(UInt(CKM_RSA_X_509), rsaMin, rsaMax, signVerify | encryptDecrypt) {
            $0.keyTypes = [.rsa]
            $0.signature = { p, _ throws(CKError) in try p.requireEmpty(); return .rsaRaw }
            $0.cipher = { p throws(CKError) in try p.requireEmpty(); return .rsa(.raw) }
        }
        table.add(UInt(CKM_RSA_PKCS_OAEP), rsaMin, rsaMax, encryptDecrypt | wrapUnwrap) {
            $0.keyTypes = [.rsa]
            $0.cipher = { p throws(CKError) in .rsa(try oaepPadding(p)) }
        }
        table.add(UInt(CKM_RSA_AES_KEY_WRAP), rsaMin, rsaMax, wrapUnwrap) {
            $0.keyTypes = [.rsa]
            $0.wrapsWithRSAAndAES = true
        }
        let rsaHashes: [(UInt, UInt, Digest.Algorithm)] = [
            (UInt(CKM_SHA1_RSA_PKCS), UInt(CKM_SHA1_RSA_PKCS_PSS), .sha1), (UInt(CKM_SHA224_RSA_PKCS), UInt(CKM_SHA224_RSA_PKCS_PSS), .sha224),
            (UInt(CKM_SHA256_RSA_PKCS), UInt(CKM_SHA256_RSA_PKCS_PSS), .sha256), (UInt(CKM_SHA384_RSA_PKCS), UInt(CKM_SHA384_RSA_PKCS_PSS), .sha384),
            (UInt(CKM_SHA512_RSA_PKCS), UInt(CKM_SHA512_RSA_PKCS_PSS), .sha512),
            (UInt(CKM_SHA3_224_RSA_PKCS), UInt(CKM_SHA3_224_RSA_PKCS_PSS), .sha3_224), (UInt(CKM_SHA3_256_RSA_PKCS), UInt(CKM_SHA3_256_RSA_PKCS_PSS), .sha3_256),
            (UInt(CKM_SHA3_384_RSA_PKCS), UInt(CKM_SHA3_384_RSA_PKCS_PSS), .sha3_384), (UInt(CKM_SHA3_512_RSA_PKCS), UInt(CKM_SHA3_512_RSA_PKCS_PSS), .sha3_512),
        ]
        for (pkcs1, pss, digest) in rsaHashes {
            table.add(pkcs1, rsaMin, rsaMax, signVerify) {
                $0.keyTypes = [.rsa]
                $0.signature = { p, _ throws(CKError) in try p.requireEmpty(); return .rsaPKCS1(digest: digest) }
            }
            table.add(pss, rsaMin, rsaMax, signVerify) {
                $0.keyTypes = [.rsa]
                $0.signature = { p, key throws(CKError) in try pssScheme(p, key: key, mechanismDigest: digest) }
            }
        }
        if policy.allowsLegacyAlgorithms {
            table.add(UInt(CKM_MD5_RSA_PKCS), rsaMin, rsaMax, signVerify) {
                $0.keyTypes = [.rsa]
                $0.signature = { p, _ throws(CKError) in try p.requireEmpty(); return .rsaPKCS1(digest: .md5) }
            }
        }
        table.add(UInt(CKM_RSA_PKCS_PSS), rsaMin, rsaMax, signVerify) {
            $0.keyTypes = [.rsa]
            $0.signature = { p, key throws(CKError) in try pssScheme(p, key: key, mechanismDigest: nil) }
        }

        // Elliptic curves (§2.3).
        let ecFlags = UInt(CKF_EC_F_P | CKF_EC_NAMEDCURVE | CKF_EC_UNCOMPRESS)
        let curveBits = Curve.allCases.filter(policy.allows).map(\.bits)
        let ecMin = curveBits.min() ?? 256, ecMax = curveBits.max() ?? 521
        table.add(UInt(CKM_EC_KEY_PAIR_GEN), ecMin, ecMax, UInt(CKF_GENERATE_KEY_PAIR) | ecFlags) { $0.generates = .ec }
        let ecdsa: [(UInt, Digest.Algorithm?)] = [(UInt(CKM_ECDSA), nil), (UInt(CKM_ECDSA_SHA1), .sha1), (UInt(CKM_ECDSA_SHA224), .sha224),
                                                   (UInt(CKM_ECDSA_SHA256), .sha256), (UInt(CKM_ECDSA_SHA384), .sha384), (UInt(CKM_ECDSA_SHA512), .sha512),
                                                   (UInt(CKM_ECDSA_SHA3_224), .sha3_224), (UInt(CKM_ECDSA_SHA3_256), .sha3_256),
                                                   (UInt(CKM_ECDSA_SHA3_384), .sha3_384), (UInt(CKM_ECDSA_SHA3_512), .sha3_512)]
        for (type, digest) in ecdsa {
            table.add(type, ecMin, ecMax, signVerify | ecFlags) {
                $0.keyTypes = [.ec]
                $0.signature = { p, _ throws(CKError) in try p.requireEmpty(); return .ecdsa(digest: digest) }
            }
        }
        table.add(UInt(CKM_EC_EDWARDS_KEY_PAIR_GEN), 255, 448, UInt(CKF_GENERATE_KEY_PAIR)) { $0.generates = .ecEdwards }
        table.add(UInt(CKM_EC_MONTGOMERY_KEY_PAIR_GEN), 255, 448, UInt(CKF_GENERATE_KEY_PAIR)) { $0.generates = .ecMontgomery }
        table.add(UInt(CKM_EDDSA), 255, 448, signVerify) {
            $0.keyTypes = [.ecEdwards]
            $0.signature = { p, key throws(CKError) in try eddsaScheme(p, key: key) }
        }

        // AES (§2.14); key sizes in bytes.
        table.add(UInt(CKM_AES_KEY_GEN), 16, 32, UInt(CKF_GENERATE)) { $0.generates = .aes }
        let aesModes: [(UInt, SymmetricCipher.Mode)] = [(UInt(CKM_AES_ECB), .ecb), (UInt(CKM_AES_CBC), .cbc), (UInt(CKM_AES_CBC_PAD), .cbcPad)]
        for (type, mode) in aesModes {
            table.add(type, 16, 32, encryptDecrypt | wrapUnwrap) {
                $0.keyTypes = [.aes]
                $0.wrapsWithBlockCipher = true
                $0.cipher = { p throws(CKError) in
                    if mode == .ecb { try p.requireEmpty(); return .symmetric(.ecb, iv: [], associatedData: []) }
                    return .symmetric(mode, iv: try p.flatBytes(count: SymmetricCipher.blockSize, what: "IV"), associatedData: [])
                }
            }
        }
        table.add(UInt(CKM_AES_CTR), 16, 32, encryptDecrypt) {
            $0.keyTypes = [.aes]
            $0.cipher = { p throws(CKError) in try ctrSpec(p) }
        }
        table.add(UInt(CKM_AES_GCM), 16, 32, encryptDecrypt) {
            $0.keyTypes = [.aes]
            $0.cipher = { p throws(CKError) in try gcmSpec(p) }
        }
        table.add(UInt(CKM_AES_CMAC), 16, 32, signVerify) {
            $0.keyTypes = [.aes]
            $0.mac = .aesCMAC
        }
        table.add(UInt(CKM_AES_CMAC_GENERAL), 16, 32, signVerify) {
            $0.keyTypes = [.aes]
            $0.mac = .aesCMAC
            $0.macLengthIsParameter = true
        }
        // The modes PKCS#11 3.0 adds to AES, and ChaCha20 (3.0 §2.x); key sizes in bytes.
        let ivModes: [(UInt, SymmetricCipher.Mode)] = [(UInt(CKM_AES_OFB), .ofb), (UInt(CKM_AES_CFB8), .cfb8), (UInt(CKM_AES_CFB128), .cfb128),
                                                       (UInt(CKM_AES_CTS), .cts)]
        for (type, mode) in ivModes {
            table.add(type, 16, 32, encryptDecrypt) {
                $0.keyTypes = [.aes]
                $0.cipher = { p throws(CKError) in .symmetric(mode, iv: try p.flatBytes(count: 16, what: "IV"), associatedData: []) }
            }
        }
        table.add(UInt(CKM_AES_XTS_KEY_GEN), 32, 64, UInt(CKF_GENERATE)) { $0.generates = .aesXTS }
        table.add(UInt(CKM_AES_XTS), 32, 64, encryptDecrypt) {
            $0.keyTypes = [.aesXTS]
            $0.cipher = { p throws(CKError) in .symmetric(.xts, iv: try p.flatBytes(count: 16, what: "XTS tweak"), associatedData: []) }
        }
        table.add(UInt(CKM_AES_CCM), 16, 32, encryptDecrypt) {
            $0.keyTypes = [.aes]
            $0.cipher = { p throws(CKError) in try ccmSpec(p) }
        }
        table.add(UInt(CKM_CHACHA20_KEY_GEN), 32, 32, UInt(CKF_GENERATE)) { $0.generates = .chacha20 }
        table.add(UInt(CKM_CHACHA20), 32, 32, encryptDecrypt) {
            $0.keyTypes = [.chacha20]
            $0.blockCipher = .chacha20
            $0.cipher = { p throws(CKError) in try chacha20Spec(p) }
        }
        table.add(UInt(CKM_CHACHA20_POLY1305), 32, 32, encryptDecrypt) {
            $0.keyTypes = [.chacha20]
            $0.blockCipher = .chacha20
            $0.cipher = { p throws(CKError) in try chacha20Poly1305Spec(p) }
        }
        if policy.allowsLegacyAlgorithms {
            // CBC-MAC (FIPS 113): half a block, or the length the parameter gives. Forgeable on
            // messages of varying length (CMAC is its modern form): legacy.
            table.add(UInt(CKM_AES_MAC), 16, 32, signVerify) {
                $0.keyTypes = [.aes]
                $0.mac = .cbcMAC(.aes, length: 8)
            }
            table.add(UInt(CKM_AES_MAC_GENERAL), 16, 32, signVerify) {
                $0.keyTypes = [.aes]
                $0.mac = .cbcMAC(.aes, length: 16)
                $0.macLengthIsParameter = true
            }
        }
        table.add(UInt(CKM_AES_KEY_WRAP), 16, 32, wrapUnwrap) {
            $0.keyTypes = [.aes]
            $0.keyWrap = .kw
        }
        table.add(UInt(CKM_AES_KEY_WRAP_PAD), 16, 32, wrapUnwrap) {
            $0.keyTypes = [.aes]
            $0.keyWrap = .kwp
        }
        if policy.allowsLegacyAlgorithms {
            addDES(&table)
            addFiniteField(&table)
        }

        // Key agreement: ECDH on the NIST curves and on X25519/X448 (sizes in bits).
        table.add(UInt(CKM_ECDH1_DERIVE), min(ecMin, 255), ecMax, UInt(CKF_DERIVE) | ecFlags) {
            $0.keyTypes = [.ec, .ecMontgomery]
            $0.derivation = .ecdh(cofactor: false)
        }
        // The named prime curves all have cofactor 1; X25519/X448 clear the cofactor in the
        // scalar (RFC 7748), so the cofactor form is the same computation on them.
        table.add(UInt(CKM_ECDH1_COFACTOR_DERIVE), min(ecMin, 255), ecMax, UInt(CKF_DERIVE) | ecFlags) {
            $0.keyTypes = [.ec, .ecMontgomery]
            $0.derivation = .ecdh(cofactor: true)
        }
        // Key derivation of PKCS#11 3.0 (§2.43, §2.44, §2.63); sizes in bytes of the base key.
        table.add(UInt(CKM_HKDF_KEY_GEN), 1, 512, UInt(CKF_GENERATE)) { $0.generates = .hkdf }
        for (type, dataObject) in [(UInt(CKM_HKDF_DERIVE), false), (UInt(CKM_HKDF_DATA), true)] {
            table.add(type, 1, 512, UInt(CKF_DERIVE)) {
                $0.keyTypes = [.hkdf, .genericSecret]
                $0.derivation = .hkdf(dataObject: dataObject)
            }
        }
        table.add(UInt(CKM_PKCS5_PBKD2), 1, 512, UInt(CKF_GENERATE)) { $0.derivesFromPassword = true }
        let kdfModes: [(UInt, SP800108.Mode)] = [(UInt(CKM_SP800_108_COUNTER_KDF), .counter), (UInt(CKM_SP800_108_FEEDBACK_KDF), .feedback),
                                                 (UInt(CKM_SP800_108_DOUBLE_PIPELINE_KDF), .doublePipeline)]
        for (type, mode) in kdfModes {
            table.add(type, 1, 512, UInt(CKF_DERIVE)) {
                $0.keyTypes = KeyType.genericLike.filter { $0 != .hkdf } + [.aes, .des2, .des3]
                $0.derivation = .sp800108(mode)
            }
        }
        // Simple derivations from secret keys' values (current mechanisms, "Miscellaneous simple key derivation mechanisms"), with the
        // defences of SimpleDerivation.swift for sensitive keys.
        let simple: [(UInt, SimpleDerivation)] = [(UInt(CKM_CONCATENATE_BASE_AND_KEY), .baseAndKey), (UInt(CKM_CONCATENATE_BASE_AND_DATA), .baseAndData),
                                                  (UInt(CKM_CONCATENATE_DATA_AND_BASE), .dataAndBase), (UInt(CKM_XOR_BASE_AND_DATA), .xorBaseAndData),
                                                  (UInt(CKM_EXTRACT_KEY_FROM_KEY), .extractKeyFromKey)]
        for (type, kind) in simple {
            table.add(type, 1, 512, UInt(CKF_DERIVE)) {
                $0.keyTypes = KeyType.genericLike.filter { $0 != .hkdf } + [.aes, .des2, .des3]
                $0.derivation = .simple(kind)
            }
        }
        // Keys derived by encrypting data with an AES key (current mechanisms §2.15).
        table.add(UInt(CKM_AES_ECB_ENCRYPT_DATA), 16, 32, UInt(CKF_DERIVE)) {
            $0.keyTypes = [.aes]
            $0.derivation = .encryptData(.ecb)
        }
        table.add(UInt(CKM_AES_CBC_ENCRYPT_DATA), 16, 32, UInt(CKF_DERIVE)) {
            $0.keyTypes = [.aes]
            $0.derivation = .encryptData(.cbc)
        }
        addLattice(&table)
        return table
    }

    /// Triple DES (two- and three-key) from OpenSSL's default provider, and single DES when its
    /// legacy provider is installed (loaded at the first use). Sizes are effective key bits, as
    /// PKCS#11 gives them for DES.
    private static func addDES(_ table: inout [CK_MECHANISM_TYPE: Mechanism]) {
        let encryptDecrypt = UInt(CKF_ENCRYPT | CKF_DECRYPT)
        table.add(UInt(CKM_DES2_KEY_GEN), 112, 112, UInt(CKF_GENERATE)) { $0.generates = .des2 }
        table.add(UInt(CKM_DES3_KEY_GEN), 168, 168, UInt(CKF_GENERATE)) { $0.generates = .des3 }
        var ciphers: [(UInt, SymmetricCipher.Mode, SymmetricCipher.Algorithm, [KeyType], Int, Int)] = [
            (UInt(CKM_DES3_ECB), .ecb, .tripleDES, [.des2, .des3], 112, 168), (UInt(CKM_DES3_CBC), .cbc, .tripleDES, [.des2, .des3], 112, 168),
            (UInt(CKM_DES3_CBC_PAD), .cbcPad, .tripleDES, [.des2, .des3], 112, 168),
        ]
        if LegacyProvider.isInstalled {
            table.add(UInt(CKM_DES_KEY_GEN), 56, 56, UInt(CKF_GENERATE)) { $0.generates = .des }
            ciphers += [(UInt(CKM_DES_ECB), .ecb, .des, [.des], 56, 56), (UInt(CKM_DES_CBC), .cbc, .des, [.des], 56, 56),
                        (UInt(CKM_DES_CBC_PAD), .cbcPad, .des, [.des], 56, 56)]
        }
        for (type, mode, algorithm, keyTypes, min, max) in ciphers {
            table.add(type, min, max, encryptDecrypt | UInt(CKF_WRAP | CKF_UNWRAP)) {
                $0.keyTypes = keyTypes
                $0.wrapsWithBlockCipher = true
                $0.blockCipher = algorithm
                $0.cipher = { p throws(CKError) in
                    if mode == .ecb { try p.requireEmpty(); return .symmetric(.ecb, iv: [], associatedData: []) }
                    return .symmetric(mode, iv: try p.flatBytes(count: algorithm.blockSize, what: "IV"), associatedData: [])
                }
            }
        }
        table.add(UInt(CKM_DES3_CMAC), 112, 168, UInt(CKF_SIGN | CKF_VERIFY)) {
            $0.keyTypes = [.des2, .des3]
            $0.blockCipher = .tripleDES
            $0.mac = .tripleDESCMAC
        }
        table.add(UInt(CKM_DES3_MAC), 112, 168, UInt(CKF_SIGN | CKF_VERIFY)) {
            $0.keyTypes = [.des2, .des3]
            $0.blockCipher = .tripleDES
            $0.mac = .cbcMAC(.tripleDES, length: 4)
        }
        table.add(UInt(CKM_DES3_MAC_GENERAL), 112, 168, UInt(CKF_SIGN | CKF_VERIFY)) {
            $0.keyTypes = [.des2, .des3]
            $0.blockCipher = .tripleDES
            $0.mac = .cbcMAC(.tripleDES, length: 8)
            $0.macLengthIsParameter = true
        }
        table.add(UInt(CKM_DES3_ECB_ENCRYPT_DATA), 112, 168, UInt(CKF_DERIVE)) {
            $0.keyTypes = [.des2, .des3]
            $0.blockCipher = .tripleDES
            $0.derivation = .encryptData(.ecb)
        }
        table.add(UInt(CKM_DES3_CBC_ENCRYPT_DATA), 112, 168, UInt(CKF_DERIVE)) {
            $0.keyTypes = [.des2, .des3]
            $0.blockCipher = .tripleDES
            $0.derivation = .encryptData(.cbc)
        }
    }

    /// DSA (FIPS 186) and PKCS #3 Diffie-Hellman, parameter generation included; sizes are
    /// prime bits.
    private static func addFiniteField(_ table: inout [CK_MECHANISM_TYPE: Mechanism]) {
        let generated = AsymmetricKey.generatedPrimeBits, keys = AsymmetricKey.finiteFieldPrimeBits
        table.add(UInt(CKM_DSA_PARAMETER_GEN), generated.lowerBound, generated.upperBound, UInt(CKF_GENERATE)) {
            $0.generates = .dsa
            $0.generatesDomainParameters = true
        }
        table.add(UInt(CKM_DSA_KEY_PAIR_GEN), keys.lowerBound, keys.upperBound, UInt(CKF_GENERATE_KEY_PAIR)) { $0.generates = .dsa }
        let dsa: [(UInt, Digest.Algorithm?)] = [(UInt(CKM_DSA), nil), (UInt(CKM_DSA_SHA1), .sha1), (UInt(CKM_DSA_SHA224), .sha224),
                                                (UInt(CKM_DSA_SHA256), .sha256), (UInt(CKM_DSA_SHA384), .sha384), (UInt(CKM_DSA_SHA512), .sha512)]
        for (type, digest) in dsa {
            table.add(type, keys.lowerBound, keys.upperBound, UInt(CKF_SIGN | CKF_VERIFY)) {
                $0.keyTypes = [.dsa]
                $0.signature = { p, _ throws(CKError) in try p.requireEmpty(); return .dsa(digest: digest) }
            }
        }
        table.add(UInt(CKM_DH_PKCS_PARAMETER_GEN), generated.lowerBound, generated.upperBound, UInt(CKF_GENERATE)) {
            $0.generates = .dh
            $0.generatesDomainParameters = true
        }
        table.add(UInt(CKM_DH_PKCS_KEY_PAIR_GEN), keys.lowerBound, keys.upperBound, UInt(CKF_GENERATE_KEY_PAIR)) { $0.generates = .dh }
        table.add(UInt(CKM_DH_PKCS_DERIVE), keys.lowerBound, keys.upperBound, UInt(CKF_DERIVE)) {
            $0.keyTypes = [.dh]
            $0.derivation = .diffieHellman
        }
    }

    static func paramInvalid(_ reason: String) -> CKError { CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), reason) }

    // MARK: parameters

    /// CKG_MGF1_* → the MGF1 hash (CKG_MGF1_SHA3_224 … _512 are 6–9 in PKCS#11 3.0).
    private static func mgf1(_ value: CK_ULONG) -> Digest.Algorithm? {
        switch value {
        case CK_ULONG(CKG_MGF1_SHA1): return .sha1
        case CK_ULONG(CKG_MGF1_SHA224): return .sha224
        case CK_ULONG(CKG_MGF1_SHA256): return .sha256
        case CK_ULONG(CKG_MGF1_SHA384): return .sha384
        case CK_ULONG(CKG_MGF1_SHA512): return .sha512
        case 6: return .sha3_224
        case 7: return .sha3_256
        case 8: return .sha3_384
        case 9: return .sha3_512
        default: return nil
        }
    }

    /// The hash a PSS, OAEP or HKDF parameter names (CKM_SHA_1 … CKM_SHA3_512; not MD5).
    static func parameterDigest(_ mechanism: CK_MECHANISM_TYPE) -> Digest.Algorithm? {
        guard let algorithm = compatible[mechanism]?.digest, algorithm != .md5 else { return nil }
        return algorithm
    }

    /// CK_RSA_PKCS_PSS_PARAMS: hash, MGF1 hash and salt length; with a hashing mechanism the
    /// parameter's hash must be the mechanism's.
    private static func pssScheme(_ parameter: MechanismParameter, key: AsymmetricKey, mechanismDigest: Digest.Algorithm?) throws(CKError) -> SignatureScheme {
        guard case .rsaPSS(let hashType, let mgfType, let saltLength) = parameter else { throw paramInvalid("PSS needs CK_RSA_PKCS_PSS_PARAMS") }
        guard let hash = parameterDigest(hashType), let mgf = mgf1(mgfType) else { throw paramInvalid("unsupported PSS hash or MGF") }
        if let mechanismDigest, mechanismDigest != hash { throw paramInvalid("the PSS hash must be the mechanism's hash") }
        let maximumSalt = (key.bits + 7) / 8 - hash.outputSize - 2
        guard saltLength <= CK_ULONG(max(maximumSalt, 0)) else { throw paramInvalid("PSS salt of \(saltLength) bytes is too long for this key") }
        return .rsaPSS(digest: hash, mgf1: mgf, saltLength: Int(saltLength), hashesData: mechanismDigest != nil)
    }

    /// CK_RSA_PKCS_OAEP_PARAMS: hash, MGF1 hash, and an optional label (CKZ_DATA_SPECIFIED).
    static func oaepPadding(_ parameter: MechanismParameter) throws(CKError) -> RSACipher.Padding {
        guard case .rsaOAEP(let hashType, let mgfType, let source, let sourceLength, let label) = parameter else {
            throw paramInvalid("OAEP needs CK_RSA_PKCS_OAEP_PARAMS")
        }
        guard let hash = parameterDigest(hashType), let mgf = mgf1(mgfType) else { throw paramInvalid("unsupported OAEP hash or MGF") }
        if source != CK_RSA_PKCS_OAEP_SOURCE_TYPE(CKZ_DATA_SPECIFIED), source != 0 || sourceLength != 0 {
            throw paramInvalid("OAEP source must be CKZ_DATA_SPECIFIED")
        }
        return .oaep(digest: hash, mgf1: mgf, label: label)
    }

    /// CKM_EDDSA takes no parameter or CK_EDDSA_PARAMS { phFlag, ulContextDataLen, pContextData }.
    /// No parameter is pure Ed25519 / Ed448, and so is Ed448 with phFlag FALSE and no context
    /// (Ed448 always has its dom4 prefix); these run in OpenSSL. With the parameter, Ed25519 is
    /// Ed25519ctx (phFlag FALSE) or Ed25519ph, Ed448 has a context or is Ed448ph (RFC 8032
    /// §5.1–§5.2, through libgcrypt). Ed25519ctx with an empty context, which RFC 8032 §5.1 says
    /// should not be used, is refused (CKR_MECHANISM_PARAM_INVALID), not signed as pure Ed25519.
    private static func eddsaScheme(_ parameter: MechanismParameter, key: AsymmetricKey) throws(CKError) -> SignatureScheme {
        switch parameter {
        case .none: return .eddsa
        case .eddsa(let prehash, let context) where !prehash && context.isEmpty:
            guard key.kind == .ed448 else { throw paramInvalid("Ed25519ctx needs a context (RFC 8032 §5.1); pure Ed25519 takes no parameter") }
            return .eddsa
        case .eddsa(let prehash, let context):
            guard context.count <= 255 else { throw paramInvalid("an EdDSA context has at most 255 bytes") }
            return .eddsaVariant(prehash: prehash, context: context)
        default: throw paramInvalid("EdDSA takes CK_EDDSA_PARAMS or nothing")
        }
    }

    /// CK_AES_CTR_PARAMS: a 16-byte counter block whose low ulCounterBits (1–128) bits are the
    /// counter; running past the counter's range is CKR_DATA_LEN_RANGE, never a wrap into the nonce.
    private static func ctrSpec(_ parameter: MechanismParameter) throws(CKError) -> CipherSpec {
        guard case .counter(let bits, let block) = parameter else { throw paramInvalid("CTR needs CK_AES_CTR_PARAMS") }
        guard (1...128).contains(bits) else { throw paramInvalid("the CTR counter must have 1–128 bits") }
        return .symmetric(.ctr(counterBits: Int(bits)), iv: block, associatedData: [])
    }

    /// CK_CCM_PARAMS: message length, nonce of 7–13 bytes, additional data, MAC of 4–16 bytes
    /// (even); the message length must fit the length field the nonce leaves (15 − nonce bytes).
    private static func ccmSpec(_ parameter: MechanismParameter) throws(CKError) -> CipherSpec {
        guard case .ccm(let dataLength, let nonce, let additionalData, let macLength) = parameter else { throw paramInvalid("CCM needs CK_CCM_PARAMS") }
        guard (7...13).contains(nonce.count) else { throw paramInvalid("the CCM nonce must have 7–13 bytes") }
        guard (4...16).contains(macLength), macLength % 2 == 0 else { throw paramInvalid("the CCM MAC must have 4, 6, … 16 bytes") }
        let lengthBytes = 15 - nonce.count
        guard dataLength <= CK_ULONG(SymmetricCipher.maximumHeldInput), lengthBytes >= 8 || dataLength < CK_ULONG(1) << (8 * lengthBytes) else {
            throw paramInvalid("a \(nonce.count)-byte CCM nonce leaves no room for \(dataLength) bytes")
        }
        return .symmetric(.ccm(tagLength: Int(macLength), dataLength: Int(dataLength)), iv: nonce, associatedData: additionalData)
    }

    /// CK_CHACHA20_PARAMS: the IV OpenSSL takes is the state's words 12–15 — the counter (4
    /// bytes, little-endian) and a 12-byte nonce, or the original 8-byte counter and 8-byte nonce.
    private static func chacha20Spec(_ parameter: MechanismParameter) throws(CKError) -> CipherSpec {
        guard case .chacha20(let counter, let nonce) = parameter, counter.count + nonce.count == 16 else {
            throw paramInvalid("ChaCha20 needs CK_CHACHA20_PARAMS with a 32-bit counter and a 96-bit nonce, or 64 and 64")
        }
        return .symmetric(.chacha20(counterBits: counter.count * 8), iv: counter + nonce, associatedData: [])
    }

    /// CK_SALSA20_CHACHA20_POLY1305_PARAMS: a 12-byte nonce (RFC 8439), or an 8-byte one (the
    /// original construction: the same as a 12-byte nonce that starts with four zero bytes).
    private static func chacha20Poly1305Spec(_ parameter: MechanismParameter) throws(CKError) -> CipherSpec {
        guard case .aead(let nonce, let additionalData) = parameter else { throw paramInvalid("ChaCha20-Poly1305 needs CK_SALSA20_CHACHA20_POLY1305_PARAMS") }
        switch nonce.count {
        case 12: return .symmetric(.chacha20Poly1305, iv: nonce, associatedData: additionalData)
        case 8: return .symmetric(.chacha20Poly1305, iv: [0, 0, 0, 0] + nonce, associatedData: additionalData)
        default: throw paramInvalid("the ChaCha20-Poly1305 nonce must have 12 or 8 bytes (XChaCha20's 24 are not supported)")
        }
    }

    /// CK_GCM_PARAMS: IV (1–256 bytes, 12 recommended), additional data, tag bits 96–128 in
    /// multiples of 8 (and 32, 64 as NIST allows for short messages are refused).
    private static func gcmSpec(_ parameter: MechanismParameter) throws(CKError) -> CipherSpec {
        guard case .gcm(let iv, let additionalData, let tagBits) = parameter else { throw paramInvalid("GCM needs CK_GCM_PARAMS") }
        guard iv.count >= 1, iv.count <= 256 else { throw paramInvalid("GCM IV length must be 1–256 bytes") }
        guard tagBits >= 96, tagBits <= 128, tagBits % 8 == 0 else { throw paramInvalid("GCM tag must be 96–128 bits") }
        return .symmetric(.gcm(tagLength: Int(tagBits / 8)), iv: iv, associatedData: additionalData)
    }
}

extension ModuleState {
    /// The mechanisms this process offers, by its key policy.
    var mechanisms: [CK_MECHANISM_TYPE: Mechanism] { Mechanisms.table(for: configuration.keyPolicy) }

    func mechanism(_ type: CK_MECHANISM_TYPE) throws(CKError) -> Mechanism {
        guard let mechanism = Mechanisms.index(for: configuration.keyPolicy)[type] else {
            throw CKError(CK_RV(CKR_MECHANISM_INVALID), "mechanism 0x\(String(type, radix: 16)) is not supported")
        }
        return mechanism
    }
}

extension Dictionary where Key == CK_MECHANISM_TYPE, Value == Mechanism {
    /// Registers a mechanism with its key sizes and flags; `configure` says what it does.
    mutating func add(_ type: UInt, _ min: Int, _ max: Int, _ flags: UInt, _ configure: (inout Mechanism) -> Void = { _ in }) {
        var mechanism = Mechanism(type: CK_MECHANISM_TYPE(type), minimumKeySize: CK_ULONG(min), maximumKeySize: CK_ULONG(max), flags: CK_FLAGS(flags))
        configure(&mechanism)
        self[mechanism.type] = mechanism
    }
}
