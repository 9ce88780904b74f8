import Foundation
import Security

// secitem: Apple's SecItem calls on the command line, as an app written for Apple platforms makes
// them (the Security module of this project): the cross-door tests use it to show that a password
// stored through one door (D-Bus, keychainctl, PKCS#11) is the same keychain item here.
//
//   secitem find SERVICE [ACCOUNT]       SecItemCopyMatching(kSecClassGenericPassword), prints the password
//   secitem add SERVICE ACCOUNT          SecItemAdd with the password read from standard input
//   secitem delete SERVICE ACCOUNT       SecItemDelete
//
// Exit status: 0, or the OSStatus's last byte with the OSStatus printed (errSecItemNotFound -25300).

func fail(_ status: OSStatus, _ what: String) -> Never {
    FileHandle.standardError.write(Data("secitem: \(what): OSStatus \(status)\n".utf8))
    exit(status == errSecItemNotFound ? 6 : 1)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first, arguments.count >= 2 else {
    FileHandle.standardError.write(Data("usage: secitem find SERVICE [ACCOUNT] | add SERVICE ACCOUNT | delete SERVICE ACCOUNT\n".utf8))
    exit(64)
}
var query: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: arguments[1]]
if arguments.count >= 3 { query[kSecAttrAccount as String] = arguments[2] }

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
