import KeychainCrypto

/// An object's attributes: every attribute of its class, each with a value.
public struct ObjectAttributes: Sendable, Equatable {
    public private(set) var values: [AttributeType: [UInt8]]
    /// Made by `withoutSecrets` and given no sensitive attribute since: nothing here to wipe.
    private var knownFreeOfSecrets = false

    public init(_ values: [AttributeType: [UInt8]] = [:]) { self.values = values }

    /// Empty, with room for `minimumCapacity` attributes (no rehashing while they are added).
    public init(minimumCapacity: Int) { values = Dictionary(minimumCapacity: minimumCapacity) }

    public subscript(_ type: AttributeType) -> [UInt8]? {
        get { values[type] }
        set {
            values[type] = newValue
            if knownFreeOfSecrets, newValue != nil, AttributeTable.rule(type)?.flags.contains(.sensitive) == true { knownFreeOfSecrets = false }
        }
    }

    /// Equal values (however each copy came to be).
    public static func == (lhs: ObjectAttributes, rhs: ObjectAttributes) -> Bool { lhs.values == rhs.values }

    public var objectClass: ObjectClass? {
        values[.objectClass].flatMap(AttributeValue.decodeULong).map(ObjectClass.init(rawValue:))
    }

    public var certificateType: CertificateType? {
        values[.certificateType].flatMap(AttributeValue.decodeULong).map(CertificateType.init(rawValue:))
    }

    public var keyType: KeyType? {
        values[.keyType].flatMap(AttributeValue.decodeULong).map(KeyType.init(rawValue:))
    }

    /// The attributes without secret key parts (what may be kept in memory between operations).
    /// A public key has none: its CKA_VALUE (DSA and DH: y) is public.
    public var withoutSecrets: ObjectAttributes {
        var stripped = self
        if objectClass != .publicKey {
            for type in AttributeTable.sensitiveTypes where stripped.values[type] != nil { stripped.values[type] = nil }
        }
        stripped.knownFreeOfSecrets = true
        return stripped
    }

    /// Whether reading `type` must be refused: a secret part of a sensitive or unextractable key.
    public func isHidden(_ type: AttributeType) -> Bool {
        guard AttributeTable.rule(type)?.flags.contains(.sensitive) == true, objectClass == .privateKey || objectClass == .secretKey else {
            return false
        }
        return bool(.sensitive) || !bool(.extractable)
    }

    public func bool(_ type: AttributeType) -> Bool { values[type].flatMap(AttributeValue.decodeBool) ?? false }

    public var isToken: Bool { bool(.token) }
    public var isPrivate: Bool { bool(.isPrivate) }
    public var isModifiable: Bool { bool(.modifiable) }
    public var isCopyable: Bool { bool(.copyable) }
    public var isDestroyable: Bool { bool(.destroyable) }

    /// Whether every attribute in `template` is present here with an equal value
    /// (PKCS#11 §5.7 C_FindObjectsInit: exact byte match; an unknown attribute never matches).
    /// Whether every template attribute has the object's value; lookup attributes (the Secret
    /// Service's) match when the object holds every pair the template names.
    public func matches(_ template: [(type: AttributeType, value: [UInt8])]) -> Bool {
        template.allSatisfy { entry in
            if entry.type == .lookupAttributes {
                guard let wanted = LookupAttributes(encoded: entry.value) else { return false }
                let held = values[.lookupAttributes].flatMap { LookupAttributes(encoded: $0) } ?? LookupAttributes()
                return wanted.isSubset(of: held)
            }
            return values[entry.type] == entry.value
        }
    }

    /// Sum of the value sizes: what C_GetObjectSize reports.
    public var size: Int { values.values.reduce(0) { $0 + $1.count } }

    /// The stored form (sorted for a stable encoding), without the row-derived attributes.
    public var recordAttributes: [(type: UInt64, value: [UInt8])] {
        var stored: [(type: UInt64, value: [UInt8])] = []
        stored.reserveCapacity(values.count)
        for (type, value) in values where !AttributeTable.derivedFromRowTypes.contains(type) {
            stored.append((UInt64(type.rawValue), value))
        }
        stored.sort { $0.type < $1.type }
        return stored
    }

    public init(recordAttributes: [(type: UInt64, value: [UInt8])]) {
        var values: [AttributeType: [UInt8]] = [:]
        for (type, value) in recordAttributes { values[AttributeType(UInt(truncatingIfNeeded: type))] = value }
        self.values = values
    }

    /// Wipes every value where it lies, at the end of this copy's life. Safe at any time: a value
    /// another holder still shares is copied first (copy-on-write) and only this copy is wiped,
    /// so the wipe reaches the memory only when this is the last holder — which it is for records
    /// just decoded and templates just read, the copies this is meant for.
    public mutating func wipeValues() {
        for key in Array(values.keys) { values[key]?.withUnsafeMutableBytes { KeychainCrypto.wipe($0) } }
    }

    /// Wipes the secret parts of a key or a data object's value in place, leaving the rest (a
    /// public key's CKA_VALUE is public, and its other values are shared with `withoutSecrets`).
    public mutating func wipeSecretValues() {
        guard objectClass != .publicKey else { return }
        for type in AttributeTable.sensitiveTypes where values[type] != nil { values[type]?.withUnsafeMutableBytes { KeychainCrypto.wipe($0) } }
    }

    /// Wipes one attribute's value (as `wipeValues` does) and removes the attribute.
    public mutating func wipeValue(_ type: AttributeType) {
        values[type]?.withUnsafeMutableBytes { KeychainCrypto.wipe($0) }
        values[type] = nil
    }

    /// `wipeValues`, except for attributes made by `withoutSecrets` (and given no secret since):
    /// for attributes that come either in full from a record or without their secrets from a
    /// cache, where wiping would only copy the cache's values to wipe the copy.
    public mutating func wipeValuesIfSecret() {
        guard !knownFreeOfSecrets else { return }
        wipeValues()
    }
}

/// Wipes the values of a template at the end of its life (see `ObjectAttributes.wipeValues`).
public func wipeValues(_ template: inout Template) {
    for index in template.indices { template[index].value.withUnsafeMutableBytes { KeychainCrypto.wipe($0) } }
}
