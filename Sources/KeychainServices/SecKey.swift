import Foundation
import KeychainCore
import KeychainCrypto

/// How a SecKeyAlgorithm signs: the scheme, whether the input is a message, and the signature form.
struct SignatureAlgorithm {
    let scheme: SignatureScheme
    /// ECDSA signatures in X9.62 DER (true) or RFC 4754 r‖s (false).
    let der: Bool
    let rsa: Bool

    static func named(_ name: String) -> SignatureAlgorithm? {
        let digests: [String: Digest.Algorithm] = ["SHA1": .sha1, "SHA224": .sha224, "SHA256": .sha256, "SHA384": .sha384, "SHA512": .sha512]
        let parts = name.split(separator: ":").map(String.init)
        guard parts.count >= 4, parts[0] == "algid", parts[1] == "sign" else { return nil }
        let digest = parts.count > 4 ? digests[parts[4]] : nil
        switch (parts[2], parts[3]) {
        case ("RSA", "digest-PKCS1v15"): return digest.map { SignatureAlgorithm(scheme: .rsaPKCS1Prehashed($0), der: false, rsa: true) }
        case ("RSA", "message-PKCS1v15"): return digest.map { SignatureAlgorithm(scheme: .rsaPKCS1(digest: $0), der: false, rsa: true) }
        case ("RSA", "digest-PSS"), ("RSA", "message-PSS"):
            guard let digest else { return nil }
            return SignatureAlgorithm(scheme: .rsaPSS(digest: digest, mgf1: digest, saltLength: digest.outputSize, hashesData: parts[3] == "message-PSS"),
                                      der: false, rsa: true)
        case ("ECDSA", "digest-X962"): return SignatureAlgorithm(scheme: .ecdsa(digest: nil), der: true, rsa: false)
        case ("ECDSA", "message-X962"): return digest.map { SignatureAlgorithm(scheme: .ecdsa(digest: $0), der: true, rsa: false) }
        case ("ECDSA", "digest-RFC4754"), ("ECDSA", "RFC4754"): return SignatureAlgorithm(scheme: .ecdsa(digest: nil), der: false, rsa: false)
        case ("ECDSA", "message-RFC4754"): return digest.map { SignatureAlgorithm(scheme: .ecdsa(digest: $0), der: false, rsa: false) }
        default: return nil
        }
    }
}

private func encryptionPadding(_ name: String) -> RSACipher.Padding? {
    let digests: [String: Digest.Algorithm] = ["SHA1": .sha1, "SHA224": .sha224, "SHA256": .sha256, "SHA384": .sha384, "SHA512": .sha512]
    if name == SecKeyAlgorithm.rsaEncryptionPKCS1.name { return .pkcs1 }
    let parts = name.split(separator: ":").map(String.init)
    guard parts.count == 5, parts[1] == "encrypt", parts[2] == "RSA", parts[3] == "OAEP", let digest = digests[parts[4]] else { return nil }
    return .oaep(digest: digest, mgf1: digest, label: [])
}

/// A key (Apple's SecKey): an OpenSSL key, its PKCS#11 attributes, and where it is stored.
/// A Secure Enclave key (made in the TPM) has its public half in `key` and its private half in
/// `enclave`, which signs and agrees keys inside the TPM.
public final class SecKey: NSObject, @unchecked Sendable {
    let key: AsymmetricKey
    let enclave: EnclaveKey?
    let attributes: ObjectAttributes
    /// For a stored key: its keychain and the authentication context it was fetched with (what a
    /// key that needs the PIN at every use checks again).
    let origin: (keychainPath: String, context: LAContext?)?
    /// Whether its per-use checks may ask the user (the fetching query's kSecUseAuthenticationUI
    /// and kSecUseOperationPrompt).
    let interaction: Interaction
    /// For a key sealed by an application password: its stored form, against which the context's
    /// application password is checked at each use.
    let sealed: ObjectAttributes?

    init(key: AsymmetricKey, enclave: EnclaveKey? = nil, attributes: ObjectAttributes, origin: (keychainPath: String, context: LAContext?)? = nil,
         sealed: ObjectAttributes? = nil, interaction: Interaction = Interaction(allowed: true, prompt: nil)) {
        self.key = key
        self.enclave = enclave
        var visible = attributes
        visible[.applicationPassword] = nil
        // Without the internal attributes, but knowing which strings were stored as Data.
        var callers = visible.forCallers
        callers[.dataTypedAttributes] = attributes[.dataTypedAttributes]
        self.attributes = callers
        self.origin = origin
        self.sealed = sealed
        self.interaction = interaction
    }

    /// Whether this is a private key: an OpenSSL private key, or a key in the TPM.
    var isPrivate: Bool { enclave != nil || key.isPrivate }

    /// The per-use check of a key with CKA_ALWAYS_AUTHENTICATE, the same key that PKCS#11 asks
    /// C_Login(CKU_CONTEXT_SPECIFIC) for: the keychain password of the context the key was
    /// fetched with is checked again (a wrong one counts toward the lock), or asked for through
    /// the prompt program when the fetch allowed interaction; a key sealed by an application
    /// password checks that password (and, with `.and` and user presence, the keychain's too).
    func confirmPresence() throws {
        guard attributes.bool(.alwaysAuthenticate) else { return }
        guard let origin else {
            throw ItemError(errSecInteractionNotAllowed, "this key asks for the PIN at every use: fetch it from the keychain")
        }
        if let sealed, sealed[.alternativeSeal] != nil {
            // User presence `.or` an application password: the context's password stands in.
            if let password = origin.context?.applicationPassword {
                try translateKeychain { () throws(KeychainError) in
                    try SecureBytes(password).withUnsafeBytes { (p: UnsafeRawBufferPointer) throws(KeychainError) in
                        try KeychainAccess.shared.checkAlternative(path: origin.keychainPath, sealed, applicationPassword: p)
                    }
                }
                return
            }
        } else if let sealed {
            // The application password is this key's per-use secret.
            let password = try origin.context?.applicationPassword
                ?? KeychainAccess.shared.askApplicationPassword(context: origin.context, interaction: interaction)
            _ = try translateKeychain { () throws(KeychainError) in
                try SecureBytes(password).withUnsafeBytes { (p: UnsafeRawBufferPointer) throws(KeychainError) in
                    try KeychainAccess.shared.reveal(path: origin.keychainPath, sealed, applicationPassword: p)
                }
            }
            origin.context?.keepApplicationPassword(password)
            guard !sealed.accessControlFlags.isDisjoint(with: .presence) else { return }
        }
        try KeychainAccess.shared.confirmPresence(keychainPath: origin.keychainPath, context: origin.context, interaction: interaction, what: "key")
    }
}

/// Sets an Apple-style error out-parameter.
func fail(_ error: UnsafeMutablePointer<Unmanaged<CFError>?>?, _ status: OSStatus, _ reason: String) {
    let nsError = NSError(domain: "NSOSStatusErrorDomain", code: Int(status), userInfo: [NSLocalizedDescriptionKey: reason])
    error?.pointee = Unmanaged.passRetained(nsError)
}

/// Attributes of a key as PKCS#11 sees them, for a key made or imported through this API:
/// a keychain item (item class "key"), extractable and not sensitive by default as on Apple
/// platforms, CKA_ID = application label (SHA-1 of the public key).
func keyObject(_ key: AsymmetricKey, extra: Template, uniqueID: [UInt8]) throws -> ObjectAttributes {
    let material = try translateKeychain { () throws(KeychainError) in try KeyFactory.generatedMaterial(key) }
    let objectClass: ObjectClass = key.isPrivate ? .privateKey : .publicKey
    let keyType: KeyType = key.kind == .rsa ? .rsa : .ec
    var template: Template = [(.objectClass, AttributeValue.ulong(objectClass.rawValue)), (.keyType, AttributeValue.ulong(keyType.rawValue)),
                              (.itemClass, AttributeValue.ulong(ItemClass.key.rawValue))]
    if key.isPrivate {
        // Apple's defaults, unless an access control (privateKeyUsage) says otherwise.
        for (type, value) in [(AttributeType.extractable, true), (.sensitive, false)] where !extra.contains(where: { $0.type == type }) {
            template.append((type, AttributeValue.bool(value)))
        }
    }
    template += (key.isPrivate ? material.privateKey : material.publicKey).map { ($0.key, $0.value) }
    for entry in extra where !template.contains(where: { $0.type == entry.type }) { template.append(entry) }
    return try translateKeychain { () throws(KeychainError) in try ObjectTemplate.create(template, uniqueID: uniqueID, policy: Configuration.current().keyPolicy) }
}

func translateKeychain<R>(_ body: () throws(KeychainError) -> R) throws -> R {
    do { return try body() } catch { throw ItemError(error) }
}

/// Creates a key pair (RSA 2048–8192, EC P-256/384/521); with kSecAttrIsPermanent it is stored
/// in the keychain (private and public key objects) and found later by its application tag.
public func SecKeyCreateRandomKey(_ parameters: CFDictionary, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> SecKey? {
    var dictionary: [String: Any] = [:]
    for (key, value) in parameters { if let key = ItemMapping.string(key) { dictionary[key] = value } }
    do {
        if let token = dictionary[kSecAttrTokenID as String] {
            guard ItemMapping.string(token) == kSecAttrTokenIDSecureEnclave as String else {
                throw ItemError(errSecParam, "kSecAttrTokenID: the only token here is kSecAttrTokenIDSecureEnclave (the TPM)")
            }
            return try createEnclaveKey(dictionary)
        }
        let type = dictionary[kSecAttrKeyType as String].flatMap(ItemMapping.string)
        let bits = dictionary[kSecAttrKeySizeInBits as String].flatMap(ItemMapping.integer) ?? 0
        let kind: AsymmetricKind
        if type == kSecAttrKeyTypeRSA as String {
            guard (2048...8192).contains(Int(bits)) else { throw ItemError(errSecParam, "RSA keys have 2048–8192 bits") }
            kind = .rsa
        } else if type == kSecAttrKeyTypeECSECPrimeRandom as String {
            guard let curve = [Curve.p256, .p384, .p521].first(where: { $0.bits == Int(bits) }) else { throw ItemError(errSecParam, "EC keys have 256, 384 or 521 bits") }
            kind = .ec(curve)
        } else {
            throw ItemError(errSecParam, "unsupported kSecAttrKeyType")
        }
        let privateAttributes = dictionary[kSecPrivateKeyAttrs as String] as? [String: Any] ?? [:]
        let permanent = (privateAttributes[kSecAttrIsPermanent as String] ?? dictionary[kSecAttrIsPermanent as String]).flatMap(ItemMapping.boolean) ?? false
        var extra: Template = []
        if let tag = (privateAttributes[kSecAttrApplicationTag as String] ?? dictionary[kSecAttrApplicationTag as String]) as? Data {
            extra.append((.applicationTag, Array(tag)))
        }
        if let label = (privateAttributes[kSecAttrLabel as String] ?? dictionary[kSecAttrLabel as String]).flatMap(ItemMapping.string) {
            extra.append((.label, Array(label.utf8)))
        }
        // kSecUseAuthenticationUI / kSecUseOperationPrompt among the parameters, as in a query.
        let ui = dictionary[kSecUseAuthenticationUI as String].flatMap(ItemMapping.string)
        let interaction = Interaction(allowed: ui == nil || ui == kSecUseAuthenticationUIAllow as String,
                                      prompt: dictionary[kSecUseOperationPrompt as String].flatMap(ItemMapping.string))
        var controlled: Template = []
        if let control = privateAttributes[kSecAttrAccessControl as String] ?? dictionary[kSecAttrAccessControl as String] {
            guard let control = control as? SecAccessControl else { throw ItemError(errSecParam, "kSecAttrAccessControl must be a SecAccessControl") }
            controlled = try control.attributes(for: .privateKey, context: dictionary[kSecUseAuthenticationContext as String] as? LAContext,
                                                interaction: interaction)
            if controlled.contains(where: { $0.type == .alwaysAuthenticate }), !permanent {
                throw ItemError(errSecParam, "user presence needs a permanent key (kSecAttrIsPermanent)")
            }
        }
        let key: AsymmetricKey
        do { key = try AsymmetricKey.generate(kind, bits: Int(bits)) } catch { throw ItemError(errSecIO, "key generation failed") }
        let uid = try UniqueID.random()
        if !controlled.contains(where: { $0.type == .accessible }),
           let name = (privateAttributes[kSecAttrAccessible as String] ?? dictionary[kSecAttrAccessible as String]).flatMap(ItemMapping.string) {
            guard let index = ItemMapping.accessibility.firstIndex(of: name) else { throw ItemError(errSecParam, "kSecAttrAccessible must be a kSecAttrAccessible value") }
            controlled.append((.accessible, AttributeValue.ulong(UInt(index + 1))))
        }
        let protection = controlled.first { $0.type == .accessible }.flatMap { AttributeValue.decodeULong($0.value) }.flatMap(ProtectionClass.init(rawValue:))
        let publicAttributes = dictionary[kSecPublicKeyAttrs as String] as? [String: Any] ?? [:]
        // kSecAttrSynchronizable: each half's own dictionary, else the top level (both halves).
        let syncPrivate = try synchronizable(privateAttributes, dictionary), syncPublic = try synchronizable(publicAttributes, dictionary)
        let flags = AccessControlFlags(rawValue: controlled.first { $0.type == .accessControl }.flatMap { AttributeValue.decodeULong($0.value) } ?? 0)
        if syncPrivate, let refusal = SyncRule.refusal(token: permanent, protection: protection, accessControl: flags, inTPM: false) {
            throw ItemError(errSecParam, refusal.reason)
        }
        if syncPublic, !permanent { throw ItemError(errSecParam, SyncRule.Refusal.sessionObject.reason) }
        let privateObject = try keyObject(key, extra: controlled + extra + [(.token, AttributeValue.bool(permanent)),
                                                                           (.isPrivate, AttributeValue.bool(protection?.needsLogin ?? true)),
                                                                           (.synchronizable, AttributeValue.bool(syncPrivate))],
                                          uniqueID: uid.text)
        let context = dictionary[kSecUseAuthenticationContext as String] as? LAContext
        var keychainPath: String?
        var sealedForm: ObjectAttributes?
        if permanent {
            try KeychainAccess.shared.with(label: nil, context: context) { keychain, master in
                keychainPath = keychain.path
                var master = master
                if master == nil { master = try KeychainAccess.shared.promptUnlock(keychain, context: context, interaction: interaction) }
                guard let master else { throw ItemError(errSecInteractionNotAllowed, "the keychain is locked") }
                let publicUID = try UniqueID.random()
                // The public half is stored too (PKCS#11 clients such as OpenSSH list public keys; it
                // pairs by CKA_ID), but with the tag and label of kSecPublicKeyAttrs only: a search by
                // the private key's tag finds the private key alone, as on Apple platforms.
                var publicExtra: Template = []
                if let tag = publicAttributes[kSecAttrApplicationTag as String] as? Data { publicExtra.append((.applicationTag, Array(tag))) }
                if let label = publicAttributes[kSecAttrLabel as String].flatMap(ItemMapping.string) { publicExtra.append((.label, Array(label.utf8))) }
                let publicObject = try keyObject(try key.publicKey(), extra: publicExtra + [(.token, AttributeValue.bool(true)),
                                                                                            (.synchronizable, AttributeValue.bool(syncPublic))],
                                                 uniqueID: publicUID.text)
                try translateKeychain { () throws(KeychainError) in
                    // An application password's scrypt runs before the write transaction.
                    let privateObject = try keychain.sealingApplicationPassword(privateObject)
                    try keychain.transaction { () throws(KeychainError) in
                        let id = try keychain.add(privateObject, uid: uid.bytes, master: master)
                        _ = try keychain.add(publicObject, uid: publicUID.bytes, master: master)
                        let stored = try keychain.object(id: id, master: master)
                        if stored.hasSealedSecrets { sealedForm = stored }
                    }
                }
            }
        }
        return SecKey(key: key, attributes: privateObject, origin: keychainPath.map { ($0, context) }, sealed: sealedForm)
    } catch let itemError as ItemError {
        fail(error, itemError.status, itemError.reason)
        return nil
    } catch let failure {
        fail(error, errSecIO, "\(failure)")
        return nil
    }
}

/// kSecAttrSynchronizable for one half of a new key pair: its own attribute dictionary's, else the
/// top level's (which names both halves); false when neither gives it. kSecAttrSynchronizableAny
/// is for searches (errSecParam).
func synchronizable(_ attributes: [String: Any], _ dictionary: [String: Any]) throws -> Bool {
    guard let value = attributes[kSecAttrSynchronizable as String] ?? dictionary[kSecAttrSynchronizable as String] else { return false }
    if ItemMapping.string(value) == kSecAttrSynchronizableAny as String { throw ItemError(errSecParam, "kSecAttrSynchronizableAny is for searches") }
    guard let flag = ItemMapping.boolean(value) else { throw ItemError(errSecParam, "kSecAttrSynchronizable must be a boolean") }
    return flag
}

/// A key from its external representation (RSA PKCS#1 DER, EC X9.63), not stored.
public func SecKeyCreateWithData(_ keyData: CFData, _ attributes: CFDictionary, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> SecKey? {
    var dictionary: [String: Any] = [:]
    for (key, value) in attributes { if let key = ItemMapping.string(key) { dictionary[key] = value } }
    let type = dictionary[kSecAttrKeyType as String].flatMap(ItemMapping.string)
    let keyClass = dictionary[kSecAttrKeyClass as String].flatMap(ItemMapping.string)
    guard type == kSecAttrKeyTypeRSA as String || type == kSecAttrKeyTypeECSECPrimeRandom as String,
          keyClass == kSecAttrKeyClassPrivate as String || keyClass == kSecAttrKeyClassPublic as String else {
        fail(error, errSecParam, "kSecAttrKeyType and kSecAttrKeyClass are required")
        return nil
    }
    do {
        let key = try AsymmetricKey.fromExternalRepresentation(Array(keyData as Data), rsa: type == kSecAttrKeyTypeRSA as String,
                                                               isPrivate: keyClass == kSecAttrKeyClassPrivate as String)
        var extra: Template = [(.isPrivate, AttributeValue.bool(key.isPrivate))]
        if let tag = dictionary[kSecAttrApplicationTag as String] as? Data { extra.append((.applicationTag, Array(tag))) }
        return SecKey(key: key, attributes: try keyObject(key, extra: extra, uniqueID: try UniqueID.random().text))
    } catch _ {
        fail(error, errSecDecode, "the data is not a key of that type and class")
        return nil
    }
}

/// The key's external representation; refused for keys stored as not extractable. A Secure
/// Enclave key's private half never leaves the TPM: errSecUnimplemented, as Apple answers.
public func SecKeyCopyExternalRepresentation(_ key: SecKey, _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData? {
    if key.enclave != nil {
        fail(error, errSecUnimplemented, "export not implemented for a Secure Enclave (TPM) key")
        return nil
    }
    if key.key.isPrivate, key.attributes[.extractable] != nil, !key.attributes.bool(.extractable) {
        fail(error, errSecParam, "the key is not extractable")
        return nil
    }
    if key.key.isPrivate {
        // A key that asks for the PIN at each use asks before it leaves, too.
        do { try key.confirmPresence() } catch let failure as ItemError {
            fail(error, failure.status, failure.reason)
            return nil
        } catch let failure {
            fail(error, errSecIO, "\(failure)")
            return nil
        }
    }
    do { return Data(try key.key.externalRepresentation().bytes) as NSData } catch let failure {
        fail(error, errSecParam, "\(failure)")
        return nil
    }
}

public func SecKeyCopyPublicKey(_ key: SecKey) -> SecKey? {
    guard let publicKey = try? key.isPrivate && key.enclave == nil ? key.key.publicKey() : key.key else { return nil }
    var extra: Template = [(.isPrivate, AttributeValue.bool(false))]
    for type in [AttributeType.label, .applicationTag] { if let value = key.attributes[type] { extra.append((type, value)) } }
    guard let uid = try? UniqueID.random(), let attributes = try? keyObject(publicKey, extra: extra, uniqueID: uid.text) else { return nil }
    return SecKey(key: publicKey, attributes: attributes)
}

/// kSecAttrKeyClass, kSecAttrKeyType, kSecAttrKeySizeInBits, kSecAttrApplicationLabel, tag, label…
public func SecKeyCopyAttributes(_ key: SecKey) -> CFDictionary? {
    var dictionary = keyAttributeDictionary(key.attributes)
    dictionary[kSecAttrKeySizeInBits as String] = NSNumber(value: keyBits(key.key))
    dictionary[kSecAttrEffectiveKeySize as String] = NSNumber(value: keyBits(key.key))
    if key.enclave != nil { dictionary[kSecAttrTokenID as String] = kSecAttrTokenIDSecureEnclave as String }
    return dictionary as NSDictionary
}

func keyBits(_ key: AsymmetricKey) -> Int {
    if case .ec(let curve) = key.kind { return curve.bits }
    return key.bits
}

func keyAttributeDictionary(_ attributes: ObjectAttributes) -> [String: Any] {
    var dictionary: [String: Any] = [kSecClass as String: kSecClassKey as String]
    let storedAsData = ItemMapping.storedAsData(attributes)
    for (key, mapping) in ItemMapping.mappings(for: .key) where mapping.kind != .keySize {
        guard let bytes = attributes[mapping.attribute],
              let value = ItemMapping.decode(bytes, as: mapping, storedAsData: storedAsData.contains(mapping.attribute)) else { continue }
        dictionary[key] = value
    }
    dictionary[kSecAttrIsPermanent as String] = NSNumber(value: attributes.isToken)
    if attributes.bool(.tpm) { dictionary[kSecAttrTokenID as String] = kSecAttrTokenIDSecureEnclave as String }
    return dictionary
}

/// The key's block size in bytes: the modulus for RSA, the field element for EC.
public func SecKeyGetBlockSize(_ key: SecKey) -> Int {
    (keyBits(key.key) + 7) / 8
}

public func SecKeyIsAlgorithmSupported(_ key: SecKey, _ operation: SecKeyOperationType, _ algorithm: SecKeyAlgorithm) -> Bool {
    let name = algorithm.name
    switch operation {
    case .sign: return key.isPrivate && SignatureAlgorithm.named(name).map { $0.rsa == (key.key.kind == .rsa) } == true
    case .verify: return SignatureAlgorithm.named(name).map { $0.rsa == (key.key.kind == .rsa) } == true
    case .encrypt: return key.key.kind == .rsa && encryptionPadding(name) != nil
    case .decrypt: return key.key.kind == .rsa && key.key.isPrivate && encryptionPadding(name) != nil
    case .keyExchange: return key.isPrivate && KeyExchangeAlgorithm.named(name) != nil && { if case .ec = key.key.kind { return true } else { return false } }()
    }
}

public enum SecKeyOperationType: Int, Sendable {
    case sign = 0, verify = 1, encrypt = 2, decrypt = 3, keyExchange = 4
}

public func SecKeyCreateSignature(_ key: SecKey, _ algorithm: SecKeyAlgorithm, _ dataToSign: CFData,
                                  _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData? {
    guard key.isPrivate, let chosen = SignatureAlgorithm.named(algorithm.name), chosen.rsa == (key.key.kind == .rsa) else {
        fail(error, errSecParam, "algorithm not supported for this key")
        return nil
    }
    do {
        try key.confirmPresence()
        if let enclave = key.enclave { return Data(try enclaveSignature(enclave, chosen, Array(dataToSign as Data))) as NSData }
        let operation = try SignatureOperation(key: key.key, scheme: chosen.scheme, signing: true)
        try Array(dataToSign as Data).withUnsafeBytes { try operation.update($0) }
        var signature = try operation.sign()
        if chosen.der, let der = SignatureOperation.ecdsaDER(fromRaw: signature, key: key.key) { signature = der }
        return Data(signature) as NSData
    } catch let itemError as ItemError {
        fail(error, itemError.status, itemError.reason)
        return nil
    } catch let failure {
        fail(error, errSecParam, "\(failure)")
        return nil
    }
}

public func SecKeyVerifySignature(_ key: SecKey, _ algorithm: SecKeyAlgorithm, _ signedData: CFData, _ signature: CFData,
                                  _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> Bool {
    guard let chosen = SignatureAlgorithm.named(algorithm.name), chosen.rsa == (key.key.kind == .rsa) else {
        fail(error, errSecParam, "algorithm not supported for this key")
        return false
    }
    do {
        let publicKey = key.key.isPrivate ? try key.key.publicKey() : key.key
        let operation = try SignatureOperation(key: publicKey, scheme: chosen.scheme, signing: false)
        try Array(signedData as Data).withUnsafeBytes { try operation.update($0) }
        var bytes = Array(signature as Data)
        if chosen.der {
            guard let raw = try? SignatureOperation.ecdsaRaw(fromDER: bytes, key: publicKey) else {
                fail(error, errSecVerifyFailed, "not an X9.62 signature")
                return false
            }
            bytes = raw
        }
        guard try operation.verify(bytes) else {
            fail(error, errSecVerifyFailed, "the signature does not verify")
            return false
        }
        return true
    } catch let failure {
        fail(error, errSecParam, "\(failure)")
        return false
    }
}

public func SecKeyCreateEncryptedData(_ key: SecKey, _ algorithm: SecKeyAlgorithm, _ plaintext: CFData,
                                      _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData? {
    guard key.key.kind == .rsa, let padding = encryptionPadding(algorithm.name) else {
        fail(error, errSecParam, "algorithm not supported for this key")
        return nil
    }
    do {
        let publicKey = key.key.isPrivate ? try key.key.publicKey() : key.key
        return Data(try RSACipher.encrypt(Array(plaintext as Data), key: publicKey, padding: padding)) as NSData
    } catch _ {
        fail(error, errSecParam, "the data does not fit this key and algorithm")
        return nil
    }
}

public func SecKeyCreateDecryptedData(_ key: SecKey, _ algorithm: SecKeyAlgorithm, _ ciphertext: CFData,
                                      _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> CFData? {
    guard key.key.kind == .rsa, key.key.isPrivate, let padding = encryptionPadding(algorithm.name) else {
        fail(error, errSecParam, "algorithm not supported for this key")
        return nil
    }
    do {
        try key.confirmPresence()
    } catch let itemError as ItemError {
        fail(error, itemError.status, itemError.reason)
        return nil
    } catch _ {
        fail(error, errSecAuthFailed, "authentication failed")
        return nil
    }
    do {
        return Data(try RSACipher.decrypt(Array(ciphertext as Data), key: key.key, padding: padding).bytes) as NSData
    } catch _ {
        fail(error, errSecDecode, "decryption failed")
        return nil
    }
}
