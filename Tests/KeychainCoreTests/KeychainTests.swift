import Glibc
import XCTest
import KeychainCrypto
@testable import KeychainCore
@testable import KeychainStore

final class KeychainTests: XCTestCase {
    private var directory = ""
    private let kdf = ScryptParameters(logN: 8, blockSize: 8, parallelism: 1)
    private let soPIN = Array("so-secret".utf8)
    private let userPIN = Array("1234".utf8)

    override func setUp() {
        var template = Array("/tmp/kc-core.XXXXXX".utf8CString)
        directory = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }

    override func tearDown() { _ = system("rm -rf '\(directory)'") }

    private func makeKeychain(userPIN: [UInt8]? = nil) throws -> Keychain {
        try soPIN.withUnsafeBytes { so in
            if let userPIN {
                return try userPIN.withUnsafeBytes { try KeychainDirectory(path: directory).createKeychain(slotID: nil, label: "test", soPIN: so, userPIN: $0, kdf: kdf) }
            }
            return try KeychainDirectory(path: directory).createKeychain(slotID: nil, label: "test", soPIN: so, userPIN: nil, kdf: kdf)
        }
    }

    private func unlock(_ keychain: Keychain, _ owner: PINOwner = .user, _ pin: [UInt8]) throws -> MasterKey {
        try pin.withUnsafeBytes { try keychain.unlock(owner, pin: $0) }
    }

    private func code(_ body: () throws -> Void) -> KeychainError.Code? {
        do { try body(); return nil } catch { return (error as? KeychainError)?.code }
    }

    private func dataObject(label: String, value: [UInt8], isPrivate: Bool) throws -> ObjectAttributes {
        try ObjectTemplate.create([(.objectClass, dataClass), (.token, [1]), (.isPrivate, [isPrivate ? 1 : 0]),
                                   (.label, Array(label.utf8)), (.value, value)], uniqueID: Array(UUIDText.random().utf8), policy: .compatible)
    }

    func test_slot_ids_are_assigned_in_order_and_kept_in_the_file() throws {
        let first = try makeKeychain(userPIN: userPIN)
        XCTAssertEqual(try first.info().slotID, 1)
        let second = try soPIN.withUnsafeBytes { try KeychainDirectory(path: directory).createKeychain(slotID: nil, label: "two", soPIN: $0, userPIN: nil, kdf: kdf) }
        XCTAssertEqual(try second.info().slotID, 2)
        XCTAssertEqual(try Keychain.open(at: first.path).info().slotID, 1)
        XCTAssertEqual(try KeychainDirectory(path: directory).emptySlotID(above: 1), 3)
    }

    func test_asking_for_the_empty_slot_creates_nothing_when_there_is_no_keychain_folder() throws {
        let missing = directory + "/not-yet/keychains"
        XCTAssertEqual(try KeychainDirectory(path: missing).emptySlotID(above: 1), 1)
        XCTAssertFalse(System.exists(directory + "/not-yet"), "listing slots created the keychain folder")
        // The first keychain then takes that very slot, and the folder and counter appear with it.
        let keychain = try soPIN.withUnsafeBytes { try KeychainDirectory(path: missing).createKeychain(slotID: 1, label: "first", soPIN: $0, userPIN: nil, kdf: kdf) }
        XCTAssertEqual(try keychain.info().slotID, 1)
        XCTAssertTrue(System.exists(missing + "/slot-ids"))
        XCTAssertEqual(try KeychainDirectory(path: missing).emptySlotID(above: 2), 2)
    }

    func test_user_pin_unlocks_and_wrong_pins_count_down_to_locked() throws {
        let keychain = try makeKeychain(userPIN: userPIN)
        XCTAssertNoThrow(try unlock(keychain, .user, userPIN))
        for attempt in 1...10 {
            XCTAssertEqual(code { _ = try self.unlock(keychain, .user, Array("0000".utf8)) }, .pinIncorrect, "attempt \(attempt)")
            let status = try keychain.info().userPIN
            XCTAssertEqual(status.failures, Int64(attempt))
            XCTAssertEqual(status.countLow, attempt < 9)
            XCTAssertEqual(status.finalTry, attempt == 9)
            XCTAssertEqual(status.locked, attempt == 10)
        }
        XCTAssertEqual(code { _ = try self.unlock(keychain, .user, self.userPIN) }, .pinLocked)
        // The SO sets a new user PIN; the objects and the master key stay the same.
        let master = try unlock(keychain, .securityOfficer, soPIN)
        try Array("5678".utf8).withUnsafeBytes { try keychain.setUserPIN($0, master: master, kdf: kdf) }
        XCTAssertFalse(try keychain.info().userPIN.locked)
        XCTAssertNoThrow(try unlock(keychain, .user, Array("5678".utf8)))
    }

    func test_a_correct_pin_resets_the_failure_count() throws {
        let keychain = try makeKeychain(userPIN: userPIN)
        _ = code { _ = try self.unlock(keychain, .user, Array("9999".utf8)) }
        XCTAssertEqual(try keychain.info().userPIN.failures, 1)
        _ = try unlock(keychain, .user, userPIN)
        XCTAssertEqual(try keychain.info().userPIN.failures, 0)
    }

    // The bookkeeping behind concurrent logins (Keychain.beginAttempt): evaluations in flight are
    // counted before they run, a right PIN clears only the failures already known. Called as
    // Keychain's own methods call them, with its lock held (the wait lets it go).

    private static func begin(_ keychain: Keychain, _ counter: String) throws -> PINAttempt {
        try keychain.lock.withLock { () throws(KeychainError) in try keychain.beginAttempt(counter, locked: "locked") }
    }

    private static func finish(_ keychain: Keychain, _ attempt: PINAttempt, right: Bool) {
        keychain.lock.withLock { keychain.finishAttempt(attempt, right: right) }
    }

    func test_a_right_pin_does_not_clear_wrong_guesses_still_in_flight() throws {
        let keychain = try makeKeychain(userPIN: userPIN)
        let counter = Keychain.Meta.failures(.user)
        let wrong = try Self.begin(keychain, counter)
        let right = try Self.begin(keychain, counter)
        Self.finish(keychain, right, right: true)
        Self.finish(keychain, wrong, right: false)
        XCTAssertEqual(try keychain.info().userPIN.failures, 1)
    }

    func test_no_more_evaluations_start_than_the_limit_leaves_room_for() throws {
        let keychain = try makeKeychain(userPIN: userPIN)
        let counter = Keychain.Meta.failures(.user)
        try keychain.lock.withLock { try keychain.store.write { try keychain.store.setMeta(counter, integer: 7) } }
        var inFlight: [PINAttempt] = []
        for _ in 0..<3 { inFlight.append(try Self.begin(keychain, counter)) }
        // 7 known + 3 in flight = the limit: a fourth waits; the three turn out wrong, so it is
        // refused as locked without ever being evaluated.
        let pending = inFlight
        let finisher = Thread {
            for attempt in pending { usleep(100_000); Self.finish(keychain, attempt, right: false) }
        }
        finisher.start()
        let started = ProcessIdentity.monotonicSeconds()
        XCTAssertEqual(code { _ = try Self.begin(keychain, counter) }, .pinLocked)
        XCTAssertGreaterThan(ProcessIdentity.monotonicSeconds() - started, 0.25)
        XCTAssertEqual(try keychain.info().userPIN.failures, 10)
    }

    func test_an_evaluation_whose_process_died_counts_as_a_failure() throws {
        let keychain = try makeKeychain(userPIN: userPIN)
        let counter = Keychain.Meta.failures(.user)
        // A marker as a process that no longer exists left it: this PID with another start time
        // (the PID reused since). No fork: a fork in the multi-threaded test process can hang
        // ThreadSanitizer's runtime.
        let me = ProcessIdentity.current()
        XCTAssertNotEqual(me.startTime, 0, "/proc/self/stat read")
        let dead = ProcessIdentity(pid: me.pid, startTime: me.startTime + 1, namespace: me.namespace)
        try keychain.lock.withLock { try keychain.store.write { try keychain.store.setMeta(counter + ".attempt.dead", blob: dead.marker(started: Int64(time(nil)))) } }
        // One of this process's own markers stays live.
        let live = try Self.begin(keychain, counter)
        XCTAssertEqual(try keychain.info().userPIN.failures, 1)
        XCTAssertNil(try keychain.lock.withLock { try keychain.store.metaBlob(counter + ".attempt.dead") })
        XCTAssertTrue(ProcessIdentity.isLive(marker: try keychain.lock.withLock { try keychain.store.metaBlob(live.marker) }, now: Int64(time(nil)), lease: Keychain.attemptLease))
        Self.finish(keychain, live, right: false)
        XCTAssertEqual(try keychain.info().userPIN.failures, 2)
        // A marker older than the lease counts as a failure too, whoever holds it.
        XCTAssertFalse(ProcessIdentity.isLive(marker: me.marker(started: Int64(time(nil)) - Keychain.attemptLease - 1), now: Int64(time(nil)), lease: Keychain.attemptLease))
        XCTAssertFalse(ProcessIdentity.isLive(marker: [1, 2, 3], now: Int64(time(nil)), lease: Keychain.attemptLease))
    }

    func test_a_full_room_makes_a_login_wait_for_a_finishing_evaluation() throws {
        let keychain = try makeKeychain(userPIN: userPIN)
        let counter = Keychain.Meta.failures(.user)
        var inFlight: [PINAttempt] = []
        for _ in 0..<Keychain.concurrentEvaluations { inFlight.append(try Self.begin(keychain, counter)) }
        let first = inFlight[0]
        let finisher = Thread {
            usleep(200_000)
            Self.finish(keychain, first, right: true)
        }
        finisher.start()
        let started = ProcessIdentity.monotonicSeconds()
        let waited = try Self.begin(keychain, counter)
        XCTAssertGreaterThan(ProcessIdentity.monotonicSeconds() - started, 0.15)
        Self.finish(keychain, waited, right: true)
        for attempt in inFlight.dropFirst() { Self.finish(keychain, attempt, right: true) }
        XCTAssertEqual(try keychain.info().userPIN.failures, 0)
        XCTAssertNoThrow(try unlock(keychain, .user, userPIN))
    }

    func test_change_pin_keeps_private_objects_readable() throws {
        let keychain = try makeKeychain(userPIN: userPIN)
        let id = try keychain.add(try dataObject(label: "p", value: [9, 9], isPrivate: true), uid: Array(repeating: 1, count: 16), master: try unlock(keychain, .user, userPIN))
        try userPIN.withUnsafeBytes { old in try Array("abcd".utf8).withUnsafeBytes { try keychain.changePIN(.user, old: old, new: $0, kdf: kdf) } }
        XCTAssertEqual(code { _ = try self.unlock(keychain, .user, self.userPIN) }, .pinIncorrect)
        XCTAssertEqual(try keychain.object(id: id, master: try unlock(keychain, .user, Array("abcd".utf8)))[.value], [9, 9])
    }

    func test_pin_policy_is_kept_per_keychain_and_enforced() throws {
        let policy = PINPolicy(minimumLength: 6, maximumLength: 12, maximumFailures: 3)
        let keychain = try soPIN.withUnsafeBytes { so in
            try Array("123456".utf8).withUnsafeBytes {
                try KeychainDirectory(path: directory).createKeychain(slotID: nil, label: "strict", soPIN: so, userPIN: $0, kdf: kdf, policy: policy)
            }
        }
        XCTAssertEqual(try Keychain.open(at: keychain.path).info().pinPolicy, policy)
        XCTAssertEqual(try keychain.info().userPIN.maximumFailures, 3)
        let master = try unlock(keychain, .securityOfficer, soPIN)
        XCTAssertEqual(code { try Array("12345".utf8).withUnsafeBytes { try keychain.setUserPIN($0, master: master, kdf: self.kdf) } }, .pinLengthRange)
        XCTAssertEqual(code { try Array("1234567890123".utf8).withUnsafeBytes { try keychain.setUserPIN($0, master: master, kdf: self.kdf) } }, .pinLengthRange)
        XCTAssertNil(code { try Array("123456789012".utf8).withUnsafeBytes { try keychain.setUserPIN($0, master: master, kdf: self.kdf) } })
        // A creation PIN outside the policy is refused before any file is written.
        XCTAssertEqual(code { _ = try self.soPIN.withUnsafeBytes {
            try KeychainDirectory(path: self.directory).createKeychain(slotID: nil, label: "x", soPIN: $0, userPIN: nil, kdf: self.kdf,
                                                                      policy: PINPolicy(minimumLength: 10, maximumLength: 20, maximumFailures: 3)) } }, .pinLengthRange)
        XCTAssertEqual(PINPolicy(minimumLength: 0, maximumLength: 9999, maximumFailures: 0),
                       PINPolicy(minimumLength: 1, maximumLength: 256, maximumFailures: 1))
    }

    func test_raised_kdf_rewraps_each_pin_at_its_next_login_and_never_lowers() throws {
        let keychain = try makeKeychain(userPIN: userPIN)
        let id = try keychain.add(try dataObject(label: "p", value: [7], isPrivate: true), uid: Array(repeating: 2, count: 16), master: try unlock(keychain, .user, userPIN))
        XCTAssertEqual(try keychain.info().userKDF, kdf)
        let stronger = ScryptParameters(logN: 10, blockSize: 8, parallelism: 1)
        try keychain.raiseKDF(to: stronger)
        XCTAssertEqual(try keychain.info().targetKDF, stronger)
        XCTAssertEqual(try keychain.info().userKDF, kdf, "the PIN is needed to re-wrap, so nothing changes before a login")
        XCTAssertEqual(code { _ = try self.unlock(keychain, .user, Array("0000".utf8)) }, .pinIncorrect)
        XCTAssertEqual(try keychain.info().userKDF, kdf, "a wrong PIN re-wraps nothing")
        let master = try unlock(keychain, .user, userPIN)
        XCTAssertEqual(try keychain.info().userKDF, stronger)
        XCTAssertEqual(try keychain.object(id: id, master: master)[.value], [7])
        XCTAssertEqual(try keychain.object(id: id, master: try unlock(keychain, .user, userPIN))[.value], [7])
        // A PIN changed later with the old default cost still gets the raised one.
        try userPIN.withUnsafeBytes { old in try Array("4321".utf8).withUnsafeBytes { try keychain.changePIN(.user, old: old, new: $0, kdf: kdf) } }
        XCTAssertEqual(try keychain.info().userKDF, stronger)
        XCTAssertEqual(code { try keychain.raiseKDF(to: self.kdf) }, .argumentsBad)
        XCTAssertEqual(code { try keychain.raiseKDF(to: ScryptParameters(logN: 30, blockSize: 8, parallelism: 1)) }, .argumentsBad)
        XCTAssertEqual(try keychain.info().targetKDF, stronger)
    }

    func test_user_pin_absent_until_set() throws {
        let keychain = try makeKeychain()
        XCTAssertFalse(try keychain.info().userPINInitialized)
        XCTAssertEqual(code { _ = try self.unlock(keychain, .user, self.userPIN) }, .userPINNotInitialized)
    }

    func test_private_objects_need_the_master_key_and_are_found_by_index() throws {
        let keychain = try makeKeychain(userPIN: userPIN)
        let master = try unlock(keychain, .user, userPIN)
        let secret = try keychain.add(try dataObject(label: "secret", value: Array("s3cr3t".utf8), isPrivate: true), uid: Array(repeating: 2, count: 16), master: master)
        let open = try keychain.add(try dataObject(label: "open", value: [1], isPrivate: false), uid: Array(repeating: 3, count: 16), master: nil)
        XCTAssertEqual(code { _ = try keychain.object(id: secret, master: nil) }, .objectNotFound)
        XCTAssertEqual(try keychain.object(id: open, master: nil)[.value], [1])
        XCTAssertEqual(try keychain.find([(.label, Array("secret".utf8))], master: nil), [])
        XCTAssertEqual(try keychain.find([(.label, Array("secret".utf8))], master: master), [FoundObject(id: secret, isPrivate: true)])
        XCTAssertEqual(try keychain.find([(.value, [1])], master: master), [FoundObject(id: open, isPrivate: false)])
        XCTAssertEqual(try keychain.find([(.objectClass, dataClass)], master: nil).map(\.id), [open])
        XCTAssertEqual(try keychain.find([(.objectClass, dataClass)], master: master).map(\.id), [secret, open])
        XCTAssertEqual(try keychain.find([(.token, [0])], master: master), [])
        XCTAssertEqual(try keychain.find([(.isPrivate, [0])], master: master).map(\.id), [open])
    }

    func test_tampered_record_fails_alone() throws {
        let keychain = try makeKeychain(userPIN: userPIN)
        let master = try unlock(keychain, .user, userPIN)
        let victim = try keychain.add(try dataObject(label: "victim", value: [1, 2, 3], isPrivate: true), uid: Array(repeating: 4, count: 16), master: master)
        let bystander = try keychain.add(try dataObject(label: "bystander", value: [4, 5, 6], isPrivate: true), uid: Array(repeating: 5, count: 16), master: master)
        let database = try KeychainDatabase(path: keychain.path, create: false)
        var record = try database.fetchObject(id: victim).record
        record[record.count / 2] ^= 0x40
        try database.database.run("UPDATE objects SET record = ? WHERE id = ?", [.blob(record), .integer(victim)])
        XCTAssertEqual(code { _ = try keychain.object(id: victim, master: master) }, .recordCorrupted)
        XCTAssertEqual(try keychain.object(id: bystander, master: master)[.value], [4, 5, 6])
    }

    func test_swapped_records_do_not_open() throws {
        let keychain = try makeKeychain(userPIN: userPIN)
        let master = try unlock(keychain, .user, userPIN)
        let a = try keychain.add(try dataObject(label: "a", value: [1], isPrivate: true), uid: Array(repeating: 6, count: 16), master: master)
        let b = try keychain.add(try dataObject(label: "b", value: [2], isPrivate: true), uid: Array(repeating: 7, count: 16), master: master)
        let database = try KeychainDatabase(path: keychain.path, create: false)
        try database.updateObject(id: a, protection: 1, record: try database.fetchObject(id: b).record, primaryKey: nil, index: [], now: 0)
        XCTAssertEqual(code { _ = try keychain.object(id: a, master: master) }, .recordCorrupted)
    }

    func test_reinitialize_destroys_objects_and_clears_the_user_pin() throws {
        let keychain = try makeKeychain(userPIN: userPIN)
        _ = try keychain.add(try dataObject(label: "x", value: [1], isPrivate: false), uid: Array(repeating: 8, count: 16), master: nil)
        XCTAssertEqual(code { try Array("wrong-so".utf8).withUnsafeBytes { try keychain.reinitialize(soPIN: $0, label: "x", kdf: self.kdf) } }, .pinIncorrect)
        try soPIN.withUnsafeBytes { try keychain.reinitialize(soPIN: $0, label: "fresh", kdf: kdf) }
        let info = try keychain.info()
        XCTAssertEqual(info.label, "fresh")
        XCTAssertEqual(info.publicObjects + info.privateObjects, 0)
        XCTAssertFalse(info.userPINInitialized)
        XCTAssertEqual(info.slotID, 1)
    }

    func test_secrets_and_labels_of_private_objects_are_not_in_the_file() throws {
        let keychain = try makeKeychain(userPIN: userPIN)
        let master = try unlock(keychain, .user, userPIN)
        _ = try keychain.add(try dataObject(label: "LABEL-c0ffee-4242", value: Array("VALUE-deadbeef-1717".utf8), isPrivate: true),
                             uid: Array(repeating: 9, count: 16), master: master)
        for suffix in ["", "-wal"] {
            guard let file = fopen(keychain.path + suffix, "r") else { continue }
            var bytes: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = fread(&buffer, 1, buffer.count, file)
                if n == 0 { break }
                bytes += buffer.prefix(n)
            }
            fclose(file)
            let text = String(decoding: bytes.map { $0 == 0 ? 0x20 : $0 }, as: UTF8.self)
            XCTAssertFalse(text.contains("LABEL-c0ffee-4242"), "label found in \(suffix)")
            XCTAssertFalse(text.contains("VALUE-deadbeef-1717"), "value found in \(suffix)")
        }
    }
}

enum UUIDText {
    static func random() -> String {
        (try? Random.bytes(16).map { String(format2: $0) }.joined()) ?? "00000000000000000000000000000000"
    }
}

extension String {
    init(format2 byte: UInt8) {
        let digits = Array("0123456789abcdef")
        self = String([digits[Int(byte >> 4)], digits[Int(byte & 0xF)]])
    }
}
