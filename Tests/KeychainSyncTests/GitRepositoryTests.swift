import Glibc
import XCTest
@testable import KeychainSync

/// The git driver against a real bare repository on disk (file://), as two devices meet it.
final class GitRepositoryTests: XCTestCase {
    private var root = ""

    override func setUpWithError() throws {
        var template = Array("/tmp/kc-sync-git.XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { buffer -> String? in
            guard let base = buffer.baseAddress, mkdtemp(base) != nil else { return nil }
            return String(cString: base)
        }
        root = try XCTUnwrap(made)
        let bare = try Subprocess.run(["git", "init", "-q", "--bare", "-b", "main", root + "/remote.git"])
        XCTAssertTrue(bare.succeeded, bare.errorText)
    }

    override func tearDownWithError() throws {
        _ = try Subprocess.run(["rm", "-rf", root])
    }

    private func device(_ name: String) throws -> GitRepository {
        let repository = GitRepository(directory: root + "/" + name, remote: "file://" + root + "/remote.git", device: name)
        try repository.prepare()
        return repository
    }

    func test_subprocess_returns_status_output_and_errors() throws {
        let result = try Subprocess.run(["sh", "-c", "echo out; echo err >&2; exit 3"])
        XCTAssertEqual(result.status, 3)
        XCTAssertEqual(result.outputText, "out\n")
        XCTAssertEqual(result.errorText, "err\n")
        XCTAssertThrowsError(try Subprocess.run(["/nonexistent/program"])) { XCTAssertEqual(($0 as? SyncError)?.kind, .crypto) }
        // More than a pipe holds on both streams at once is drained without a deadlock.
        let big = try Subprocess.run(["sh", "-c", "head -c 300000 /dev/zero; head -c 300000 /dev/zero >&2"])
        XCTAssertEqual(big.output.count, 300_000)
        XCTAssertEqual(big.errors.count, 300_000)
    }

    func test_a_file_pushed_by_one_device_arrives_at_another() throws {
        let a = try device("a"), b = try device("b")
        XCTAssertFalse(try a.fetch())  // the remote is empty
        try WorkTreeFiles.makeDirectory(a.path("items"))
        try WorkTreeFiles.write([1, 2, 3], to: a.path("items/one"))
        try a.commitAll("sync")
        XCTAssertEqual(try a.push(), .pushed)
        XCTAssertTrue(try b.fetch())
        XCTAssertEqual(try b.mergeFetched(), [])
        XCTAssertEqual(WorkTreeFiles.read(b.path("items/one")), [1, 2, 3])
        XCTAssertEqual(WorkTreeFiles.list(b.path("items")), ["one"])
    }

    // Two devices push at the same moment: the second is rejected, fetches, merges, pushes; both
    // end up with both files. A path both changed comes back as a conflict with both sides.
    func test_a_rejected_push_is_reported_and_a_merge_brings_both_sides_together() throws {
        let a = try device("a"), b = try device("b")
        try WorkTreeFiles.makeDirectory(a.path("items"))
        try WorkTreeFiles.write([0], to: a.path("items/shared"))
        try a.commitAll("sync")
        XCTAssertEqual(try a.push(), .pushed)
        XCTAssertTrue(try b.fetch())
        _ = try b.mergeFetched()

        try WorkTreeFiles.write([1], to: a.path("items/from-a"))
        try WorkTreeFiles.write([0xA], to: a.path("items/shared"))
        try a.commitAll("sync")
        try WorkTreeFiles.write([2], to: b.path("items/from-b"))
        try WorkTreeFiles.write([0xB], to: b.path("items/shared"))
        try b.commitAll("sync")
        XCTAssertEqual(try a.push(), .pushed)
        XCTAssertEqual(try b.push(), .rejected)
        XCTAssertTrue(try b.fetch())
        let conflicts = try b.mergeFetched()
        XCTAssertEqual(conflicts, ["items/shared"])
        let sides = try b.conflictSides("items/shared")
        XCTAssertEqual(sides.ours, [0xB])
        XCTAssertEqual(sides.theirs, [0xA])
        try WorkTreeFiles.write([0xA], to: b.path("items/shared"))  // the settled side
        try b.commitAll("sync: settled")
        XCTAssertEqual(try b.push(), .pushed)
        XCTAssertTrue(try a.fetch())
        XCTAssertEqual(try a.mergeFetched(), [])
        XCTAssertEqual(WorkTreeFiles.list(a.path("items")), ["from-a", "from-b", "shared"])
        XCTAssertEqual(WorkTreeFiles.read(a.path("items/shared")), [0xA])
    }

    func test_an_unreachable_remote_is_an_error_with_gits_words() throws {
        let lost = GitRepository(directory: root + "/lost", remote: "file://" + root + "/nothing.git", device: "lost")
        try lost.prepare()
        XCTAssertThrowsError(try lost.fetch()) { error in
            XCTAssertTrue("\(error)".contains("git fetch"), "\(error)")
        }
    }

    func test_revisions_read_from_loose_refs_agree_with_git_and_packed_refs_ask_git() throws {
        let a = try device("a")
        XCTAssertEqual(try a.revisions().head, nil)  // no commit yet
        try WorkTreeFiles.makeDirectory(a.path("items"))
        try WorkTreeFiles.write([1], to: a.path("items/one"))
        try a.commitAll("sync")
        XCTAssertEqual(try a.push(), .pushed)
        let expected = try a.git(["rev-parse", "HEAD"]).outputText.split(separator: "\n").first.map(String.init)
        XCTAssertNotNil(expected)
        XCTAssertEqual(try a.revisions().head, expected)
        XCTAssertEqual(try a.revisions().remote, expected)
        // Packed refs (after git gc or pack-refs) are read by git itself.
        try a.git(["pack-refs", "--all", "--prune"])
        XCTAssertNotEqual(access(a.path(".git/refs/heads/main"), F_OK), 0)
        XCTAssertEqual(try a.revisions().head, expected)
        XCTAssertEqual(try a.revisions().remote, expected)
        XCTAssertNil(GitRepository.objectName(Array("ref: refs/heads/main\n".utf8)))
        XCTAssertNil(GitRepository.objectName(Array(String(repeating: "A", count: 40).utf8) + [0x0a]))
        XCTAssertEqual(GitRepository.objectName(Array(String(repeating: "a", count: 40).utf8) + [0x0a]), String(repeating: "a", count: 40))
    }
}
