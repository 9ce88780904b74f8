import Foundation
import KeychainCore
import KeychainCrypto

// The Keychain Services item functions, with Apple's semantics (Docs/keychain-api.md lists the
// differences). Passwords are CKO_DATA objects on the same keychain the PKCS#11 module serves.

/// Adds an item; `result` receives what the kSecReturn… keys ask for.
public func SecItemAdd(_ attributes: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    SecItemAdd(dictionary(attributes), result)
}

public func SecItemAdd(_ attributes: [String: Any], _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    run {
        let query = try ItemQuery(attributes)
        guard query.limit == nil, query.persistentRef == nil, !query.hasMatchKeys, query.itemList == nil else {
            throw ItemError(errSecParam, "search keys are not allowed when adding")
        }
        if case .any? = query.synchronizable { throw ItemError(errSecParam, "kSecAttrSynchronizableAny is for searches") }
        // As securityd: a synchronizable item that could not leave this device is errSecParam,
        // before the keychain is opened or anyone asked (the keychain checks the stored object too).
        if case .only(true)? = query.synchronizable, let refusal = query.syncRefusal { throw ItemError(errSecParam, refusal.reason) }
        if query.onlyTokenItems, (query.valueReference as? SecKey)?.enclave == nil {
            throw ItemError(errSecParam, "kSecAttrTokenID: nothing can be imported into the Secure Enclave (TPM); make the key there with SecKeyCreateRandomKey")
        }
        return try KeychainAccess.shared.with(label: query.keychainLabel, context: query.context) { keychain, master in
            let uid = try UniqueID.random()
            let object = ItemMapping.recordingStoredTypes(try newObject(query, uniqueID: uid.text), asData: query.givenAsData)
            var master = master
            if object.isPrivate, master == nil { master = try KeychainAccess.shared.promptUnlock(keychain, query) }
            if object.isPrivate, master == nil { throw ItemError(errSecInteractionNotAllowed, "the keychain is locked") }
            let id = try translate { () throws(KeychainError) in try keychain.add(object, uid: uid.bytes, master: master) }
            guard query.returnCount > 0 else { return nil }
            let stored = try translate { () throws(KeychainError) in try keychain.object(id: id, master: master) }
            return try shape([stored], query: query, limit: .one, keychain: keychain, master: master)
        }
    } store: { value in result?.pointee = value }
}

/// Finds items; `result` receives the value, dictionary or array kSecReturn… and kSecMatchLimit
/// ask for. No match is errSecItemNotFound, never an empty array.
public func SecItemCopyMatching(_ query: CFDictionary, _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    SecItemCopyMatching(dictionary(query), result)
}

public func SecItemCopyMatching(_ query: [String: Any], _ result: UnsafeMutablePointer<CFTypeRef?>?) -> OSStatus {
    run {
        let given = try ItemQuery(query)
        return try KeychainAccess.shared.with(label: given.keychainLabel, context: given.context) { keychain, master in
            var master = master
            let parsed = try given.resolvingClass(in: keychain, master: &master)
            if parsed.isIdentity {
                if master == nil { master = try KeychainAccess.shared.promptUnlock(keychain, parsed) }
                return try identities(parsed, keychain: keychain, master: master)
            }
            let several = parsed.limit != nil && parsed.limit != .one
            let found = try matchesUnlocking(parsed, keychain: keychain, master: &master, several: several)
            guard parsed.returnCount > 0 else { return nil }
            // Items whose per-use check would need the user are left out under kSecUseAuthenticationUISkip.
            let opened = try found.compactMap { (id, object) in try withSecret(object, query: parsed, keychain: keychain).map { (id, $0) } }
            guard !opened.isEmpty else { throw ItemError(errSecItemNotFound, "no item matches without authentication") }
            return try shape(opened, query: parsed, limit: parsed.limit ?? .one, keychain: keychain, master: master)
        }
    } store: { value in result?.pointee = value }
}

/// Changes every matching item. The query may not carry search keys (kSecMatch…, kSecReturn…).
public func SecItemUpdate(_ query: CFDictionary, _ attributesToUpdate: CFDictionary) -> OSStatus {
    SecItemUpdate(dictionary(query), dictionary(attributesToUpdate))
}

public func SecItemUpdate(_ query: [String: Any], _ attributesToUpdate: [String: Any]) -> OSStatus {
    run {
        let given = try ItemQuery(query)
        guard !given.hasSearchKeys, !given.hasMatchKeys else { throw ItemError(errSecParam, "SecItemUpdate takes no search keys") }
        guard attributesToUpdate[kSecClass as String] == nil else { throw ItemError(errSecParam, "kSecClass cannot be updated") }
        // The changes are read for the item class; a query that names its item by persistent
        // reference alone learns the class from the item.
        let known: ItemChanges? = try given.isAwaitingClass ? nil : ItemChanges(attributesToUpdate, itemClass: given.itemClass)
        return try KeychainAccess.shared.with(label: given.keychainLabel, context: given.context) { keychain, master in
            var master = master
            let parsed = try given.resolvingClass(in: keychain, master: &master)
            let changes = try known ?? ItemChanges(attributesToUpdate, itemClass: parsed.itemClass)
            let newProtection = changes.newProtection
            var all = parsed
            all.limit = .all
            let found = try matchesUnlocking(all, keychain: keychain, master: &master)
            // Each item's new form is made before the write transaction: a new secret for an item
            // sealed by an application password needs that password (the context's, else the
            // prompt's) checked against the old seal — with `.and` user presence too — and the new
            // secret sealed under it, both scrypt, which no transaction waits for.
            var planned: [(id: Int64, object: ObjectAttributes)] = []
            for (id, object) in found {
                var base = object
                var password: [UInt8]?
                if object.hasSealedSecrets, changes.updates.contains(where: { $0.type == .value }) {
                    let presented = try parsed.context?.applicationPassword
                        ?? KeychainAccess.shared.askApplicationPassword(context: parsed.context, interaction: parsed.interaction)
                    base = try translate { () throws(KeychainError) in
                        try SecureBytes(presented).withUnsafeBytes { (p: UnsafeRawBufferPointer) throws(KeychainError) in try keychain.reveal(object, applicationPassword: p) }
                    }
                    parsed.context?.keepApplicationPassword(presented)
                    if !object.accessControlFlags.isDisjoint(with: .presence) {
                        try KeychainAccess.shared.confirmPresence(keychain: keychain, context: parsed.context, interaction: parsed.interaction, what: "item")
                    }
                    password = presented
                }
                var updated = try translate { () throws(KeychainError) in try ObjectTemplate.set(changes.updates, on: base) }
                updated = ItemMapping.recordingStoredTypes(updated, asData: changes.givenAsData, asText: changes.givenAsText)
                if let newProtection {
                    guard !object.bool(.alwaysAuthenticate) || newProtection.needsLogin else {
                        throw ItemError(errSecParam, "a key that asks for the PIN at each use cannot become usable without login")
                    }
                    updated[.accessible] = AttributeValue.ulong(newProtection.rawValue)
                    updated[.isPrivate] = AttributeValue.bool(newProtection.needsLogin)
                }
                // Making an item synchronizable that cannot leave this device, or binding a
                // synchronizable item to it, is errSecParam; nothing is changed.
                if let refusal = updated.syncRefusal(changing: object) { throw ItemError(errSecParam, refusal.reason) }
                if var secret = password {
                    updated[.applicationPassword] = secret
                    wipe(&secret)
                    updated = try translate { () throws(KeychainError) in try keychain.sealingApplicationPassword(updated) }
                }
                planned.append((id, updated))
            }
            try translate { () throws(KeychainError) in
                // All or nothing: one write transaction (a duplicate part-way undoes the rest).
                try keychain.transaction { () throws(KeychainError) in
                    for (id, updated) in planned {
                        try keychain.replace(id: id, with: updated, master: master, allowingPrivateChange: newProtection != nil)
                    }
                }
            }
            return nil
        }
    } store: { _ in }
}

/// SecItemUpdate's attributes to change, read for an item class: the PKCS#11 attributes to set,
/// a new protection class (applied apart, as PKCS#11 has no such change in place), and which
/// string attributes come as Data and which as strings.
private struct ItemChanges {
    let updates: Template
    let newProtection: ProtectionClass?
    let givenAsData: Set<AttributeType>
    let givenAsText: Set<AttributeType>

    init(_ attributesToUpdate: [String: Any], itemClass: ItemClass) throws {
        let changes = try ItemQuery(attributesToUpdate, requireClass: false, defaultClass: itemClass)
        guard !changes.hasSearchKeys, !changes.hasMatchKeys, changes.persistentRef == nil, changes.context == nil, changes.keychainLabel == nil,
              changes.valueReference == nil, changes.operationPrompt == nil, changes.itemList == nil else {
            throw ItemError(errSecParam, "only attributes and kSecValueData can be updated")
        }
        if case .any? = changes.synchronizable { throw ItemError(errSecParam, "kSecAttrSynchronizableAny is for searches") }
        var updates = changes.attributes
        if updates.contains(where: { $0.type == .tpm }) { throw ItemError(errSecParam, "kSecAttrTokenID cannot be updated: a key is made in the TPM or not") }
        if let data = changes.valueData { updates.append((.value, data)) }
        // A new kSecAttrAccessible moves the item to another protection class (and so, possibly,
        // between private and public).
        newProtection = updates.first { $0.type == .accessible }.flatMap { AttributeValue.decodeULong($0.value) }.flatMap(ProtectionClass.init(rawValue:))
        updates.removeAll { $0.type == .accessible }
        if changes.accessControl != nil { throw ItemError(errSecParam, "kSecAttrAccessControl cannot be updated: delete and add the item") }
        self.updates = updates
        givenAsData = changes.givenAsData
        givenAsText = changes.givenAsText
    }
}

/// Deletes the matching items: every one, unless kSecMatchLimit says otherwise as macOS allows
/// (…One deletes one, a number up to that many). No other search key is taken.
public func SecItemDelete(_ query: CFDictionary) -> OSStatus {
    SecItemDelete(dictionary(query))
}

public func SecItemDelete(_ query: [String: Any]) -> OSStatus {
    run {
        let given = try ItemQuery(query)
        guard given.returnCount == 0, !given.hasMatchKeys else { throw ItemError(errSecParam, "SecItemDelete takes no kSecReturn… or kSecMatch… search keys") }
        return try KeychainAccess.shared.with(label: given.keychainLabel, context: given.context) { keychain, master in
            var master = master
            var scoped = try given.resolvingClass(in: keychain, master: &master)
            scoped.limit = scoped.limit ?? .all
            for (id, _) in try matchesUnlocking(scoped, keychain: keychain, master: &master) {
                try translate { () throws(KeychainError) in try keychain.remove(id: id, master: master) }
            }
            return nil
        }
    } store: { _ in }
}

// MARK: helpers

/// The object SecItemAdd stores for a query: a password item, a key (kSecValueRef or
/// kSecValueData with kSecAttrKeyType/kSecAttrKeyClass), or a certificate.
private func newObject(_ query: ItemQuery, uniqueID: [UInt8]) throws -> ObjectAttributes {
    let common: Template = [(.token, AttributeValue.bool(true)), (.itemClass, AttributeValue.ulong(query.itemClass.rawValue))]
    var accessibility: Template = []
    if let control = query.accessControl {
        if query.itemClass != .key {
            accessibility = try control.attributes(for: query.itemClass == .certificate ? .certificate : .password, context: query.context, interaction: query.interaction)
        }
    }
    /// The item's protection class: given, or Apple's default (WhenUnlocked; Always for
    /// certificates and public keys, which OpenSSH and others read without login).
    func protection(defaultClass: ProtectionClass, controlled: Template = []) -> (template: Template, isPrivate: Bool) {
        let given = (controlled + accessibility + query.attributes).first { $0.type == .accessible }.flatMap { AttributeValue.decodeULong($0.value) }
        let resolved = given.flatMap(ProtectionClass.init(rawValue:)) ?? defaultClass
        let extra: Template = given == nil ? [(.accessible, AttributeValue.ulong(resolved.rawValue))] : []
        return (accessibility + extra, resolved.needsLogin)
    }
    let settable = query.attributes.filter { ![.objectClass, .keyType].contains($0.type) }
    switch query.itemClass {
    case .genericPassword, .internetPassword:
        let (accessibility, isPrivate) = protection(defaultClass: .whenUnlocked)
        let template: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue)), (.isPrivate, AttributeValue.bool(isPrivate)),
                                  (.value, query.valueData ?? [])] + common + accessibility + query.attributes
        return try translate { () throws(KeychainError) in try ObjectTemplate.create(template, uniqueID: uniqueID, policy: Configuration.current().keyPolicy) }
    case .key:
        let key: AsymmetricKey
        if let reference = query.valueReference as? SecKey, let enclave = reference.enclave {
            return try enclaveItem(enclave, query: query, uniqueID: uniqueID)
        } else if let reference = query.valueReference as? SecKey {
            key = reference.key
        } else if let data = query.valueData {
            let type = query.attributes.first { $0.type == .keyType }.flatMap { AttributeValue.decodeULong($0.value) }
            let objectClass = query.attributes.first { $0.type == .objectClass }.flatMap { AttributeValue.decodeULong($0.value) }
            guard let type, let objectClass, objectClass != ObjectClass.secretKey.rawValue else {
                throw ItemError(errSecParam, "a key given as data needs kSecAttrKeyType and kSecAttrKeyClass")
            }
            do {
                key = try AsymmetricKey.fromExternalRepresentation(data, rsa: type == KeyType.rsa.rawValue, isPrivate: objectClass == ObjectClass.privateKey.rawValue)
            } catch { throw ItemError(errSecDecode, "the data is not a key of that type and class") }
        } else {
            throw ItemError(errSecParam, "a key item needs kSecValueRef or kSecValueData")
        }
        // Private keys are private items by default (sealed with the master key); public keys
        // stay readable without unlocking, as on Apple platforms.
        let controlled = try query.accessControl?.attributes(for: key.isPrivate ? .privateKey : .publicKey, context: query.context, interaction: query.interaction) ?? []
        let (accessibility, isPrivate) = protection(defaultClass: key.isPrivate ? .whenUnlocked : .always, controlled: controlled)
        return try keyObject(key, extra: controlled + common + accessibility + settable + [(.isPrivate, AttributeValue.bool(isPrivate))], uniqueID: uniqueID)
    case .certificate:
        let der: [UInt8]
        if let reference = query.valueReference as? SecCertificate { der = reference.der } else if let data = query.valueData { der = data } else {
            throw ItemError(errSecParam, "a certificate item needs kSecValueRef or kSecValueData")
        }
        let template: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.certificate.rawValue)),
                                  (.certificateType, AttributeValue.ulong(CertificateType.x509.rawValue)), (.value, der)]
            + common + protection(defaultClass: .always).template + settable.filter { ![.subject, .issuer, .serialNumber].contains($0.type) }
        return try translate { () throws(KeychainError) in try ObjectTemplate.create(template, uniqueID: uniqueID, policy: Configuration.current().keyPolicy) }
    }
}

/// SecItemAdd of a Secure Enclave key that was not stored (kSecAttrIsPermanent false): its private
/// key object, as a permanent one would have been stored. Its TPM authorisation is the default
/// keychain's, so it can be added there only.
private func enclaveItem(_ enclave: EnclaveKey, query: ItemQuery, uniqueID: [UInt8]) throws -> ObjectAttributes {
    let controlled = try query.accessControl?.attributes(for: .privateKey, context: query.context, interaction: query.interaction) ?? []
    if controlled.contains(where: { $0.type == .applicationPassword }) {
        throw ItemError(errSecParam, "an application password does not protect a Secure Enclave (TPM) key here")
    }
    var template = controlled + query.attributes.filter { ![.objectClass, .keyType, .tpm, .extractable, .sensitive].contains($0.type) }
        + [(.itemClass, AttributeValue.ulong(ItemClass.key.rawValue)), (.token, AttributeValue.bool(true))]
    if !template.contains(where: { $0.type == .accessible }) { template.append((.accessible, AttributeValue.ulong(ProtectionClass.whenUnlocked.rawValue))) }
    let protection = template.first { $0.type == .accessible }.flatMap { AttributeValue.decodeULong($0.value) }.flatMap(ProtectionClass.init(rawValue:))
    template.append((.isPrivate, AttributeValue.bool(protection?.needsLogin ?? true)))
    return try enclaveObjects(enclave, publicTemplate: [], privateTemplate: template, uniqueIDs: (try UniqueID.random().text, uniqueID)).privateKey
}

/// `matches`, and when the keychain is locked and that finds nothing readable, once more after
/// the prompt unlocked it (`KeychainAccess.promptUnlock`); `master` is then the unlocked key.
private func matchesUnlocking(_ query: ItemQuery, keychain: Keychain, master: inout MasterKey?, several: Bool = false) throws -> [(Int64, ObjectAttributes)] {
    // A search for more than one result: a locked pass would return only what needs no login.
    if several, master == nil, query.itemClass != .certificate, !query.asksOnlyForPublicKeys {
        master = try KeychainAccess.shared.promptUnlock(keychain, query)
    }
    do {
        return try matches(query, keychain: keychain, master: master)
    } catch let error as ItemError where master == nil && query.itemClass != .certificate
        && (error.status == errSecItemNotFound || error.status == errSecInteractionNotAllowed) {
        guard let unlocked = try KeychainAccess.shared.promptUnlock(keychain, query) else { throw error }
        master = unlocked
        return try matches(query, keychain: keychain, master: unlocked)
    }
}

/// The items matching a query, with their ids, honouring the match limit.
private func matches(_ query: ItemQuery, keychain: Keychain, master: MasterKey?) throws -> [(Int64, ObjectAttributes)] {
    if query.persistentRef != nil, PersistentReference.uniqueID(query.persistentRef ?? []) == nil {
        throw ItemError(errSecItemNotFound, "not a persistent reference of this keychain")
    }
    let rows = try translate { () throws(KeychainError) in try keychain.find(query.searchTemplate, master: master) }
    var found: [(Int64, ObjectAttributes)] = []
    let wanted: Int
    switch query.limit ?? .one {
    case .one: wanted = 1
    case .all: wanted = Int.max
    case .count(let count): wanted = count
    }
    for row in rows where found.count < wanted {
        if let object = try? keychain.object(id: row.id, master: master), query.admits(object) { found.append((row.id, object)) }
    }
    guard !found.isEmpty else {
        // While locked only items usable without a login are searched (Always, AfterFirstUnlock
        // after a first unlock, certificates, public keys): a password may be among the others.
        if master == nil, query.authenticationUI != .skip, query.itemClass != .certificate, !query.asksOnlyForPublicKeys {
            throw ItemError(errSecInteractionNotAllowed, "the keychain is locked")
        }
        throw ItemError(errSecItemNotFound, "no item matches")
    }
    return found
}

/// The item with its secret readable when the query asks for it (kSecReturnData, or a key
/// reference) and the item's access control asks for a credential: user presence is the keychain
/// password again (the context's, checked and counted; else the prompt when the query allows it),
/// an application password the context's credential (else the prompt). nil: the item is left out
/// (kSecUseAuthenticationUISkip). Without any way to ask it is errSecInteractionNotAllowed, as on
/// Apple platforms when no UI may be shown.
private func withSecret(_ object: ObjectAttributes, query: ItemQuery, keychain: Keychain) throws -> ObjectAttributes? {
    let needsSecret = query.returnData || (query.itemClass == .key && query.returnReference)
    guard needsSecret else { return object }
    /// The keychain password presented for this read.
    func presentPIN(_ what: String) throws -> Bool {
        if query.authenticationUI == .skip, query.context?.password(for: keychain.path) == nil,
           !(query.context?.authenticationIsFresh(for: keychain.path) ?? false) { return false }
        try KeychainAccess.shared.confirmPresence(keychain: keychain, context: query.context, interaction: query.interaction, what: what)
        return true
    }
    switch object.requiredCredential {
    case .none:
        // An extractable key that asks for the PIN at each use asks before it leaves.
        if query.itemClass == .key, query.returnData, object.bool(.alwaysAuthenticate) { return try presentPIN("key") ? object : nil }
        return object
    case .userPIN:
        // User presence `.or` an application password: the context's password stands in.
        if object[.alternativeSeal] != nil, let password = query.context?.applicationPassword {
            try translate { () throws(KeychainError) in
                try SecureBytes(password).withUnsafeBytes { (p: UnsafeRawBufferPointer) throws(KeychainError) in try keychain.checkAlternative(object, applicationPassword: p) }
            }
            return object
        }
        return try presentPIN("item") ? object : nil
    case .applicationPassword:
        var password = query.context?.applicationPassword
        if password == nil {
            if query.authenticationUI == .skip { return nil }
            password = try KeychainAccess.shared.askApplicationPassword(context: query.context, interaction: query.interaction)
        }
        guard let password else { throw ItemError(errSecInteractionNotAllowed, "this item asks for its application password") }
        // `.and` with user presence: the keychain password as well.
        if !object.accessControlFlags.isDisjoint(with: .presence), try !presentPIN("item") { return nil }
        var revealed = try translate { () throws(KeychainError) in
            try SecureBytes(password).withUnsafeBytes { (p: UnsafeRawBufferPointer) throws(KeychainError) in try keychain.reveal(object, applicationPassword: p) }
        }
        // Only a password that opened the item stays on the context.
        query.context?.keepApplicationPassword(password)
        // Keys keep their sealed form beside the secret, to check the password at each use.
        if query.itemClass == .key {
            revealed[.sealedSecrets] = object[.sealedSecrets]
            revealed[.applicationPasswordKDF] = object[.applicationPasswordKDF]
        }
        return revealed
    }
}

/// Apple's result shapes: one return type → that value; several → a dictionary; a limit other
/// than one → an array of those.
private func shape(_ items: [(Int64, ObjectAttributes)], query: ItemQuery, limit: ItemQuery.Limit, keychain: Keychain, master: MasterKey?) throws -> AnyObject? {
    try shape(items.map(\.1), query: query, limit: limit, keychain: keychain, master: master)
}

/// A Secure Enclave (TPM) key found by a reference query is loaded into the TPM with `master`.
private func shape(_ objects: [ObjectAttributes], query: ItemQuery, limit: ItemQuery.Limit, keychain: Keychain, master: MasterKey?) throws -> AnyObject? {
    let mappings = ItemMapping.mappings(for: query.itemClass)
    func one(_ object: ObjectAttributes) throws -> AnyObject {
        var dictionary: [String: Any] = [:]
        var data = Data(object[.value] ?? [])
        var reference: AnyObject = PersistentReference.make(object) as NSData
        switch query.itemClass {
        case .genericPassword, .internetPassword:
            if query.returnAttributes {
                dictionary[kSecClass as String] = query.itemClass == .genericPassword ? kSecClassGenericPassword as String : kSecClassInternetPassword as String
                let storedAsData = ItemMapping.storedAsData(object)
                for (key, mapping) in mappings {
                    guard let bytes = object[mapping.attribute],
                          let value = ItemMapping.decode(bytes, as: mapping, storedAsData: storedAsData.contains(mapping.attribute)) else { continue }
                    if ItemMapping.isUnsetByApple(bytes, as: mapping) { continue }
                    dictionary[key] = value
                }
            }
        case .key:
            // A key still sealed by its application password shows its public half only.
            let sealed = object.hasSealedSecrets && object[.privateExponent] == nil && object[.value] == nil
            let inTPM = object.bool(.tpm)
            let key = try translate { () throws(KeychainError) in
                sealed || inTPM ? try KeyFactory.publicKey(of: object) : try KeyFactory.key(of: object)
            }
            if query.returnAttributes {
                dictionary = keyAttributeDictionary(object)
                dictionary[kSecAttrKeySizeInBits as String] = NSNumber(value: keyBits(key))
            }
            if query.returnData {
                guard !key.isPrivate && !inTPM || object.bool(.extractable) else { throw ItemError(errSecItemNotFound, "the key is not extractable") }
                data = Data(try key.externalRepresentation().bytes)
            }
            if !sealed, query.returnReference {
                reference = try storedKey(object, keychain: keychain, master: master, context: query.context, interaction: query.interaction,
                                          sealed: object.hasSealedSecrets || object[.alternativeSeal] != nil ? object : nil)
            }
        case .certificate:
            let certificate = try Certificate(der: object[.value] ?? [])
            if query.returnAttributes { dictionary = certificateAttributeDictionary(object) }
            reference = SecCertificate(der: object[.value] ?? [], parsed: certificate, attributes: object)
        }
        if query.returnAttributes { dictionary[kSecAttrPersistentReference as String] = PersistentReference.make(object) }
        if query.returnCount == 1 {
            if query.returnData { return data as NSData }
            if query.returnReference { return reference }
            if query.returnPersistentReference { return PersistentReference.make(object) as NSData }
            return dictionary as NSDictionary
        }
        if query.returnData { dictionary[kSecValueData as String] = data }
        if query.returnPersistentReference { dictionary[kSecValuePersistentRef as String] = PersistentReference.make(object) }
        if query.returnReference { dictionary[kSecValueRef as String] = reference }
        return dictionary as NSDictionary
    }
    if limit == .one, let first = objects.first { return try one(first) }
    return try objects.map(one) as NSArray
}

/// kSecClassIdentity: certificates that have a private key with the same CKA_ID.
private func identities(_ query: ItemQuery, keychain: Keychain, master: MasterKey?) throws -> AnyObject? {
    var all = query
    all.limit = .all
    var found: [SecIdentity] = []
    for (_, object) in try matches(all, keychain: keychain, master: master) {
        guard let id = object[.id], !id.isEmpty, let certificate = try? Certificate(der: object[.value] ?? []) else { continue }
        let keyTemplate: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.privateKey.rawValue)), (.id, id)]
        let keys = try translate { () throws(KeychainError) in try keychain.find(keyTemplate, master: master) }
        guard let keyRow = keys.first, let keyObject = try? keychain.object(id: keyRow.id, master: master),
              let key = try? storedKey(keyObject, keychain: keychain, master: master, context: query.context, interaction: query.interaction) else { continue }
        found.append(SecIdentity(certificate: SecCertificate(der: object[.value] ?? [], parsed: certificate, attributes: object), privateKey: key))
    }
    guard !found.isEmpty else { throw ItemError(errSecItemNotFound, "no certificate has its private key") }
    let limited: [SecIdentity]
    switch query.limit ?? .one {
    case .one: limited = [found[0]]
    case .all: limited = found
    case .count(let count): limited = Array(found.prefix(count))
    }
    guard query.returnCount > 0 else { return nil }
    /// One identity in Apple's shapes: the reference alone, or a dictionary of the certificate's
    /// attributes with what else was asked for (the reference, the certificate's data and
    /// persistent reference).
    func one(_ identity: SecIdentity) -> AnyObject {
        if query.returnCount == 1, query.returnReference { return identity }
        let certificate = identity.certificate
        if query.returnCount == 1, query.returnData { return Data(certificate.der) as NSData }
        let stored = certificate.attributes ?? ObjectAttributes()
        if query.returnCount == 1, query.returnPersistentReference { return PersistentReference.make(stored) as NSData }
        var dictionary: [String: Any] = query.returnAttributes ? certificateAttributeDictionary(stored) : [:]
        if query.returnAttributes { dictionary[kSecClass as String] = kSecClassIdentity as String }
        if query.returnReference { dictionary[kSecValueRef as String] = identity }
        if query.returnData { dictionary[kSecValueData as String] = Data(certificate.der) }
        if query.returnPersistentReference { dictionary[kSecValuePersistentRef as String] = PersistentReference.make(stored) }
        return dictionary as NSDictionary
    }
    return (query.limit ?? .one) == .one ? one(limited[0]) : limited.map(one) as NSArray
}

private func dictionary(_ value: CFDictionary) -> [String: Any] {
    var result: [String: Any] = [:]
    for (key, value) in value {
        if let key = ItemMapping.string(key) { result[key] = value }
    }
    return result
}

private func translate<R>(_ body: () throws(KeychainError) -> R) throws -> R {
    do { return try body() } catch { throw ItemError(error) }
}

/// Runs a SecItem operation: its OSStatus, and its result stored on success.
private func run(_ body: () throws -> AnyObject?, store: (AnyObject?) -> Void) -> OSStatus {
    do {
        let value = try body()
        store(value)
        return errSecSuccess
    } catch let error as ItemError {
        return error.status
    } catch {
        return errSecIO
    }
}
