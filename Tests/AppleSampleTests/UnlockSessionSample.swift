import Foundation
import Security
import XCTest
import KeychainCore

/// Apple-style code in a process that never unlocks and has no prompt program: with the keychain
/// unlocked in the login session (keychaind), it reads the password; locked there, it is
/// errSecInteractionNotAllowed, as on a Mac when nothing may ask.
final class UnlockSessionSampleTests: AppleSampleCase {
    private func readPassword() -> (OSStatus, String?) {
        let query: [String: Any] = [kSecClass as String: kSecClassGenericPassword,
                                    kSecAttrService as String: "session.example",
                                    kSecAttrAccount as String: "me",
                                    kSecReturnData as String: true]
        var item: CFTypeRef?
        let status = SecItemCopyMatching(query as CFDictionary, &item)
        return (status, (item as? Data).map { String(decoding: $0, as: UTF8.self) })
    }

    func test_a_process_finds_the_keychain_unlocked_by_the_session() throws {
        // keychaind is built beside the test bundle.
        let folder = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        let daemon = folder.appendingPathComponent("keychaind")
        guard FileManager.default.isExecutableFile(atPath: daemon.path) else {
            return XCTFail("keychaind is not built at \(daemon.path) (swift build --build-tests builds it)")
        }
        // Stored through the prompt, then everything locked and no prompt left.
        XCTAssertEqual(SecItemAdd([kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: "session.example",
                                   kSecAttrAccount as String: "me", kSecValueData as String: Data("from the session".utf8)] as CFDictionary, nil),
                       errSecSuccess)
        lockKeychain()
        unsetenv("KEYCHAIN_PKCS11_PROMPT")
        XCTAssertEqual(readPassword().0, errSecInteractionNotAllowed)

        let agentFolder = root + "/agent"
        XCTAssertEqual(mkdir(agentFolder, 0o700), 0)
        let socket = agentFolder + "/agent.sock"
        setenv("KEYCHAIN_PKCS11_AGENT", socket, 1)
        defer { unsetenv("KEYCHAIN_PKCS11_AGENT") }
        let process = Process()
        process.executableURL = daemon
        process.arguments = ["--foreground", "--socket", socket]
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        for _ in 0..<50 where !UnlockSession.isRunning { usleep(100_000) }
        XCTAssertTrue(UnlockSession.isRunning)
        let path = try XCTUnwrap(KeychainDirectory(path: root + "/keychains").keychainFiles().first)
        // What `keychainctl unlock` does.
        let outcome = Array("1234".utf8).withUnsafeBytes { UnlockSession.unlock(path: path, pin: $0, idleTimeout: 0) }
        guard case .success? = outcome else { return XCTFail("unlock through keychaind: \(String(describing: outcome))") }

        let (status, value) = readPassword()
        XCTAssertEqual(status, errSecSuccess)
        XCTAssertEqual(value, "from the session")

        // Locked in the session (and in this process): asked again, nothing can answer.
        UnlockSession.lock(path: path)
        lockKeychain()
        XCTAssertEqual(readPassword().0, errSecInteractionNotAllowed)
    }
}
