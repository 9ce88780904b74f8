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

public nonisolated(unsafe) let kSecClass: CFString = ConstantString("class")
public nonisolated(unsafe) let kSecClassGenericPassword: CFString = ConstantString("genp")
public nonisolated(unsafe) let kSecClassInternetPassword: CFString = ConstantString("inet")
public nonisolated(unsafe) let kSecClassCertificate: CFString = ConstantString("cert")
public nonisolated(unsafe) let kSecClassKey: CFString = ConstantString("keys")
public nonisolated(unsafe) let kSecClassIdentity: CFString = ConstantString("idnt")

// MARK: attributes

public nonisolated(unsafe) let kSecAttrAccessible: CFString = ConstantString("pdmn")
public nonisolated(unsafe) let kSecAttrAccessControl: CFString = ConstantString("accc")
public nonisolated(unsafe) let kSecAttrAccessGroup: CFString = ConstantString("agrp")
public nonisolated(unsafe) let kSecAttrSynchronizable: CFString = ConstantString("sync")
public nonisolated(unsafe) let kSecAttrSynchronizableAny: CFString = ConstantString("syna")
public nonisolated(unsafe) let kSecAttrCreationDate: CFString = ConstantString("cdat")
public nonisolated(unsafe) let kSecAttrModificationDate: CFString = ConstantString("mdat")
public nonisolated(unsafe) let kSecAttrDescription: CFString = ConstantString("desc")
public nonisolated(unsafe) let kSecAttrComment: CFString = ConstantString("icmt")
public nonisolated(unsafe) let kSecAttrCreator: CFString = ConstantString("crtr")
public nonisolated(unsafe) let kSecAttrType: CFString = ConstantString("type")
public nonisolated(unsafe) let kSecAttrLabel: CFString = ConstantString("labl")
public nonisolated(unsafe) let kSecAttrIsInvisible: CFString = ConstantString("invi")
public nonisolated(unsafe) let kSecAttrIsNegative: CFString = ConstantString("nega")
public nonisolated(unsafe) let kSecAttrAccount: CFString = ConstantString("acct")
public nonisolated(unsafe) let kSecAttrService: CFString = ConstantString("svce")
public nonisolated(unsafe) let kSecAttrGeneric: CFString = ConstantString("gena")
public nonisolated(unsafe) let kSecAttrSecurityDomain: CFString = ConstantString("sdmn")
public nonisolated(unsafe) let kSecAttrServer: CFString = ConstantString("srvr")
public nonisolated(unsafe) let kSecAttrProtocol: CFString = ConstantString("ptcl")
public nonisolated(unsafe) let kSecAttrAuthenticationType: CFString = ConstantString("atyp")
public nonisolated(unsafe) let kSecAttrPort: CFString = ConstantString("port")
public nonisolated(unsafe) let kSecAttrPath: CFString = ConstantString("path")

// Keys and certificates.
public nonisolated(unsafe) let kSecAttrKeyClass: CFString = ConstantString("kcls")
public nonisolated(unsafe) let kSecAttrKeyClassPublic: CFString = ConstantString("0")
public nonisolated(unsafe) let kSecAttrKeyClassPrivate: CFString = ConstantString("1")
public nonisolated(unsafe) let kSecAttrKeyClassSymmetric: CFString = ConstantString("2")
public nonisolated(unsafe) let kSecAttrKeyType: CFString = ConstantString("type")
public nonisolated(unsafe) let kSecAttrKeyTypeRSA: CFString = ConstantString("42")
public nonisolated(unsafe) let kSecAttrKeyTypeECSECPrimeRandom: CFString = ConstantString("73")
public nonisolated(unsafe) let kSecAttrKeyTypeEC: CFString = ConstantString("73")
public nonisolated(unsafe) let kSecAttrKeySizeInBits: CFString = ConstantString("bsiz")
public nonisolated(unsafe) let kSecAttrEffectiveKeySize: CFString = ConstantString("esiz")
public nonisolated(unsafe) let kSecAttrApplicationLabel: CFString = ConstantString("klbl")
public nonisolated(unsafe) let kSecAttrApplicationTag: CFString = ConstantString("atag")
public nonisolated(unsafe) let kSecAttrIsPermanent: CFString = ConstantString("perm")
public nonisolated(unsafe) let kSecAttrIsSensitive: CFString = ConstantString("sens")
public nonisolated(unsafe) let kSecAttrIsExtractable: CFString = ConstantString("extr")
public nonisolated(unsafe) let kSecAttrCanEncrypt: CFString = ConstantString("encr")
public nonisolated(unsafe) let kSecAttrCanDecrypt: CFString = ConstantString("decr")
public nonisolated(unsafe) let kSecAttrCanDerive: CFString = ConstantString("drve")
public nonisolated(unsafe) let kSecAttrCanSign: CFString = ConstantString("sign")
public nonisolated(unsafe) let kSecAttrCanVerify: CFString = ConstantString("vrfy")
public nonisolated(unsafe) let kSecAttrCanWrap: CFString = ConstantString("wrap")
public nonisolated(unsafe) let kSecAttrCanUnwrap: CFString = ConstantString("unwp")
public nonisolated(unsafe) let kSecPrivateKeyAttrs: CFString = ConstantString("private")
public nonisolated(unsafe) let kSecPublicKeyAttrs: CFString = ConstantString("public")
public nonisolated(unsafe) let kSecAttrSubject: CFString = ConstantString("subj")
public nonisolated(unsafe) let kSecAttrIssuer: CFString = ConstantString("issr")
public nonisolated(unsafe) let kSecAttrSerialNumber: CFString = ConstantString("slnr")
public nonisolated(unsafe) let kSecAttrPublicKeyHash: CFString = ConstantString("pkhh")
public nonisolated(unsafe) let kSecAttrCertificateType: CFString = ConstantString("ctyp")

// kSecAttrAccessible values.
public nonisolated(unsafe) let kSecAttrAccessibleWhenUnlocked: CFString = ConstantString("ak")
public nonisolated(unsafe) let kSecAttrAccessibleAfterFirstUnlock: CFString = ConstantString("ck")
public nonisolated(unsafe) let kSecAttrAccessibleAlways: CFString = ConstantString("dk")
public nonisolated(unsafe) let kSecAttrAccessibleWhenPasscodeSetThisDeviceOnly: CFString = ConstantString("akpu")
public nonisolated(unsafe) let kSecAttrAccessibleWhenUnlockedThisDeviceOnly: CFString = ConstantString("aku")
public nonisolated(unsafe) let kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly: CFString = ConstantString("cku")
public nonisolated(unsafe) let kSecAttrAccessibleAlwaysThisDeviceOnly: CFString = ConstantString("dku")

// MARK: values, returns, search

public nonisolated(unsafe) let kSecValueData: CFString = ConstantString("v_Data")
public nonisolated(unsafe) let kSecValueRef: CFString = ConstantString("v_Ref")
public nonisolated(unsafe) let kSecValuePersistentRef: CFString = ConstantString("v_PersistentRef")
public nonisolated(unsafe) let kSecReturnData: CFString = ConstantString("r_Data")
public nonisolated(unsafe) let kSecReturnAttributes: CFString = ConstantString("r_Attributes")
public nonisolated(unsafe) let kSecReturnRef: CFString = ConstantString("r_Ref")
public nonisolated(unsafe) let kSecReturnPersistentRef: CFString = ConstantString("r_PersistentRef")
public nonisolated(unsafe) let kSecMatchLimit: CFString = ConstantString("m_Limit")
public nonisolated(unsafe) let kSecMatchLimitOne: CFString = ConstantString("m_LimitOne")
public nonisolated(unsafe) let kSecMatchLimitAll: CFString = ConstantString("m_LimitAll")
public nonisolated(unsafe) let kSecUseAuthenticationContext: CFString = ConstantString("u_AuthCtx")
public nonisolated(unsafe) let kSecUseOperationPrompt: CFString = ConstantString("u_OpPrompt")
public nonisolated(unsafe) let kSecUseAuthenticationUI: CFString = ConstantString("u_AuthUI")
public nonisolated(unsafe) let kSecUseAuthenticationUIAllow: CFString = ConstantString("u_AuthUIA")
public nonisolated(unsafe) let kSecUseAuthenticationUIFail: CFString = ConstantString("u_AuthUIF")
public nonisolated(unsafe) let kSecUseAuthenticationUISkip: CFString = ConstantString("u_AuthUIS")
/// Deprecated by Apple in favour of kSecUseAuthenticationUI: true means …Fail.
public nonisolated(unsafe) let kSecUseNoAuthenticationUI: CFString = ConstantString("u_NoAuthUI")
public nonisolated(unsafe) let kSecMatchCaseInsensitive: CFString = ConstantString("m_CaseInsensitive")
/// Accepted and ignored: every keychain here behaves like Apple's data protection keychain.
public nonisolated(unsafe) let kSecUseDataProtectionKeychain: CFString = ConstantString("nleg")
/// This project's addition: the label of the keychain to use (default: the configured one).
public nonisolated(unsafe) let kSecUseKeychainLabel: CFString = ConstantString("u_KeychainLabel")

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
