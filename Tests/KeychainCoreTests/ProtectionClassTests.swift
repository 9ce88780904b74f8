import Glibc
import XCTest
import KeychainCrypto
@testable import KeychainCore

/// Each kSecAttrAccessible class at the keychain layer: what opens it, in this process and in a
/// fresh one, and what a copy of the file without its device key still opens.
final class ProtectionClassTests: XCTestCase {
    private var root = ""
    private var folder: String { root + "/keychains" }
    private var deviceKey: DeviceKeyFile { DeviceKeyFile(path: root + "/state/device-key") }
    private let kdf = ScryptParameters(logN: 8, blockSize: 8, parallelism: 1)
    private let soPIN = Array("so-secret".utf8)
    private let userPIN = Array("1234".utf8)

    override func setUp() {
        var template = Array("/tmp/kc-protection.XXXXXX".utf8CString)
        root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        setenv("KEYCHAIN_PKCS11_DEVICE_KEY", root + "/state/device-key", 1)
    }

    override func tearDown() { _ = system("rm -rf '\(root)'") }

    private func makeKeychain(withUserPIN: Bool = true) throws -> Keychain {
        try soPIN.withUnsafeBytes { so in
            guard withUserPIN else {
                return try KeychainDirectory(path: folder).createKeychain(slotID: nil, label: "test", soPIN: so, userPIN: nil, kdf: kdf)
            }
            return try userPIN.withUnsafeBytes { try KeychainDirectory(path: folder).createKeychain(slotID: nil, label: "test", soPIN: so, userPIN: $0, kdf: kdf) }
        }
    }

    private func unlock(_ keychain: Keychain, _ owner: PINOwner = .user) throws -> MasterKey {
        try (owner == .user ? userPIN : soPIN).withUnsafeBytes { try keychain.unlock(owner, pin: $0) }
    }

    private func code(_ body: () throws -> Void) -> KeychainError.Code? {
        do { try body(); return nil } catch { return (error as? KeychainError)?.code }
    }




    func test_the_class_decides_cka_private_and_a_contradiction_is_refused() throws {
        for protection in ProtectionClass.allCases {
            XCTAssertEqual(try ProtectionClassItems.item("x", protection).isPrivate, protection.needsLogin, "\(protection)")
        }
        XCTAssertEqual(code { _ = try ProtectionClassItems.item("x", .whenUnlocked, isPrivate: false) }, nil, "the template is only assembled here")
        let keychain = try makeKeychain()
        let master = try unlock(keychain)
        XCTAssertEqual(code { _ = try keychain.add(try ProtectionClassItems.item("x", .whenUnlocked, isPrivate: false), uid: try Random.bytes(16), master: master) },
                       .templateInconsistent)
        XCTAssertEqual(code { _ = try keychain.add(try ProtectionClassItems.item("x", .always, isPrivate: true), uid: try Random.bytes(16), master: master) },
                       .templateInconsistent)
    }

    func test_each_class_opens_with_exactly_what_it_needs() throws {
        let keychain = try makeKeychain()
        let ids = try ProtectionClassItems.storeOneOfEach(keychain, master: try unlock(keychain))
        XCTAssertEqual(access(deviceKey.path, F_OK), 0, "the first device-bound item creates the device key")
        var status = stat()
        XCTAssertEqual(stat(deviceKey.path, &status), 0)
        XCTAssertEqual(status.st_mode & 0o777, 0o600)
        let all = Set(ProtectionClass.allCases.map { "\($0)" })
        let withoutLogin: Set<String> = ["afterFirstUnlock", "always", "afterFirstUnlockThisDeviceOnly", "alwaysThisDeviceOnly"]

        // This process logged in once: after "logout" (no master) the AfterFirstUnlock classes
        // stay usable, the WhenUnlocked ones do not.
        XCTAssertEqual(try ProtectionClassItems.labels(keychain, master: nil), withoutLogin)
        XCTAssertEqual(try ProtectionClassItems.labels(keychain, master: try unlock(keychain)), all)

        // A fresh process (a new instance) before any login: only the Always classes.
        let fresh = try Keychain.open(at: keychain.path, deviceKey: deviceKey)
        XCTAssertEqual(try ProtectionClassItems.labels(fresh, master: nil), ["always", "alwaysThisDeviceOnly"])
        XCTAssertEqual(code { _ = try fresh.object(id: ids[.afterFirstUnlock] ?? 0, master: nil) }, .protectionUnavailable)
        XCTAssertEqual(code { _ = try fresh.object(id: ids[.whenUnlocked] ?? 0, master: nil) }, .objectNotFound)
        let master = try unlock(fresh)
        XCTAssertEqual(try ProtectionClassItems.labels(fresh, master: master), all)
        XCTAssertEqual(try ProtectionClassItems.labels(fresh, master: nil), withoutLogin)
        XCTAssertEqual(try fresh.object(id: ids[.afterFirstUnlockThisDeviceOnly] ?? 0, master: nil)[.value], Array("secret of afterFirstUnlockThisDeviceOnly".utf8))

        let info = try fresh.info()
        XCTAssertEqual(info.privateObjects, 3)
        XCTAssertEqual(info.publicObjects, 4)
        XCTAssertEqual(info.deviceBoundObjects, 4)
        XCTAssertNil(info.deviceKeyProblem)
    }

    func test_passcode_class_needs_a_user_pin() throws {
        let keychain = try makeKeychain(withUserPIN: false)
        let master = try unlock(keychain, .securityOfficer)
        XCTAssertEqual(code { _ = try keychain.add(try ProtectionClassItems.item("p", .whenPasscodeSetThisDeviceOnly), uid: try Random.bytes(16), master: master) },
                       .userPINNotInitialized)
        XCTAssertNoThrow(try keychain.add(try ProtectionClassItems.item("u", .whenUnlockedThisDeviceOnly), uid: try Random.bytes(16), master: master))
    }

    func test_nothing_secret_opens_from_the_file_alone() throws {
        let keychain = try makeKeychain()
        _ = try ProtectionClassItems.storeOneOfEach(keychain, master: try unlock(keychain))
        let raw = try String(decoding: Array(contentsOf: keychain.path) + Array(contentsOf: keychain.path + "-wal"), as: UTF8.self)
        for protection in ProtectionClass.allCases { XCTAssertFalse(raw.contains("secret of \(protection)")) }
    }

    func test_a_copy_without_its_device_key_keeps_device_bound_items_sealed_and_everything_else_intact() throws {
        let keychain = try makeKeychain()
        let ids = try ProtectionClassItems.storeOneOfEach(keychain, master: try unlock(keychain))
        let moved = root + "/elsewhere/moved.keychain-db"
        // The file and its write-ahead log, as a copy of the folder would take them.
        XCTAssertEqual(system("mkdir -p '\(root)/elsewhere' && cp '\(keychain.path)' '\(moved)' && cp '\(keychain.path)-wal' '\(moved)-wal'"), 0)
        let otherDevice = DeviceKeyFile(path: root + "/other-machine/device-key")

        // Missing device key: the device-bound items are unavailable, with the reason.
        let copy = try Keychain.open(at: moved, deviceKey: otherDevice)
        let problem = try XCTUnwrap(try copy.info().deviceKeyProblem)
        XCTAssertTrue(problem.contains("missing"), problem)
        XCTAssertEqual(try copy.info().deviceBoundObjects, 4)
        XCTAssertEqual(try ProtectionClassItems.labels(copy, master: nil), [], "Always items are bound to the first device: a copy needs the PIN once")
        XCTAssertEqual(code { _ = try copy.object(id: ids[.alwaysThisDeviceOnly] ?? 0, master: nil) }, .deviceKeyUnavailable)
        let master = try unlock(copy)
        XCTAssertEqual(try ProtectionClassItems.labels(copy, master: master), ["whenUnlocked", "afterFirstUnlock", "always"])
        XCTAssertEqual(code { _ = try copy.object(id: ids[.whenUnlockedThisDeviceOnly] ?? 0, master: master) }, .deviceKeyUnavailable)
        XCTAssertEqual(try copy.object(id: ids[.always] ?? 0, master: master)[.value], Array("secret of always".utf8))

        // The login created a key for the new device; it is not the items' key.
        XCTAssertEqual(access(otherDevice.path, F_OK), 0)
        let again = try Keychain.open(at: moved, deviceKey: otherDevice)
        let mismatch = try XCTUnwrap(try again.info().deviceKeyProblem)
        XCTAssertTrue(mismatch.contains("not the one"), mismatch)
        XCTAssertEqual(code { _ = try again.add(try ProtectionClassItems.item("new", .alwaysThisDeviceOnly), uid: try Random.bytes(16), master: try self.unlock(again)) },
                       .deviceKeyUnavailable, "new device-bound items are refused while old ones are stranded")

        // Deleting the stranded items lets the copy bind to its new device.
        for protection in ProtectionClass.allCases where protection.isDeviceBound { try again.remove(id: ids[protection] ?? 0, master: try unlock(again)) }
        XCTAssertNoThrow(try again.add(try ProtectionClassItems.item("new", .alwaysThisDeviceOnly), uid: try Random.bytes(16), master: try unlock(again)))
        let third = try Keychain.open(at: moved, deviceKey: otherDevice)
        XCTAssertEqual(try ProtectionClassItems.labels(third, master: nil), ["always", "new"], "Always items now open on the new device without a login")

        // The original, with its own device key, lost nothing.
        let original = try Keychain.open(at: keychain.path, deviceKey: deviceKey)
        XCTAssertEqual(try ProtectionClassItems.labels(original, master: try unlock(original)), Set(ProtectionClass.allCases.map { "\($0)" }))
    }

    func test_an_unsafe_or_damaged_device_key_is_refused_with_its_reason() throws {
        let keychain = try makeKeychain()
        _ = try ProtectionClassItems.storeOneOfEach(keychain, master: try unlock(keychain))
        XCTAssertEqual(chmod(deviceKey.path, 0o644), 0)
        let exposed = try Keychain.open(at: keychain.path, deviceKey: deviceKey)
        XCTAssertTrue(try XCTUnwrap(try exposed.info().deviceKeyProblem).contains("readable by others"))
        XCTAssertEqual(try ProtectionClassItems.labels(exposed, master: nil), [], "the Always key's device copy needs the device key, its master copy a login")
        XCTAssertEqual(chmod(deviceKey.path, 0o600), 0)
        XCTAssertEqual(truncate(deviceKey.path, 16), 0)
        let damaged = try Keychain.open(at: keychain.path, deviceKey: deviceKey)
        XCTAssertTrue(try XCTUnwrap(try damaged.info().deviceKeyProblem).contains("damaged"))
    }

    /// The Always key made for a keychain's first Always item inside a transaction that rolls
    /// back must not stay cached: Always items added afterwards would be sealed under a key that
    /// was never stored, and lost when the process ends.
    func test_a_rolled_back_first_always_item_leaves_no_cached_key() throws {
        let keychain = try makeKeychain()
        let master = try unlock(keychain)
        let rolledBack = try ProtectionClassItems.item("rolled back", .always)
        let uid = try Random.bytes(16)
        XCTAssertEqual(code {
            try keychain.transaction { () throws(KeychainError) in
                _ = try keychain.add(rolledBack, uid: uid, master: master)
                throw KeychainError(.argumentsBad, "abort")
            }
        }, .argumentsBad)
        _ = try keychain.add(try ProtectionClassItems.item("kept", .always), uid: try Random.bytes(16), master: master)
        let reopened = try Keychain.open(at: keychain.path, deviceKey: deviceKey)
        XCTAssertEqual(try ProtectionClassItems.labels(reopened, master: nil), ["kept"])
        XCTAssertEqual(try ProtectionClassItems.labels(reopened, master: try unlock(reopened)), ["kept"])
    }
}

private extension Array where Element == UInt8 {
    init(contentsOf path: String) throws {
        guard let file = fopen(path, "rb") else { throw KeychainError(.storageFailure, "cannot read \(path)") }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count == 0 { break }
            bytes += buffer.prefix(count)
        }
        self = bytes
    }
}
