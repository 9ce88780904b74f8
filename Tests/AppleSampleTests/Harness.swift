import Foundation
import XCTest
import KeychainCore
import KeychainCrypto
import KeychainServices

/// What the sample ports run on: a fresh keychain labelled "login" with the user password
/// "1234", locked, and a prompt program that answers "1234" and writes each text it was shown
/// to a log — the Linux stand-in for the system's password dialog. The sample files themselves
/// import only Apple's module names and never unlock: the first item that needs the keychain
/// asks the prompt program, as a locked login keychain asks on a Mac.
class AppleSampleCase: XCTestCase {
    private(set) var root = ""
    private(set) var promptLog = ""

    override func setUpWithError() throws {
        root = NSTemporaryDirectory() + "apple-sample-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: root + "/keychains", withIntermediateDirectories: true)
        setenv("KEYCHAIN_PKCS11_DIR", root + "/keychains", 1)
        setenv("KEYCHAIN_PKCS11_DEVICE_KEY", root + "/device-key", 1)
        unsetenv("KEYCHAIN_PKCS11_DEFAULT")
        let kdf = ScryptParameters(logN: 8, blockSize: 8, parallelism: 1)
        _ = try Array("12345678".utf8).withUnsafeBytes { so in
            try Array("1234".utf8).withUnsafeBytes { user in
                try KeychainDirectory(path: root + "/keychains").createKeychain(slotID: nil, label: "login", soPIN: so, userPIN: user, kdf: kdf)
            }
        }
        promptLog = root + "/prompts.log"
        try answerPrompts(with: "1234")
        KeychainServices.lockAll()
    }

    override func tearDown() {
        KeychainServices.lockAll()
        unsetenv("KEYCHAIN_PKCS11_PROMPT")
        try? FileManager.default.removeItem(atPath: root)
    }

    /// Makes the prompt program answer `answer` (nil: the user cancels).
    func answerPrompts(with answer: String?) throws {
        let script = root + "/prompt.sh"
        let body = answer.map { "printf '%s\\n' '\($0)'" } ?? "exit 1"
        try "#!/bin/sh\nprintf '%s\\n' \"$1\" >> '\(promptLog)'\n\(body)\n".write(toFile: script, atomically: true, encoding: .utf8)
        chmod(script, 0o700)
        setenv("KEYCHAIN_PKCS11_PROMPT", script, 1)
    }

    /// The texts the prompt program was shown, in order.
    var prompts: [String] {
        ((try? String(contentsOfFile: promptLog, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }

    /// Locks the keychain again, as a new login session would find it.
    func lockKeychain() { KeychainServices.lockAll() }
}
