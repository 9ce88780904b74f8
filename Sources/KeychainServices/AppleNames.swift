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

public nonisolated(unsafe) let kSecAttrProtocolFTP: CFString = "ftp "
public nonisolated(unsafe) let kSecAttrProtocolFTPAccount: CFString = "ftpa"
public nonisolated(unsafe) let kSecAttrProtocolHTTP: CFString = "http"
public nonisolated(unsafe) let kSecAttrProtocolIRC: CFString = "irc "
public nonisolated(unsafe) let kSecAttrProtocolNNTP: CFString = "nntp"
public nonisolated(unsafe) let kSecAttrProtocolPOP3: CFString = "pop3"
public nonisolated(unsafe) let kSecAttrProtocolSMTP: CFString = "smtp"
public nonisolated(unsafe) let kSecAttrProtocolSOCKS: CFString = "sox "
public nonisolated(unsafe) let kSecAttrProtocolIMAP: CFString = "imap"
public nonisolated(unsafe) let kSecAttrProtocolLDAP: CFString = "ldap"
public nonisolated(unsafe) let kSecAttrProtocolAppleTalk: CFString = "atlk"
public nonisolated(unsafe) let kSecAttrProtocolAFP: CFString = "afp "
public nonisolated(unsafe) let kSecAttrProtocolTelnet: CFString = "teln"
public nonisolated(unsafe) let kSecAttrProtocolSSH: CFString = "ssh "
public nonisolated(unsafe) let kSecAttrProtocolFTPS: CFString = "ftps"
public nonisolated(unsafe) let kSecAttrProtocolHTTPS: CFString = "htps"
public nonisolated(unsafe) let kSecAttrProtocolHTTPProxy: CFString = "htpx"
public nonisolated(unsafe) let kSecAttrProtocolHTTPSProxy: CFString = "htsx"
public nonisolated(unsafe) let kSecAttrProtocolFTPProxy: CFString = "ftpx"
public nonisolated(unsafe) let kSecAttrProtocolSMB: CFString = "smb "
public nonisolated(unsafe) let kSecAttrProtocolRTSP: CFString = "rtsp"
public nonisolated(unsafe) let kSecAttrProtocolRTSPProxy: CFString = "rtsx"
public nonisolated(unsafe) let kSecAttrProtocolDAAP: CFString = "daap"
public nonisolated(unsafe) let kSecAttrProtocolEPPC: CFString = "eppc"
public nonisolated(unsafe) let kSecAttrProtocolIPP: CFString = "ipp "
public nonisolated(unsafe) let kSecAttrProtocolNNTPS: CFString = "ntps"
public nonisolated(unsafe) let kSecAttrProtocolLDAPS: CFString = "ldps"
public nonisolated(unsafe) let kSecAttrProtocolTelnetS: CFString = "tels"
public nonisolated(unsafe) let kSecAttrProtocolIMAPS: CFString = "imps"
public nonisolated(unsafe) let kSecAttrProtocolIRCS: CFString = "ircs"
public nonisolated(unsafe) let kSecAttrProtocolPOP3S: CFString = "pops"

// MARK: kSecAttrAuthenticationType values (internet passwords)
public nonisolated(unsafe) let kSecAttrAuthenticationTypeNTLM: CFString = "ntlm"
public nonisolated(unsafe) let kSecAttrAuthenticationTypeMSN: CFString = "msna"
public nonisolated(unsafe) let kSecAttrAuthenticationTypeDPA: CFString = "dpaa"
public nonisolated(unsafe) let kSecAttrAuthenticationTypeRPA: CFString = "rpaa"
public nonisolated(unsafe) let kSecAttrAuthenticationTypeHTTPBasic: CFString = "http"
public nonisolated(unsafe) let kSecAttrAuthenticationTypeHTTPDigest: CFString = "httd"
public nonisolated(unsafe) let kSecAttrAuthenticationTypeHTMLForm: CFString = "form"
public nonisolated(unsafe) let kSecAttrAuthenticationTypeDefault: CFString = "dflt"

// MARK: search keys and other SecItem.h names

public nonisolated(unsafe) let kSecMatchPolicy: CFString = "m_Policy"
public nonisolated(unsafe) let kSecMatchItemList: CFString = "m_ItemList"
public nonisolated(unsafe) let kSecMatchSearchList: CFString = "m_SearchList"
public nonisolated(unsafe) let kSecMatchIssuers: CFString = "m_Issuers"
public nonisolated(unsafe) let kSecMatchEmailAddressIfPresent: CFString = "m_EmailAddressIfPresent"
public nonisolated(unsafe) let kSecMatchSubjectContains: CFString = "m_SubjectContains"
public nonisolated(unsafe) let kSecMatchSubjectStartsWith: CFString = "m_SubjectStartsWith"
public nonisolated(unsafe) let kSecMatchSubjectEndsWith: CFString = "m_SubjectEndsWith"
public nonisolated(unsafe) let kSecMatchSubjectWholeString: CFString = "m_SubjectWholeString"
public nonisolated(unsafe) let kSecMatchDiacriticInsensitive: CFString = "m_DiacriticInsensitive"
public nonisolated(unsafe) let kSecMatchWidthInsensitive: CFString = "m_WidthInsensitive"
public nonisolated(unsafe) let kSecMatchTrustedOnly: CFString = "m_TrustedOnly"
public nonisolated(unsafe) let kSecMatchValidOnDate: CFString = "m_ValidOnDate"
public nonisolated(unsafe) let kSecUseItemList: CFString = "u_ItemList"
public nonisolated(unsafe) let kSecUseKeychain: CFString = "u_Keychain"
public nonisolated(unsafe) let kSecAttrTokenID: CFString = "tkid"
public nonisolated(unsafe) let kSecAttrTokenIDSecureEnclave: CFString = "com.apple.setoken"
public nonisolated(unsafe) let kSecAttrAccessGroupToken: CFString = "com.apple.token"
public nonisolated(unsafe) let kSecAttrPersistentReference: CFString = "persistref"
public nonisolated(unsafe) let kSecAttrPersistantReference: CFString = "persistref"
public nonisolated(unsafe) let kSecAttrSyncViewHint: CFString = "vwht"
public nonisolated(unsafe) let kSecAttrCertificateEncoding: CFString = "cenc"
public nonisolated(unsafe) let kSecAttrSubjectKeyID: CFString = "skid"
public nonisolated(unsafe) let kSecAttrIsPrivate: CFString = "priv"
public nonisolated(unsafe) let kSecAttrIsModifiable: CFString = "modi"
public nonisolated(unsafe) let kSecAttrKeyCreator: CFString = "crtr"
public nonisolated(unsafe) let kSecAttrStartDate: CFString = "sdat"
public nonisolated(unsafe) let kSecAttrEndDate: CFString = "edat"
public nonisolated(unsafe) let kSecAttrWasAlwaysSensitive: CFString = "asen"
public nonisolated(unsafe) let kSecAttrWasNeverExtractable: CFString = "next"
public nonisolated(unsafe) let kSecAttrCanSignRecover: CFString = "snrc"
public nonisolated(unsafe) let kSecAttrCanVerifyRecover: CFString = "vyrc"
public nonisolated(unsafe) let kSecAttrPRF: CFString = "prf"
public nonisolated(unsafe) let kSecAttrSalt: CFString = "salt"
public nonisolated(unsafe) let kSecAttrRounds: CFString = "rounds"
public nonisolated(unsafe) let kSecAttrPRFHmacAlgSHA1: CFString = "hsha1"
public nonisolated(unsafe) let kSecAttrPRFHmacAlgSHA224: CFString = "hsha224"
public nonisolated(unsafe) let kSecAttrPRFHmacAlgSHA256: CFString = "hsha256"
public nonisolated(unsafe) let kSecAttrPRFHmacAlgSHA384: CFString = "hsha384"
public nonisolated(unsafe) let kSecAttrPRFHmacAlgSHA512: CFString = "hsha512"
public nonisolated(unsafe) let kSecAttrKeyTypeDSA: CFString = "43"
public nonisolated(unsafe) let kSecAttrKeyTypeAES: CFString = "2147483649"
public nonisolated(unsafe) let kSecAttrKeyTypeDES: CFString = "14"
public nonisolated(unsafe) let kSecAttrKeyType3DES: CFString = "17"
public nonisolated(unsafe) let kSecAttrKeyTypeRC2: CFString = "23"
public nonisolated(unsafe) let kSecAttrKeyTypeRC4: CFString = "25"
public nonisolated(unsafe) let kSecAttrKeyTypeCAST: CFString = "56"
public nonisolated(unsafe) let kSecAttrKeyTypeECDSA: CFString = "73"
public nonisolated(unsafe) let kSecSymmetricKeyAttrs: CFString = "symmetric"
