internal import CTSS2

/// What the TPM objects of this layer are (TPM 2.0 Part 2 §12.2.4, TPMT_PUBLIC).
enum TPMTemplates {
    /// The primary key every object of ours lives under: the TCG's ECC storage root key template
    /// ("TCG TPM v2.0 Provisioning Guidance" §7.5.1, the SRK that `tpm2_createprimary -C o -G
    /// ecc256:aes128cfb` and FAPI's P_ECCP256SHA256 profile make):
    ///
    ///     hierarchy         owner (TPM2_RH_OWNER), empty owner authorisation
    ///     type, nameAlg     TPM2_ALG_ECC, TPM2_ALG_SHA256
    ///     objectAttributes  fixedTPM | fixedParent | sensitiveDataOrigin | userWithAuth | noDA |
    ///                       restricted | decrypt   (0x00030472)
    ///     authPolicy        empty;  authValue empty;  sensitive data empty
    ///     symmetric         AES-128 CFB (protects children's private parts and parameter encryption)
    ///     scheme, kdf       TPM2_ALG_NULL, TPM2_ALG_NULL
    ///     curveID           TPM2_ECC_NIST_P256
    ///     unique            x and y empty
    ///
    /// CreatePrimary derives it from the owner seed, so the same template gives the same key on
    /// the same TPM every time and nothing need be stored; a TPM whose owner is cleared (or
    /// another machine's TPM) derives another key, and blobs made under this one do not load there.
    /// `TPMConnection` creates it once per connection and keeps the transient handle until it
    /// closes: CreatePrimary costs tens to hundreds of milliseconds on hardware TPMs, too much per
    /// operation, while a persistent handle (EvictControl) would need owner authorisation and
    /// leave NV state behind. With `/dev/tpmrm0` the resource manager swaps it out when idle.
    static func primary() -> TPM2B_PUBLIC {
        var template = TPM2B_PUBLIC()
        template.publicArea.type = kc_TPM2_ALG_ECC
        template.publicArea.nameAlg = kc_TPM2_ALG_SHA256
        template.publicArea.objectAttributes = kc_TPMA_OBJECT_FIXEDTPM | kc_TPMA_OBJECT_FIXEDPARENT
            | kc_TPMA_OBJECT_SENSITIVEDATAORIGIN | kc_TPMA_OBJECT_USERWITHAUTH | kc_TPMA_OBJECT_NODA
            | kc_TPMA_OBJECT_RESTRICTED | kc_TPMA_OBJECT_DECRYPT
        template.publicArea.parameters.eccDetail.symmetric = storageCipher
        template.publicArea.parameters.eccDetail.scheme.scheme = kc_TPM2_ALG_NULL
        template.publicArea.parameters.eccDetail.curveID = kc_TPM2_ECC_NIST_P256
        template.publicArea.parameters.eccDetail.kdf.scheme = kc_TPM2_ALG_NULL
        return template
    }

    /// AES-128 in CFB mode: the storage key's cipher and the session's parameter encryption.
    static var storageCipher: TPMT_SYM_DEF_OBJECT {
        var cipher = TPMT_SYM_DEF_OBJECT()
        cipher.algorithm = kc_TPM2_ALG_AES
        cipher.keyBits.aes = kc_TPM2_AES_128
        cipher.mode.aes = kc_TPM2_ALG_CFB
        return cipher
    }

    /// The longest authValue an object with nameAlg SHA-256 takes (Part 1 §19.6.4: its digest size).
    static let maximumAuthorizationLength = 32
    /// The most a sealed object holds: the reference implementation's MAX_SYM_DATA (128), which
    /// tpm2-tss's header declares larger (256) than most TPMs accept.
    static let maximumSealedLength = 128

    /// Attributes every key and sealed object shares: it never leaves this TPM (fixedTPM,
    /// fixedParent), it is used with its authValue (userWithAuth), and a wrong authValue does not
    /// count toward the TPM's dictionary-attack lockout (noDA): the authValue is 32 bytes derived
    /// from the unlocked keychain, not a guessable PIN, and a lockout would stop every TPM user.
    private static let commonAttributes = kc_TPMA_OBJECT_FIXEDTPM | kc_TPMA_OBJECT_FIXEDPARENT
        | kc_TPMA_OBJECT_USERWITHAUTH | kc_TPMA_OBJECT_NODA

    /// A key made inside the TPM (sensitiveDataOrigin), unrestricted, for both signing and
    /// decryption: ECDSA and ECDH (TPM2_ECDH_ZGen needs `decrypt`) from one EC key, PKCS#1 and
    /// RSA decryption from one RSA key. A key with both uses must have the NULL scheme; each
    /// command names its scheme.
    static func key(_ type: TPMKeyType) -> TPM2B_PUBLIC {
        var template = TPM2B_PUBLIC()
        template.publicArea.nameAlg = kc_TPM2_ALG_SHA256
        template.publicArea.objectAttributes = commonAttributes | kc_TPMA_OBJECT_SENSITIVEDATAORIGIN
            | kc_TPMA_OBJECT_SIGN_ENCRYPT | kc_TPMA_OBJECT_DECRYPT
        template.publicArea.parameters = parameters(type)
        template.publicArea.type = type.isEC ? kc_TPM2_ALG_ECC : kc_TPM2_ALG_RSA
        return template
    }

    /// The algorithm parameters of a key type (also what TPM2_TestParms asks about).
    static func parameters(_ type: TPMKeyType) -> TPMU_PUBLIC_PARMS {
        var parameters = TPMU_PUBLIC_PARMS()
        switch type {
        case .ecP256, .ecP384:
            parameters.eccDetail.symmetric.algorithm = kc_TPM2_ALG_NULL
            parameters.eccDetail.scheme.scheme = kc_TPM2_ALG_NULL
            parameters.eccDetail.curveID = type == .ecP256 ? kc_TPM2_ECC_NIST_P256 : kc_TPM2_ECC_NIST_P384
            parameters.eccDetail.kdf.scheme = kc_TPM2_ALG_NULL
        case .rsa2048:
            parameters.rsaDetail.symmetric.algorithm = kc_TPM2_ALG_NULL
            parameters.rsaDetail.scheme.scheme = kc_TPM2_ALG_NULL
            parameters.rsaDetail.keyBits = 2048
            parameters.rsaDetail.exponent = 0 // 65537
        }
        return parameters
    }

    /// A sealed data object: a keyed-hash object whose sensitive data is the caller's secret
    /// (not sensitiveDataOrigin), with neither sign nor decrypt, so TPM2_Unseal is its only use.
    static func sealed() -> TPM2B_PUBLIC {
        var template = TPM2B_PUBLIC()
        template.publicArea.type = kc_TPM2_ALG_KEYEDHASH
        template.publicArea.nameAlg = kc_TPM2_ALG_SHA256
        template.publicArea.objectAttributes = commonAttributes
        template.publicArea.parameters.keyedHashDetail.scheme.scheme = kc_TPM2_ALG_NULL
        return template
    }
}
