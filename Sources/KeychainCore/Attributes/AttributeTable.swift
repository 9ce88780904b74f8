/// The rules for each attribute, as data: one table shared by every object class.
///
/// PKCS#11 3.0 §4.2–§4.5 (common, storage and data-object attributes). Key and certificate
/// attributes join this table, not a switch elsewhere.
public struct AttributeRule: Sendable {
    public enum Kind: Sendable {
        case bool, ulong, bytes
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
        add(.isPrivate, .bool, [.copySettable], default: yes)
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
        add(.value, .bytes, [.settable, .copySettable], default: [])
        return table
    }()

    public static func rule(_ type: AttributeType) -> AttributeRule? { rules[type] }

    /// The attributes every storage object has.
    static let storage: [AttributeType] = [.objectClass, .token, .isPrivate, .modifiable, .label, .copyable, .destroyable, .uniqueID, .creationTime, .modificationTime]

    /// Attributes valid for each supported object class.
    private static let schemas: [ObjectClass: Set<AttributeType>] = [
        .data: Set(storage + [.application, .objectID, .value]),
    ]

    public static func isSupported(_ objectClass: ObjectClass) -> Bool { schemas[objectClass] != nil }

    /// Whether `type` is an attribute of objects of `objectClass`.
    public static func isValid(_ type: AttributeType, for objectClass: ObjectClass) -> Bool {
        schemas[objectClass]?.contains(type) ?? false
    }

    public static func attributes(of objectClass: ObjectClass) -> Set<AttributeType> { schemas[objectClass] ?? [] }
}
