/// kSecAttrAccessible values as stored in CKA_KC_ACCESSIBLE (0 means not given).
public enum ProtectionClass: UInt, CaseIterable, Sendable {
    case whenUnlocked = 1
    case afterFirstUnlock = 2
    case always = 3
    case whenPasscodeSetThisDeviceOnly = 4
    case whenUnlockedThisDeviceOnly = 5
    case afterFirstUnlockThisDeviceOnly = 6
    case alwaysThisDeviceOnly = 7

    /// Whether items of this class are private objects: invisible until the user logs in.
    public var needsLogin: Bool {
        self == .whenUnlocked || self == .whenPasscodeSetThisDeviceOnly || self == .whenUnlockedThisDeviceOnly
    }

    /// Whether items of this class are bound to the device key.
    public var isDeviceBound: Bool { rawValue >= ProtectionClass.whenPasscodeSetThisDeviceOnly.rawValue }
}

/// How a stored row is sealed: the `protection` column, bound into each record's associated
/// data so that a row's protection cannot be edited on disk.
enum Protection: UInt8, CaseIterable {
    /// The file key: objects without secrets that need no login (certificates, public keys,
    /// data objects a PKCS#11 application made public).
    case `public` = 0
    /// The master key: private objects (`WhenUnlocked`).
    case `private` = 1
    /// The master key, kept by the process after its first user login (`AfterFirstUnlock`).
    case afterFirstUnlock = 2
    /// The keychain's Always key, which opens with the device key or with the master key
    /// (`Always` secrets: usable without login on this device, never readable from the file alone).
    case always = 3
    /// The master key and the device key (`WhenUnlockedThisDeviceOnly`, `WhenPasscodeSetThisDeviceOnly`).
    case privateThisDevice = 4
    /// The first login's master key and the device key (`AfterFirstUnlockThisDeviceOnly`).
    case afterFirstUnlockThisDevice = 5
    /// The device key (`AlwaysThisDeviceOnly`).
    case alwaysThisDevice = 6

    /// Private objects (CKA_PRIVATE = TRUE) are seen only while the user is logged in.
    var isPrivate: Bool { self == .private || self == .privateThisDevice }

    var isDeviceBound: Bool { self == .privateThisDevice || self == .afterFirstUnlockThisDevice || self == .alwaysThisDevice }

    /// The protection an object is stored with, from its kSecAttrAccessible value (CKA_KC_ACCESSIBLE)
    /// and CKA_PRIVATE, which must agree.
    init(for object: ObjectAttributes) throws(KeychainError) {
        let holdsSecret = object.objectClass != .certificate && object.objectClass != .publicKey
        let raw = object[.accessible].flatMap(AttributeValue.decodeULong) ?? 0
        guard raw == 0 || ProtectionClass(rawValue: raw) != nil else {
            throw KeychainError(.attributeValueInvalid, "CKA_KC_ACCESSIBLE \(raw) is not a protection class (1…7)")
        }
        switch ProtectionClass(rawValue: raw) {
        case nil:
            // No protection class given: PKCS#11 rules. Keys that are not private are the
            // Always class, so that their secret still never lies open in the file.
            let isKey = object.objectClass == .privateKey || object.objectClass == .secretKey
            self = object.isPrivate ? .private : (isKey ? .always : .public)
        case .whenUnlocked?: self = .private
        case .afterFirstUnlock?: self = .afterFirstUnlock
        case .always?: self = holdsSecret ? .always : .public
        case .whenPasscodeSetThisDeviceOnly?, .whenUnlockedThisDeviceOnly?: self = .privateThisDevice
        case .afterFirstUnlockThisDeviceOnly?: self = .afterFirstUnlockThisDevice
        case .alwaysThisDeviceOnly?: self = .alwaysThisDevice
        }
        if let given = ProtectionClass(rawValue: raw), given.needsLogin != object.isPrivate {
            throw KeychainError(.templateInconsistent, "protection class \(given) needs CKA_PRIVATE = \(given.needsLogin ? "TRUE" : "FALSE")")
        }
    }
}
