/// The rules for each attribute, as data: one table shared by every object class.
///
/// PKCS#11 3.0 §4.2–§4.5 (common, storage and data-object attributes). Key and certificate
/// attributes join this table, not a switch elsewhere.
public struct AttributeRule: Sendable {
    public enum Kind: Sendable {
        /// CK_BBOOL, one byte.
        case bool
        /// CK_ULONG.
        case ulong
        /// A byte string of any length.
        case bytes
        /// CK_DATE: empty or eight ASCII digits YYYYMMDD.
        case date
        /// An array of CK_MECHANISM_TYPE.
        case ulongArray
        /// An array of attributes (CKA_WRAP_TEMPLATE…), kept in its encoded form
        /// (`NestedTemplate`).
        case template
    }

    public struct Flags: OptionSet, Sendable {
        public let rawValue: UInt16
        public init(rawValue: UInt16) { self.rawValue = rawValue }

        /// Must be in a creation template (else CKR_TEMPLATE_INCOMPLETE).
        public static let requiredOnCreate = Flags(rawValue: 1 << 0)
        /// Set by the token; in any template it is CKR_ATTRIBUTE_READ_ONLY.
        public static let generated = Flags(rawValue: 1 << 1)
        /// May be changed by C_SetAttributeValue.
        public static let settable = Flags(rawValue: 1 << 2)
        /// May be given in a C_CopyObject template.
        public static let copySettable = Flags(rawValue: 1 << 3)
        /// Once FALSE it stays FALSE (a change to TRUE is CKR_ATTRIBUTE_READ_ONLY).
        public static let changeToFalseOnly = Flags(rawValue: 1 << 4)
        /// Never revealed: reading it is CKR_ATTRIBUTE_SENSITIVE.
        public static let sensitive = Flags(rawValue: 1 << 5)
        /// Searchable through the blind index rather than by decrypting records.
        public static let indexed = Flags(rawValue: 1 << 6)
        /// Computed from the stored row, not kept in the record.
        public static let derivedFromRow = Flags(rawValue: 1 << 7)
        /// Once TRUE it stays TRUE (a change to FALSE is CKR_ATTRIBUTE_READ_ONLY).
        public static let changeToTrueOnly = Flags(rawValue: 1 << 8)
        /// Only the SO may set it to TRUE.
        public static let securityOfficerOnly = Flags(rawValue: 1 << 9)
        /// Computed from the key material; accepted in a template only with the computed value.
        public static let computed = Flags(rawValue: 1 << 10)
    }

    public let type: AttributeType
    public let kind: Kind
    public let flags: Flags
    /// The value given when a creation template omits the attribute.
    public let defaultValue: [UInt8]?

    /// Whether `value` has the shape this attribute requires.
    public func accepts(_ value: [UInt8]) -> Bool {
        switch kind {
        case .bool: return value.count == 1
        case .ulong: return value.count == AttributeValue.ulongSize
        case .bytes: return value.count <= AttributeTable.maximumValueLength
        case .date: return value.isEmpty || (value.count == 8 && value.allSatisfy { (0x30...0x39).contains($0) })
        // An empty list given by a caller says nothing (the default, "no restriction", is not given).
        case .ulongArray: return !value.isEmpty && value.count % AttributeValue.ulongSize == 0 && value.count <= AttributeTable.maximumValueLength
        case .template: return NestedTemplate.decode(value) != nil
        }
    }
}

public enum AttributeTable {
    /// The largest attribute value accepted from a caller.
    public static let maximumValueLength = 16 << 20

    private static let rules: [AttributeType: AttributeRule] = {
        var table: [AttributeType: AttributeRule] = [:]
        func add(_ type: AttributeType, _ kind: AttributeRule.Kind, _ flags: AttributeRule.Flags, default value: [UInt8]? = nil) {
            table[type] = AttributeRule(type: type, kind: kind, flags: flags, defaultValue: value)
        }
        let yes = AttributeValue.bool(true), no = AttributeValue.bool(false)
        // Common and storage attributes (§4.2, §4.4).
        add(.objectClass, .ulong, [.requiredOnCreate])
        add(.token, .bool, [.copySettable], default: no)
        // Keychain items default to WhenUnlocked: private until login.
        // Never lowered: a public copy of a private key would sign without login (DESIGN §10).
        add(.isPrivate, .bool, [.copySettable, .changeToTrueOnly], default: yes)
        add(.modifiable, .bool, [.copySettable], default: yes)
        add(.label, .bytes, [.settable, .copySettable, .indexed], default: [])
        add(.copyable, .bool, [.settable, .copySettable, .changeToFalseOnly], default: yes)
        add(.destroyable, .bool, [.copySettable], default: yes)
        add(.uniqueID, .bytes, [.generated, .indexed])
        add(.creationTime, .ulong, [.generated, .derivedFromRow])
        add(.modificationTime, .ulong, [.generated, .derivedFromRow])
        // Data objects (§4.5).
        add(.application, .bytes, [.settable, .copySettable, .indexed], default: [])
        add(.objectID, .bytes, [.settable, .copySettable, .indexed], default: [])
        add(.value, .bytes, [.settable, .copySettable, .sensitive], default: [])
        // Keys (§4.7–§4.9). Usage flags default to TRUE for what the key type can do;
        // KeyFactory removes usages a key type cannot have.
        let unavailable = AttributeValue.ulong(UInt.max)
        add(.keyType, .ulong, [.requiredOnCreate])
        add(.id, .bytes, [.settable, .copySettable, .indexed])
        add(.startDate, .date, [.settable, .copySettable], default: [])
        add(.endDate, .date, [.settable, .copySettable], default: [])
        add(.derive, .bool, [.settable, .copySettable], default: no)
        add(.local, .bool, [.generated], default: no)
        add(.keyGenMechanism, .ulong, [.generated], default: unavailable)
        add(.allowedMechanisms, .ulongArray, [], default: [])
        add(.wrapTemplate, .template, [], default: NestedTemplate.encode([]))
        add(.unwrapTemplate, .template, [], default: NestedTemplate.encode([]))
        add(.deriveTemplate, .template, [], default: NestedTemplate.encode([]))
        add(.subject, .bytes, [.settable, .copySettable, .indexed], default: [])
        add(.encrypt, .bool, [.settable, .copySettable], default: yes)
        add(.verify, .bool, [.settable, .copySettable], default: yes)
        add(.verifyRecover, .bool, [.settable, .copySettable], default: no)
        add(.wrap, .bool, [.settable, .copySettable], default: yes)
        add(.decrypt, .bool, [.settable, .copySettable], default: yes)
        add(.sign, .bool, [.settable, .copySettable], default: yes)
        add(.signRecover, .bool, [.settable, .copySettable], default: no)
        add(.unwrap, .bool, [.settable, .copySettable], default: yes)
        add(.trusted, .bool, [.settable, .securityOfficerOnly], default: no)
        add(.publicKeyInfo, .bytes, [.computed])
        // Keys are kept from leaving unless a template says otherwise.
        add(.sensitive, .bool, [.settable, .copySettable, .changeToTrueOnly], default: yes)
        add(.extractable, .bool, [.settable, .copySettable, .changeToFalseOnly], default: no)
        add(.alwaysSensitive, .bool, [.generated])
        add(.neverExtractable, .bool, [.generated])
        add(.alwaysAuthenticate, .bool, [], default: no)
        add(.wrapWithTrusted, .bool, [.settable, .copySettable, .changeToTrueOnly], default: no)
        add(.checkValue, .bytes, [.computed])
        add(.valueLength, .ulong, [.computed])
        // Keychain items (vendor attributes; see Docs/keychain-api.md). Absent and empty are equal.
        // Searches name the class and usually the account (service and server are
        // CKA_APPLICATION, already indexed); the rest is matched on the decrypted candidates.
        add(.account, .bytes, [.settable, .copySettable, .indexed], default: [])
        for type in [AttributeType.generic, .comment, .itemDescription, .accessGroup, .securityDomain, .path] {
            add(type, .bytes, [.settable, .copySettable], default: [])
        }
        for type in [AttributeType.creator, .itemType, .itemProtocol, .port, .authenticationType] {
            add(type, .ulong, [.settable, .copySettable], default: AttributeValue.ulong(0))
        }
        add(.itemClass, .ulong, [.indexed], default: AttributeValue.ulong(0))
        add(.synchronizable, .bool, [.settable, .copySettable], default: AttributeValue.bool(false))
        add(.accessible, .ulong, [], default: AttributeValue.ulong(0))
        add(.accessControl, .ulong, [], default: AttributeValue.ulong(0))
        add(.applicationPassword, .bytes, [.sensitive])
        // Secret Service lookup attributes: one blind-index entry per name/value pair (see
        // LookupAttributes), never the values in clear outside the sealed record.
        add(.lookupAttributes, .bytes, [.settable, .copySettable, .indexed], default: [])
        add(.contentType, .bytes, [.settable, .copySettable], default: [])
        add(.isInvisible, .bool, [.settable, .copySettable], default: AttributeValue.bool(false))
        add(.isNegative, .bool, [.settable, .copySettable], default: AttributeValue.bool(false))
        add(.applicationTag, .bytes, [.settable, .copySettable, .indexed], default: [])
        // Made inside the TPM (C_GenerateKeyPair only: KeyGeneration.enclaveObjects).
        add(.tpm, .bool, [], default: no)
        // Certificates (§4.6)
        add(.certificateType, .ulong, [])
        add(.issuer, .bytes, [.computed, .indexed])
        add(.serialNumber, .bytes, [.computed, .indexed])
        add(.certificateCategory, .ulong, [.settable, .copySettable], default: AttributeValue.ulong(0))
        add(.javaMIDPSecurityDomain, .ulong, [.settable, .copySettable], default: AttributeValue.ulong(0))
        add(.url, .bytes, [.settable, .copySettable], default: [])
        add(.hashOfSubjectPublicKey, .bytes, [.settable, .copySettable], default: [])
        add(.hashOfIssuerPublicKey, .bytes, [.settable, .copySettable], default: [])
        // RSA (§6.1)
        add(.modulus, .bytes, [])
        add(.modulusBits, .ulong, [.computed])
        add(.publicExponent, .bytes, [])
        add(.privateExponent, .bytes, [.sensitive])
        add(.prime1, .bytes, [.sensitive])
        add(.prime2, .bytes, [.sensitive])
        add(.exponent1, .bytes, [.sensitive])
        add(.exponent2, .bytes, [.sensitive])
        add(.coefficient, .bytes, [.sensitive])
        // EC, Edwards and Montgomery (§6.3, §6.4)
        add(.ecParams, .bytes, [])
        add(.ecPoint, .bytes, [])
        // DSA and DH keys and domain parameters (§6.2, §6.5 of the current mechanisms)
        add(.prime, .bytes, [])
        add(.subprime, .bytes, [])
        add(.base, .bytes, [])
        add(.primeBits, .ulong, [.computed])
        add(.subprimeBits, .ulong, [.computed])
        add(.valueBits, .ulong, [.computed])
        // ML-DSA and ML-KEM (3.2 §6.67, §6.68): the set is given when the key is imported or
        // (public template) generated; the seed is the private key.
        add(.parameterSet, .ulong, [])
        add(.seed, .bytes, [.sensitive])
        add(.encapsulate, .bool, [.settable, .copySettable], default: no)
        add(.decapsulate, .bool, [.settable, .copySettable], default: no)
        return table
    }()

    public static func rule(_ type: AttributeType) -> AttributeRule? { rules[type] }

    /// The attributes with a blind-index entry, in order (each stored object looks each up once,
    /// instead of looking up the rule of each of its ~40 attributes).
    public static let indexedTypes: [AttributeType] = rules.values.filter { $0.flags.contains(.indexed) }.map(\.type).sorted()

    /// The secret parts of keys (`withoutSecrets` removes these, instead of looking up the rule of
    /// each attribute).
    public static let sensitiveTypes: [AttributeType] = rules.values.filter { $0.flags.contains(.sensitive) }.map(\.type).sorted()

    /// The attributes taken from the row, not stored in the record (a few: searched in order).
    public static let derivedFromRowTypes: [AttributeType] = rules.values.filter { $0.flags.contains(.derivedFromRow) }.map(\.type).sorted()

    /// The attributes every storage object has.
    static let storage: [AttributeType] = [.objectClass, .token, .isPrivate, .modifiable, .label, .copyable, .destroyable, .uniqueID, .creationTime, .modificationTime]

    static let commonKey: [AttributeType] = [.keyType, .id, .startDate, .endDate, .derive, .local, .keyGenMechanism, .allowedMechanisms, .deriveTemplate]
    static let publicKey: [AttributeType] = commonKey + [.subject, .encrypt, .verify, .verifyRecover, .wrap, .trusted, .publicKeyInfo, .wrapTemplate]
    static let privateKey: [AttributeType] = commonKey + [.subject, .sensitive, .decrypt, .sign, .signRecover, .unwrap, .extractable, .applicationPassword,
                                                          .alwaysSensitive, .neverExtractable, .wrapWithTrusted, .alwaysAuthenticate, .publicKeyInfo,
                                                          .unwrapTemplate, .tpm]

    /// The keychain-item attributes a data object carries (generic and internet passwords).
    static let itemAttributes: [AttributeType] = [.itemClass, .account, .generic, .comment, .itemDescription, .creator, .itemType, .accessGroup,
                                                  .synchronizable, .accessible, .accessControl, .applicationPassword, .securityDomain, .itemProtocol, .port, .path,
                                                  .authenticationType, .isInvisible, .isNegative, .lookupAttributes, .contentType]

    /// What one object class (and key type) has: its attributes, those a creation template must
    /// give, and those fixed at creation even where the attribute is settable elsewhere.
    struct Schema {
        let attributes: Set<AttributeType>
        let required: Set<AttributeType>
        let fixed: Set<AttributeType>
        /// Defaults of this class that differ from the table's.
        let defaults: [AttributeType: [UInt8]]
        /// The rule of each of its attributes (one lookup per template attribute, not two).
        let rules: [AttributeType: AttributeRule]
        /// A new object before its template: every attribute the template may leave out that has
        /// a default, with room for all the schema's attributes (copied, then the template's values
        /// written over it: no growth, no rehash). Worked out once per schema (C_CreateObject looked
        /// up each attribute's rule, requirement and default: four hashed lookups for each of some
        /// 40 attributes per object).
        let creationDefaults: ObjectAttributes
        /// What a creation template must give, in attribute order (the first missing is named).
        let requiredOnCreate: [AttributeType]

        init(attributes: Set<AttributeType>, required: Set<AttributeType>, fixed: Set<AttributeType>, defaults: [AttributeType: [UInt8]] = [:]) {
            self.attributes = attributes
            self.required = required
            self.fixed = fixed
            self.defaults = defaults
            var rules: [AttributeType: AttributeRule] = [:]
            var filled = ObjectAttributes(minimumCapacity: attributes.count + 1)
            var mustGive: [AttributeType] = []
            for type in attributes.sorted() {
                guard let rule = AttributeTable.rule(type) else { continue }
                rules[type] = rule
                if rule.flags.contains(.requiredOnCreate) || required.contains(type) {
                    mustGive.append(type)
                } else if let value = defaults[type] ?? rule.defaultValue {
                    filled[type] = value
                }
            }
            self.rules = rules
            creationDefaults = filled
            requiredOnCreate = mustGive
        }
    }

    /// Certificates and public keys are readable without login (as on Apple platforms, and as
    /// OpenSSH expects); everything else defaults to CKA_PRIVATE = TRUE.
    private static let publicByDefault: [AttributeType: [UInt8]] = [.isPrivate: AttributeValue.bool(false)]

    /// Keychain-item attributes keys and certificates carry (SecItem's view of them).
    static let keyItemAttributes: [AttributeType] = [.itemClass, .applicationTag, .accessGroup, .synchronizable, .accessible, .accessControl, .creator]

    private static func keySchema(_ base: [AttributeType], material: [AttributeType], required: [AttributeType]) -> Schema {
        // CKA_KC_TPM says where the key lives: fixed when it is made (C_SetAttributeValue of it is
        // CKR_ATTRIBUTE_READ_ONLY, even with its own value).
        Schema(attributes: Set(storage + base + material + keyItemAttributes), required: Set(required), fixed: Set(material + [.itemClass, .tpm]),
               defaults: base.starts(with: publicKey) ? publicByDefault : [:])
    }

    private static let certificateAttributes: [AttributeType] = [.certificateType, .trusted, .certificateCategory, .checkValue, .startDate, .endDate,
                                                                  .publicKeyInfo, .subject, .id, .issuer, .serialNumber, .value, .url,
                                                                  .hashOfSubjectPublicKey, .hashOfIssuerPublicKey, .javaMIDPSecurityDomain]

    static let secretKey: [AttributeType] = commonKey + [.sensitive, .encrypt, .decrypt, .sign, .verify, .wrap, .unwrap, .extractable,
                                                         .alwaysSensitive, .neverExtractable, .checkValue, .wrapWithTrusted, .trusted,
                                                         .wrapTemplate, .unwrapTemplate]

    private static let rsaPrivateMaterial: [AttributeType] = [.modulus, .publicExponent, .privateExponent, .prime1, .prime2, .exponent1, .exponent2, .coefficient]

    /// Attributes valid for each supported object class (and key type).
    private static let schemas: [SchemaKey: Schema] = [
        SchemaKey(.data): Schema(attributes: Set(storage + [.application, .objectID, .value] + itemAttributes), required: [], fixed: [.itemClass]),
        SchemaKey(.publicKey, .rsa): keySchema(publicKey, material: [.modulus, .modulusBits, .publicExponent], required: [.modulus, .publicExponent]),
        SchemaKey(.privateKey, .rsa): keySchema(privateKey, material: rsaPrivateMaterial, required: [.modulus, .publicExponent, .privateExponent]),
        SchemaKey(.publicKey, .ec): keySchema(publicKey, material: [.ecParams, .ecPoint], required: [.ecParams, .ecPoint]),
        SchemaKey(.privateKey, .ec): keySchema(privateKey, material: [.ecParams, .value], required: [.ecParams, .value]),
        SchemaKey(.publicKey, .ecEdwards): keySchema(publicKey, material: [.ecParams, .ecPoint], required: [.ecParams, .ecPoint]),
        SchemaKey(.privateKey, .ecEdwards): keySchema(privateKey, material: [.ecParams, .value], required: [.ecParams, .value]),
        SchemaKey(.publicKey, .ecMontgomery): keySchema(publicKey, material: [.ecParams, .ecPoint], required: [.ecParams, .ecPoint]),
        SchemaKey(.privateKey, .ecMontgomery): keySchema(privateKey, material: [.ecParams, .value], required: [.ecParams, .value]),
        SchemaKey(.certificate): Schema(attributes: Set(storage + certificateAttributes + keyItemAttributes), required: [.value],
                                        fixed: [.value, .subject, .issuer, .serialNumber, .publicKeyInfo, .checkValue, .certificateType, .itemClass],
                                        defaults: publicByDefault),
        SchemaKey(.secretKey, .aes): keySchema(secretKey, material: [.value, .valueLength], required: [.value]),
        SchemaKey(.secretKey, .genericSecret): keySchema(secretKey, material: [.value, .valueLength], required: [.value]),
        SchemaKey(.secretKey, .md5HMAC): keySchema(secretKey, material: [.value, .valueLength], required: [.value]),
        SchemaKey(.secretKey, .sha1HMAC): keySchema(secretKey, material: [.value, .valueLength], required: [.value]),
        SchemaKey(.secretKey, .sha224HMAC): keySchema(secretKey, material: [.value, .valueLength], required: [.value]),
        SchemaKey(.secretKey, .sha256HMAC): keySchema(secretKey, material: [.value, .valueLength], required: [.value]),
        SchemaKey(.secretKey, .sha384HMAC): keySchema(secretKey, material: [.value, .valueLength], required: [.value]),
        SchemaKey(.secretKey, .sha512HMAC): keySchema(secretKey, material: [.value, .valueLength], required: [.value]),
        SchemaKey(.secretKey, .sha3_224HMAC): keySchema(secretKey, material: [.value, .valueLength], required: [.value]),
        SchemaKey(.secretKey, .sha3_256HMAC): keySchema(secretKey, material: [.value, .valueLength], required: [.value]),
        SchemaKey(.secretKey, .sha3_384HMAC): keySchema(secretKey, material: [.value, .valueLength], required: [.value]),
        SchemaKey(.secretKey, .sha3_512HMAC): keySchema(secretKey, material: [.value, .valueLength], required: [.value]),
        SchemaKey(.secretKey, .hkdf): keySchema(secretKey, material: [.value, .valueLength], required: [.value]),
        SchemaKey(.secretKey, .chacha20): keySchema(secretKey, material: [.value, .valueLength], required: [.value]),
        SchemaKey(.secretKey, .aesXTS): keySchema(secretKey, material: [.value, .valueLength], required: [.value]),
        SchemaKey(.publicKey, .dsa): keySchema(publicKey, material: [.prime, .subprime, .base, .value], required: [.prime, .subprime, .base, .value]),
        SchemaKey(.privateKey, .dsa): keySchema(privateKey, material: [.prime, .subprime, .base, .value], required: [.prime, .subprime, .base, .value]),
        SchemaKey(.publicKey, .dh): keySchema(publicKey, material: [.prime, .base, .value], required: [.prime, .base, .value]),
        SchemaKey(.privateKey, .dh): keySchema(privateKey, material: [.prime, .base, .value, .valueBits], required: [.prime, .base, .value]),
        SchemaKey(.domainParameters, .dsa): Schema(attributes: Set(storage + [.keyType, .local, .prime, .subprime, .base, .primeBits, .subprimeBits]),
                                                   required: [.prime, .subprime, .base], fixed: [.prime, .subprime, .base, .keyType],
                                                   defaults: publicByDefault),
        SchemaKey(.domainParameters, .dh): Schema(attributes: Set(storage + [.keyType, .local, .prime, .base, .primeBits]),
                                                  required: [.prime, .base], fixed: [.prime, .base, .keyType], defaults: publicByDefault),
        SchemaKey(.publicKey, .mlDSA): keySchema(publicKey, material: [.parameterSet, .value], required: [.parameterSet, .value]),
        // A private key's CKA_VALUE (the expanded key) is accepted beside its seed, checked and not kept.
        SchemaKey(.privateKey, .mlDSA): keySchema(privateKey, material: [.parameterSet, .seed, .value], required: [.parameterSet, .seed]),
        SchemaKey(.publicKey, .mlKEM): keySchema(publicKey + [.encapsulate], material: [.parameterSet, .value], required: [.parameterSet, .value]),
        SchemaKey(.privateKey, .mlKEM): keySchema(privateKey + [.decapsulate], material: [.parameterSet, .seed, .value], required: [.parameterSet, .seed]),
        SchemaKey(.secretKey, .des): keySchema(secretKey, material: [.value], required: [.value]),
        SchemaKey(.secretKey, .des2): keySchema(secretKey, material: [.value], required: [.value]),
        SchemaKey(.secretKey, .des3): keySchema(secretKey, material: [.value], required: [.value]),
    ]

    struct SchemaKey: Hashable {
        let objectClass: ObjectClass
        let keyType: KeyType?
        init(_ objectClass: ObjectClass, _ keyType: KeyType? = nil) {
            self.objectClass = objectClass
            self.keyType = keyType
        }
    }

    /// Whether objects of this class carry CKA_KEY_TYPE.
    public static func isKeyClass(_ objectClass: ObjectClass) -> Bool {
        objectClass == .publicKey || objectClass == .privateKey || objectClass == .secretKey
    }

    /// Whether objects of this class carry CKA_KEY_TYPE to say which algorithm they serve.
    public static func hasKeyType(_ objectClass: ObjectClass) -> Bool {
        isKeyClass(objectClass) || objectClass == .domainParameters
    }

    public static func isSupported(_ objectClass: ObjectClass) -> Bool {
        schemas.keys.contains { $0.objectClass == objectClass }
    }

    public static func isSupported(_ objectClass: ObjectClass, keyType: KeyType?) -> Bool {
        schemas[SchemaKey(objectClass, keyType)] != nil
    }

    /// Whether `type` is an attribute of objects of `objectClass` (and `keyType`).
    public static func isValid(_ type: AttributeType, for objectClass: ObjectClass, keyType: KeyType? = nil) -> Bool {
        schemas[SchemaKey(objectClass, keyType)]?.attributes.contains(type) ?? false
    }

    public static func attributes(of objectClass: ObjectClass, keyType: KeyType? = nil) -> Set<AttributeType> {
        schemas[SchemaKey(objectClass, keyType)]?.attributes ?? []
    }

    static func schema(_ objectClass: ObjectClass, keyType: KeyType?) -> Schema? {
        schemas[SchemaKey(objectClass, keyType)]
    }
}
