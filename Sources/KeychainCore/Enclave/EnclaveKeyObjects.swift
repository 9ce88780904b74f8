import KeychainCrypto
import KeychainTPM

extension KeyGeneration {
    /// Whether a private-key template asks for the key to be made in the TPM (CKA_KC_TPM TRUE).
    /// A value that is not a CK_BBOOL is `.attributeValueInvalid`.
    public static func asksForTPM(_ template: Template) throws(KeychainError) -> Bool {
        guard let value = template.first(where: { $0.type == .tpm })?.value else { return false }
        guard value.count == 1 else { throw KeychainError(.attributeValueInvalid, "CKA_KC_TPM is a CK_BBOOL") }
        return value[0] != 0
    }

    /// The TPM key type for a request: EC P-256 or P-384, RSA 2048 with exponent 65537 (the
    /// TPM's default). Other sizes and curves are `.attributeValueInvalid` (the TPM makes only these).
    public static func enclaveKeyType(_ request: Request) throws(KeychainError) -> TPMKeyType {
        switch request.kind {
        case .ec(.p256): return .ecP256
        case .ec(.p384): return .ecP384
        case .rsa:
            guard request.bits == 2048 else { throw KeychainError(.attributeValueInvalid, "CKA_KC_TPM: the TPM makes RSA keys of 2048 bits only") }
            if let exponent = request.publicExponent, Array(exponent.drop { $0 == 0 }) != [0x01, 0x00, 0x01] {
                throw KeychainError(.attributeValueInvalid, "CKA_KC_TPM: the TPM makes RSA keys with exponent 65537 only")
            }
            return .rsa2048
        default:
            throw KeychainError(.attributeValueInvalid, "CKA_KC_TPM: the TPM makes EC P-256, EC P-384 and RSA-2048 keys only")
        }
    }

    /// The two objects of a pair made in the TPM: as `objects(for:…)`, but the private key holds
    /// no key material — only its public parameters, CKA_KC_TPM TRUE and the TPM's wrapped key
    /// (internal) — and is never extractable and always sensitive (a template saying otherwise
    /// is `.templateInconsistent`). CKA_LOCAL, CKA_NEVER_EXTRACTABLE and CKA_ALWAYS_SENSITIVE are TRUE.
    public static func enclaveObjects(for key: EnclaveKey, request: Request, mechanism: UInt, publicTemplate: Template, privateTemplate: Template,
                                      uniqueIDs: (public: [UInt8], private: [UInt8]),
                                      bySecurityOfficer: Bool) throws(KeychainError) -> (publicKey: ObjectAttributes, privateKey: ObjectAttributes) {
        for (type, required) in [(AttributeType.extractable, false), (.sensitive, true)] {
            if let value = privateTemplate.first(where: { $0.type == type })?.value, value.count == 1, (value[0] != 0) != required {
                throw KeychainError(.templateInconsistent, "a TPM key is never extractable and always sensitive")
            }
        }
        // The TPM signs and agrees keys with it, nothing else: a template asking it to decrypt,
        // unwrap or recover is inconsistent, and those roles are FALSE rather than defaulted.
        let impossible: [AttributeType] = [.decrypt, .unwrap, .signRecover]
        if let asked = privateTemplate.first(where: { impossible.contains($0.type) && $0.value != AttributeValue.bool(false) }) {
            throw KeychainError(.templateInconsistent, "a key in the TPM cannot \(asked.type == .decrypt ? "decrypt" : asked.type == .unwrap ? "unwrap" : "sign with recovery")")
        }
        if publicTemplate.contains(where: { $0.type == .tpm }) {
            throw KeychainError(.templateInconsistent, "CKA_KC_TPM belongs in the private key's template")
        }
        let heldByTPM: Set<AttributeType> = [.value, .privateExponent]
        let material = try KeyFactory.generatedMaterial(key.publicKey)
        let parameters = material.publicKey.filter { [.ecParams, .modulus, .publicExponent].contains($0.key) }
        let enclave: Template = [(.extractable, AttributeValue.bool(false)), (.sensitive, AttributeValue.bool(true))]
        let privateFull = privateTemplate.filter { !([AttributeType.extractable, .sensitive, .tpm] + impossible).contains($0.type) } + enclave
            + impossible.map { ($0, AttributeValue.bool(false)) }
        var pair = try objects(publicKey: key.publicKey, material: (material.publicKey, parameters), request: request, mechanism: mechanism,
                               publicTemplate: publicTemplate, privateTemplate: privateFull, uniqueIDs: uniqueIDs, bySecurityOfficer: bySecurityOfficer,
                               heldElsewhere: heldByTPM)
        // Not even an empty default (CKA_VALUE has one): the TPM holds these.
        for type in heldByTPM { pair.privateKey[type] = nil }
        pair.privateKey[.tpm] = AttributeValue.bool(true)
        pair.privateKey[.tpmBlob] = key.blob.bytes
        return pair
    }
}
