import Foundation
import KeychainCore
import KeychainCrypto

/// A SecItem dictionary read into typed parts, refusing unknown keys and wrong value types
/// with errSecParam.
struct ItemQuery {
    enum Limit: Equatable {
        case one, all
        case count(Int)
    }

    enum Synchronizable {
        case only(Bool)
        case any
    }

    var itemClass: ItemClass
    /// kSecClassIdentity: certificates paired with their private keys.
    var isIdentity = false
    /// kSecValueRef: a SecKey, SecCertificate or SecIdentity to add or find.
    var valueReference: AnyObject?
    /// kSecAttrKeySizeInBits / kSecAttrEffectiveKeySize, matched after loading.
    var keySize: Int?
    /// Attributes to match or set, already in their stored form.
    var attributes: Template = []
    /// The string attributes given as Data, and those given as strings: an item keeps the type
    /// it was given (`ItemMapping.recordingStoredTypes`); searches compare the bytes either way.
    var givenAsData: Set<AttributeType> = []
    var givenAsText: Set<AttributeType> = []
    /// A query without kSecClass that names its item by persistent reference: the dictionary,
    /// parsed again with the item's class by `resolvingClass` (its attributes wait for that).
    private var awaitingClass: [String: Any]?
    var valueData: [UInt8]?
    var persistentRef: [UInt8]?
    /// kSecAttrSynchronizable as the dictionary gave it; nil when it did not.
    var synchronizable: Synchronizable?
    var limit: Limit?
    var returnData = false
    var returnAttributes = false
    var returnReference = false
    var returnPersistentReference = false
    var context: LAContext?
    var keychainLabel: String?
    /// kSecUseOperationPrompt: the text a prompt shows.
    var operationPrompt: String?
    /// kSecUseAuthenticationUI (and the older kSecUseNoAuthenticationUI).
    var authenticationUI = AuthenticationUI.allow
    /// kSecMatchCaseInsensitive, …DiacriticInsensitive, …WidthInsensitive: how string
    /// attributes (and certificate subject matches) compare.
    var folding: String.CompareOptions = []
    var caseInsensitive: Bool { !folding.isEmpty }
    /// kSecMatchSubjectContains / StartsWith / EndsWith / WholeString (certificates).
    var subjectMatch: (kind: SubjectMatch, text: String)?
    /// kSecMatchEmailAddressIfPresent (certificates).
    var emailIfPresent: String?
    /// kSecMatchValidOnDate (certificates): valid at this moment.
    var validOn: Date?
    /// kSecMatchIssuers (certificates): DER issuer names, one of which must be the certificate's.
    var issuers: [[UInt8]]?
    /// kSecMatchItemList: the results are limited to these items (by unique ID).
    var itemList: [[UInt8]]?
    /// kSecAttrTokenID (kSecAttrTokenIDSecureEnclave): only keys made in the TPM match.
    var onlyTokenItems = false

    enum SubjectMatch {
        case contains, startsWith, endsWith, whole
    }

    enum AuthenticationUI {
        /// Ask the user when an item needs it (Apple's default).
        case allow
        /// Never ask: errSecInteractionNotAllowed where asking would be needed.
        case fail
        /// Never ask: items that would need it are left out of the results.
        case skip
    }

    /// Whether this operation may ask the user.
    var mayInteract: Bool { authenticationUI == .allow && !(context?.interactionNotAllowed ?? false) }
    var interaction: Interaction { Interaction(allowed: mayInteract, prompt: operationPrompt) }
    /// kSecAttrAccessControl (SecItemAdd): turned into key attributes by `newObject`.
    var accessControl: SecAccessControl?

    /// The string attributes of this class (what kSecMatchCaseInsensitive compares by folding).
    private var stringTypes: Set<AttributeType> {
        Set(ItemMapping.mappings(for: itemClass).values.filter { $0.kind == .string }.map(\.attribute))
    }

    /// Whether a loaded object belongs to this query's class (keys: any key class), and, with
    /// kSecMatchCaseInsensitive, has the query's string attributes in any case.
    func admits(_ object: ObjectAttributes) -> Bool {
        if caseInsensitive {
            let folded = stringTypes
            for (type, wanted) in attributes where folded.contains(type) {
                guard let stored = object[type],
                      String(decoding: stored, as: UTF8.self).compare(String(decoding: wanted, as: UTF8.self), options: folding) == .orderedSame else {
                    return false
                }
            }
        }
        if let itemList {
            guard let uid = object[.uniqueID], itemList.contains(uid) else { return false }
        }
        if onlyTokenItems, !object.bool(.tpm) { return false }
        if itemClass == .certificate, subjectMatch != nil || emailIfPresent != nil || validOn != nil || issuers != nil {
            guard let certificate = try? Certificate(der: object[.value] ?? []) else { return false }
            if let (kind, text) = subjectMatch {
                let matched = certificate.subjectValues.contains { value in
                    switch kind {
                    case .contains: return value.range(of: text, options: folding) != nil
                    case .startsWith: return value.range(of: text, options: folding.union(.anchored)) != nil
                    case .endsWith: return value.range(of: text, options: folding.union([.anchored, .backwards])) != nil
                    case .whole: return value.compare(text, options: folding) == .orderedSame
                    }
                }
                guard matched else { return false }
            }
            if let email = emailIfPresent, !certificate.emailAddresses.isEmpty {
                guard certificate.emailAddresses.contains(where: { $0.compare(email, options: .caseInsensitive) == .orderedSame }) else { return false }
            }
            if let validOn {
                guard let validity = certificate.validity else { return false }
                let moment = Int64(validOn.timeIntervalSince1970)
                guard validity.notBefore <= moment, moment <= validity.notAfter else { return false }
            }
            if let issuers, !issuers.contains(certificate.issuer) { return false }
        }
        switch itemClass {
        case .genericPassword:
            return object.itemClass == nil || object.itemClass == .genericPassword
        case .key:
            guard let objectClass = object.objectClass, AttributeTable.isKeyClass(objectClass) else { return false }
            // ML-DSA and ML-KEM keys (made through PKCS#11 or keychainctl) are no SecKey: Apple's
            // Security framework has no such key type (CryptoKit's are kept as generic passwords),
            // so kSecClassKey queries do not see them, as they would not on Apple platforms.
            if object.keyType?.isLattice == true { return false }
            guard let keySize else { return true }
            // A TPM key's size is its public half's (it holds no private material).
            let key = object.bool(.tpm) ? try? KeyFactory.publicKey(of: object) : try? KeyFactory.key(of: object)
            return key.map { keyBits($0) == keySize } ?? false
        default:
            return true
        }
    }

    var hasSearchKeys: Bool { limit != nil || returnData || returnAttributes || returnReference || returnPersistentReference }
    /// A key search for public keys only (they need no login).
    var asksOnlyForPublicKeys: Bool {
        itemClass == .key && attributes.contains { $0.type == .objectClass && AttributeValue.decodeULong($0.value) == ObjectClass.publicKey.rawValue }
    }

    /// Keys that only narrow a search (refused when adding, updating or deleting; an item list
    /// may name what to update or delete).
    var hasMatchKeys: Bool { caseInsensitive || subjectMatch != nil || emailIfPresent != nil || validOn != nil || issuers != nil }
    var returnCount: Int { [returnData, returnAttributes, returnReference, returnPersistentReference].filter { $0 }.count }

    /// Parses `dictionary`. With `requireClass` false the class may be absent (an update's
    /// attribute dictionary) and `defaultClass` applies.
    init(_ dictionary: [String: Any], requireClass: Bool = true, defaultClass: ItemClass = .genericPassword) throws {
        let classValue = dictionary[kSecClass as String]
        let className = classValue.flatMap(ItemMapping.string)
        if className == kSecClassGenericPassword as String {
            itemClass = .genericPassword
        } else if className == kSecClassInternetPassword as String {
            itemClass = .internetPassword
        } else if className == kSecClassKey as String {
            itemClass = .key
        } else if className == kSecClassCertificate as String {
            itemClass = .certificate
        } else if className == kSecClassIdentity as String {
            itemClass = .certificate
            isIdentity = true
        } else if classValue == nil, !requireClass {
            itemClass = defaultClass
        } else if classValue == nil, Self.persistentReference(in: dictionary) != nil {
            // Apple's persistent references name an item of any class: the item says which.
            itemClass = defaultClass
            awaitingClass = dictionary
        } else {
            throw ItemError(errSecParam, "kSecClass is missing or unknown")
        }
        let mappings = ItemMapping.mappings(for: itemClass)
        for (key, value) in dictionary where key != kSecClass as String {
            if awaitingClass != nil, ItemMapping.isAttributeKey(key) { continue }
            if let mapping = mappings[key] {
                if key == kSecAttrSynchronizable as String, ItemMapping.string(value) == kSecAttrSynchronizableAny as String {
                    synchronizable = .any
                    continue
                }
                let encoded = try ItemMapping.encode(value, as: mapping)
                if mapping.kind == .string {
                    if value is Data { givenAsData.insert(mapping.attribute) } else { givenAsText.insert(mapping.attribute) }
                }
                if mapping.kind == .keySize {
                    keySize = AttributeValue.decodeULong(encoded).map { Int($0) }
                    continue
                }
                if mapping.attribute == .synchronizable {
                    synchronizable = .only(AttributeValue.decodeBool(encoded) ?? false)
                }
                attributes.append((mapping.attribute, encoded))
                continue
            }
            switch key {
            case Key.valueData:
                guard let data = value as? Data else { throw ItemError(errSecParam, "kSecValueData must be Data") }
                valueData = Array(data)
            case Key.valueRef:
                guard value is SecKey || value is SecCertificate || value is SecIdentity else { throw ItemError(errSecParam, "kSecValueRef must be a key or certificate") }
                valueReference = value as AnyObject
            case Key.persistentRef:
                guard let data = value as? Data else { throw ItemError(errSecParam, "kSecValuePersistentRef must be Data") }
                persistentRef = Array(data)
            case Key.returnData: returnData = try Self.flag(value, key)
            case Key.returnAttributes: returnAttributes = try Self.flag(value, key)
            case Key.returnRef: returnReference = try Self.flag(value, key)
            case Key.returnPersistentRef: returnPersistentReference = try Self.flag(value, key)
            case Key.matchLimit:
                let name = ItemMapping.string(value)
                if name == kSecMatchLimitOne as String {
                    limit = .one
                } else if name == kSecMatchLimitAll as String {
                    limit = .all
                } else {
                    guard let count = ItemMapping.integer(value), count > 0 else { throw ItemError(errSecParam, "bad kSecMatchLimit") }
                    limit = .count(Int(count))
                }
            case Key.context:
                guard let context = value as? LAContext else { throw ItemError(errSecParam, "kSecUseAuthenticationContext must be an LAContext") }
                self.context = context
            case Key.operationPrompt:
                guard let text = ItemMapping.string(value) else { throw ItemError(errSecParam, "kSecUseOperationPrompt must be a string") }
                operationPrompt = text
            case Key.authenticationUI:
                switch ItemMapping.string(value) {
                case Key.authenticationUIAllow: authenticationUI = .allow
                case Key.authenticationUIFail: authenticationUI = .fail
                case Key.authenticationUISkip: authenticationUI = .skip
                default: throw ItemError(errSecParam, "kSecUseAuthenticationUI must be kSecUseAuthenticationUIAllow, …Fail or …Skip")
                }
            case Key.noAuthenticationUI:
                if try Self.flag(value, key) { authenticationUI = .fail }
            case Key.caseInsensitive:
                if try Self.flag(value, key) { folding.insert(.caseInsensitive) }
            case Key.diacriticInsensitive:
                if try Self.flag(value, key) { folding.insert(.diacriticInsensitive) }
            case Key.widthInsensitive:
                if try Self.flag(value, key) { folding.insert(.widthInsensitive) }
            case Key.subjectContains, Key.subjectStartsWith, Key.subjectEndsWith, Key.subjectWholeString:
                guard let text = ItemMapping.string(value) else { throw ItemError(errSecParam, "\(key) must be a string") }
                let kinds: [String: SubjectMatch] = [Key.subjectContains: .contains, Key.subjectStartsWith: .startsWith,
                                                     Key.subjectEndsWith: .endsWith, Key.subjectWholeString: .whole]
                subjectMatch = kinds[key].map { ($0, text) }
            case Key.emailIfPresent:
                guard let text = ItemMapping.string(value) else { throw ItemError(errSecParam, "kSecMatchEmailAddressIfPresent must be a string") }
                emailIfPresent = text
            case Key.validOnDate:
                if let date = value as? Date { validOn = date } else if value is NSNull { validOn = Date() } else {
                    throw ItemError(errSecParam, "kSecMatchValidOnDate must be a date or kCFNull")
                }
            case Key.issuers:
                guard let list = value as? [Any] else { throw ItemError(errSecParam, "kSecMatchIssuers must be an array of DER names") }
                issuers = try list.map { entry in
                    guard let data = entry as? Data else { throw ItemError(errSecParam, "kSecMatchIssuers must be an array of DER names") }
                    return Array(data)
                }
            case Key.itemList:
                guard let list = value as? [Any] else { throw ItemError(errSecParam, "kSecMatchItemList must be an array") }
                itemList = try list.map { entry -> [UInt8] in
                    if let data = entry as? Data, let uid = PersistentReference.uniqueID(Array(data)) { return uid }
                    if let key = entry as? SecKey, let uid = key.attributes[.uniqueID] { return uid }
                    if let certificate = entry as? SecCertificate, let uid = certificate.attributes?[.uniqueID] { return uid }
                    if let identity = entry as? SecIdentity, let uid = identity.certificate.attributes?[.uniqueID] { return uid }
                    throw ItemError(errSecParam, "kSecMatchItemList holds keychain item references or persistent references")
                }
            case Key.trustedOnly:
                if try Self.flag(value, key) { throw ItemError(errSecUnimplemented, "kSecMatchTrustedOnly: certificates are not evaluated for trust here") }
            case Key.tokenID:
                // The one token here is the TPM (Secure Enclave keys): its keys carry CKA_KC_TPM.
                guard ItemMapping.string(value) == kSecAttrTokenIDSecureEnclave as String else {
                    throw ItemError(errSecParam, "kSecAttrTokenID: the only token here is kSecAttrTokenIDSecureEnclave (the TPM)")
                }
                onlyTokenItems = true
                if itemClass == .key { attributes.append((.tpm, AttributeValue.bool(true))) }
            case Key.persistentReferenceAttribute:
                guard let data = value as? Data else { throw ItemError(errSecParam, "kSecAttrPersistentReference must be Data") }
                persistentRef = Array(data)
            case Key.syncViewHint:
                guard ItemMapping.string(value) != nil else { throw ItemError(errSecParam, "kSecAttrSyncViewHint must be a string") }
            case Key.policy, Key.searchList, Key.useKeychain, Key.useItemList:
                throw ItemError(errSecParam, "\(key): SecPolicy, macOS file keychains and item lists for adding do not exist here")
            case Key.dataProtection:
                _ = try Self.flag(value, key)
            case Key.accessControl:
                guard let control = value as? SecAccessControl else { throw ItemError(errSecParam, "kSecAttrAccessControl must be a SecAccessControl") }
                guard dictionary[kSecAttrAccessible as String] == nil else {
                    throw ItemError(errSecParam, "give kSecAttrAccessControl or kSecAttrAccessible, not both")
                }
                accessControl = control
            case Key.keychainLabel:
                guard let label = ItemMapping.string(value) else { throw ItemError(errSecParam, "kSecUseKeychainLabel") }
                keychainLabel = label
            default:
                throw ItemError(errSecParam, "\(key) is not an attribute of this item class")
            }
        }
    }

    /// The persistent reference a dictionary names its item by (kSecValuePersistentRef or
    /// kSecAttrPersistentReference), if it is Data.
    private static func persistentReference(in dictionary: [String: Any]) -> Data? {
        (dictionary[Key.persistentRef] ?? dictionary[Key.persistentReferenceAttribute]) as? Data
    }

    /// Whether the class still has to come from the item the persistent reference names.
    var isAwaitingClass: Bool { awaitingClass != nil }

    /// This query with its class taken from the item its persistent reference names, when the
    /// query gave no kSecClass (Apple finds such an item whatever its class); else itself. A
    /// locked keychain whose public items do not hold the item is unlocked as a search would be
    /// (`KeychainAccess.promptUnlock`); `master` is then the unlocked key.
    func resolvingClass(in keychain: Keychain, master: inout MasterKey?) throws -> ItemQuery {
        guard var dictionary = awaitingClass else { return self }
        guard let uid = persistentRef.flatMap(PersistentReference.uniqueID) else {
            throw ItemError(errSecItemNotFound, "not a persistent reference of this keychain")
        }
        var found = try Self.itemClass(of: uid, in: keychain, master: master)
        if found == nil, master == nil, let unlocked = try KeychainAccess.shared.promptUnlock(keychain, self) {
            master = unlocked
            found = try Self.itemClass(of: uid, in: keychain, master: unlocked)
        }
        guard let found else {
            if master == nil, authenticationUI != .skip { throw ItemError(errSecInteractionNotAllowed, "the keychain is locked") }
            throw ItemError(errSecItemNotFound, "no item has this persistent reference")
        }
        let names: [ItemClass: CFString] = [.genericPassword: kSecClassGenericPassword, .internetPassword: kSecClassInternetPassword,
                                            .key: kSecClassKey, .certificate: kSecClassCertificate]
        dictionary[kSecClass as String] = names[found].map { $0 as String }
        return try ItemQuery(dictionary)
    }

    /// The SecItem class of the stored object with this unique ID: its CKA_KC_ITEM_CLASS, else
    /// what its PKCS#11 class makes it (data objects are generic passwords); nil if there is none.
    private static func itemClass(of uid: [UInt8], in keychain: Keychain, master: MasterKey?) throws -> ItemClass? {
        let object = try translateKeychain { () throws(KeychainError) -> ObjectAttributes? in
            guard let row = try keychain.find([(.uniqueID, uid)], master: master).first else { return nil }
            return try keychain.object(id: row.id, master: master)
        }
        guard let object, let objectClass = object.objectClass else { return nil }
        if let itemClass = object.itemClass { return itemClass }
        if objectClass == .data { return .genericPassword }
        if objectClass == .certificate { return .certificate }
        return AttributeTable.isKeyClass(objectClass) ? .key : nil
    }

    private static func flag(_ value: Any, _ key: String) throws -> Bool {
        guard let flag = ItemMapping.boolean(value) else { throw ItemError(errSecParam, "\(key) must be a boolean") }
        return flag
    }

    /// What `SyncRule` says of an item added with this query, from its parts: the protection class
    /// (kSecAttrAccessControl's, else kSecAttrAccessible), the access control's flags, and
    /// kSecAttrTokenID or a Secure Enclave key as kSecValueRef (a key in the TPM).
    var syncRefusal: SyncRule.Refusal? {
        let accessible = attributes.first { $0.type == .accessible }.flatMap { AttributeValue.decodeULong($0.value) }.flatMap(ProtectionClass.init(rawValue:))
        let inTPM = onlyTokenItems || (valueReference as? SecKey)?.enclave != nil
        return SyncRule.refusal(token: true, protection: accessControl?.policy.protection ?? accessible, accessControl: accessControl?.policy.flags ?? [],
                                inTPM: inTPM)
    }

    /// The PKCS#11 search template. Passwords are data objects of their item class; keys and
    /// certificates are found whether SecItem or a PKCS#11 client stored them.
    var searchTemplate: Template {
        var template: Template
        switch itemClass {
        case .genericPassword:
            // Plain PKCS#11 data objects (no item class) count as generic passwords too.
            template = [(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue))]
        case .internetPassword:
            template = [(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue)), (.itemClass, AttributeValue.ulong(itemClass.rawValue))]
        case .key:
            template = []
        case .certificate:
            template = [(.objectClass, AttributeValue.ulong(ObjectClass.certificate.rawValue))]
        }
        // Case-insensitive string matches are checked on the loaded objects (`admits`): the
        // stored digests match exact bytes only.
        let folded = caseInsensitive ? stringTypes : []
        template += attributes.filter { $0.type != .synchronizable && !folded.contains($0.type) }
        let uniqueID = persistentRef.flatMap(PersistentReference.uniqueID)
        // As securityd: a query that names neither kSecAttrSynchronizable nor a persistent
        // reference sees only non-synchronizable items; a persistent reference finds its item either way.
        switch synchronizable {
        case .only(let flag)?: template.append((.synchronizable, AttributeValue.bool(flag)))
        case nil where uniqueID == nil: template.append((.synchronizable, AttributeValue.bool(false)))
        case .any?, nil: break
        }
        if let uniqueID { template.append((.uniqueID, uniqueID)) }
        return template
    }
}

/// The non-attribute keys, as Swift strings (usable as `case` patterns).
private enum Key {
    static let valueData = kSecValueData as String
    static let persistentRef = kSecValuePersistentRef as String
    static let valueRef = kSecValueRef as String
    static let returnData = kSecReturnData as String
    static let returnAttributes = kSecReturnAttributes as String
    static let returnRef = kSecReturnRef as String
    static let returnPersistentRef = kSecReturnPersistentRef as String
    static let matchLimit = kSecMatchLimit as String
    static let context = kSecUseAuthenticationContext as String
    static let keychainLabel = kSecUseKeychainLabel as String
    static let dataProtection = kSecUseDataProtectionKeychain as String
    static let accessControl = kSecAttrAccessControl as String
    static let operationPrompt = kSecUseOperationPrompt as String
    static let authenticationUI = kSecUseAuthenticationUI as String
    static let authenticationUIAllow = kSecUseAuthenticationUIAllow as String
    static let authenticationUIFail = kSecUseAuthenticationUIFail as String
    static let authenticationUISkip = kSecUseAuthenticationUISkip as String
    static let noAuthenticationUI = kSecUseNoAuthenticationUI as String
    static let caseInsensitive = kSecMatchCaseInsensitive as String
    static let diacriticInsensitive = kSecMatchDiacriticInsensitive as String
    static let widthInsensitive = kSecMatchWidthInsensitive as String
    static let subjectContains = kSecMatchSubjectContains as String
    static let subjectStartsWith = kSecMatchSubjectStartsWith as String
    static let subjectEndsWith = kSecMatchSubjectEndsWith as String
    static let subjectWholeString = kSecMatchSubjectWholeString as String
    static let emailIfPresent = kSecMatchEmailAddressIfPresent as String
    static let validOnDate = kSecMatchValidOnDate as String
    static let issuers = kSecMatchIssuers as String
    static let itemList = kSecMatchItemList as String
    static let trustedOnly = kSecMatchTrustedOnly as String
    static let tokenID = kSecAttrTokenID as String
    static let persistentReferenceAttribute = kSecAttrPersistentReference as String
    static let syncViewHint = kSecAttrSyncViewHint as String
    static let policy = kSecMatchPolicy as String
    static let searchList = kSecMatchSearchList as String
    static let useKeychain = kSecUseKeychain as String
    static let useItemList = kSecUseItemList as String
}

/// kSecValuePersistentRef: "KCPR" followed by the item's CKA_UNIQUE_ID.
enum PersistentReference {
    static let prefix = Array("KCPR".utf8)

    static func make(_ object: ObjectAttributes) -> Data {
        Data(prefix + (object[.uniqueID] ?? []))
    }

    static func uniqueID(_ reference: [UInt8]) -> [UInt8]? {
        guard reference.count > prefix.count, Array(reference.prefix(prefix.count)) == prefix else { return nil }
        return Array(reference.dropFirst(prefix.count))
    }
}
