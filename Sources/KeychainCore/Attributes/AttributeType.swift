import KeychainCrypto
/// A PKCS#11 attribute type (`CKA_*`), as a Swift value: KeychainCore has no C types.
public struct AttributeType: RawRepresentable, Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    public init(_ rawValue: UInt) { self.rawValue = rawValue }

    public func hash(into hasher: inout Hasher) { hasher.combine(rawValue) }

    /// What dictionaries and sets of attribute types (every object's attributes, the rule table)
    /// hash with, instead of a full SipHash per lookup: storing one object looked up some 270
    /// of them, a sixth of the module's own work in C_CreateObject. The splitmix64 finalizer
    /// mixes every bit of the type into the low bits the tables use; a caller's made-up types
    /// can at worst make its own template's few lookups probe longer.
    public func _rawHashValue(seed: Int) -> Int {
        var x = UInt64(truncatingIfNeeded: rawValue) ^ UInt64(UInt(bitPattern: seed))
        x = (x ^ (x >> 30)) &* 0xbf58_476d_1ce4_e5b9
        x = (x ^ (x >> 27)) &* 0x94d0_49bb_1331_11eb
        return Int(truncatingIfNeeded: x ^ (x >> 31))
    }

    /// CKA_CLASS
    public static let objectClass = AttributeType(0x0)
    /// CKA_TOKEN
    public static let token = AttributeType(0x1)
    /// CKA_PRIVATE
    public static let isPrivate = AttributeType(0x2)
    /// CKA_LABEL
    public static let label = AttributeType(0x3)
    /// CKA_UNIQUE_ID (PKCS#11 3.0)
    public static let uniqueID = AttributeType(0x4)
    /// CKA_APPLICATION
    public static let application = AttributeType(0x10)
    /// CKA_VALUE
    public static let value = AttributeType(0x11)
    /// CKA_OBJECT_ID
    public static let objectID = AttributeType(0x12)
    /// CKA_MODIFIABLE
    public static let modifiable = AttributeType(0x170)
    /// CKA_COPYABLE
    public static let copyable = AttributeType(0x171)
    /// CKA_DESTROYABLE
    public static let destroyable = AttributeType(0x172)

    // Key attributes (PKCS#11 3.0 §4.7–§4.9, §6).
    /// CKA_CERTIFICATE_TYPE
    public static let certificateType = AttributeType(0x80)
    /// CKA_ISSUER
    public static let issuer = AttributeType(0x81)
    /// CKA_SERIAL_NUMBER
    public static let serialNumber = AttributeType(0x82)
    /// CKA_TRUSTED
    public static let trusted = AttributeType(0x86)
    /// CKA_CERTIFICATE_CATEGORY
    public static let certificateCategory = AttributeType(0x87)
    /// CKA_JAVA_MIDP_SECURITY_DOMAIN
    public static let javaMIDPSecurityDomain = AttributeType(0x88)
    /// CKA_URL
    public static let url = AttributeType(0x89)
    /// CKA_HASH_OF_SUBJECT_PUBLIC_KEY
    public static let hashOfSubjectPublicKey = AttributeType(0x8A)
    /// CKA_HASH_OF_ISSUER_PUBLIC_KEY
    public static let hashOfIssuerPublicKey = AttributeType(0x8B)
    /// CKA_CHECK_VALUE
    public static let checkValue = AttributeType(0x90)
    /// CKA_KEY_TYPE
    public static let keyType = AttributeType(0x100)
    /// CKA_SUBJECT
    public static let subject = AttributeType(0x101)
    /// CKA_ID
    public static let id = AttributeType(0x102)
    /// CKA_SENSITIVE
    public static let sensitive = AttributeType(0x103)
    /// CKA_ENCRYPT
    public static let encrypt = AttributeType(0x104)
    /// CKA_DECRYPT
    public static let decrypt = AttributeType(0x105)
    /// CKA_WRAP
    public static let wrap = AttributeType(0x106)
    /// CKA_UNWRAP
    public static let unwrap = AttributeType(0x107)
    /// CKA_SIGN
    public static let sign = AttributeType(0x108)
    /// CKA_SIGN_RECOVER
    public static let signRecover = AttributeType(0x109)
    /// CKA_VERIFY
    public static let verify = AttributeType(0x10A)
    /// CKA_VERIFY_RECOVER
    public static let verifyRecover = AttributeType(0x10B)
    /// CKA_DERIVE
    public static let derive = AttributeType(0x10C)
    /// CKA_START_DATE
    public static let startDate = AttributeType(0x110)
    /// CKA_END_DATE
    public static let endDate = AttributeType(0x111)
    /// CKA_MODULUS
    public static let modulus = AttributeType(0x120)
    /// CKA_MODULUS_BITS
    public static let modulusBits = AttributeType(0x121)
    /// CKA_PUBLIC_EXPONENT
    public static let publicExponent = AttributeType(0x122)
    /// CKA_PRIVATE_EXPONENT
    public static let privateExponent = AttributeType(0x123)
    /// CKA_PRIME_1
    public static let prime1 = AttributeType(0x124)
    /// CKA_PRIME_2
    public static let prime2 = AttributeType(0x125)
    /// CKA_EXPONENT_1
    public static let exponent1 = AttributeType(0x126)
    /// CKA_EXPONENT_2
    public static let exponent2 = AttributeType(0x127)
    /// CKA_COEFFICIENT
    public static let coefficient = AttributeType(0x128)
    /// CKA_PRIME (DSA, DH: p)
    public static let prime = AttributeType(0x130)
    /// CKA_SUBPRIME (DSA: q)
    public static let subprime = AttributeType(0x131)
    /// CKA_BASE (DSA, DH: g)
    public static let base = AttributeType(0x132)
    /// CKA_PRIME_BITS (domain parameter generation)
    public static let primeBits = AttributeType(0x133)
    /// CKA_SUB_PRIME_BITS (domain parameter generation)
    public static let subprimeBits = AttributeType(0x134)
    /// CKA_VALUE_BITS (DH private keys: bits of x)
    public static let valueBits = AttributeType(0x160)
    /// CKA_PUBLIC_KEY_INFO
    public static let publicKeyInfo = AttributeType(0x129)
    /// CKA_PARAMETER_SET (3.2): CK_ULONG, the ML-DSA or ML-KEM parameter set (CKP_*).
    public static let parameterSet = AttributeType(0x61D)
    /// CKA_ENCAPSULATE (3.2): CK_BBOOL, on ML-KEM public keys.
    public static let encapsulate = AttributeType(0x633)
    /// CKA_DECAPSULATE (3.2): CK_BBOOL, on ML-KEM private keys.
    public static let decapsulate = AttributeType(0x634)
    /// CKA_SEED (3.2): the seed an ML-DSA (ξ, 32 bytes) or ML-KEM (d ‖ z, 64 bytes) private key is made from.
    public static let seed = AttributeType(0x637)
    /// CKA_VALUE_LEN
    public static let valueLength = AttributeType(0x161)
    /// CKA_EXTRACTABLE
    public static let extractable = AttributeType(0x162)
    /// CKA_LOCAL
    public static let local = AttributeType(0x163)
    /// CKA_NEVER_EXTRACTABLE
    public static let neverExtractable = AttributeType(0x164)
    /// CKA_ALWAYS_SENSITIVE
    public static let alwaysSensitive = AttributeType(0x165)
    /// CKA_KEY_GEN_MECHANISM
    public static let keyGenMechanism = AttributeType(0x166)
    /// CKA_EC_PARAMS
    public static let ecParams = AttributeType(0x180)
    /// CKA_EC_POINT
    public static let ecPoint = AttributeType(0x181)
    /// CKA_ALWAYS_AUTHENTICATE
    public static let alwaysAuthenticate = AttributeType(0x202)
    /// CKA_WRAP_WITH_TRUSTED
    public static let wrapWithTrusted = AttributeType(0x210)
    /// CKA_ALLOWED_MECHANISMS (CKF_ARRAY_ATTRIBUTE | 0x600)
    public static let allowedMechanisms = AttributeType(0x4000_0600)
    /// CKA_WRAP_TEMPLATE (CKF_ARRAY_ATTRIBUTE | 0x211)
    public static let wrapTemplate = AttributeType(0x4000_0211)
    /// CKA_UNWRAP_TEMPLATE (CKF_ARRAY_ATTRIBUTE | 0x212)
    public static let unwrapTemplate = AttributeType(0x4000_0212)
    /// CKA_DERIVE_TEMPLATE (CKF_ARRAY_ATTRIBUTE | 0x213)
    public static let deriveTemplate = AttributeType(0x4000_0213)

    /// Whether the value is itself an array of attributes (a template).
    public var isTemplate: Bool { self == .wrapTemplate || self == .unwrapTemplate || self == .deriveTemplate }

    /// CKA_VENDOR_DEFINED | 0x4B430000: the base of this module's vendor attributes.
    public static let vendorBase: UInt = 0x8000_0000 | 0x4B43_0000
    /// CKA_KC_CREATION_TIME: seconds since 1970 when a token object was stored (read-only).
    public static let creationTime = AttributeType(vendorBase + 0x02)
    /// CKA_KC_MODIFICATION_TIME: seconds since 1970 of the last change to a token object (read-only).
    public static let modificationTime = AttributeType(vendorBase + 0x03)

    // Keychain item attributes (vendor; documented in Include/keychain-pkcs11.h).
    /// CKA_KC_ITEM_CLASS: CK_ULONG, 1 generic password, 2 internet password.
    public static let itemClass = AttributeType(vendorBase + 0x10)
    /// CKA_KC_ACCOUNT (kSecAttrAccount)
    public static let account = AttributeType(vendorBase + 0x11)
    /// CKA_KC_GENERIC (kSecAttrGeneric)
    public static let generic = AttributeType(vendorBase + 0x12)
    /// CKA_KC_COMMENT (kSecAttrComment)
    public static let comment = AttributeType(vendorBase + 0x13)
    /// CKA_KC_DESCRIPTION (kSecAttrDescription)
    public static let itemDescription = AttributeType(vendorBase + 0x14)
    /// CKA_KC_CREATOR (kSecAttrCreator, a four-character code as CK_ULONG)
    public static let creator = AttributeType(vendorBase + 0x15)
    /// CKA_KC_TYPE (kSecAttrType, a four-character code as CK_ULONG)
    public static let itemType = AttributeType(vendorBase + 0x16)
    /// CKA_KC_ACCESS_GROUP (kSecAttrAccessGroup)
    public static let accessGroup = AttributeType(vendorBase + 0x17)
    /// CKA_KC_SYNCHRONIZABLE (kSecAttrSynchronizable), CK_BBOOL
    public static let synchronizable = AttributeType(vendorBase + 0x18)
    /// CKA_KC_ACCESSIBLE (kSecAttrAccessible), CK_ULONG protection class
    public static let accessible = AttributeType(vendorBase + 0x19)
    /// CKA_KC_SECURITY_DOMAIN (kSecAttrSecurityDomain)
    public static let securityDomain = AttributeType(vendorBase + 0x1A)
    /// CKA_KC_PROTOCOL (kSecAttrProtocol, a four-character code as CK_ULONG)
    public static let itemProtocol = AttributeType(vendorBase + 0x1B)
    /// CKA_KC_PORT (kSecAttrPort), CK_ULONG
    public static let port = AttributeType(vendorBase + 0x1C)
    /// CKA_KC_PATH (kSecAttrPath)
    public static let path = AttributeType(vendorBase + 0x1D)
    /// CKA_KC_AUTHENTICATION_TYPE (kSecAttrAuthenticationType, a four-character code as CK_ULONG)
    public static let authenticationType = AttributeType(vendorBase + 0x1E)
    /// CKA_KC_IS_INVISIBLE (kSecAttrIsInvisible), CK_BBOOL
    public static let isInvisible = AttributeType(vendorBase + 0x1F)
    /// CKA_KC_IS_NEGATIVE (kSecAttrIsNegative), CK_BBOOL
    public static let isNegative = AttributeType(vendorBase + 0x20)

    /// CKA_KC_APPLICATION_TAG (kSecAttrApplicationTag), bytes, on key objects
    public static let applicationTag = AttributeType(vendorBase + 0x21)
    /// CKA_KC_ACCESS_CONTROL (kSecAttrAccessControl flags, Apple's bit values), CK_ULONG, set at creation
    public static let accessControl = AttributeType(vendorBase + 0x22)
    /// Internal, never given to callers: an item's secret attributes sealed under its application password.
    public static let sealedSecrets = AttributeType(vendorBase + 0x23)
    /// Internal, never given to callers: salt and scrypt cost of that seal.
    public static let applicationPasswordKDF = AttributeType(vendorBase + 0x24)
    /// CKA_KC_APPLICATION_PASSWORD: write-only, in a creation template; it seals the item's secret.
    public static let applicationPassword = AttributeType(vendorBase + 0x25)
    /// CKA_KC_CREDENTIAL_OBJECT: on a CKO_KC_CREDENTIAL object, the handle of the item it unlocks.
    public static let credentialObject = AttributeType(vendorBase + 0x26)

    /// Internal, never given to callers: for an item whose access control is user presence `.or`
    /// an application password, a fixed token sealed under that password (the record keeps the
    /// secret itself, for the presence alternative): opening it proves the password.
    public static let alternativeSeal = AttributeType(vendorBase + 0x27)
    /// Internal: salt and scrypt cost of that seal.
    public static let alternativeSealKDF = AttributeType(vendorBase + 0x28)

    /// CKA_KC_LOOKUP_ATTRIBUTES: a password's lookup attributes as the freedesktop Secret Service
    /// knows them (name/value strings, `LookupAttributes` encoding). Each pair has its own
    /// blind-index entry; a search template's value matches every item holding all its pairs.
    public static let lookupAttributes = AttributeType(vendorBase + 0x29)
    /// CKA_KC_CONTENT_TYPE: the MIME type of a password's secret ("text/plain"), as the Secret
    /// Service stores it beside the secret.
    public static let contentType = AttributeType(vendorBase + 0x2A)
    /// Internal, never given to callers: which keychain-item string attributes (kSecAttrAccount,
    /// kSecAttrLabel…) the SecItem caller gave as CFData, as their types in CK_ULONGs, so that
    /// SecItemCopyMatching returns each in the type it was stored as (as Apple does).
    public static let dataTypedAttributes = AttributeType(vendorBase + 0x2B)
    /// CKA_KC_TPM: CK_BBOOL on private keys, TRUE when the key was made inside the TPM and lives
    /// there (Apple's kSecAttrTokenIDSecureEnclave). Given TRUE in C_GenerateKeyPair's private
    /// template, it makes the key in the TPM; nothing else may set it.
    public static let tpm = AttributeType(vendorBase + 0x2C)
    /// Internal, never given to callers: a TPM key's `EnclaveKeyBlob` (the TPM's wrapped key, the
    /// keychain serial and the salt of its authorisation).
    public static let tpmBlob = AttributeType(vendorBase + 0x2D)

    /// Attributes the module keeps for itself: reading or searching them behaves as if absent.
    public var isInternal: Bool {
        self == .sealedSecrets || self == .applicationPasswordKDF || self == .alternativeSeal || self == .alternativeSealKDF
            || self == .dataTypedAttributes || self == .tpmBlob
    }

    public static func < (lhs: AttributeType, rhs: AttributeType) -> Bool { lhs.rawValue < rhs.rawValue }
    public var description: String { "0x" + String(rawValue, radix: 16) }
}

/// A PKCS#11 object class (`CKO_*`).
public struct ObjectClass: RawRepresentable, Hashable, Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// CKO_DATA
    public static let data = ObjectClass(rawValue: 0x0)
    /// CKO_CERTIFICATE
    public static let certificate = ObjectClass(rawValue: 0x1)
    /// CKO_PUBLIC_KEY
    public static let publicKey = ObjectClass(rawValue: 0x2)
    /// CKO_PRIVATE_KEY
    public static let privateKey = ObjectClass(rawValue: 0x3)
    /// CKO_SECRET_KEY
    public static let secretKey = ObjectClass(rawValue: 0x4)
    /// CKO_DOMAIN_PARAMETERS (DSA and DH groups)
    public static let domainParameters = ObjectClass(rawValue: 0x6)
    /// CKO_KC_CREDENTIAL (vendor): a session object presenting an item's credential (its
    /// application password, or the user PIN), after which the item's secret is readable in that session.
    public static let credential = ObjectClass(rawValue: 0x8000_0000 | 0x4B43_0001)
}

/// A PKCS#11 certificate type (`CKC_*`).
public struct CertificateType: RawRepresentable, Hashable, Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// CKC_X_509
    public static let x509 = CertificateType(rawValue: 0x0)
}

/// A PKCS#11 key type (`CKK_*`).
public struct KeyType: RawRepresentable, Hashable, Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    /// CKK_RSA
    public static let rsa = KeyType(rawValue: 0x0)
    /// CKK_DSA
    public static let dsa = KeyType(rawValue: 0x1)
    /// CKK_DH
    public static let dh = KeyType(rawValue: 0x2)
    /// CKK_EC
    public static let ec = KeyType(rawValue: 0x3)
    /// CKK_GENERIC_SECRET
    public static let genericSecret = KeyType(rawValue: 0x10)
    /// CKK_MD5_HMAC, CKK_SHA_1_HMAC, CKK_SHA256_HMAC, CKK_SHA384_HMAC, CKK_SHA512_HMAC,
    /// CKK_SHA224_HMAC (2.40): generic secrets dedicated to one HMAC.
    public static let md5HMAC = KeyType(rawValue: 0x27)
    public static let sha1HMAC = KeyType(rawValue: 0x28)
    public static let sha256HMAC = KeyType(rawValue: 0x2B)
    public static let sha384HMAC = KeyType(rawValue: 0x2C)
    public static let sha512HMAC = KeyType(rawValue: 0x2D)
    public static let sha224HMAC = KeyType(rawValue: 0x2E)
    /// CKK_DES (single DES: legacy, through OpenSSL's legacy provider)
    public static let des = KeyType(rawValue: 0x13)
    /// CKK_DES2 (two-key triple DES)
    public static let des2 = KeyType(rawValue: 0x14)
    /// CKK_DES3 (three-key triple DES)
    public static let des3 = KeyType(rawValue: 0x15)
    /// CKK_AES
    public static let aes = KeyType(rawValue: 0x1F)
    /// CKK_EC_EDWARDS
    public static let ecEdwards = KeyType(rawValue: 0x40)
    /// CKK_EC_MONTGOMERY
    public static let ecMontgomery = KeyType(rawValue: 0x41)
    /// CKK_SHA3_224_HMAC … CKK_SHA3_512_HMAC (3.0)
    public static let sha3_224HMAC = KeyType(rawValue: 0x36)
    public static let sha3_256HMAC = KeyType(rawValue: 0x37)
    public static let sha3_384HMAC = KeyType(rawValue: 0x38)
    public static let sha3_512HMAC = KeyType(rawValue: 0x39)
    /// CKK_CHACHA20 (3.0): a 32-byte ChaCha20 key.
    public static let chacha20 = KeyType(rawValue: 0x33)
    /// CKK_AES_XTS (3.0): two AES keys of 16 or 32 bytes each, one after the other.
    public static let aesXTS = KeyType(rawValue: 0x35)
    /// CKK_HKDF (3.0): key material for CKM_HKDF_DERIVE and CKM_HKDF_DATA.
    public static let hkdf = KeyType(rawValue: 0x42)
    /// CKK_ML_KEM (3.2): FIPS 203 key encapsulation.
    public static let mlKEM = KeyType(rawValue: 0x49)
    /// CKK_ML_DSA (3.2): FIPS 204 signatures.
    public static let mlDSA = KeyType(rawValue: 0x4A)
}

extension KeyType {
    /// ML-DSA and ML-KEM keys: lattice keys (`LatticeKey`), not OpenSSL's.
    public var isLattice: Bool { self == .mlDSA || self == .mlKEM }

    /// The parameter set a CKA_PARAMETER_SET value names for keys of this type (nil: none).
    public func latticeParameterSet(_ value: UInt) -> LatticeParameterSet? {
        switch self {
        case .mlDSA: return LatticeParameterSet.mlDSA(pkcs11Value: value)
        case .mlKEM: return LatticeParameterSet.mlKEM(pkcs11Value: value)
        default: return nil
        }
    }

    /// The asymmetric kind of DSA and DH keys and domain parameters (nil for other types).
    public var finiteFieldKind: AsymmetricKind? {
        switch self {
        case .dsa: return .dsa
        case .dh: return .dh
        default: return nil
        }
    }

    /// The value lengths (bytes) a secret key of a type without a block cipher may have; nil
    /// for types that take any length from 1 to 512 bytes.
    public var secretLengths: [Int]? {
        switch self {
        case .chacha20: return [32]
        case .aesXTS: return [32, 64]
        default: return nil
        }
    }

    /// Secret key types that are generic secrets for every purpose but their use (HMAC, HKDF).
    public static let genericLike: [KeyType] = [.genericSecret, .md5HMAC, .sha1HMAC, .sha224HMAC, .sha256HMAC, .sha384HMAC, .sha512HMAC,
                                               .sha3_224HMAC, .sha3_256HMAC, .sha3_384HMAC, .sha3_512HMAC, .hkdf]

    /// The block cipher of a DES or AES key, and its value length in bytes (nil: 16, 24 or 32).
    public var blockCipher: (algorithm: SymmetricCipher.Algorithm, keyLength: Int?)? {
        switch self {
        case .aes: return (.aes, nil)
        case .des3: return (.tripleDES, 24)
        case .des2: return (.tripleDES, 16)
        case .des: return (.des, 8)
        default: return nil
        }
    }
}

/// Encodings of attribute values in their PKCS#11 in-memory form on this platform:
/// CK_BBOOL is one byte, CK_ULONG is a native `unsigned long` (8 bytes on LP64 Linux).
public enum AttributeValue {
    public static let ulongSize = MemoryLayout<UInt>.size

    public static func bool(_ value: Bool) -> [UInt8] { value ? trueBytes : falseBytes }
    // Shared (every key has a dozen flags); a wipe of a shared copy copies it first.
    private static let trueBytes: [UInt8] = [1]
    private static let falseBytes: [UInt8] = [0]

    public static func ulong(_ value: UInt) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }

    /// CK_TRUE is any non-zero byte; nil when the bytes are not a CK_BBOOL.
    public static func decodeBool(_ bytes: [UInt8]) -> Bool? {
        bytes.count == 1 ? bytes[0] != 0 : nil
    }

    public static func decodeULong(_ bytes: [UInt8]) -> UInt? {
        guard bytes.count == ulongSize else { return nil }
        var value: UInt = 0
        withUnsafeMutableBytes(of: &value) { $0.copyBytes(from: bytes) }
        return value
    }
}
