import Foundation
import XCTest
import KeychainCore
import KeychainCrypto
import KeychainServices

/// Both doors with real programs: pkcs11-tool reads what SecItem stored, SecItem signs with a
/// key pkcs11-tool generated, and openssl verifies the signature.
final class RealClientTests: XCTestCase {
    private var directory = ""
    private var module = ""

    override func setUpWithError() throws {
        module = Self.binaryDirectory() + "/libkeychain-pkcs11.so"
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: "/usr/bin/pkcs11-tool"), "pkcs11-tool (opensc) is not installed")
        // scripts/test.sh sets this for the sanitizer runs: an uninstrumented pkcs11-tool cannot
        // load a sanitizer-instrumented module (the plain run covers these tests).
        try XCTSkipIf(ProcessInfo.processInfo.environment["KEYCHAIN_TEST_SANITIZER"] != nil, "sanitizer run: pkcs11-tool cannot load this build")
        setenv("KEYCHAIN_PKCS11_KDF_LOG_N", "8", 1)
        directory = try makeTemporaryLoginKeychain("clients").root
    }

    override func tearDown() { removeTemporaryKeychain(directory) }

    static func binaryDirectory() -> String {
        let executable = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        var directory = executable.deletingLastPathComponent()
        if directory.pathExtension == "xctest" { directory = directory.deletingLastPathComponent() }
        return directory.path
    }

    /// Runs a program; returns its exit status and standard output.
    @discardableResult
    private func run(_ program: String, _ arguments: [String]) throws -> (Int32, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    func test_pkcs11_tool_reads_a_secitem_password_and_secitem_signs_with_a_pkcs11_tool_key() throws {
        let add: [String: Any] = [kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "mail.example",
                                  kSecAttrAccount as String: "alice", kSecAttrLabel as String: "Mail password",
                                  kSecValueData as String: Data("hunter2".utf8)]
        XCTAssertEqual(SecItemAdd(add, nil), errSecSuccess)
        let secretFile = directory + "/secret.out"
        let (readStatus, readOutput) = try run("/usr/bin/pkcs11-tool", ["--module", module, "--login", "--pin", "1234", "--read-object", "--type", "data",
                                                                       "--label", "Mail password", "--application-label", "mail.example", "-o", secretFile])
        XCTAssertEqual(readStatus, 0, readOutput)
        XCTAssertEqual(FileManager.default.contents(atPath: secretFile), Data("hunter2".utf8))

        let (genStatus, genOutput) = try run("/usr/bin/pkcs11-tool", ["--module", module, "--login", "--pin", "1234", "--keypairgen",
                                                                     "--key-type", "EC:prime256v1", "--id", "4242", "--label", "cross-door"])
        XCTAssertEqual(genStatus, 0, genOutput)
        var item: CFTypeRef?
        let query: [String: Any] = [kSecClass as String: kSecClassKey, kSecAttrApplicationLabel as String: Data([0x42, 0x42]),
                                    kSecAttrKeyClass as String: kSecAttrKeyClassPrivate, kSecReturnRef as String: true]
        XCTAssertEqual(SecItemCopyMatching(query as CFDictionary, &item), errSecSuccess)
        let key = try XCTUnwrap(item as? SecKey)
        let message = Data("signed through SecKeyCreateSignature".utf8)
        var error: Unmanaged<CFError>?
        let signature = try XCTUnwrap(SecKeyCreateSignature(key, kSecKeyAlgorithmECDSASignatureMessageX962SHA256, message as CFData, &error) as Data?)
        XCTAssertNil(SecKeyCopyExternalRepresentation(key, &error), "a key pkcs11-tool made sensitive does not leave")
        _ = FileManager.default.createFile(atPath: directory + "/message", contents: message)
        _ = FileManager.default.createFile(atPath: directory + "/signature", contents: signature)
        let (exportStatus, exportOutput) = try run("/usr/bin/pkcs11-tool", ["--module", module, "--read-object", "--type", "pubkey", "--id", "4242",
                                                                           "-o", directory + "/public.der"])
        XCTAssertEqual(exportStatus, 0, exportOutput)
        let (verifyStatus, verifyOutput) = try run("/usr/bin/openssl", ["dgst", "-sha256", "-verify", directory + "/public.der", "-keyform", "DER",
                                                                       "-signature", directory + "/signature", directory + "/message"])
        XCTAssertEqual(verifyStatus, 0)
        XCTAssertEqual(verifyOutput, "Verified OK\n")
    }
}
