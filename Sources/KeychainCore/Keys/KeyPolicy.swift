import KeychainCrypto

/// Which key sizes, curves and legacy algorithms a process accepts (DESIGN §10: compatibility by
/// default, strictness by choice). `key_policy = modern` in the configuration file, or
/// `KEYCHAIN_PKCS11_KEY_POLICY=modern`, selects the strict one.
public enum KeyPolicy: String, Sendable, CaseIterable {
    /// What OpenSSL's default provider accepts: RSA from 1,024 bits, every named curve it knows
    /// (P-192 included), and SoftHSM's legacy mechanisms (DES, DES3, DSA, DH, MD5).
    case compatible
    /// RSA from 2,048 bits, no P-192, none of the legacy mechanisms.
    case modern

    /// RSA modulus sizes for generation and import (bits).
    public var rsaBits: ClosedRange<Int> {
        switch self {
        case .compatible: return 1024...8192
        case .modern: return 2048...8192
        }
    }

    /// RSA public keys accepted for verification and encryption: the compatible policy also
    /// takes the 512-bit keys of old certificates (python-pkcs11's X.509 test verifies one).
    /// No private key of that size is generated or imported.
    public var rsaPublicBits: ClosedRange<Int> {
        switch self {
        case .compatible: return 512...16384
        case .modern: return rsaBits
        }
    }

    public func allows(_ curve: Curve) -> Bool { self == .compatible || !curve.isLegacy }

    /// Whether DES, DES3, DSA, DH and MD5 are offered (DSA and DH groups from 512 bits, as
    /// SoftHSM and OpenSSL take them).
    public var allowsLegacyAlgorithms: Bool { self == .compatible }

    /// Checks a secret key's type: DES keys are legacy, and single DES needs OpenSSL's legacy
    /// provider (without it a CKK_DES key could not even get its check value).
    func check(secretKeyType keyType: KeyType?) throws(KeychainError) {
        guard let keyType, [.des, .des2, .des3, .md5HMAC].contains(keyType) else { return }
        guard allowsLegacyAlgorithms else { throw KeychainError(.attributeValueInvalid, "DES and MD5-HMAC keys are refused by the \(rawValue) key policy") }
        guard keyType != .des || LegacyProvider.isInstalled else {
            throw KeychainError(.attributeValueInvalid, "single DES needs OpenSSL's legacy provider, which is not installed")
        }
    }

    /// Checks a key kind and (for RSA) size against the policy: a refused RSA size is
    /// CKR_KEY_SIZE_RANGE when generating, a bad CKA_MODULUS when importing; a refused curve is
    /// a bad CKA_EC_PARAMS.
    func check(_ kind: AsymmetricKind, bits: Int, generating: Bool, publicOnly: Bool = false) throws(KeychainError) {
        switch kind {
        case .rsa:
            let range = publicOnly ? rsaPublicBits : rsaBits
            guard range.contains(bits) else {
                throw KeychainError(generating ? .keySizeRange : .attributeValueInvalid,
                                    "RSA \(publicOnly ? "public " : "")keys of \(bits) bits are outside the \(rawValue) key policy (\(range.lowerBound)–\(range.upperBound))")
            }
        case .dsa, .dh:
            guard allowsLegacyAlgorithms else { throw KeychainError(generating ? .keySizeRange : .attributeValueInvalid, "DSA and DH keys are refused by the \(rawValue) key policy") }
        case .ec(let curve):
            guard allows(curve) else { throw KeychainError(.attributeValueInvalid, "the curve \(curve.rawValue) is refused by the \(rawValue) key policy") }
        default:
            break
        }
    }
}

/// Who may wrap a key whose value must never be seen (CKA_SENSITIVE = TRUE): the defence against
/// the key-management attacks of Clulow's "On the security of PKCS#11" and the Tookan tool
/// (wrap a sensitive key under a key the attacker knows, or wrap it and decrypt the blob, or wrap
/// and unwrap it as non-sensitive).
public enum SensitiveWrapping: String, Sendable, CaseIterable {
    /// Only a key the SO marked CKA_TRUSTED wraps a sensitive key; a trusted secret wrapping key
    /// must itself be sensitive and may never encrypt or decrypt data (else a C_Decrypt of the
    /// blob, or an encryption oracle, undoes the wrap). A key unwrapped with a trusted key is
    /// sensitive: the blob may hold a sensitive key.
    case trusted
    /// Any key with CKA_WRAP wraps any extractable key, as SoftHSM does. This re-opens the attacks
    /// above to anyone who can log in; it exists for applications that back up sensitive keys
    /// under a key they make themselves.
    case any
}

extension KeyPolicy {
    /// The usage flags a key gets when its template leaves them out: a key has key-transport
    /// roles (wrap, unwrap) *or* data roles (encrypt, decrypt), not both, unless the template
    /// asks for both explicitly. Without a wrap or unwrap request a key gets the data roles.
    /// Sets them on `object` (its usages in `given` stay as the template put them).
    static func applyRoleDefaults(_ typeDefaults: KeyValuePairs<AttributeType, Bool>, to object: inout ObjectAttributes, given: Set<AttributeType>) {
        // A trusted key is a key-transport key (the SO marks it to wrap sensitive keys).
        let transportAsked = (given.contains(.wrap) && object.bool(.wrap)) || (given.contains(.unwrap) && object.bool(.unwrap))
            || (given.contains(.trusted) && object.bool(.trusted))
        for (usage, enabled) in typeDefaults where !given.contains(usage) {
            switch usage {
            case .wrap, .unwrap: object[usage] = AttributeValue.bool(enabled && transportAsked)
            case .encrypt, .decrypt: object[usage] = AttributeValue.bool(enabled && !transportAsked)
            default: object[usage] = AttributeValue.bool(enabled)
            }
        }
    }
}

extension ObjectAttributes {
    /// A trusted secret key wraps sensitive keys, so it must never encrypt or decrypt data: a
    /// C_Decrypt of a wrapped blob (AES key wrap is AES rounds and XORs) would undo the wrap.
    func checkTrustedRoles() throws(KeychainError) {
        if objectClass == .secretKey, bool(.trusted), bool(.encrypt) || bool(.decrypt) {
            throw KeychainError(.templateInconsistent, "a trusted secret key wraps keys: it cannot also have CKA_ENCRYPT or CKA_DECRYPT")
        }
    }
}
