import Foundation

// Keychain code as it is written for Apple platforms, where Foundation's module graph brings
// Security's names along: this file never says `import Security`. Package.swift's one build
// setting makes Security an implicit import, so the file compiles unchanged on Linux.
//
//   PortingCheck SERVICE    adds a password, finds it by service and account and by its
//                           persistent reference, draws a salt, deletes every match; prints each
//                           call's OSStatus, exits 1 at the first failure.

func check(_ status: OSStatus, _ call: String) {
    print("\(call): \(status)")
    if status != errSecSuccess { exit(1) }
}

let service = CommandLine.arguments.dropFirst().first ?? "porting.example"
let add: [String: Any] = [kSecClass as String: kSecClassGenericPassword,
                          kSecAttrService as String: service,
                          kSecAttrAccount as String: "alice",
                          kSecValueData as String: "ported secret".data(using: .utf8) ?? Data(),
                          kSecReturnPersistentRef as String: kCFBooleanTrue as Any]
var added: CFTypeRef?
check(SecItemAdd(add as CFDictionary, &added), "SecItemAdd")

let find: [String: Any] = [kSecClass as String: kSecClassGenericPassword,
                           kSecAttrService as String: service,
                           kSecAttrAccount as String: "alice",
                           kSecMatchLimit as String: kSecMatchLimitOne,
                           kSecReturnData as String: true]
var found: CFTypeRef?
check(SecItemCopyMatching(find as CFDictionary, &found), "SecItemCopyMatching")
print("password: \(String(data: found as? Data ?? Data(), encoding: .utf8) ?? "?")")

var byReference: CFTypeRef?
let reference: [String: Any] = [kSecValuePersistentRef as String: added as? Data ?? Data(), kSecReturnData as String: true]
check(SecItemCopyMatching(reference as CFDictionary, &byReference), "SecItemCopyMatching by persistent reference")

var salt = [UInt8](repeating: 0, count: 16)
check(SecRandomCopyBytes(kSecRandomDefault, salt.count, &salt), "SecRandomCopyBytes")

let delete: [String: Any] = [kSecClass as String: kSecClassGenericPassword,
                             kSecAttrService as String: service,
                             kSecMatchLimit as String: kSecMatchLimitAll]
check(SecItemDelete(delete as CFDictionary), "SecItemDelete")
print("after delete: \(SecItemCopyMatching(find as CFDictionary, nil))")
