import Foundation
import Glibc
import XCTest
import KeychainCore
import KeychainCrypto
@testable import SecretService

/// A private session bus: `dbus-daemon --session` as a child process listening on a socket in
/// `folder`, terminated by its PID in `stop`.
final class PrivateBus {
    let address: String
    private let process = Process()

    init(folder: String) throws {
        guard let program = Self.find("dbus-daemon") else {
            throw XCTSkip("dbus-daemon is missing (scripts/install-deps.sh installs it)")
        }
        let socket = folder + "/bus"
        address = "unix:path=" + socket
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = ["--session", "--nofork", "--address=" + address]
        // Its complaints (it cannot raise its descriptor limit when not root…) go to a file.
        _ = FileManager.default.createFile(atPath: folder + "/dbus-daemon.log", contents: nil)
        let log = FileHandle(forWritingAtPath: folder + "/dbus-daemon.log")
        process.standardOutput = log
        process.standardError = log
        try process.run()
        // Ready when its socket is there (at most 5 s).
        for _ in 0..<500 where access(socket, F_OK) != 0 { usleep(10_000) }
        guard access(socket, F_OK) == 0 else {
            stop()
            let said = (try? String(contentsOfFile: folder + "/dbus-daemon.log", encoding: .utf8)) ?? ""
            throw TestFailure("dbus-daemon did not make \(socket): \(said)")
        }
    }

    func stop() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
    }

    private static func find(_ program: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(program)" }.first { access($0, X_OK) == 0 }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The unlock session of a test, in memory: the keychain checks the PIN, the master key is held
/// here until `lock`.
final class MemoryKeySource: KeySource, @unchecked Sendable {
    private let mutex = PThreadMutex()
    private var held: [String: SecureBytes] = [:]

    func sessionKey(path: String) -> SecureBytes? {
        mutex.withLock { held[path].map { key in key.withUnsafeBytes { SecureBytes($0) } } }
    }

    func isHeld(path: String) -> Bool { mutex.withLock { held[path] != nil } }

    func unlock(path: String, pin: UnsafeRawBufferPointer) -> Result<Void, KeychainError> {
        do {
            let keychain = try Keychain.open(at: path)
            let key = keychain.exportedMasterKey(try keychain.unlock(.user, pin: pin))
            mutex.withLock { held[path] = key }
            return .success(())
        } catch {
            return .failure(error)
        }
    }

    func lock(path: String) { mutex.withLock { held[path] = nil } }
}

/// Each test gets a temporary keychain folder with an unlocked keychain "login" (user PIN 1234),
/// a private bus, the server on it (in this process, over a MemoryKeySource), and a client
/// connection; all of it goes in `tearDown`.
class SecretServiceTestCase: XCTestCase {
    static let userPIN = "1234"
    static let variables = ["KEYCHAIN_PKCS11_DIR", "KEYCHAIN_PKCS11_DEVICE_KEY", "KEYCHAIN_PKCS11_KDF_LOG_N", "KEYCHAIN_PKCS11_DEFAULT",
                            "KEYCHAIN_PKCS11_PROMPT", "KEYCHAIN_PKCS11_CONF", "DBUS_SESSION_BUS_ADDRESS"]

    var root = ""
    var keychainFile = ""
    let keys = MemoryKeySource()
    private var bus: PrivateBus?
    private var server: SecretServiceServer?
    private var connection: BusClient?
    private var savedEnvironment: [String: String?] = [:]

    /// The client connection (set up for every test).
    var client: BusClient {
        get throws {
            guard let connection else { throw TestFailure("no client connection") }
            return connection
        }
    }

    override func setUpWithError() throws {
        var template = Array("/tmp/kc-secret-service.XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ $0.baseAddress.flatMap { mkdtemp($0) } }) else { throw TestFailure("mkdtemp") }
        root = String(cString: made)
        for name in Self.variables { savedEnvironment[name] = ProcessInfo.processInfo.environment[name] }
        for name in Self.variables { unsetenv(name) }
        setenv("KEYCHAIN_PKCS11_DIR", root + "/keychains", 1)
        setenv("KEYCHAIN_PKCS11_DEVICE_KEY", root + "/device-key", 1)
        setenv("KEYCHAIN_PKCS11_KDF_LOG_N", "10", 1)

        let directory = KeychainDirectory(path: root + "/keychains")
        try directory.ensureExists()
        let keychain = try Array("so-secret".utf8).withUnsafeBytes { so in
            try Array(Self.userPIN.utf8).withUnsafeBytes { user in
                try directory.create(label: "login", soPIN: so, userPIN: user, kdf: ScryptParameters(logN: 10, blockSize: 8, parallelism: 1),
                                     policy: .default)
            }
        }
        keychainFile = keychain.path
        try unlockKeychain()

        let bus = try PrivateBus(folder: root)
        self.bus = bus
        setenv("DBUS_SESSION_BUS_ADDRESS", bus.address, 1)
        let server = SecretServiceServer(keys: keys, report: { _ in })
        self.server = server
        if let problem = server.start() { throw TestFailure("the server did not start: \(problem)") }
        connection = try BusClient()
    }

    override func tearDown() {
        connection = nil
        server?.stop()
        server = nil
        bus?.stop()
        bus = nil
        keys.lock(path: keychainFile)
        for (name, value) in savedEnvironment {
            if let value { setenv(name, value, 1) } else { unsetenv(name) }
        }
        _ = system("rm -rf '\(root)'")
    }

    func unlockKeychain() throws {
        try Array(Self.userPIN.utf8).withUnsafeBytes { try keys.unlock(path: keychainFile, pin: $0).get() }
    }
}
