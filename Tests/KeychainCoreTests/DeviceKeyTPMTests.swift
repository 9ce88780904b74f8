import Glibc
import Dispatch
import XCTest
import KeychainCrypto
import KeychainTPM
import TPMTestSupport
@testable import KeychainCore

/// The device key sealed by the TPM (swtpm, fresh per test; a second swtpm is "another
/// machine"): made sealed where a TPM answers, in clear without one or when configured so; a
/// keychain folder and key file copied to another TPM open nothing ThisDeviceOnly; sealing a clear
/// key in place keeps every item; damaged files are refused.
final class DeviceKeyTPMTests: KeychainFolderTestCase {
    private var tpms: [SoftwareTPM] = []
    private var deviceKey: DeviceKeyFile { DeviceKeyFile(path: root + "/state/device-key") }

    override func setUp() {
        super.setUp()
        setenv("KEYCHAIN_PKCS11_DEVICE_KEY", deviceKey.path, 1)
    }

    override func tearDown() {
        for tpm in tpms { tpm.stop() }
        unsetenv("KEYCHAIN_PKCS11_TCTI")
        unsetenv("KEYCHAIN_PKCS11_DEVICE_KEY_TPM")
        super.tearDown()
    }

    /// A new swtpm, made this process's TPM.
    @discardableResult
    private func startTPM() throws -> SoftwareTPM {
        let started = try SoftwareTPM()
        tpms.append(started)
        use(started)
        return started
    }

    private func use(_ tpm: SoftwareTPM?) {
        setenv("KEYCHAIN_PKCS11_TCTI", tpm?.tcti ?? "none", 1)
    }

    private func code(_ body: () throws -> Void) -> KeychainError.Code? {
        do { try body(); return nil } catch { return (error as? KeychainError)?.code }
    }

    private func reason(_ body: () throws -> Void) -> String {
        do { try body(); return "" } catch { return (error as? KeychainError)?.reason ?? "\(error)" }
    }

    private func unlock(_ keychain: Keychain) throws -> MasterKey {
        try Array("1234".utf8).withUnsafeBytes { try keychain.unlock(.user, pin: $0) }
    }




    private var allLabels: Set<String> { Set(ProtectionClass.allCases.map { "\($0)" }) }
    private var notDeviceBound: Set<String> {
        Set(ProtectionClass.allCases.filter { !$0.isDeviceBound }.map { "\($0)" })
    }

    private func fileBytes(_ path: String) -> [UInt8] {
        guard let file = fopen(path, "rb") else { return [] }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count <= 0 { break }
            bytes += buffer[0..<count]
        }
        return bytes
    }

    private func writeFile(_ path: String, _ bytes: [UInt8]) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
        XCTAssertEqual(bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }, bytes.count)
        close(fd)
    }

    // MARK: Made sealed, or in clear

    func test_a_new_device_key_is_sealed_when_a_TPM_answers() throws {
        let tpm = try startTPM()
        let keychain = try create("sealed")
        let ids = try ProtectionClassItems.storeOneOfEach(keychain, master: try unlock(keychain))
        XCTAssertEqual(try deviceKey.kind(), .sealed)
        let bytes = fileBytes(deviceKey.path)
        XCTAssertEqual(Array(bytes.prefix(6)), Array("KCDK".utf8) + [1, 1])
        XCTAssertTrue(SealedDeviceKey.sizes.contains(bytes.count), "\(bytes.count) bytes")
        var status = stat()
        XCTAssertEqual(stat(deviceKey.path, &status), 0)
        XCTAssertEqual(status.st_mode & 0o777, 0o600)
        XCTAssertEqual(keychain.deviceBindingKind(), .sealed(tcti: tpm.tcti))

        // A new instance (a new process) unseals it and opens everything.
        let fresh = try Keychain.open(at: keychain.path, deviceKey: deviceKey)
        XCTAssertEqual(try ProtectionClassItems.labels(fresh, master: nil), ["always", "alwaysThisDeviceOnly"])
        XCTAssertEqual(try ProtectionClassItems.labels(fresh, master: try unlock(fresh)), allLabels)
        XCTAssertEqual(try fresh.object(id: ids[.whenUnlockedThisDeviceOnly] ?? 0, master: try unlock(fresh))[.value],
                       Array("secret of whenUnlockedThisDeviceOnly".utf8))
        XCTAssertNil(try fresh.info().deviceKeyProblem)
    }

    func test_without_a_TPM_or_with_device_key_tpm_no_a_new_key_is_kept_in_clear() throws {
        use(nil)
        let first = try create("no-tpm")
        _ = try ProtectionClassItems.storeOneOfEach(first, master: try unlock(first))
        XCTAssertEqual(try deviceKey.kind(), .clear)
        XCTAssertEqual(fileBytes(deviceKey.path).count, 32)
        XCTAssertEqual(first.deviceBindingKind(), .file)

        XCTAssertEqual(unlink(deviceKey.path), 0)
        try startTPM()
        setenv("KEYCHAIN_PKCS11_DEVICE_KEY_TPM", "no", 1)
        let second = try create("tpm-but-no")
        _ = try ProtectionClassItems.storeOneOfEach(second, master: try unlock(second))
        XCTAssertEqual(try deviceKey.kind(), .clear)
        XCTAssertEqual(try ProtectionClassItems.labels(try Keychain.open(at: second.path, deviceKey: deviceKey), master: nil), ["always", "alwaysThisDeviceOnly"])
    }

    func test_device_key_tpm_yes_without_a_TPM_makes_no_key_and_says_why() throws {
        use(nil)
        setenv("KEYCHAIN_PKCS11_DEVICE_KEY_TPM", "yes", 1)
        let keychain = try create("strict")
        let master = try unlock(keychain)
        XCTAssertEqual(code { _ = try keychain.add(try ProtectionClassItems.item("bound", .whenUnlockedThisDeviceOnly), uid: try Random.bytes(16), master: master) },
                       .deviceKeyUnavailable)
        XCTAssertEqual(access(deviceKey.path, F_OK), -1, "no key, neither clear nor sealed")
        XCTAssertTrue(reason { _ = try self.deviceKey.load(create: true) }.contains("device_key_tpm = yes"))
        // Items that need no device key are stored as ever.
        XCTAssertNoThrow(try keychain.add(try ProtectionClassItems.item("plain", .whenUnlocked), uid: try Random.bytes(16), master: master))
    }

    func test_two_creators_at_once_end_with_one_sealed_key() throws {
        try startTPM()
        final class Results: @unchecked Sendable {
            let lock = PThreadMutex(.plain)
            var keys: [[UInt8]] = []
        }
        let results = Results()
        let file = deviceKey
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            let key = (try? file.load(create: true))?.bytes ?? []
            results.lock.withLock { results.keys.append(key) }
        }
        let keys = results.keys
        XCTAssertEqual(keys.count, 4)
        XCTAssertEqual(keys[0].count, 32)
        XCTAssertEqual(Set(keys).count, 1, "every creator uses the key in the file")
        XCTAssertEqual(try deviceKey.load(create: false)?.bytes, keys[0])
        let leftovers = try System.directoryEntries(root + "/state").filter { $0 != "device-key" }
        XCTAssertEqual(leftovers, [], "no temporary file is left")
    }

    // MARK: Another machine

    func test_a_copy_on_another_TPM_opens_nothing_device_bound_and_the_first_TPM_opens_it_again() throws {
        let first = try startTPM()
        let keychain = try create("moved")
        let ids = try ProtectionClassItems.storeOneOfEach(keychain, master: try unlock(keychain))
        // The keychain folder and the key file, copied as a home-directory copy takes them.
        let elsewhere = root + "/other-machine"
        XCTAssertEqual(system("mkdir -p '\(elsewhere)' && cp '\(keychain.path)' '\(keychain.path)-wal' '\(elsewhere)/' && cp -p '\(deviceKey.path)' '\(elsewhere)/device-key'"), 0)
        let moved = elsewhere + "/" + (keychain.path.split(separator: "/").last.map(String.init) ?? "")
        let copiedKey = DeviceKeyFile(path: elsewhere + "/device-key")
        let copiedBytes = fileBytes(copiedKey.path)

        let second = try startTPM()
        let copy = try Keychain.open(at: moved, deviceKey: copiedKey)
        let problem = try XCTUnwrap(try copy.info().deviceKeyProblem)
        XCTAssertTrue(problem.contains("sealed by another TPM"), problem)
        XCTAssertEqual(try copy.info().deviceBoundObjects, 4)
        XCTAssertEqual(try ProtectionClassItems.labels(copy, master: nil), [], "the Always key's device copy needs the device key")
        let master = try unlock(copy)
        XCTAssertEqual(try ProtectionClassItems.labels(copy, master: master), notDeviceBound)
        for protection in ProtectionClass.allCases where protection.isDeviceBound {
            XCTAssertEqual(code { _ = try copy.object(id: ids[protection] ?? 0, master: master) }, .deviceKeyUnavailable, "\(protection)")
        }
        XCTAssertEqual(try copy.object(id: ids[.always] ?? 0, master: master)[.value], Array("secret of always".utf8))
        XCTAssertEqual(code { _ = try copy.add(try ProtectionClassItems.item("new", .alwaysThisDeviceOnly), uid: try Random.bytes(16), master: master) },
                       .deviceKeyUnavailable, "new device-bound items are refused too")
        XCTAssertEqual(fileBytes(copiedKey.path), copiedBytes, "the sealed key is never replaced by one for this TPM")
        guard case .unavailable(let said) = copy.deviceBindingKind() else { return XCTFail("\(copy.deviceBindingKind())") }
        XCTAssertTrue(said.contains("another TPM"), said)
        _ = second

        // No TPM at all on that machine.
        use(nil)
        let withoutTPM = try Keychain.open(at: moved, deviceKey: copiedKey)
        let none = try XCTUnwrap(try withoutTPM.info().deviceKeyProblem)
        XCTAssertTrue(none.contains("this machine has none"), none)
        XCTAssertEqual(code { _ = try withoutTPM.object(id: ids[.alwaysThisDeviceOnly] ?? 0, master: nil) }, .deviceKeyUnavailable)

        // The same copy with the first TPM again: everything opens.
        use(first)
        let back = try Keychain.open(at: moved, deviceKey: copiedKey)
        XCTAssertNil(try back.info().deviceKeyProblem)
        XCTAssertEqual(try ProtectionClassItems.labels(back, master: try unlock(back)), allLabels)
        XCTAssertEqual(back.deviceBindingKind(), .sealed(tcti: first.tcti))
    }

    // MARK: Threads

    /// Milliseconds on the monotonic clock.
    private static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1_000 + Int64(time.tv_nsec) / 1_000_000
    }

    func test_a_thread_waiting_for_a_silent_TPM_to_unseal_does_not_hold_the_keychain() throws {
        try startTPM()
        let made = try create("silent")
        let ids = try ProtectionClassItems.storeOneOfEach(made, master: try unlock(made))
        XCTAssertEqual(try deviceKey.kind(), .sealed)
        let silent = try SilentTPM()
        setenv("KEYCHAIN_PKCS11_TCTI", silent.tcti, 1)
        // A new instance (a new process) has not read the device key yet.
        let keychain = try Keychain.open(at: made.path, deviceKey: deviceKey)
        final class Outcome: @unchecked Sendable {
            var error: KeychainError?
            var milliseconds: Int64 = 0
        }
        let reader = Outcome()
        let done = DispatchSemaphore(value: 0)
        let id = ids[.alwaysThisDeviceOnly] ?? 0
        try EnclaveTPM.withTimeouts(TPMConnection.Timeouts(commandMilliseconds: 2_000, keyGenerationMilliseconds: 2_000)) {
            Thread {
                let start = Self.now()
                do { _ = try keychain.object(id: id, master: nil) } catch { reader.error = error as? KeychainError }
                reader.milliseconds = Self.now() - start
                done.signal()
            }.start()
            // The reader is waiting for the TPM by now.
            usleep(300_000)
            // Another thread's calls that need the keychain's lock but not the device key: a
            // login, C_GetTokenInfo's state, the version a cache compares.
            let start = Self.now()
            _ = try unlock(keychain)
            XCTAssertEqual(try keychain.info(countingObjects: false).userPIN.failures, 0)
            _ = try keychain.version()
            let elapsed = Self.now() - start
            XCTAssertLessThan(elapsed, 500, "the other thread waited \(elapsed) ms for the keychain")
            done.wait()
        }
        XCTAssertGreaterThanOrEqual(reader.milliseconds, 1_700, "the reader waited for the TPM's deadline")
        XCTAssertLessThan(reader.milliseconds, 6_000)
        XCTAssertEqual(reader.error?.code, .deviceKeyUnavailable)
        let said = reader.error?.reason ?? ""
        XCTAssertTrue(said.hasPrefix("the TPM (\(silent.tcti)) did not unseal the device key \(deviceKey.path): "), said)
        XCTAssertTrue(said.contains("did not answer within 2000 ms"), said)
    }

    func test_two_threads_reading_a_sealed_device_key_at_once_both_open_with_the_same_key() throws {
        try startTPM()
        let made = try create("shared")
        let ids = try ProtectionClassItems.storeOneOfEach(made, master: try unlock(made))
        let keychain = try Keychain.open(at: made.path, deviceKey: deviceKey)
        final class Results: @unchecked Sendable {
            let lock = PThreadMutex(.plain)
            var values: [[UInt8]] = []
        }
        let results = Results()
        let ready = DispatchGroup()
        let go = DispatchSemaphore(value: 0)
        let finished = DispatchGroup()
        for protection in [ProtectionClass.alwaysThisDeviceOnly, .alwaysThisDeviceOnly, .always, .alwaysThisDeviceOnly] {
            ready.enter()
            finished.enter()
            Thread {
                ready.leave()
                go.wait()
                let value = (try? keychain.object(id: ids[protection] ?? 0, master: nil)[.value]) ?? []
                results.lock.withLock { results.values.append(value) }
                finished.leave()
            }.start()
        }
        ready.wait()
        for _ in 0..<4 { go.signal() }
        finished.wait()
        XCTAssertEqual(results.values.sorted { $0.lexicographicallyPrecedes($1) },
                       [Array("secret of always".utf8)] + Array(repeating: Array("secret of alwaysThisDeviceOnly".utf8), count: 3))
        // The binding kept is the one the file's key gives.
        let key = try XCTUnwrap(try deviceKey.load(create: false))
        let expected = try DeviceBinding(deviceKey: key, keychainSalt: keychain.keychainSalt)
        XCTAssertEqual(keychain.lock.withLock { keychain.device?.base.bytes }, expected.base.bytes)
        XCTAssertNil(try keychain.info().deviceKeyProblem)
    }

    // MARK: Sealing a clear key

    func test_sealing_a_clear_key_keeps_every_item_and_wipes_the_old_file() throws {
        use(nil)
        let keychain = try create("upgrade")
        _ = try ProtectionClassItems.storeOneOfEach(keychain, master: try unlock(keychain))
        let clear = fileBytes(deviceKey.path)
        XCTAssertEqual(clear.count, 32)
        XCTAssertEqual(code { _ = try self.deviceKey.seal() }, .tpmUnavailable, "no TPM: refused")
        XCTAssertEqual(fileBytes(deviceKey.path), clear, "and left as it was")

        let tpm = try startTPM()
        // A second name for the old file shows what becomes of its bytes.
        XCTAssertEqual(link(deviceKey.path, root + "/old-device-key"), 0)
        XCTAssertEqual(try deviceKey.seal(), .sealed(tcti: tpm.tcti, wiped: true))
        XCTAssertEqual(try deviceKey.kind(), .sealed)
        XCTAssertEqual(fileBytes(root + "/old-device-key"), [UInt8](repeating: 0, count: 32), "the old inode holds zeros")
        XCTAssertEqual(try deviceKey.load(create: false)?.bytes, clear, "the same key, sealed")
        XCTAssertEqual(try deviceKey.seal(), .alreadySealed)

        let reopened = try Keychain.open(at: keychain.path, deviceKey: deviceKey)
        XCTAssertEqual(try ProtectionClassItems.labels(reopened, master: nil), ["always", "alwaysThisDeviceOnly"])
        XCTAssertEqual(try ProtectionClassItems.labels(reopened, master: try unlock(reopened)), allLabels)
        XCTAssertEqual(reopened.deviceBindingKind(), .sealed(tcti: tpm.tcti))

        XCTAssertEqual(code { _ = try DeviceKeyFile(path: self.root + "/state/absent").seal() }, .objectNotFound)
    }

    // MARK: Damage

    func test_damaged_or_unsafe_sealed_files_are_refused_with_their_reason() throws {
        try startTPM()
        XCTAssertNotNil(try deviceKey.load(create: true))
        let good = fileBytes(deviceKey.path)
        let cases: [(String, [UInt8], String)] = [
            ("cut short", Array(good.prefix(40)), "damaged"),
            ("too long", good + [UInt8](repeating: 0, count: 5000), "damaged"),
            ("no magic", [0x58] + good.dropFirst(), "damaged"),
            ("a later version", Array(good.prefix(4)) + [2] + good.dropFirst(5), "format version 2"),
            ("an unknown kind", Array(good.prefix(5)) + [9] + good.dropFirst(6), "unknown kind"),
            ("bytes after the blob", good + [0], "damaged"),
            ("an altered private part", Array(good.dropLast()) + [good[good.count - 1] ^ 0x01], "another TPM"),
        ]
        for (name, bytes, expected) in cases {
            writeFile(deviceKey.path, bytes)
            XCTAssertEqual(code { _ = try self.deviceKey.load(create: true) }, .deviceKeyUnavailable, name)
            let said = reason { _ = try self.deviceKey.load(create: false) }
            XCTAssertTrue(said.contains(expected), "\(name): \(said)")
            XCTAssertEqual(fileBytes(deviceKey.path), bytes, "\(name): a damaged key is never replaced")
        }
        writeFile(deviceKey.path, good)
        XCTAssertEqual(chmod(deviceKey.path, 0o640), 0)
        XCTAssertTrue(reason { _ = try self.deviceKey.load(create: false) }.contains("readable by others"))
        XCTAssertEqual(code { _ = try self.deviceKey.seal() }, .deviceKeyUnavailable)
        XCTAssertEqual(chmod(deviceKey.path, 0o600), 0)
        XCTAssertEqual(try deviceKey.load(create: false)?.count, 32)
    }
}
