import CPKCS11
import KeychainCore
import KeychainCrypto

/// How a cipher mechanism processes data, built from its parameter.
enum CipherSpec {
    case symmetric(SymmetricCipher.Mode, iv: [UInt8], associatedData: [UInt8])
    case rsa(RSACipher.Padding)
}

/// How C_DeriveKey makes the new key's value.
enum Derivation {
    /// ECDH with CK_ECDH1_DERIVE_PARAMS; `cofactor`: CKM_ECDH1_COFACTOR_DERIVE (the shared
    /// point multiplied by the curve's cofactor, SP 800-56A §5.7.1.2).
    case ecdh(cofactor: Bool)
    /// HKDF (RFC 5869) with CK_HKDF_PARAMS; CKM_HKDF_DATA makes a data object.
    case hkdf(dataObject: Bool)
    /// SP 800-108 in counter, feedback or double-pipeline mode, with additional keys.
    case sp800108(SP800108.Mode)
    /// PKCS #3 Diffie-Hellman with the other party's public value as the parameter.
    case diffieHellman
    /// The base key encrypts the parameter's data (CKM_AES_ECB_ENCRYPT_DATA, …_CBC_…, and the
    /// triple-DES ones).
    case encryptData(SymmetricCipher.Mode)
    /// PKCS#11's "miscellaneous simple key derivation" mechanisms: secret keys' values: concatenation with data or
    /// another key, XOR with data, bits taken out of the base key.
    case simple(SimpleDerivation)
}

enum SimpleDerivation {
    case baseAndKey, baseAndData, dataAndBase, xorBaseAndData, extractKeyFromKey
}

/// What a mechanism does, as data: C_GetMechanismList/Info and every *Init read this table.
/// A mechanism has one capability per kind of operation it serves; `flags` says which.
struct Mechanism: Sendable {
    typealias SchemeBuilder = @Sendable (MechanismParameter, AsymmetricKey) throws(CKError) -> SignatureScheme
    typealias CipherBuilder = @Sendable (MechanismParameter) throws(CKError) -> CipherSpec

    let type: CK_MECHANISM_TYPE
    let minimumKeySize: CK_ULONG
    let maximumKeySize: CK_ULONG
    let flags: CK_FLAGS
    /// Key types the mechanism takes (empty for digests): a few, searched in order (cheaper
    /// than hashing at this size, on every *Init).
    var keyTypes: [KeyType] = []
    var digest: Digest.Algorithm?
    var signature: SchemeBuilder?
    var mac: StreamingMAC.Algorithm?
    /// A _GENERAL MAC: its length comes as CK_MAC_GENERAL_PARAMS.
    var macLengthIsParameter = false
    var cipher: CipherBuilder?
    var generates: KeyType?
    /// C_GenerateKey makes domain parameters (CKO_DOMAIN_PARAMETERS) of `generates`, not a key.
    var generatesDomainParameters = false
    /// AES key wrap (the RSA wrapping mechanisms use their `cipher`).
    var keyWrap: KeyWrap.Mode?
    /// CKM_RSA_AES_KEY_WRAP: a one-time AES key under RSA-OAEP, then the key under it (KWP).
    var wrapsWithRSAAndAES = false
    /// The block-cipher modes that PKCS#11 lets wrap (…_ECB, …_CBC, …_CBC_PAD): the key's value
    /// encrypted with the mechanism's `cipher` (§2.10: zero-padded to whole blocks for ECB and CBC).
    var wrapsWithBlockCipher = false
    var derivation: Derivation?
    /// CKM_PKCS5_PBKD2: C_GenerateKey derives the key from a password in the parameter.
    var derivesFromPassword = false
    /// CKM_ML_DSA: signs and verifies with an ML-DSA key (`LatticeSigner`).
    var signsWithLattice = false
    /// CKM_ML_KEM: C_EncapsulateKey and C_DecapsulateKey with an ML-KEM key.
    var encapsulates = false
    /// The block cipher of symmetric cipher, MAC and encrypt-data mechanisms.
    var blockCipher: SymmetricCipher.Algorithm = .aes

    /// CKF_HW is set on every mechanism: the operation runs inside the token (the module), with
    /// its keys, never in the calling application — which is what clients test the flag for.
    var info: CK_MECHANISM_INFO {
        CK_MECHANISM_INFO(ulMinKeySize: minimumKeySize, ulMaxKeySize: maximumKeySize, flags: flags | CK_FLAGS(CKF_HW))
    }

    func supports(_ flag: UInt) -> Bool { flags & CK_FLAGS(flag) != 0 }
}
