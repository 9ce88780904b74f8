import Foundation
import KeychainCore
import KeychainCrypto

// Secure Enclave keys (kSecAttrTokenID: kSecAttrTokenIDSecureEnclave) are made in the TPM
// (Docs/keychain-api.md, "Secure Enclave keys"). A key's TPM authorisation comes from the
// keychain's master key, so making or loading one needs the keychain unlocked — also for a key
// that is not stored (kSecAttrIsPermanent false).

/// CKM_EC_KEY_PAIR_GEN, the mechanism a TPM key's CKA_KEY_GEN_MECHANISM names (as PKCS#11 would).
private let ecKeyPairGeneration: UInt = 0x1040

/// SecKeyCreateRandomKey with kSecAttrTokenIDSecureEnclave: a P-256 key made in the TPM, stored
/// (private and public key objects, the private one as PKCS#11 sees a TPM key) when permanent.
func createEnclaveKey(_ dictionary: [String: Any]) throws -> SecKey {
    let type = dictionary[kSecAttrKeyType as String].flatMap(ItemMapping.string)
    let bits = dictionary[kSecAttrKeySizeInBits as String].flatMap(ItemMapping.integer)
    guard type == kSecAttrKeyTypeECSECPrimeRandom as String, bits == 256 else {
        throw ItemError(errSecParam, "the Secure Enclave makes 256-bit elliptic-curve keys (kSecAttrKeyTypeECSECPrimeRandom) only")
    }
    let privateAttributes = dictionary[kSecPrivateKeyAttrs as String] as? [String: Any] ?? [:]
    let publicAttributes = dictionary[kSecPublicKeyAttrs as String] as? [String: Any] ?? [:]
    if privateAttributes[kSecAttrTokenID as String] != nil || publicAttributes[kSecAttrTokenID as String] != nil {
        throw ItemError(errSecParam, "kSecAttrTokenID belongs in the top-level dictionary")
    }
    // A key in the Secure Enclave never syncs: errSecParam, as Apple answers, with or without a TPM.
    if try synchronizable(privateAttributes, dictionary) { throw ItemError(errSecParam, SyncRule.Refusal.inTPM.reason) }
    let syncPublic = try synchronizable(publicAttributes, [:])
    // No TPM: Apple's answer on a device without a Secure Enclave, before any unlock prompt.
    try SecureEnclaveAccess.requireTPM()
    func given(_ key: CFString) -> Any? { privateAttributes[key as String] ?? dictionary[key as String] }
    let permanent = given(kSecAttrIsPermanent).flatMap(ItemMapping.boolean) ?? false
    var extra: Template = [(.itemClass, AttributeValue.ulong(ItemClass.key.rawValue)), (.token, AttributeValue.bool(permanent))]
    if let tag = given(kSecAttrApplicationTag) as? Data { extra.append((.applicationTag, Array(tag))) }
    if let label = given(kSecAttrLabel).flatMap(ItemMapping.string) { extra.append((.label, Array(label.utf8))) }
    let ui = dictionary[kSecUseAuthenticationUI as String].flatMap(ItemMapping.string)
    let interaction = Interaction(allowed: ui == nil || ui == kSecUseAuthenticationUIAllow as String,
                                  prompt: dictionary[kSecUseOperationPrompt as String].flatMap(ItemMapping.string))
    let context = dictionary[kSecUseAuthenticationContext as String] as? LAContext
    var controlled: Template = []
    if let control = given(kSecAttrAccessControl) {
        guard let control = control as? SecAccessControl else { throw ItemError(errSecParam, "kSecAttrAccessControl must be a SecAccessControl") }
        if control.flags.contains(.applicationPassword) {
            throw ItemError(errSecParam, "an application password does not protect a Secure Enclave (TPM) key here: its authorisation is the keychain's")
        }
        controlled = try control.attributes(for: .privateKey, context: context, interaction: interaction)
        if controlled.contains(where: { $0.type == .alwaysAuthenticate }), !permanent {
            throw ItemError(errSecParam, "user presence needs a permanent key (kSecAttrIsPermanent)")
        }
    } else if let name = given(kSecAttrAccessible).flatMap(ItemMapping.string) {
        guard let index = ItemMapping.accessibility.firstIndex(of: name) else { throw ItemError(errSecParam, "kSecAttrAccessible must be a kSecAttrAccessible value") }
        controlled.append((.accessible, AttributeValue.ulong(UInt(index + 1))))
    }
    if !controlled.contains(where: { $0.type == .accessible }) { controlled.append((.accessible, AttributeValue.ulong(ProtectionClass.whenUnlocked.rawValue))) }
    let protection = controlled.first { $0.type == .accessible }.flatMap { AttributeValue.decodeULong($0.value) }.flatMap(ProtectionClass.init(rawValue:))
    let privateTemplate = controlled + extra + [(.isPrivate, AttributeValue.bool(protection?.needsLogin ?? true))]

    return try KeychainAccess.shared.with(label: nil, context: context) { keychain, master in
        var master = master
        if master == nil { master = try KeychainAccess.shared.promptUnlock(keychain, context: context, interaction: interaction) }
        guard let master else { throw ItemError(errSecInteractionNotAllowed, "the keychain is locked: a Secure Enclave key's authorisation comes from it") }
        let enclave = try translateKeychain { () throws(KeychainError) in try keychain.createEnclaveKey(.ecP256, master: master) }
        var publicTemplate: Template = [(.itemClass, AttributeValue.ulong(ItemClass.key.rawValue)), (.token, AttributeValue.bool(true)),
                                        (.isPrivate, AttributeValue.bool(false)), (.synchronizable, AttributeValue.bool(syncPublic))]
        if let tag = publicAttributes[kSecAttrApplicationTag as String] as? Data { publicTemplate.append((.applicationTag, Array(tag))) }
        if let label = publicAttributes[kSecAttrLabel as String].flatMap(ItemMapping.string) { publicTemplate.append((.label, Array(label.utf8))) }
        let publicUID = try UniqueID.random()
        let privateUID = try UniqueID.random()
        let (publicObject, privateObject) = try enclaveObjects(enclave, publicTemplate: publicTemplate, privateTemplate: privateTemplate,
                                                               uniqueIDs: (publicUID.text, privateUID.text))
        guard permanent else { return SecKey(key: enclave.publicKey, enclave: enclave, attributes: privateObject, interaction: interaction) }
        try translateKeychain { () throws(KeychainError) in
            try keychain.transaction { () throws(KeychainError) in
                _ = try keychain.add(privateObject, uid: privateUID.bytes, master: master)
                _ = try keychain.add(publicObject, uid: publicUID.bytes, master: master)
            }
        }
        return SecKey(key: enclave.publicKey, enclave: enclave, attributes: privateObject, origin: (keychain.path, context), interaction: interaction)
    }
}

/// The two objects of a TPM key (KeychainCore's `KeyGeneration.enclaveObjects`, the same that
/// C_GenerateKeyPair stores).
func enclaveObjects(_ enclave: EnclaveKey, publicTemplate: Template, privateTemplate: Template,
                    uniqueIDs: (public: [UInt8], private: [UInt8])) throws -> (publicKey: ObjectAttributes, privateKey: ObjectAttributes) {
    try translateKeychain { () throws(KeychainError) in
        let ecParams: Template = [(.ecParams, Curve.p256.oid)]
        let request = try KeyGeneration.request(keyType: .ec, publicTemplate: ecParams, privateTemplate: [], policy: Configuration.current().keyPolicy)
        return try KeyGeneration.enclaveObjects(for: enclave, request: request, mechanism: ecKeyPairGeneration, publicTemplate: publicTemplate,
                                                privateTemplate: privateTemplate, uniqueIDs: uniqueIDs, bySecurityOfficer: false)
    }
}

/// The SecKey of a stored key object: its OpenSSL key, or for a TPM key its public half and the
/// key loaded into the TPM (which needs the keychain's master key).
func storedKey(_ object: ObjectAttributes, keychain: Keychain, master: MasterKey?, context: LAContext?, interaction: Interaction,
               sealed: ObjectAttributes? = nil) throws -> SecKey {
    try translateKeychain { () throws(KeychainError) in
        guard let blob = try EnclaveKeyBlob(of: object) else {
            return SecKey(key: try KeyFactory.key(of: object), attributes: object, origin: (keychain.path, context), sealed: sealed, interaction: interaction)
        }
        guard let master else { throw KeychainError(.protectionUnavailable, "the keychain is locked: a Secure Enclave key's authorisation comes from it") }
        let enclave = try keychain.loadEnclaveKey(blob, master: master)
        return SecKey(key: enclave.publicKey, enclave: enclave, attributes: object, origin: (keychain.path, context), interaction: interaction)
    }
}

/// An ECDSA signature made in the TPM: the message hashed here (the message forms), the digest
/// fitted to the curve's 32 bytes as ECDSA does (a longer digest keeps its leftmost bytes, a
/// shorter one is the same integer in 32 bytes), r‖s from the TPM, DER for the X9.62 forms.
func enclaveSignature(_ enclave: EnclaveKey, _ algorithm: SignatureAlgorithm, _ input: [UInt8]) throws -> [UInt8] {
    guard case .ecdsa(let digest) = algorithm.scheme else { throw ItemError(errSecParam, "a Secure Enclave key makes ECDSA signatures only") }
    let hashed: [UInt8]
    do { hashed = try digest.map { try Digest.hash($0, input) } ?? input } catch { throw ItemError(errSecParam, "cannot hash the message") }
    let raw = try translateKeychain { () throws(KeychainError) in try enclave.signECDSA(hashed) }
    guard algorithm.der else { return raw }
    guard let der = SignatureOperation.ecdsaDER(fromRaw: raw, coordinateLength: 32) else { throw ItemError(errSecInternalComponent, "the TPM's signature has no DER form") }
    return der
}
