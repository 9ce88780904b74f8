import Glibc
import XCTest
import KeychainCrypto
@testable import KeychainCore
@testable import KeychainStore

/// A keychain folder in a temporary directory, and keychains made in it by name.
class KeychainFolderTestCase: XCTestCase {
    var root = ""
    let kdf = ScryptParameters(logN: 8, blockSize: 8, parallelism: 1)

    override func setUp() {
        var template = Array("/tmp/kc-lifecycle.XXXXXX".utf8CString)
        root = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
    }

    override func tearDown() {
        System.failure = nil
        _ = system("rm -rf '\(root)'")
    }

    var directory: KeychainDirectory { KeychainDirectory(path: root + "/keychains") }

    func create(_ label: String, so: String = "so-secret", user: String = "1234") throws -> Keychain {
        try Array(so.utf8).withUnsafeBytes { so in
            try Array(user.utf8).withUnsafeBytes { try directory.create(label: label, soPIN: so, userPIN: $0, kdf: kdf, policy: .default) }
        }
    }
}

/// Creating and deleting keychains by name: the one lifecycle keychainctl, restore and the
/// Secret Service use.
final class KeychainLifecycleTests: KeychainFolderTestCase {
    private func code(_ body: () throws -> Void) -> KeychainError.Code? {
        do { try body(); return nil } catch { return (error as? KeychainError)?.code }
    }

    func test_a_taken_label_is_a_duplicate_and_leaves_no_file() throws {
        _ = try create("work")
        XCTAssertEqual(code { _ = try create("work") }, .duplicateItem)
        XCTAssertEqual(directory.keychainFiles().count, 1)
        XCTAssertNotNil(directory.keychainFile(labelled: "work"))
        XCTAssertNil(directory.keychainFile(labelled: "home"))
    }

    func test_labels_and_pins_are_checked_before_anything_is_written() {
        XCTAssertEqual(code { _ = try create("") }, .argumentsBad)
        XCTAssertEqual(code { _ = try create(String(repeating: "x", count: 33)) }, .argumentsBad)
        XCTAssertEqual(code { _ = try create("short", user: "12") }, .pinLengthRange)
        XCTAssertEqual(code { _ = try create("short", so: "") }, .pinLengthRange)
        XCTAssertEqual(directory.keychainFiles(), [])
    }

    func test_delete_removes_the_side_files_and_forgets_the_default() throws {
        let keychain = try create("old")
        let path = keychain.path
        try directory.setDefaultKeychain("old")
        XCTAssertEqual(access(path + "-wal", F_OK), 0, "WAL mode keeps its side files")
        try directory.delete(at: path, label: "old")
        for file in Database.files(of: path) { XCTAssertNotEqual(access(file, F_OK), 0, file) }
        XCTAssertNil(directory.defaultKeychain())
        _ = try create("old")
        XCTAssertEqual(directory.keychainFiles().count, 1, "the label is free again")
    }

    func test_delete_keeps_another_default() throws {
        let keychain = try create("old")
        _ = try create("kept")
        try directory.setDefaultKeychain("kept")
        try directory.delete(at: keychain.path, label: "old")
        XCTAssertEqual(directory.defaultKeychain(), "kept")
    }
}

/// The syscall seam (`System.failure`): a system call made to fail gives the caller's precise
/// error and leaves nothing half done.
final class SystemFailureTests: KeychainFolderTestCase {
    func test_a_slot_counter_that_cannot_be_locked_creates_nothing() throws {
        try directory.ensureExists()
        System.failure = { call, _ in call == "flock" ? ENOLCK : nil }
        do {
            _ = try create("work")
            XCTFail("created without the slot-ID lock")
        } catch let error as KeychainError {
            XCTAssertEqual(error.code, .storageFailure)
            XCTAssertTrue(error.reason.contains("cannot lock"), error.reason)
            XCTAssertTrue(error.reason.contains(String(cString: strerror(ENOLCK))), "the errno is named: \(error.reason)")
        }
        System.failure = nil
        XCTAssertEqual(directory.keychainFiles(), [])
    }

    func test_a_full_disk_while_recording_the_default_keeps_the_old_choice() throws {
        try directory.setDefaultKeychain("first")
        System.failure = { call, path in call == "fsync" || (call == "open" && path?.hasSuffix("default-keychain.new") == true) ? ENOSPC : nil }
        XCTAssertThrowsError(try directory.setDefaultKeychain("second")) { error in
            XCTAssertEqual((error as? KeychainError)?.code, .storageFailure)
            XCTAssertTrue((error as? KeychainError)?.reason.contains(String(cString: strerror(ENOSPC))) == true, "\(error)")
        }
        System.failure = nil
        XCTAssertEqual(directory.defaultKeychain(), "first")
        XCTAssertFalse(System.exists(root + "/keychains/default-keychain.new"), "no temporary file is left behind")
    }

    func test_delete_that_cannot_unlink_reports_the_file_and_keeps_the_default() throws {
        let keychain = try create("old")
        try directory.setDefaultKeychain("old")
        System.failure = { call, path in call == "unlink" && path == keychain.path ? EACCES : nil }
        XCTAssertThrowsError(try directory.delete(at: keychain.path, label: "old")) { error in
            XCTAssertEqual((error as? KeychainError)?.code, .storageFailure)
            XCTAssertTrue((error as? KeychainError)?.reason.contains(keychain.path) == true, "\(error)")
        }
        System.failure = nil
        XCTAssertEqual(directory.defaultKeychain(), "old", "a keychain still there stays the default")
    }
}
