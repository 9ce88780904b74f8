/// Which items may be synchronizable (CKA_KC_SYNCHRONIZABLE, kSecAttrSynchronizable): the one rule
/// every door asks (Docs/keychain-api.md, "Synchronizable items"). An item syncs to the user's
/// other devices, so it may be marked only if it can exist on another device: a token object
/// (a session object never leaves its process) that is not bound to this device — no
/// `…ThisDeviceOnly` protection class, not a key inside this machine's TPM, and no access-control
/// constraint that belongs to this device (user presence, biometry, device passcode, watch, or
/// private-key-usage: the key never leaves). An application password alone travels with the item.
/// Public keys and certificates follow the same rule.
public enum SyncRule {
    /// Why an item may not be synchronizable. Each door answers with its own code (errSecParam,
    /// CKR_TEMPLATE_INCONSISTENT, keychainctl's usage status) and this reason.
    public enum Refusal: Error, Equatable, Sendable {
        /// CKA_TOKEN = FALSE: a session object (a SecKey that is not permanent).
        case sessionObject
        /// A `…ThisDeviceOnly` protection class (CKA_KC_ACCESSIBLE 4…7).
        case thisDeviceOnly(ProtectionClass)
        /// A key made in this machine's TPM (CKA_KC_TPM = TRUE; kSecAttrTokenIDSecureEnclave).
        case inTPM
        /// Access-control constraints that only this device can check (the flags that bind).
        case boundAccessControl(AccessControlFlags)

        /// One line saying what is refused, without a door's option or attribute names.
        public var reason: String {
            switch self {
            case .sessionObject: return "a session object cannot sync"
            case .thisDeviceOnly: return "a ThisDeviceOnly item cannot sync"
            case .inTPM: return "a key in the TPM cannot sync"
            case .boundAccessControl(let flags): return "an item bound to this device by \(SyncRule.names(of: flags).joined(separator: " and ")) cannot sync"
            }
        }
    }

    /// The access-control flags that bind an item to this device: each use asks this device's
    /// user (presence, biometry, passcode, watch), or the key is never to leave (private-key-usage).
    public static let deviceBoundFlags: AccessControlFlags = AccessControlFlags.presence.union(.privateKeyUsage)

    /// Why an item with these properties may not be synchronizable; nil when it may. The first
    /// obstacle found is named: session, protection class, TPM, access control.
    public static func refusal(token: Bool, protection: ProtectionClass?, accessControl: AccessControlFlags, inTPM: Bool) -> Refusal? {
        if !token { return .sessionObject }
        if let protection, protection.isDeviceBound { return .thisDeviceOnly(protection) }
        if inTPM { return .inTPM }
        let bound = accessControl.intersection(deviceBoundFlags)
        if !bound.isEmpty { return .boundAccessControl(bound) }
        return nil
    }

    /// Why `object` may not be synchronizable, whatever its flag says now; nil when it may.
    public static func refusal(for object: ObjectAttributes) -> Refusal? {
        let protection = object[.accessible].flatMap(AttributeValue.decodeULong).flatMap(ProtectionClass.init(rawValue:))
        return refusal(token: object.isToken, protection: protection, accessControl: object.accessControlFlags, inTPM: object.bool(.tpm))
    }

    /// The flags' names as keychainctl and Docs/security.md spell them.
    static func names(of flags: AccessControlFlags) -> [String] {
        let named: [(AccessControlFlags, String)] = [(.userPresence, "user presence"), (.biometryAny, "biometry"), (.biometryCurrentSet, "biometry"),
                                                     (.devicePasscode, "device passcode"), (.watch, "watch"), (.privateKeyUsage, "private-key-usage")]
        var names: [String] = []
        for (flag, name) in named where flags.contains(flag) && !names.contains(name) { names.append(name) }
        return names
    }
}

extension ObjectAttributes {
    /// CKA_KC_SYNCHRONIZABLE (kSecAttrSynchronizable).
    public var isSynchronizable: Bool { bool(.synchronizable) }

    /// Why this object, marked synchronizable, may not be (`SyncRule`); nil when it is not marked
    /// or may be. What a new item (every door's create, copy, generate, unwrap, derive) is checked by.
    public var syncRefusal: SyncRule.Refusal? {
        guard isSynchronizable else { return nil }
        return SyncRule.refusal(for: self)
    }

    /// `syncRefusal` for this object as a change of `old` (C_SetAttributeValue, SecItemUpdate):
    /// only a combination the change makes is refused, so an item stored so before the rule keeps
    /// its flags through other changes (turning sync off is always allowed).
    public func syncRefusal(changing old: ObjectAttributes) -> SyncRule.Refusal? {
        guard let refusal = syncRefusal, old.syncRefusal != refusal else { return nil }
        return refusal
    }
}
