import Foundation
import KeychainCore

/// Apple's SecAccessControlCreateFlags: KeychainCore's `AccessControlFlags` (Apple's bit values)
/// under Apple's names.
public struct SecAccessControlCreateFlags: OptionSet, Sendable {
    public let rawValue: CFOptionFlags
    public init(rawValue: CFOptionFlags) { self.rawValue = rawValue }
    init(_ flags: AccessControlFlags) { self.rawValue = flags.rawValue }

    var core: AccessControlFlags { AccessControlFlags(rawValue: rawValue) }

    public static let userPresence = Self(.userPresence)
    public static let biometryAny = Self(.biometryAny)
    public static let biometryCurrentSet = Self(.biometryCurrentSet)
    public static let devicePasscode = Self(.devicePasscode)
    public static let watch = Self(.watch)
    public static let or = Self(.or)
    public static let and = Self(.and)
    public static let privateKeyUsage = Self(.privateKeyUsage)
    public static let applicationPassword = Self(.applicationPassword)
    /// Deprecated names of the biometry flags.
    public static let touchIDAny = biometryAny
    public static let touchIDCurrentSet = biometryCurrentSet

    /// The flags that ask for the user at each use.
    static let presence = Self(AccessControlFlags.presence)
}

/// An access control: a protection class (kSecAttrAccessible…) and constraint flags, whose
/// meaning KeychainCore's `AccessPolicy` decides.
public final class SecAccessControl: NSObject, @unchecked Sendable {
    let policy: AccessPolicy

    init(policy: AccessPolicy) {
        self.policy = policy
    }

    var flags: SecAccessControlCreateFlags { SecAccessControlCreateFlags(policy.flags) }

    /// The PKCS#11 attributes an item gets from this access control (`AccessPolicy.attributes`);
    /// an application password comes from `context`, else through the prompt when the call allows it.
    func attributes(for item: AccessPolicy.Item, context: LAContext?, interaction: Interaction = Interaction(allowed: false, prompt: nil)) throws -> Template {
        do {
            return try policy.attributes(for: item) {
                guard let password = try context?.applicationPassword ?? KeychainAccess.shared.askApplicationPassword(context: context, interaction: interaction) as [UInt8]? else {
                    throw ItemError(errSecInteractionNotAllowed, "set the application password on the kSecUseAuthenticationContext (setCredential(_:type: .applicationPassword))")
                }
                return password
            }
        } catch let refusal as AccessPolicy.Refusal {
            throw ItemError(errSecParam, refusal.reason)
        }
    }
}

/// Creates an access control, with Apple's validity rules (`AccessPolicy.init`): the protection
/// must be one of the kSecAttrAccessible… values. Errors are errSecParam.
public func SecAccessControlCreateWithFlags(_ allocator: CFAllocator?, _ protection: CFTypeRef, _ flags: SecAccessControlCreateFlags,
                                            _ error: UnsafeMutablePointer<Unmanaged<CFError>?>?) -> SecAccessControl? {
    guard let name = ItemMapping.string(protection), let index = ItemMapping.accessibility.firstIndex(of: name),
          let protectionClass = ProtectionClass(rawValue: UInt(index + 1)) else {
        fail(error, errSecParam, "the protection must be a kSecAttrAccessible value")
        return nil
    }
    do {
        return SecAccessControl(policy: try AccessPolicy(protection: protectionClass, flags: flags.core))
    } catch let refusal {
        fail(error, errSecParam, refusal.reason)
        return nil
    }
}
