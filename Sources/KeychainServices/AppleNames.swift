import Foundation

// Further names of Apple's SecBase.h, SecItem.h, SecKey.h, SecCertificate.h, SecIdentity.h and
// SecAccessControl.h, with Apple's values, so that Apple code compiles unchanged
// (Docs/keychain-api.md says per key what it does here).

public typealias CFNull = NSNull
/// Core Foundation's null (kSecMatchValidOnDate: kCFNull means now).
public let kCFNull: CFNull! = NSNull()

/// SecBase.h's success code, as Apple code compares with it.
public let noErr: OSStatus = 0

// MARK: type identifiers (`CFGetTypeID(item) == SecKeyGetTypeID()`)

public typealias CFTypeID = UInt

/// The type identifier of a Core Foundation or Security object; distinct per type, stable
/// within a process (Apple's numbers are not part of its API).
public func CFGetTypeID(_ object: CFTypeRef?) -> CFTypeID {
    switch object {
    case is SecKey: return SecKeyGetTypeID()
    case is SecCertificate: return SecCertificateGetTypeID()
    case is SecIdentity: return SecIdentityGetTypeID()
    case is SecAccessControl: return SecAccessControlGetTypeID()
    case is LAContext: return 0x10_0005
    case let number as NSNumber where number === kCFBooleanTrue || number === kCFBooleanFalse: return CFBooleanGetTypeID()
    case is NSNumber: return CFNumberGetTypeID()
    case is NSString: return CFStringGetTypeID()
    case is NSData: return CFDataGetTypeID()
    case is NSDictionary: return CFDictionaryGetTypeID()
    case is NSArray: return CFArrayGetTypeID()
    case is NSDate: return CFDateGetTypeID()
    case is NSError: return CFErrorGetTypeID()
    default: return 0
    }
}

public func SecKeyGetTypeID() -> CFTypeID { 0x10_0001 }
public func SecCertificateGetTypeID() -> CFTypeID { 0x10_0002 }
public func SecIdentityGetTypeID() -> CFTypeID { 0x10_0003 }
public func SecAccessControlGetTypeID() -> CFTypeID { 0x10_0004 }
public func CFStringGetTypeID() -> CFTypeID { 7 }
public func CFDataGetTypeID() -> CFTypeID { 20 }
public func CFDictionaryGetTypeID() -> CFTypeID { 18 }
public func CFArrayGetTypeID() -> CFTypeID { 19 }
public func CFNumberGetTypeID() -> CFTypeID { 22 }
public func CFBooleanGetTypeID() -> CFTypeID { 21 }
public func CFDateGetTypeID() -> CFTypeID { 42 }
public func CFErrorGetTypeID() -> CFTypeID { 30 }

// MARK: kSecAttrProtocol values (internet passwords)

public nonisolated(unsafe) let kSecAttrProtocolFTP: CFString = ConstantString("ftp ")
public nonisolated(unsafe) let kSecAttrProtocolFTPAccount: CFString = ConstantString("ftpa")
public nonisolated(unsafe) let kSecAttrProtocolHTTP: CFString = ConstantString("http")
public nonisolated(unsafe) let kSecAttrProtocolIRC: CFString = ConstantString("irc ")
public nonisolated(unsafe) let kSecAttrProtocolNNTP: CFString = ConstantString("nntp")
public nonisolated(unsafe) let kSecAttrProtocolPOP3: CFString = ConstantString("pop3")
public nonisolated(unsafe) let kSecAttrProtocolSMTP: CFString = ConstantString("smtp")
public nonisolated(unsafe) let kSecAttrProtocolSOCKS: CFString = ConstantString("sox ")
public nonisolated(unsafe) let kSecAttrProtocolIMAP: CFString = ConstantString("imap")
public nonisolated(unsafe) let kSecAttrProtocolLDAP: CFString = ConstantString("ldap")
public nonisolated(unsafe) let kSecAttrProtocolAppleTalk: CFString = ConstantString("atlk")
public nonisolated(unsafe) let kSecAttrProtocolAFP: CFString = ConstantString("afp ")
public nonisolated(unsafe) let kSecAttrProtocolTelnet: CFString = ConstantString("teln")
public nonisolated(unsafe) let kSecAttrProtocolSSH: CFString = ConstantString("ssh ")
public nonisolated(unsafe) let kSecAttrProtocolFTPS: CFString = ConstantString("ftps")
public nonisolated(unsafe) let kSecAttrProtocolHTTPS: CFString = ConstantString("htps")
public nonisolated(unsafe) let kSecAttrProtocolHTTPProxy: CFString = ConstantString("htpx")
public nonisolated(unsafe) let kSecAttrProtocolHTTPSProxy: CFString = ConstantString("htsx")
public nonisolated(unsafe) let kSecAttrProtocolFTPProxy: CFString = ConstantString("ftpx")
public nonisolated(unsafe) let kSecAttrProtocolSMB: CFString = ConstantString("smb ")
public nonisolated(unsafe) let kSecAttrProtocolRTSP: CFString = ConstantString("rtsp")
public nonisolated(unsafe) let kSecAttrProtocolRTSPProxy: CFString = ConstantString("rtsx")
public nonisolated(unsafe) let kSecAttrProtocolDAAP: CFString = ConstantString("daap")
public nonisolated(unsafe) let kSecAttrProtocolEPPC: CFString = ConstantString("eppc")
public nonisolated(unsafe) let kSecAttrProtocolIPP: CFString = ConstantString("ipp ")
public nonisolated(unsafe) let kSecAttrProtocolNNTPS: CFString = ConstantString("ntps")
public nonisolated(unsafe) let kSecAttrProtocolLDAPS: CFString = ConstantString("ldps")
public nonisolated(unsafe) let kSecAttrProtocolTelnetS: CFString = ConstantString("tels")
public nonisolated(unsafe) let kSecAttrProtocolIMAPS: CFString = ConstantString("imps")
public nonisolated(unsafe) let kSecAttrProtocolIRCS: CFString = ConstantString("ircs")
public nonisolated(unsafe) let kSecAttrProtocolPOP3S: CFString = ConstantString("pops")

// MARK: kSecAttrAuthenticationType values (internet passwords)
public nonisolated(unsafe) let kSecAttrAuthenticationTypeNTLM: CFString = ConstantString("ntlm")
public nonisolated(unsafe) let kSecAttrAuthenticationTypeMSN: CFString = ConstantString("msna")
public nonisolated(unsafe) let kSecAttrAuthenticationTypeDPA: CFString = ConstantString("dpaa")
public nonisolated(unsafe) let kSecAttrAuthenticationTypeRPA: CFString = ConstantString("rpaa")
public nonisolated(unsafe) let kSecAttrAuthenticationTypeHTTPBasic: CFString = ConstantString("http")
public nonisolated(unsafe) let kSecAttrAuthenticationTypeHTTPDigest: CFString = ConstantString("httd")
public nonisolated(unsafe) let kSecAttrAuthenticationTypeHTMLForm: CFString = ConstantString("form")
public nonisolated(unsafe) let kSecAttrAuthenticationTypeDefault: CFString = ConstantString("dflt")

// MARK: search keys and other SecItem.h names

public nonisolated(unsafe) let kSecMatchPolicy: CFString = ConstantString("m_Policy")
public nonisolated(unsafe) let kSecMatchItemList: CFString = ConstantString("m_ItemList")
public nonisolated(unsafe) let kSecMatchSearchList: CFString = ConstantString("m_SearchList")
public nonisolated(unsafe) let kSecMatchIssuers: CFString = ConstantString("m_Issuers")
public nonisolated(unsafe) let kSecMatchEmailAddressIfPresent: CFString = ConstantString("m_EmailAddressIfPresent")
public nonisolated(unsafe) let kSecMatchSubjectContains: CFString = ConstantString("m_SubjectContains")
public nonisolated(unsafe) let kSecMatchSubjectStartsWith: CFString = ConstantString("m_SubjectStartsWith")
public nonisolated(unsafe) let kSecMatchSubjectEndsWith: CFString = ConstantString("m_SubjectEndsWith")
public nonisolated(unsafe) let kSecMatchSubjectWholeString: CFString = ConstantString("m_SubjectWholeString")
public nonisolated(unsafe) let kSecMatchDiacriticInsensitive: CFString = ConstantString("m_DiacriticInsensitive")
public nonisolated(unsafe) let kSecMatchWidthInsensitive: CFString = ConstantString("m_WidthInsensitive")
public nonisolated(unsafe) let kSecMatchTrustedOnly: CFString = ConstantString("m_TrustedOnly")
public nonisolated(unsafe) let kSecMatchValidOnDate: CFString = ConstantString("m_ValidOnDate")
public nonisolated(unsafe) let kSecUseItemList: CFString = ConstantString("u_ItemList")
public nonisolated(unsafe) let kSecUseKeychain: CFString = ConstantString("u_Keychain")
public nonisolated(unsafe) let kSecAttrTokenID: CFString = ConstantString("tkid")
public nonisolated(unsafe) let kSecAttrTokenIDSecureEnclave: CFString = ConstantString("com.apple.setoken")
public nonisolated(unsafe) let kSecAttrAccessGroupToken: CFString = ConstantString("com.apple.token")
public nonisolated(unsafe) let kSecAttrPersistentReference: CFString = ConstantString("persistref")
public nonisolated(unsafe) let kSecAttrPersistantReference: CFString = ConstantString("persistref")
public nonisolated(unsafe) let kSecAttrSyncViewHint: CFString = ConstantString("vwht")
public nonisolated(unsafe) let kSecAttrCertificateEncoding: CFString = ConstantString("cenc")
public nonisolated(unsafe) let kSecAttrSubjectKeyID: CFString = ConstantString("skid")
public nonisolated(unsafe) let kSecAttrIsPrivate: CFString = ConstantString("priv")
public nonisolated(unsafe) let kSecAttrIsModifiable: CFString = ConstantString("modi")
public nonisolated(unsafe) let kSecAttrKeyCreator: CFString = ConstantString("crtr")
public nonisolated(unsafe) let kSecAttrStartDate: CFString = ConstantString("sdat")
public nonisolated(unsafe) let kSecAttrEndDate: CFString = ConstantString("edat")
public nonisolated(unsafe) let kSecAttrWasAlwaysSensitive: CFString = ConstantString("asen")
public nonisolated(unsafe) let kSecAttrWasNeverExtractable: CFString = ConstantString("next")
public nonisolated(unsafe) let kSecAttrCanSignRecover: CFString = ConstantString("snrc")
public nonisolated(unsafe) let kSecAttrCanVerifyRecover: CFString = ConstantString("vyrc")
public nonisolated(unsafe) let kSecAttrPRF: CFString = ConstantString("prf")
public nonisolated(unsafe) let kSecAttrSalt: CFString = ConstantString("salt")
public nonisolated(unsafe) let kSecAttrRounds: CFString = ConstantString("rounds")
public nonisolated(unsafe) let kSecAttrPRFHmacAlgSHA1: CFString = ConstantString("hsha1")
public nonisolated(unsafe) let kSecAttrPRFHmacAlgSHA224: CFString = ConstantString("hsha224")
public nonisolated(unsafe) let kSecAttrPRFHmacAlgSHA256: CFString = ConstantString("hsha256")
public nonisolated(unsafe) let kSecAttrPRFHmacAlgSHA384: CFString = ConstantString("hsha384")
public nonisolated(unsafe) let kSecAttrPRFHmacAlgSHA512: CFString = ConstantString("hsha512")
public nonisolated(unsafe) let kSecAttrKeyTypeDSA: CFString = ConstantString("43")
public nonisolated(unsafe) let kSecAttrKeyTypeAES: CFString = ConstantString("2147483649")
public nonisolated(unsafe) let kSecAttrKeyTypeDES: CFString = ConstantString("14")
public nonisolated(unsafe) let kSecAttrKeyType3DES: CFString = ConstantString("17")
public nonisolated(unsafe) let kSecAttrKeyTypeRC2: CFString = ConstantString("23")
public nonisolated(unsafe) let kSecAttrKeyTypeRC4: CFString = ConstantString("25")
public nonisolated(unsafe) let kSecAttrKeyTypeCAST: CFString = ConstantString("56")
public nonisolated(unsafe) let kSecAttrKeyTypeECDSA: CFString = ConstantString("73")
public nonisolated(unsafe) let kSecSymmetricKeyAttrs: CFString = ConstantString("symmetric")
