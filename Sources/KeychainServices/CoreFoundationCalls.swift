import Foundation

// The Core Foundation calls Apple's keychain code applies to what this API returns: the CFError
// of a SecKey… or SecAccessControl… call, the CFData of a key or certificate. Here CFError is
// NSError and CFData is NSData (Constants.swift), so each call is the Foundation property it
// stands for; Docs/keychain-api.md lists the CF names that are not offered, and why.

/// Core Foundation's signed count and index type (`CFErrorGetCode`'s result).
public typealias CFIndex = Int
/// Core Foundation's option bits: the raw type of SecAccessControlCreateFlags.
public typealias CFOptionFlags = UInt
/// An error domain's name.
public typealias CFErrorDomain = CFString

/// The domain of OSStatus errors: what every CFError of this API carries, with the status as code.
public nonisolated(unsafe) let kCFErrorDomainOSStatus: CFErrorDomain! = ConstantString("NSOSStatusErrorDomain")
public nonisolated(unsafe) let kCFErrorDomainPOSIX: CFErrorDomain! = ConstantString("NSPOSIXErrorDomain")
public nonisolated(unsafe) let kCFErrorDomainCocoa: CFErrorDomain! = ConstantString("NSCocoaErrorDomain")
public nonisolated(unsafe) let kCFErrorDomainMach: CFErrorDomain! = ConstantString("NSMachErrorDomain")

// userInfo keys, with the values Foundation's NSError keys have on Apple platforms.
public nonisolated(unsafe) let kCFErrorLocalizedDescriptionKey: CFString! = ConstantString("NSLocalizedDescription")
public nonisolated(unsafe) let kCFErrorLocalizedFailureReasonKey: CFString! = ConstantString("NSLocalizedFailureReason")
public nonisolated(unsafe) let kCFErrorLocalizedRecoverySuggestionKey: CFString! = ConstantString("NSLocalizedRecoverySuggestion")
public nonisolated(unsafe) let kCFErrorDescriptionKey: CFString! = ConstantString("NSDescription")
public nonisolated(unsafe) let kCFErrorUnderlyingErrorKey: CFString! = ConstantString("NSUnderlyingError")

public func CFErrorGetDomain(_ error: CFError!) -> CFErrorDomain! {
    error.map { NSString(string: $0.domain) }
}

public func CFErrorGetCode(_ error: CFError!) -> CFIndex {
    error?.code ?? 0
}

/// The error's user info (an empty dictionary when it has none, as Apple's returns).
public func CFErrorCopyUserInfo(_ error: CFError!) -> CFDictionary! {
    error.map { NSDictionary(dictionary: $0.userInfo) }
}

/// The error's localized description (its reason, for this API's errors).
public func CFErrorCopyDescription(_ error: CFError!) -> CFString! {
    error.map { NSString(string: $0.localizedDescription) }
}

public func CFErrorCopyFailureReason(_ error: CFError!) -> CFString! {
    error?.localizedFailureReason.map { NSString(string: $0) }
}

public func CFErrorCopyRecoverySuggestion(_ error: CFError!) -> CFString! {
    error?.localizedRecoverySuggestion.map { NSString(string: $0) }
}

/// A new error; the allocator is ignored, as everywhere here.
public func CFErrorCreate(_ allocator: CFAllocator!, _ domain: CFErrorDomain!, _ code: CFIndex, _ userInfo: CFDictionary!) -> CFError! {
    var info: [String: Any] = [:]
    for (key, value) in userInfo ?? NSDictionary() {
        if let key = ItemMapping.string(key) { info[key] = value }
    }
    return NSError(domain: domain.map { $0 as String } ?? "", code: code, userInfo: info)
}

/// The length of a CFData (a key's external representation, a certificate's DER).
public func CFDataGetLength(_ data: CFData!) -> CFIndex {
    data?.length ?? 0
}

/// The bytes of a CFData, valid while the data lives (as on Apple platforms).
public func CFDataGetBytePtr(_ data: CFData!) -> UnsafePointer<UInt8>! {
    data.map { $0.bytes.assumingMemoryBound(to: UInt8.self) }
}

public func CFArrayGetCount(_ array: CFArray!) -> CFIndex {
    array?.count ?? 0
}

public func CFDictionaryGetCount(_ dictionary: CFDictionary!) -> CFIndex {
    dictionary?.count ?? 0
}

public func CFBooleanGetValue(_ boolean: CFBoolean!) -> Bool {
    boolean?.boolValue ?? false
}

// CFBundle.h's Info.plist keys, with Apple's values: keychain wrappers take their default service
// from `Bundle.main.infoDictionary?[kCFBundleIdentifierKey as String]`. Linux's CoreFoundation
// module has them too, but importing it beside this module makes CFString, CFDictionary and
// kCFBooleanTrue ambiguous, so they are offered here.
public nonisolated(unsafe) let kCFBundleIdentifierKey: CFString! = ConstantString("CFBundleIdentifier")
public nonisolated(unsafe) let kCFBundleNameKey: CFString! = ConstantString("CFBundleName")
public nonisolated(unsafe) let kCFBundleVersionKey: CFString! = ConstantString("CFBundleVersion")
public nonisolated(unsafe) let kCFBundleExecutableKey: CFString! = ConstantString("CFBundleExecutable")
public nonisolated(unsafe) let kCFBundleInfoDictionaryVersionKey: CFString! = ConstantString("CFBundleInfoDictionaryVersion")
public nonisolated(unsafe) let kCFBundleLocalizationsKey: CFString! = ConstantString("CFBundleLocalizations")
public nonisolated(unsafe) let kCFBundleDevelopmentRegionKey: CFString! = ConstantString("CFBundleDevelopmentRegion")
