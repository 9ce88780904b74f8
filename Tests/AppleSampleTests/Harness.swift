import Foundation
import XCTest
import KeychainCore
import KeychainCrypto
import KeychainServices
import TPMTestSupport

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

/// The sample harness with a TPM: a fresh swtpm per test, named by KEYCHAIN_PKCS11_TCTI, as the
/// Secure Enclave samples need (`none`: a machine without one).
class AppleEnclaveCase: AppleSampleCase {
    private var tpm: SoftwareTPM?

    override func setUpWithError() throws {
        try super.setUpWithError()
        let started = try SoftwareTPM()
        tpm = started
        setenv("KEYCHAIN_PKCS11_TCTI", started.tcti, 1)
    }

    override func tearDown() {
        tpm?.stop()
        unsetenv("KEYCHAIN_PKCS11_TCTI")
        super.tearDown()
    }

    /// Says that this machine has no TPM from now on.
    func removeTPM() {
        tpm?.stop()
        tpm = nil
        setenv("KEYCHAIN_PKCS11_TCTI", "none", 1)
    }

    /// Runs the `secitem` program built beside the tests, in this test's keychain folder and TPM.
    func secitem(_ arguments: [String], input: Data) throws -> (status: Int32, output: Data) {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var directory = executable.deletingLastPathComponent()
        if directory.pathExtension == "xctest" { directory = directory.deletingLastPathComponent() }
        let process = Process()
        process.executableURL = directory.appendingPathComponent("secitem")
        process.arguments = arguments
        let stdin = Pipe()
        let stdout = Pipe()
        process.standardInput = stdin
        process.standardOutput = stdout
        try process.run()
        stdin.fileHandleForWriting.write(input)
        try stdin.fileHandleForWriting.close()
        let output = stdout.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, output)
    }
}
