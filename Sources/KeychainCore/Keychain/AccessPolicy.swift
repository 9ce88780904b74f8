/// kSecAttrAccessControl flags as stored in CKA_KC_ACCESS_CONTROL (Apple's bit values).
public struct AccessControlFlags: OptionSet, Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    public static let userPresence = AccessControlFlags(rawValue: 1 << 0)
    public static let biometryAny = AccessControlFlags(rawValue: 1 << 1)
    public static let biometryCurrentSet = AccessControlFlags(rawValue: 1 << 3)
    public static let devicePasscode = AccessControlFlags(rawValue: 1 << 4)
    public static let watch = AccessControlFlags(rawValue: 1 << 5)
    public static let or = AccessControlFlags(rawValue: 1 << 14)
    public static let and = AccessControlFlags(rawValue: 1 << 15)
    public static let privateKeyUsage = AccessControlFlags(rawValue: 1 << 30)
    public static let applicationPassword = AccessControlFlags(rawValue: 1 << 31)

    /// The flags that ask for the user at each use; here each is the user PIN (no biometry).
    public static let presence: AccessControlFlags = [.userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode, .watch]
    /// Every flag Apple defines.
    public static let known: AccessControlFlags = [.presence, .or, .and, .privateKeyUsage, .applicationPassword]
    /// The flags that make a private key sensitive and unextractable: an export would skip their check.
    static let keepKeyIn: AccessControlFlags = [.presence, .applicationPassword, .privateKeyUsage]
}

/// One item's access control — its protection class (kSecAttrAccessible…) and constraint flags —
/// and the one place that decides what they mean for an item (Docs/security.md, "Access
/// control"): which combinations are valid, on which kinds of item, and which PKCS#11
/// attributes they become. keychainctl's `--accessible`/`--access-control` and the Swift API's
/// `SecAccessControl` both ask it.
public struct AccessPolicy: Sendable {
    public let protection: ProtectionClass
    public let flags: AccessControlFlags

    /// Why a policy or its use on an item is refused (errSecParam in the Swift API, a usage
    /// error in keychainctl).
    public struct Refusal: Error, Equatable, Sendable {
        public let reason: String
        init(_ reason: String) { self.reason = reason }
    }

    /// The kinds of item the rules tell apart.
    public enum Item: Sendable {
        case privateKey, publicKey, password, certificate
    }

    /// A policy with Apple's SecAccessControlCreateWithFlags rules: known bits only; `.and` and
    /// `.or` exclude each other and join at least two constraints; an application password with
    /// a presence flag needs one of them (one is the other's alternative or companion).
    public init(protection: ProtectionClass, flags: AccessControlFlags) throws(Refusal) {
        guard flags.isSubset(of: .known) else { throw Refusal("unknown access-control flag bits") }
        let conjunction = flags.intersection([.and, .or])
        guard conjunction != [.and, .or] else { throw Refusal("and and or exclude each other") }
        if !conjunction.isEmpty, flags.subtracting([.and, .or, .privateKeyUsage]).rawValue.nonzeroBitCount < 2 {
            throw Refusal("a conjunction (and, or) joins at least two constraints")
        }
        self.protection = protection
        self.flags = flags
    }

    /// Whether the item must present a credential at each use (CKA_ALWAYS_AUTHENTICATE on keys).
    public var asksAtEachUse: Bool { !flags.isDisjoint(with: AccessControlFlags.presence.union(.applicationPassword)) }

    /// Checks that this policy applies to `item`: presence and an application password to private
    /// keys and passwords, privateKeyUsage to private keys, an application password with a
    /// presence flag only joined by `.and` or `.or`.
    public func check(for item: Item) throws(Refusal) {
        if flags.contains(.privateKeyUsage), item != .privateKey {
            throw Refusal("private-key-usage (kSecAccessControlPrivateKeyUsage) applies to private keys")
        }
        if asksAtEachUse, item != .privateKey, item != .password {
            throw Refusal("per-use authentication (user presence, an application password) applies to private keys and passwords")
        }
        if flags.contains(.applicationPassword), !flags.isDisjoint(with: .presence), flags.isDisjoint(with: [.and, .or]) {
            throw Refusal("an application password with user presence needs and (both at each use) or or (either one)")
        }
    }

    /// The PKCS#11 attributes of an `item` under this policy: CKA_KC_ACCESSIBLE and
    /// CKA_KC_ACCESS_CONTROL; for private keys with a per-use check CKA_ALWAYS_AUTHENTICATE, and
    /// with any constraint CKA_SENSITIVE and not CKA_EXTRACTABLE; with `.applicationPassword` the
    /// password, which `applicationPassword` supplies (called only then, after every check).
    /// CKA_PRIVATE is the caller's: it follows `protection.needsLogin` unless the door says otherwise.
    public func attributes(for item: Item, applicationPassword: () throws -> [UInt8]) throws -> Template {
        try check(for: item)
        var template: Template = [(.accessible, AttributeValue.ulong(protection.rawValue)), (.accessControl, AttributeValue.ulong(flags.rawValue))]
        if item == .privateKey, asksAtEachUse { template.append((.alwaysAuthenticate, AttributeValue.bool(true))) }
        if item == .privateKey, !flags.isDisjoint(with: AccessControlFlags.keepKeyIn) {
            template += [(.sensitive, AttributeValue.bool(true)), (.extractable, AttributeValue.bool(false))]
        }
        if flags.contains(.applicationPassword) { template.append((.applicationPassword, try applicationPassword())) }
        return template
    }
}
