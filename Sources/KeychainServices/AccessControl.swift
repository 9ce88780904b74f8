import Foundation
import KeychainCore

/// Apple's SecAccessControlCreateFlags, with Apple's bit values.
public struct SecAccessControlCreateFlags: OptionSet, Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }

    public static let userPresence = SecAccessControlCreateFlags(rawValue: 1 << 0)
    public static let biometryAny = SecAccessControlCreateFlags(rawValue: 1 << 1)
    public static let biometryCurrentSet = SecAccessControlCreateFlags(rawValue: 1 << 3)
    public static let devicePasscode = SecAccessControlCreateFlags(rawValue: 1 << 4)
    public static let watch = SecAccessControlCreateFlags(rawValue: 1 << 5)
    public static let or = SecAccessControlCreateFlags(rawValue: 1 << 14)
    public static let and = SecAccessControlCreateFlags(rawValue: 1 << 15)
    public static let privateKeyUsage = SecAccessControlCreateFlags(rawValue: 1 << 30)
    public static let applicationPassword = SecAccessControlCreateFlags(rawValue: 1 << 31)
    /// Deprecated names of the biometry flags.
    public static let touchIDAny = biometryAny
    public static let touchIDCurrentSet = biometryCurrentSet

    /// The flags that ask for the user at each use.
    static let presence: SecAccessControlCreateFlags = [.userPresence, .biometryAny, .biometryCurrentSet, .devicePasscode, .watch]
    static let known: SecAccessControlCreateFlags = [.presence, .or, .and, .privateKeyUsage, .applicationPassword]
}

/// An access control: a protection class (kSecAttrAccessible…) and constraint flags.
public final class SecAccessControl: NSObject, @unchecked Sendable {
    let protection: String
    let flags: SecAccessControlCreateFlags

    init(protection: String, flags: SecAccessControlCreateFlags) {
        self.protection = protection
        self.flags = flags
    }

    /// The PKCS#11 attributes an item gets from this access control (Docs/security.md): the flags
    /// themselves (CKA_KC_ACCESS_CONTROL); for keys, user presence, passcode, biometry and watch →
    /// CKA_ALWAYS_AUTHENTICATE (the user PIN at each use; there is no biometry here) and
    /// privateKeyUsage → sensitive and never extractable; applicationPassword → the secret sealed
    /// under the password set on `context` (for keys it is then the context-specific PIN).
    func attributes(isKey: Bool, isPrivate: Bool, context: LAContext?, interaction: Interaction = Interaction(allowed: false, prompt: nil)) throws -> Template {
        var template: Template = [(.accessControl, AttributeValue.ulong(UInt(flags.rawValue)))]
        if flags.contains(.applicationPassword) {
            guard !isKey || isPrivate else { throw ItemError(errSecParam, "an application password applies to private keys") }
            // The context's, else asked through the prompt when the call allows it.
            guard let password = try context?.applicationPassword ?? KeychainAccess.shared.askApplicationPassword(context: context, interaction: interaction) as [UInt8]? else {
                throw ItemError(errSecInteractionNotAllowed, "set the application password on the kSecUseAuthenticationContext (setCredential(_:type: .applicationPassword))")
            }
            template.append((.applicationPassword, password))
            if isKey { template.append((.alwaysAuthenticate, [1])) }
        }
        if isKey, !flags.intersection(SecAccessControlCreateFlags.presence).isEmpty {
            guard isPrivate else { throw ItemError(errSecParam, "user presence applies to private keys") }
            if !template.contains(where: { $0.type == .alwaysAuthenticate }) { template.append((.alwaysAuthenticate, [1])) }
        }
        if flags.contains(.privateKeyUsage), !isPrivate {
            throw ItemError(errSecParam, "kSecAccessControlPrivateKeyUsage applies to private keys")
        }
        // privateKeyUsage keeps the key in; so does any per-use check (an export would skip it).
        if isKey, isPrivate, !flags.isDisjoint(with: SecAccessControlCreateFlags.presence.union([.applicationPassword, .privateKeyUsage])) {
            template += [(.sensitive, [1]), (.extractable, [0])]
        }
        if let index = ItemMapping.accessibility.firstIndex(of: protection) {
            template.append((.accessible, AttributeValue.ulong(UInt(index + 1))))
        }
        return template
    }
}

/// Creates an access control, with Apple's validity rules: the protection must be one of the
/// kSecAttrAccessible… values; `.and` and `.or` exclude each other and join at least two
/// constraints; unknown bits are refused. Errors are errSecParam.
public func SecAccessControlCreateWithFlags(_ allocator: CFAllocator?, _ protection: CFTypeRef, _ flags: SecAccessControlCreateFlags,
                                            _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> SecAccessControl? {
    guard let name = ItemMapping.string(protection), ItemMapping.accessibility.contains(name) else {
        fail(error, errSecParam, "the protection must be a kSecAttrAccessible value")
        return nil
    }
    guard flags.isSubset(of: SecAccessControlCreateFlags.known) else {
        fail(error, errSecParam, "unknown SecAccessControlCreateFlags bits")
        return nil
    }
    if flags.contains(.and) && flags.contains(.or) {
        fail(error, errSecParam, "kSecAccessControlAnd and kSecAccessControlOr exclude each other")
        return nil
    }
    let constraints = flags.subtracting([.and, .or, .privateKeyUsage])
    if flags.contains(.and) || flags.contains(.or), constraints.rawValue.nonzeroBitCount < 2 {
        fail(error, errSecParam, "a conjunction joins at least two constraints")
        return nil
    }
    return SecAccessControl(protection: name, flags: flags)
}
