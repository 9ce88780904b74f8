import Foundation
import Security

// secitem: Apple's SecItem calls on the command line, as an app written for Apple platforms makes
// them (the Security module of this project): the cross-door tests use it to show that a password
// stored through one door (D-Bus, keychainctl, PKCS#11) is the same keychain item here.
//
//   secitem find SERVICE [ACCOUNT]       SecItemCopyMatching(kSecClassGenericPassword), prints the password
//   secitem add SERVICE ACCOUNT          SecItemAdd with the password read from standard input
//   secitem delete SERVICE ACCOUNT       SecItemDelete
//   secitem sign-enclave TAG             SecItemCopyMatching(kSecClassKey, kSecAttrTokenIDSecureEnclave, tag) and
//                                        SecKeyCreateSignature(ECDSA X9.62 SHA-256) of standard input, the DER signature to standard output
//   secitem create-enclave TAG           SecKeyCreateRandomKey of a permanent P-256 key in the Secure Enclave (the TPM) with that tag
//
// --sync yes|no|any (find, add, delete) gives kSecAttrSynchronizable: true, false or
// kSecAttrSynchronizableAny; without it Apple's rule applies (only non-synchronizable items).
//
// Exit status: 0, 64 for a usage error, 6 for errSecItemNotFound (-25300), else 1; the OSStatus is printed.

func fail(_ status: OSStatus, _ what: String) -> Never {
    FileHandle.standardError.write(Data("secitem: \(what): OSStatus \(status)\n".utf8))
    exit(status == errSecItemNotFound ? 6 : 1)
}

func usage() -> Never {
    FileHandle.standardError.write(Data(("usage: secitem find SERVICE [ACCOUNT] | add SERVICE ACCOUNT | delete SERVICE ACCOUNT [--sync yes|no|any]"
                                         + " | sign-enclave TAG | create-enclave TAG\n").utf8))
    exit(64)
}

var arguments = Array(CommandLine.arguments.dropFirst())
var synchronizable: Any?
if let index = arguments.firstIndex(of: "--sync") {
    guard index + 1 < arguments.count else { usage() }
    switch arguments[index + 1] {
    case "yes": synchronizable = true
    case "no": synchronizable = false
    case "any": synchronizable = kSecAttrSynchronizableAny
    default: usage()
    }
    arguments.removeSubrange(index...(index + 1))
}
guard let command = arguments.first, arguments.count >= 2 else { usage() }
var query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: arguments[1]]
if arguments.count >= 3 { query[kSecAttrAccount as String] = arguments[2] }
if let synchronizable { query[kSecAttrSynchronizable as String] = synchronizable }

if command == "sign-enclave" {
    let keyQuery: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
                                   kSecAttrApplicationTag as String: Data(arguments[1].utf8), kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom,
                                   kSecReturnRef as String: true]
    var result: CFTypeRef?
    let status = SecItemCopyMatching(keyQuery as CFDictionary, &result)
    guard status == errSecSuccess, let key = result as? SecKey else { fail(status, "SecItemCopyMatching") }
    var error: Unmanaged<CFError>?
    let message = FileHandle.standardInput.readDataToEndOfFile()
    guard let signature = SecKeyCreateSignature(key, .ecdsaSignatureMessageX962SHA256, message as CFData, &error) as Data? else {
        fail(OSStatus(error.map { CFErrorGetCode($0.takeRetainedValue()) } ?? Int(errSecParam)), "SecKeyCreateSignature")
    }
    FileHandle.standardOutput.write(signature)
    exit(0)
}

if command == "create-enclave" {
    let attributes: [String: Any] = [kSecAttrKeyType as String: kSecAttrKeyTypeECSECPrimeRandom, kSecAttrKeySizeInBits as String: 256,
                                     kSecAttrTokenID as String: kSecAttrTokenIDSecureEnclave,
                                     kSecPrivateKeyAttrs as String: [kSecAttrIsPermanent as String: true,
                                                                     kSecAttrApplicationTag as String: Data(arguments[1].utf8)]]
    var error: Unmanaged<CFError>?
    guard SecKeyCreateRandomKey(attributes as CFDictionary, &error) != nil else {
        fail(OSStatus(error.map { CFErrorGetCode($0.takeRetainedValue()) } ?? Int(errSecParam)), "SecKeyCreateRandomKey")
    }
    exit(0)
}

switch command {
case "find":
    query[kSecReturnData as String] = true
    query[kSecMatchLimit as String] = kSecMatchLimitOne
    var result: CFTypeRef?
    let status = SecItemCopyMatching(query as CFDictionary, &result)
    guard status == errSecSuccess, let data = result as? Data else { fail(status, "SecItemCopyMatching") }
    FileHandle.standardOutput.write(data)
case "add":
    query[kSecValueData as String] = FileHandle.standardInput.readDataToEndOfFile()
    let status = SecItemAdd(query as CFDictionary, nil)
    guard status == errSecSuccess else { fail(status, "SecItemAdd") }
case "delete":
    let status = SecItemDelete(query as CFDictionary)
    guard status == errSecSuccess else { fail(status, "SecItemDelete") }
default:
    fail(errSecParam, "unknown command \(command)")
}
