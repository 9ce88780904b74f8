import Foundation
import XCTest
import KeychainCore
import KeychainCrypto
@testable import KeychainServices

/// A temporary folder with one fresh keychain labelled "login" (SO PIN 12345678, user PIN 1234,
/// a cheap scrypt cost), made this process's keychain folder and device key through the
/// environment. Every keychain of the SecItem door is locked first; with `unlocked` the new one
/// is then unlocked with the user PIN. `subfolder` and `deviceKey` are paths inside the folder.
func makeTemporaryLoginKeychain(_ name: String, subfolder: String? = nil, deviceKey: String = "/.device-key",
                                unlocked: Bool = true) throws -> (root: String, keychain: Keychain) {
    let root = NSTemporaryDirectory() + "kc-\(name)-" + UUID().uuidString
    let folder = subfolder.map { root + "/" + $0 } ?? root
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    setenv("KEYCHAIN_PKCS11_DIR", folder, 1)
    setenv("KEYCHAIN_PKCS11_DEVICE_KEY", root + deviceKey, 1)
    unsetenv("KEYCHAIN_PKCS11_DEFAULT")
    let kdf = ScryptParameters(logN: 8, blockSize: 8, parallelism: 1)
    let keychain = try Array("12345678".utf8).withUnsafeBytes { so in
        try Array("1234".utf8).withUnsafeBytes { user in
            try KeychainDirectory(path: folder).createKeychain(slotID: nil, label: "login", soPIN: so, userPIN: user, kdf: kdf)
        }
    }
    KeychainServices.lockAll()
    if unlocked { XCTAssertEqual(KeychainServices.unlock(password: "1234"), errSecSuccess) }
    return (root, keychain)
}

/// Locks the SecItem door and removes a folder made by `makeTemporaryLoginKeychain`.
func removeTemporaryKeychain(_ root: String) {
    KeychainServices.lockAll()
    try? FileManager.default.removeItem(atPath: root)
}
