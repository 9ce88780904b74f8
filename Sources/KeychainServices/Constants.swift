import Foundation

// Core Foundation names as Apple's Security framework uses them, so keychain code written for
// Apple platforms compiles here unchanged (`kSecClass as String`, `dict as CFDictionary`,
// `"x" as CFString`, `kCFBooleanTrue`). On Linux they are the Foundation classes they bridge to.
public typealias CFTypeRef = AnyObject
public typealias CFString = NSString
public typealias CFData = NSData
public typealias CFDictionary = NSDictionary
public typealias CFArray = NSArray
public typealias CFBoolean = NSNumber
public typealias CFNumber = NSNumber
public typealias CFDate = NSDate
public typealias CFError = NSError
/// Allocators do not exist here: every allocator argument is ignored (Apple code passes
/// `kCFAllocatorDefault` or nil).
public final class CFAllocator: @unchecked Sendable {}
public let kCFAllocatorDefault: CFAllocator? = nil
public typealias OSStatus = Int32
/// Where a function stores an error (LAContext.canEvaluatePolicy): `&error` with `var error: NSError?`.
public typealias NSErrorPointer = UnsafeMutablePointer<NSError?>?

/// Implicitly unwrapped, as Apple's are (`kCFBooleanTrue!` compiles; so does plain `kCFBooleanTrue`).
public let kCFBooleanTrue: CFBoolean! = NSNumber(value: true)
public let kCFBooleanFalse: CFBoolean! = NSNumber(value: false)

// MARK: item classes (values as on Apple platforms)

public nonisolated(unsafe) let kSecClass: CFString = "class"
public nonisolated(unsafe) let kSecClassGenericPassword: CFString = "genp"
public nonisolated(unsafe) let kSecClassInternetPassword: CFString = "inet"
public nonisolated(unsafe) let kSecClassCertificate: CFString = "cert"
public nonisolated(unsafe) let kSecClassKey: CFString = "keys"
public nonisolated(unsafe) let kSecClassIdentity: CFString = "idnt"

// MARK: attributes

public nonisolated(unsafe) let kSecAttrAccessible: CFString = "pdmn"
public nonisolated(unsafe) let kSecAttrAccessControl: CFString = "accc"
public nonisolated(unsafe) let kSecAttrAccessGroup: CFString = "agrp"
public nonisolated(unsafe) let kSecAttrSynchronizable: CFString = "sync"
public nonisolated(unsafe) let kSecAttrSynchronizableAny: CFString = "syna"
public nonisolated(unsafe) let kSecAttrCreationDate: CFString = "cdat"
public nonisolated(unsafe) let kSecAttrModificationDate: CFString = "mdat"
public nonisolated(unsafe) let kSecAttrDescription: CFString = "desc"
public nonisolated(unsafe) let kSecAttrComment: CFString = "icmt"
public nonisolated(unsafe) let kSecAttrCreator: CFString = "crtr"
public nonisolated(unsafe) let kSecAttrType: CFString = "type"
public nonisolated(unsafe) let kSecAttrLabel: CFString = "labl"
public nonisolated(unsafe) let kSecAttrIsInvisible: CFString = "invi"
public nonisolated(unsafe) let kSecAttrIsNegative: CFString = "nega"
public nonisolated(unsafe) let kSecAttrAccount: CFString = "acct"
public nonisolated(unsafe) let kSecAttrService: CFString = "svce"
public nonisolated(unsafe) let kSecAttrGeneric: CFString = "gena"
public nonisolated(unsafe) let kSecAttrSecurityDomain: CFString = "sdmn"
public nonisolated(unsafe) let kSecAttrServer: CFString = "srvr"
public nonisolated(unsafe) let kSecAttrProtocol: CFString = "ptcl"
public nonisolated(unsafe) let kSecAttrAuthenticationType: CFString = "atyp"
public nonisolated(unsafe) let kSecAttrPort: CFString = "port"
public nonisolated(unsafe) let kSecAttrPath: CFString = "path"

// Keys and certificates.
public nonisolated(unsafe) let kSecAttrKeyClass: CFString = "kcls"
public nonisolated(unsafe) let kSecAttrKeyClassPublic: CFString = "0"
public nonisolated(unsafe) let kSecAttrKeyClassPrivate: CFString = "1"
public nonisolated(unsafe) let kSecAttrKeyClassSymmetric: CFString = "2"
public nonisolated(unsafe) let kSecAttrKeyType: CFString = "type"
public nonisolated(unsafe) let kSecAttrKeyTypeRSA: CFString = "42"
public nonisolated(unsafe) let kSecAttrKeyTypeECSECPrimeRandom: CFString = "73"
public nonisolated(unsafe) let kSecAttrKeyTypeEC: CFString = "73"
public nonisolated(unsafe) let kSecAttrKeySizeInBits: CFString = "bsiz"
public nonisolated(unsafe) let kSecAttrEffectiveKeySize: CFString = "esiz"
public nonisolated(unsafe) let kSecAttrApplicationLabel: CFString = "klbl"
public nonisolated(unsafe) let kSecAttrApplicationTag: CFString = "atag"
public nonisolated(unsafe) let kSecAttrIsPermanent: CFString = "perm"
public nonisolated(unsafe) let kSecAttrIsSensitive: CFString = "sens"
public nonisolated(unsafe) let kSecAttrIsExtractable: CFString = "extr"
public nonisolated(unsafe) let kSecAttrCanEncrypt: CFString = "encr"
public nonisolated(unsafe) let kSecAttrCanDecrypt: CFString = "decr"
public nonisolated(unsafe) let kSecAttrCanDerive: CFString = "drve"
public nonisolated(unsafe) let kSecAttrCanSign: CFString = "sign"
public nonisolated(unsafe) let kSecAttrCanVerify: CFString = "vrfy"
public nonisolated(unsafe) let kSecAttrCanWrap: CFString = "wrap"
public nonisolated(unsafe) let kSecAttrCanUnwrap: CFString = "unwp"
public nonisolated(unsafe) let kSecPrivateKeyAttrs: CFString = "private"
public nonisolated(unsafe) let kSecPublicKeyAttrs: CFString = "public"
public nonisolated(unsafe) let kSecAttrSubject: CFString = "subj"
public nonisolated(unsafe) let kSecAttrIssuer: CFString = "issr"
public nonisolated(unsafe) let kSecAttrSerialNumber: CFString = "slnr"
public nonisolated(unsafe) let kSecAttrPublicKeyHash: CFString = "pkhh"
public nonisolated(unsafe) let kSecAttrCertificateType: CFString = "ctyp"

// kSecAttrAccessible values.
public nonisolated(unsafe) let kSecAttrAccessibleWhenUnlocked: CFString = "ak"
public nonisolated(unsafe) let kSecAttrAccessibleAfterFirstUnlock: CFString = "ck"
public nonisolated(unsafe) let kSecAttrAccessibleAlways: CFString = "dk"
public nonisolated(unsafe) let kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly: CFString = "akpu"
public nonisolated(unsafe) let kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString = "aku"
public nonisolated(unsafe) let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = "cku"
public nonisolated(unsafe) let kSecAttrAccessibleAlwaysThisDeviceOnly: CFString = "dku"

// MARK: values, returns, search

public nonisolated(unsafe) let kSecValueData: CFString = "v_Data"
public nonisolated(unsafe) let kSecValueRef: CFString = "v_Ref"
public nonisolated(unsafe) let kSecValuePersistentRef: CFString = "v_PersistentRef"
public nonisolated(unsafe) let kSecReturnData: CFString = "r_Data"
public nonisolated(unsafe) let kSecReturnAttributes: CFString = "r_Attributes"
public nonisolated(unsafe) let kSecReturnRef: CFString = "r_Ref"
public nonisolated(unsafe) let kSecReturnPersistentRef: CFString = "r_PersistentRef"
public nonisolated(unsafe) let kSecMatchLimit: CFString = "m_Limit"
public nonisolated(unsafe) let kSecMatchLimitOne: CFString = "m_LimitOne"
public nonisolated(unsafe) let kSecMatchLimitAll: CFString = "m_LimitAll"
public nonisolated(unsafe) let kSecUseAuthenticationContext: CFString = "u_AuthCtx"
public nonisolated(unsafe) let kSecUseOperationPrompt: CFString = "u_OpPrompt"
public nonisolated(unsafe) let kSecUseAuthenticationUI: CFString = "u_AuthUI"
public nonisolated(unsafe) let kSecUseAuthenticationUIAllow: CFString = "u_AuthUIA"
public nonisolated(unsafe) let kSecUseAuthenticationUIFail: CFString = "u_AuthUIF"
public nonisolated(unsafe) let kSecUseAuthenticationUISkip: CFString = "u_AuthUIS"
/// Deprecated by Apple in favour of kSecUseAuthenticationUI: true means …Fail.
public nonisolated(unsafe) let kSecUseNoAuthenticationUI: CFString = "u_NoAuthUI"
public nonisolated(unsafe) let kSecMatchCaseInsensitive: CFString = "m_CaseInsensitive"
/// Accepted and ignored: every keychain here behaves like Apple's data protection keychain.
public nonisolated(unsafe) let kSecUseDataProtectionKeychain: CFString = "nleg"
/// This project's addition: the label of the keychain to use (default: the configured one).
public nonisolated(unsafe) let kSecUseKeychainLabel: CFString = "u_KeychainLabel"

/// A human-readable message for an OSStatus (Apple's SecCopyErrorMessageString).
public func SecCopyErrorMessageString(_ status: OSStatus, _ reserved: UnsafeMutableRawPointer?) -> CFString? {
    let messages: [OSStatus: String] = [
        errSecSuccess: "No error.",
        errSecUnimplemented: "Function or operation not implemented.",
        errSecIO: "I/O error.",
        errSecParam: "One or more parameters passed to a function were not valid.",
        errSecAllocate: "Failed to allocate memory.",
        errSecUserCanceled: "User canceled the operation.",
        errSecBadReq: "Bad parameter or invalid state for operation.",
        errSecNotAvailable: "No keychain is available. You may need to restart your computer.",
        errSecReadOnly: "This keychain cannot be modified.",
        errSecAuthFailed: "The user name or passphrase you entered is not correct.",
        errSecNoSuchKeychain: "The specified keychain could not be found.",
        errSecDuplicateItem: "The specified item already exists in the keychain.",
        errSecItemNotFound: "The specified item could not be found in the keychain.",
        errSecInteractionNotAllowed: "User interaction is not allowed.",
        errSecDecode: "Unable to decode the provided data.",
        errSecMissingEntitlement: "A required entitlement isn't present.",
        errSecDiskFull: "The disk is full.",
        errSecWrPerm: "Write permissions error.",
        errSecInternalComponent: "An internal component failed.",
        errSecCoreFoundationUnknown: "An unknown Core Foundation error occurred.",
        errSecDataTooLarge: "This item contains information which is too large or in a format that cannot be displayed.",
        errSecNoSuchAttr: "The specified attribute does not exist.",
        errSecNoSuchClass: "The specified item does not appear to be a valid keychain item.",
        errSecNoDefaultKeychain: "A default keychain could not be found.",
        errSecInvalidKeyRef: "The specified key reference is not valid.",
        errSecInvalidItemRef: "The specified item is no longer valid. It may have been deleted from the keychain.",
        errSecUnsupportedFormat: "The specified import or export format is not supported.",
        errSecInvalidData: "The data is not valid.",
        errSecInvalidKeychain: "The specified keychain is not a valid keychain file.",
        errSecNotTrusted: "The certificate is not trusted.",
        errSecVerifyFailed: "The signature did not verify.",
    ]
    return messages[status].map { NSString(string: $0) } ?? NSString(string: "OSStatus \(status)")
}
