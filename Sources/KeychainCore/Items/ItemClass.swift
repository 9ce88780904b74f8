/// Keychain item classes stored as CKO_DATA objects (DESIGN §4). Keys, certificates and
/// identities are PKCS#11 key and certificate objects themselves.
public enum ItemClass: UInt, Sendable {
    case genericPassword = 1
    case internetPassword = 2
    /// A key added through SecItem (keys created through PKCS#11 carry no item class).
    case key = 3
    /// A certificate added through SecItem.
    case certificate = 4

    /// The attributes that make an item unique in its class (Apple's primary keys; the access
    /// group and synchronizable flag included). CKA_APPLICATION holds the service or server.
    var primaryKey: [AttributeType] {
        switch self {
        case .genericPassword:
            return [.account, .application, .accessGroup, .synchronizable]
        case .internetPassword:
            return [.account, .securityDomain, .application, .itemProtocol, .authenticationType, .port, .path, .accessGroup, .synchronizable]
        case .key:
            // Apple's key primary key has the key size and effective size; the curve and the
            // modulus size stand for them (a P-256 and a P-384 key may share a label and tag).
            return [.objectClass, .id, .applicationTag, .keyType, .ecParams, .modulusBits, .creator, .startDate, .endDate, .accessGroup, .synchronizable]
        case .certificate:
            return [.certificateType, .issuer, .serialNumber, .accessGroup, .synchronizable]
        }
    }
}

extension ObjectAttributes {
    /// The keychain item class of a data object, if it is a keychain item.
    public var itemClass: ItemClass? {
        guard let raw = values[.itemClass].flatMap(AttributeValue.decodeULong) else { return nil }
        return ItemClass(rawValue: raw)
    }

    /// Whether `other` is the same keychain item: same class and primary key (absent equals empty).
    public func isSameItem(as other: ObjectAttributes) -> Bool {
        guard let mine = primaryKeyTuple else { return false }
        return mine == other.primaryKeyTuple
    }

    /// The values of the item's primary key in a fixed encoding (absent equals empty), or nil
    /// for objects that are not keychain items.
    var primaryKeyTuple: [UInt8]? {
        guard let itemClass else { return nil }
        var tuple: [(type: UInt64, value: [UInt8])] = [(0, AttributeValue.ulong(itemClass.rawValue))]
        for type in itemClass.primaryKey {
            let defaultValue = AttributeTable.rule(type)?.defaultValue ?? []
            tuple.append((UInt64(type.rawValue), values[type] ?? defaultValue))
        }
        return tuple.flatMap { entry in
            withUnsafeBytes(of: entry.type.bigEndian) { Array($0) } + withUnsafeBytes(of: UInt32(entry.value.count).bigEndian) { Array($0) } + entry.value
        }
    }
}
