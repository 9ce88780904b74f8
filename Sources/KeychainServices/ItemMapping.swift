import Foundation
import KeychainCore
import KeychainCrypto

/// How one kSecAttr… key maps to a PKCS#11 attribute of a data object (DESIGN §4).
struct AttributeMapping {
    enum Kind {
        /// UTF-8 text (CFString).
        case string
        /// Raw bytes (CFData).
        case data
        /// A four-character code, given as a CFString ("http") or a CFNumber; stored as CK_ULONG.
        case fourCharacterCode
        /// A CFNumber stored as CK_ULONG.
        case number
        /// A CFBoolean stored as CK_BBOOL.
        case boolean
        /// A read-only date (seconds since 1970 in a CK_ULONG).
        case date
        /// kSecAttrAccessible: one of the kSecAttrAccessible… constants.
        case accessibility
        /// kSecAttrKeyClass ("0" public, "1" private, "2" symmetric) ↔ CKA_CLASS.
        case keyClass
        /// kSecAttrKeyType ("42" RSA, "73" EC) ↔ CKA_KEY_TYPE.
        case keyType
        /// kSecAttrSerialNumber: the serial's bytes ↔ CKA_SERIAL_NUMBER, a DER INTEGER.
        case serialNumber
        /// kSecAttrKeySizeInBits: computed from the key, matched after loading.
        case keySize
    }

    let key: String
    let attribute: AttributeType
    let kind: Kind
}

enum ItemMapping {
    static let common: [AttributeMapping] = [
        AttributeMapping(key: kSecAttrLabel as String, attribute: .label, kind: .string),
        AttributeMapping(key: kSecAttrComment as String, attribute: .comment, kind: .string),
        AttributeMapping(key: kSecAttrDescription as String, attribute: .itemDescription, kind: .string),
        AttributeMapping(key: kSecAttrCreator as String, attribute: .creator, kind: .fourCharacterCode),
        AttributeMapping(key: kSecAttrType as String, attribute: .itemType, kind: .fourCharacterCode),
        AttributeMapping(key: kSecAttrAccessGroup as String, attribute: .accessGroup, kind: .string),
        AttributeMapping(key: kSecAttrSynchronizable as String, attribute: .synchronizable, kind: .boolean),
        AttributeMapping(key: kSecAttrIsInvisible as String, attribute: .isInvisible, kind: .boolean),
        AttributeMapping(key: kSecAttrIsNegative as String, attribute: .isNegative, kind: .boolean),
        AttributeMapping(key: kSecAttrAccessible as String, attribute: .accessible, kind: .accessibility),
        AttributeMapping(key: kSecAttrCreationDate as String, attribute: .creationTime, kind: .date),
        AttributeMapping(key: kSecAttrModificationDate as String, attribute: .modificationTime, kind: .date),
        AttributeMapping(key: kSecAttrAccount as String, attribute: .account, kind: .string),
    ]

    static let keyAttributes: [AttributeMapping] = [
        AttributeMapping(key: kSecAttrLabel as String, attribute: .label, kind: .string),
        AttributeMapping(key: kSecAttrAccessGroup as String, attribute: .accessGroup, kind: .string),
        AttributeMapping(key: kSecAttrSynchronizable as String, attribute: .synchronizable, kind: .boolean),
        AttributeMapping(key: kSecAttrAccessible as String, attribute: .accessible, kind: .accessibility),
        AttributeMapping(key: kSecAttrCreationDate as String, attribute: .creationTime, kind: .date),
        AttributeMapping(key: kSecAttrModificationDate as String, attribute: .modificationTime, kind: .date),
    ]

    static func mappings(for itemClass: ItemClass) -> [String: AttributeMapping] {
        var all = common
        switch itemClass {
        case .key:
            all = keyAttributes + [
                AttributeMapping(key: kSecAttrKeyClass as String, attribute: .objectClass, kind: .keyClass),
                AttributeMapping(key: kSecAttrKeyType as String, attribute: .keyType, kind: .keyType),
                AttributeMapping(key: kSecAttrApplicationLabel as String, attribute: .id, kind: .data),
                AttributeMapping(key: kSecAttrApplicationTag as String, attribute: .applicationTag, kind: .data),
                AttributeMapping(key: kSecAttrKeySizeInBits as String, attribute: .modulusBits, kind: .keySize),
                AttributeMapping(key: kSecAttrEffectiveKeySize as String, attribute: .modulusBits, kind: .keySize),
                AttributeMapping(key: kSecAttrCanSign as String, attribute: .sign, kind: .boolean),
                AttributeMapping(key: kSecAttrCanVerify as String, attribute: .verify, kind: .boolean),
                AttributeMapping(key: kSecAttrCanEncrypt as String, attribute: .encrypt, kind: .boolean),
                AttributeMapping(key: kSecAttrCanDecrypt as String, attribute: .decrypt, kind: .boolean),
                AttributeMapping(key: kSecAttrCanDerive as String, attribute: .derive, kind: .boolean),
                AttributeMapping(key: kSecAttrCanWrap as String, attribute: .wrap, kind: .boolean),
                AttributeMapping(key: kSecAttrCanUnwrap as String, attribute: .unwrap, kind: .boolean),
                AttributeMapping(key: kSecAttrIsExtractable as String, attribute: .extractable, kind: .boolean),
                AttributeMapping(key: kSecAttrIsSensitive as String, attribute: .sensitive, kind: .boolean),
            ]
        case .certificate:
            all = keyAttributes + [
                AttributeMapping(key: kSecAttrSubject as String, attribute: .subject, kind: .data),
                AttributeMapping(key: kSecAttrIssuer as String, attribute: .issuer, kind: .data),
                AttributeMapping(key: kSecAttrSerialNumber as String, attribute: .serialNumber, kind: .serialNumber),
                AttributeMapping(key: kSecAttrPublicKeyHash as String, attribute: .id, kind: .data),
            ]
        case .genericPassword:
            all += [AttributeMapping(key: kSecAttrService as String, attribute: .application, kind: .string),
                    AttributeMapping(key: kSecAttrGeneric as String, attribute: .generic, kind: .data)]
        case .internetPassword:
            all += [AttributeMapping(key: kSecAttrServer as String, attribute: .application, kind: .string),
                    AttributeMapping(key: kSecAttrSecurityDomain as String, attribute: .securityDomain, kind: .string),
                    AttributeMapping(key: kSecAttrProtocol as String, attribute: .itemProtocol, kind: .fourCharacterCode),
                    AttributeMapping(key: kSecAttrAuthenticationType as String, attribute: .authenticationType, kind: .fourCharacterCode),
                    AttributeMapping(key: kSecAttrPort as String, attribute: .port, kind: .number),
                    AttributeMapping(key: kSecAttrPath as String, attribute: .path, kind: .string)]
        }
        return Dictionary(uniqueKeysWithValues: all.map { ($0.key, $0) })
    }

    /// Every kSecAttr… key that some item class maps.
    private static let attributeKeys: Set<String> = Set([ItemClass.genericPassword, .internetPassword, .key, .certificate].flatMap { mappings(for: $0).keys })

    /// Whether `key` is an attribute of some item class (what a query still waiting for its class
    /// leaves to be read once the class is known).
    static func isAttributeKey(_ key: String) -> Bool { attributeKeys.contains(key) }

    /// kSecAttrAccessible constants in the order of their stored values (1…7).
    static let accessibility: [String] = [kSecAttrAccessibleWhenUnlocked, kSecAttrAccessibleAfterFirstUnlock, kSecAttrAccessibleAlways,
                                          kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly, kSecAttrAccessibleWhenUnlockedThisDeviceOnly,
                                          kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly, kSecAttrAccessibleAlwaysThisDeviceOnly].map { $0 as String }

    /// The stored form of a query or attribute value; a value of the wrong type is errSecParam.
    static func encode(_ value: Any, as mapping: AttributeMapping) throws -> [UInt8] {
        func bad() -> ItemError { ItemError(errSecParam, "\(mapping.key) has a value of the wrong type") }
        switch mapping.kind {
        case .string:
            // Apple reads a string attribute given as data as its UTF-8 text.
            if let data = value as? Data { return Array(data) }
            guard let text = string(value) else { throw bad() }
            return Array(text.utf8)
        case .data:
            // Apple's samples pass strings for application labels and tags too (as UTF-8).
            if let data = value as? Data { return Array(data) }
            guard let text = string(value) else { throw bad() }
            return Array(text.utf8)
        case .fourCharacterCode:
            if let number = integer(value) { return AttributeValue.ulong(UInt(truncatingIfNeeded: number)) }
            guard let text = string(value), text.utf8.count == 4 else { throw bad() }
            return AttributeValue.ulong(UInt(text.utf8.reduce(UInt32(0)) { $0 << 8 | UInt32($1) }))
        case .number:
            guard let number = integer(value), number >= 0 else { throw bad() }
            return AttributeValue.ulong(UInt(number))
        case .boolean:
            guard let flag = boolean(value) else { throw bad() }
            return AttributeValue.bool(flag)
        case .accessibility:
            guard let text = string(value), let index = accessibility.firstIndex(of: text) else { throw bad() }
            return AttributeValue.ulong(UInt(index + 1))
        case .date:
            throw ItemError(errSecParam, "\(mapping.key) is set by the keychain")
        case .keyClass:
            guard let text = string(value), let objectClass = keyClasses[text] else { throw bad() }
            return AttributeValue.ulong(objectClass.rawValue)
        case .keyType:
            guard let text = string(value), let keyType = keyTypes[text] else { throw bad() }
            return AttributeValue.ulong(keyType.rawValue)
        case .serialNumber:
            guard let data = value as? Data else { throw bad() }
            var content = Array(data)
            if content.first.map({ $0 & 0x80 != 0 }) == true { content.insert(0, at: 0) }
            return [0x02] + DER.lengthBytes(content.count) + content
        case .keySize:
            guard let number = integer(value), number > 0 else { throw bad() }
            return AttributeValue.ulong(UInt(number))
        }
    }

    static let keyClasses: [String: ObjectClass] = [kSecAttrKeyClassPublic as String: .publicKey, kSecAttrKeyClassPrivate as String: .privateKey,
                                                    kSecAttrKeyClassSymmetric as String: .secretKey]
    static let keyTypes: [String: KeyType] = [kSecAttrKeyTypeRSA as String: .rsa, kSecAttrKeyTypeECSECPrimeRandom as String: .ec]

    /// Whether a password attribute holds the value it has when never set, which Apple's keychain
    /// stores as NULL and leaves out of kSecReturnAttributes: the optional strings (not the
    /// account), kSecAttrGeneric's empty data, kSecAttrIsInvisible and kSecAttrIsNegative false.
    /// (kSecAttrSynchronizable false is returned: Apple's column defaults to 0.)
    static func isUnsetByApple(_ bytes: [UInt8], as mapping: AttributeMapping) -> Bool {
        switch mapping.kind {
        case .string: return bytes.isEmpty && mapping.attribute != .account
        case .data: return bytes.isEmpty
        case .boolean:
            return (mapping.attribute == .isInvisible || mapping.attribute == .isNegative) && AttributeValue.decodeBool(bytes) != true
        default: return false
        }
    }

    /// The Apple-typed value of a stored attribute (for kSecReturnAttributes). A string attribute
    /// the caller stored as Data (`storedAsData`) comes back as Data, as on Apple platforms.
    static func decode(_ bytes: [UInt8], as mapping: AttributeMapping, storedAsData: Bool = false) -> Any? {
        switch mapping.kind {
        case .string:
            if storedAsData { return Data(bytes) }
            return String(decoding: bytes, as: UTF8.self)
        case .data:
            return Data(bytes)
        case .fourCharacterCode:
            guard let raw = AttributeValue.decodeULong(bytes), raw != 0 else { return nil }
            let code = UInt32(truncatingIfNeeded: raw)
            let characters = (0..<4).map { UInt8(truncatingIfNeeded: code >> (24 - 8 * UInt32($0))) }
            return characters.allSatisfy({ $0 >= 0x20 && $0 < 0x7F }) ? String(decoding: characters, as: UTF8.self) : NSNumber(value: code)
        case .number:
            return AttributeValue.decodeULong(bytes).map { NSNumber(value: $0) }
        case .boolean:
            return AttributeValue.decodeBool(bytes).map { NSNumber(value: $0) }
        case .date:
            return AttributeValue.decodeULong(bytes).map { Date(timeIntervalSince1970: TimeInterval($0)) }
        case .accessibility:
            guard let raw = AttributeValue.decodeULong(bytes), raw >= 1, Int(raw) <= accessibility.count else { return nil }
            return accessibility[Int(raw) - 1]
        case .keyClass:
            guard let raw = AttributeValue.decodeULong(bytes) else { return nil }
            return keyClasses.first { $0.value.rawValue == raw }?.key
        case .keyType:
            guard let raw = AttributeValue.decodeULong(bytes) else { return nil }
            return keyTypes.first { $0.value.rawValue == raw }?.key
        case .serialNumber:
            guard var content = DER.content(of: bytes, tag: 0x02) else { return nil }
            if content.count > 1, content.first == 0 { content.removeFirst() }
            return Data(content)
        case .keySize:
            return AttributeValue.decodeULong(bytes).map { NSNumber(value: $0) }
        }
    }

    // MARK: the type a string attribute was stored as

    /// The string attributes of `object` that were given as Data (CKA_KC internal
    /// `dataTypedAttributes`: a list of attribute types, each a CK_ULONG).
    static func storedAsData(_ object: ObjectAttributes) -> Set<AttributeType> {
        guard let list = object[.dataTypedAttributes] else { return [] }
        let size = AttributeValue.ulongSize
        return Set(stride(from: 0, to: list.count - list.count % size, by: size).compactMap { offset in
            AttributeValue.decodeULong(Array(list[offset..<offset + size])).map(AttributeType.init(rawValue:))
        })
    }

    /// `object` remembering that `given` string attributes were now given as Data and `text` ones
    /// as strings (an update keeps what it does not name). Searches ignore it: they compare bytes.
    static func recordingStoredTypes(_ object: ObjectAttributes, asData given: Set<AttributeType>, asText text: Set<AttributeType> = []) -> ObjectAttributes {
        let types = storedAsData(object).subtracting(text).union(given)
        var result = object
        result[.dataTypedAttributes] = types.isEmpty ? nil : types.sorted().flatMap { AttributeValue.ulong($0.rawValue) }
        return result
    }

    // MARK: Foundation and Core Foundation value shapes

    static func string(_ value: Any) -> String? {
        if let text = value as? String { return text }
        if let text = value as? NSString { return text as String }
        return nil
    }

    static func integer(_ value: Any) -> Int64? {
        if value is Bool { return nil }
        if let number = value as? Int { return Int64(number) }
        if let number = value as? NSNumber, CFNumberIsInteger(number) { return number.int64Value }
        return nil
    }

    static func boolean(_ value: Any) -> Bool? {
        if let flag = value as? Bool { return flag }
        if let number = value as? NSNumber { return number.boolValue }
        return nil
    }

    /// Whether an NSNumber holds an integer (not a Bool or a fraction).
    private static func CFNumberIsInteger(_ number: NSNumber) -> Bool {
        let double = number.doubleValue
        return double == double.rounded() && !(number === kCFBooleanTrue || number === kCFBooleanFalse)
    }
}
