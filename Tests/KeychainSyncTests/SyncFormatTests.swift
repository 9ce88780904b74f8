import KeychainCrypto
import XCTest
@testable import KeychainSync

final class SyncFormatTests: XCTestCase {
    private let firstKey = SecureBytes(Array(repeating: 0x11, count: 32))
    private let deviceA = [UInt8](repeating: 0xA1, count: 16)
    private let deviceB = [UInt8](repeating: 0xB2, count: 16)

    private func keys(_ generation: UInt32 = 1) throws -> CircleKeys {
        try CircleKeys(generation: generation, key: SecureBytes(Array(repeating: UInt8(generation), count: 32)))
    }

    private func item(uid: UInt8, version: UInt64, record: String = "the record") -> SyncItem {
        SyncItem(state: SyncItemState(uid: [UInt8](repeating: uid, count: 16), version: version, modified: 1_000 * version, writer: deviceA, deleted: false),
                 record: SecureBytes(Array(record.utf8)))
    }

    private func open(_ file: [UInt8], _ name: String, listed: UInt64? = nil) throws -> SyncItem {
        let names = try ItemNames(firstGenerationKey: firstKey)
        let generation1 = try keys(1), generation2 = try keys(2)
        return try SyncItemFile.open(file, name: name, listedVersion: listed, names: names) { [1: generation1, 2: generation2][$0] }
    }

    private func expect(_ kind: SyncError.Kind, _ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            XCTAssertEqual((error as? SyncError)?.kind, kind, "\(error)", file: file, line: line)
        }
    }

    func test_an_item_file_round_trips_and_names_reveal_nothing_of_the_item() throws {
        let names = try ItemNames(firstGenerationKey: firstKey)
        let original = item(uid: 7, version: 3)
        let name = try names.name(for: original.state.uid)
        XCTAssertEqual(name.count, 32)
        XCTAssertFalse(name.contains(Hex.string(original.state.uid)))
        let file = try SyncItemFile.seal(original, name: name, keys: keys())
        let opened = try open(file, name)
        XCTAssertEqual(opened.state, original.state)
        XCTAssertEqual(opened.record.bytes, original.record.bytes)
        // Neither the record nor the id appears in the file.
        XCTAssertNil(file.firstRange(of: Array("the record".utf8)))
        XCTAssertNil(file.firstRange(of: original.state.uid))
    }

    func test_sizes_are_padded_to_buckets() throws {
        XCTAssertEqual(SyncItemFile.bucket(10), 1024)
        XCTAssertEqual(SyncItemFile.bucket(1025), 2048)
        XCTAssertEqual(SyncItemFile.bucket(16 * 1024), 16 * 1024)
        XCTAssertEqual(SyncItemFile.bucket(16 * 1024 + 1), 32 * 1024)
        let names = try ItemNames(firstGenerationKey: firstKey)
        let short = try SyncItemFile.seal(item(uid: 1, version: 1, record: "a"), name: try names.name(for: [UInt8](repeating: 1, count: 16)), keys: keys())
        let longer = try SyncItemFile.seal(item(uid: 2, version: 1, record: String(repeating: "b", count: 900)), name: try names.name(for: [UInt8](repeating: 2, count: 16)), keys: keys())
        XCTAssertEqual(short.count, longer.count)
    }

    func test_every_changed_byte_is_refused_as_tampered() throws {
        let names = try ItemNames(firstGenerationKey: firstKey)
        let original = item(uid: 7, version: 3)
        let name = try names.name(for: original.state.uid)
        let file = try SyncItemFile.seal(original, name: name, keys: keys())
        for index in stride(from: SyncItemFile.headerSize, to: file.count, by: 97) {
            var edited = file
            edited[index] ^= 0x01
            expect(.tampered) { _ = try open(edited, name) }
        }
    }

    func test_a_file_moved_to_another_items_name_is_refused() throws {
        let names = try ItemNames(firstGenerationKey: firstKey)
        let first = item(uid: 7, version: 3), second = item(uid: 8, version: 3)
        let file = try SyncItemFile.seal(first, name: try names.name(for: first.state.uid), keys: keys())
        expect(.tampered) { _ = try open(file, try names.name(for: second.state.uid)) }
    }

    func test_an_older_version_put_back_is_refused_as_a_replay_and_a_lying_header_as_tampered() throws {
        let names = try ItemNames(firstGenerationKey: firstKey)
        let old = item(uid: 7, version: 2)
        let name = try names.name(for: old.state.uid)
        let file = try SyncItemFile.seal(old, name: name, keys: keys())
        expect(.replayed) { _ = try open(file, name, listed: 3) }
        XCTAssertEqual(try open(file, name, listed: 2).state.version, 2)
        // The header raised to the listed version: the associated data no longer matches.
        var raised = file
        raised[15] = 3
        expect(.tampered) { _ = try open(raised, name, listed: 3) }
    }

    func test_a_generation_this_device_does_not_hold_is_named() throws {
        let names = try ItemNames(firstGenerationKey: firstKey)
        let original = item(uid: 7, version: 1)
        let name = try names.name(for: original.state.uid)
        let file = try SyncItemFile.seal(original, name: name, keys: keys(3))
        expect(.unknownGeneration) { _ = try open(file, name) }
        expect(.malformed) { _ = try open(Array(file.prefix(10)), name) }
    }

    func test_a_manifest_round_trips_and_refuses_another_signer_or_device() throws {
        let signer = try SoftwareDeviceIdentity.generate(), other = try SoftwareDeviceIdentity.generate()
        let manifest = SyncManifest(device: deviceA, counter: 5, generation: 1,
                                    entries: [.init(name: "bb", version: 2, digest: [UInt8](repeating: 2, count: 32)),
                                              .init(name: "aa", version: 1, digest: [UInt8](repeating: 1, count: 32))])
        let file = try manifest.sealed(keys: keys(), signer: signer)
        let generation1 = try keys(1)
        let opened = try SyncManifest.open(file, device: deviceA, publicKeyInfo: signer.publicKeyInfo) { $0 == 1 ? generation1 : nil }
        XCTAssertEqual(opened, manifest)
        XCTAssertEqual(opened.entries.map(\.name), ["aa", "bb"])
        XCTAssertEqual(SyncManifest.claimedDevice(file), deviceA)
        expect(.badSignature) { _ = try SyncManifest.open(file, device: deviceA, publicKeyInfo: other.publicKeyInfo) { _ in generation1 } }
        expect(.badSignature) { _ = try SyncManifest.open(file, device: deviceB, publicKeyInfo: signer.publicKeyInfo) { _ in generation1 } }
        var edited = file
        edited[edited.count - 1] ^= 1
        expect(.badSignature) { _ = try SyncManifest.open(edited, device: deviceA, publicKeyInfo: signer.publicKeyInfo) { _ in generation1 } }
        // Nothing of the entries is readable without the circle key.
        XCTAssertNil(file.firstRange(of: Array("bb".utf8) + [0, 0, 0, 0, 0, 0, 0, 2]))
    }

    // The remote's checks, each case on its own.
    func test_rollback_withholding_replay_and_planted_files_are_refused_with_their_reason() throws {
        let names = try ItemNames(firstGenerationKey: firstKey)
        let v1 = item(uid: 7, version: 1), v2 = item(uid: 7, version: 2)
        let name = try names.name(for: v1.state.uid)
        let file1 = try SyncItemFile.seal(v1, name: name, keys: keys()), file2 = try SyncItemFile.seal(v2, name: name, keys: keys())
        let manifest = SyncManifest(device: deviceA, counter: 4, generation: 1,
                                    entries: [.init(name: name, version: 2, digest: try SyncManifest.digest(of: file2))])
        let device = Hex.string(deviceA)
        let result = try RemoteCheck.check(manifests: [manifest], remembered: [device: 4], files: [name: file2])
        XCTAssertEqual(result.listed[name]?.version, 2)
        XCTAssertEqual(result.counters[device], 4)
        XCTAssertThrowsError(try RemoteCheck.check(manifests: [manifest], remembered: [device: 5], files: [name: file2])) {
            XCTAssertEqual(($0 as? SyncError)?.kind, .rolledBack)
        }
        XCTAssertThrowsError(try RemoteCheck.check(manifests: [], remembered: [device: 4], files: [:])) {
            XCTAssertEqual(($0 as? SyncError)?.kind, .withheld)
        }
        XCTAssertThrowsError(try RemoteCheck.check(manifests: [manifest], remembered: [:], files: [:])) {
            XCTAssertEqual(($0 as? SyncError)?.kind, .withheld)
        }
        XCTAssertThrowsError(try RemoteCheck.check(manifests: [manifest], remembered: [:], files: [name: file1])) {
            XCTAssertEqual(($0 as? SyncError)?.kind, .replayed)
        }
        XCTAssertThrowsError(try RemoteCheck.check(manifests: [manifest], remembered: [:], files: [name: file2, "00": file2])) {
            XCTAssertEqual(($0 as? SyncError)?.kind, .tampered)
        }
    }
}

final class SyncMergeTests: XCTestCase {
    private struct Replica {
        let id: [UInt8]
        var items: [[UInt8]: SyncItemState] = [:]
        var clock: UInt64 = 0
    }

    /// A small deterministic generator (no calendar, no global state): the test can be replayed.
    private struct Generator {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int((state >> 33) % UInt64(bound))
        }
    }

    private func merge(_ into: inout Replica, from other: Replica) -> Int {
        var settled = 0
        for (uid, theirs) in other.items {
            if let ours = into.items[uid] {
                let kept = SyncMerge.settle(ours, theirs)
                if ours != theirs { settled += 1 }
                into.items[uid] = kept
            } else {
                into.items[uid] = theirs
            }
        }
        return settled
    }

    func test_the_order_is_total_and_the_same_whichever_side_asks() {
        let a = SyncItemState(uid: [1], version: 2, modified: 10, writer: [1], deleted: false)
        let later = SyncItemState(uid: [1], version: 1, modified: 11, writer: [0], deleted: false)
        let tieHigherWriter = SyncItemState(uid: [1], version: 1, modified: 10, writer: [2], deleted: false)
        let tieDelete = SyncItemState(uid: [1], version: 2, modified: 10, writer: [1], deleted: true)
        XCTAssertEqual(SyncMerge.settle(a, later), later)
        XCTAssertEqual(SyncMerge.settle(later, a), later)
        XCTAssertEqual(SyncMerge.settle(a, tieHigherWriter), tieHigherWriter)
        XCTAssertEqual(SyncMerge.settle(tieHigherWriter, a), tieHigherWriter)
        XCTAssertEqual(SyncMerge.settle(a, tieDelete), tieDelete)
        XCTAssertEqual(SyncMerge.settle(tieDelete, a), tieDelete)
        XCTAssertEqual(SyncMerge.settle(a, a), a)
    }

    // A few hundred random adds, edits and deletes on three replicas with clocks that collide,
    // synced pairwise in random order; after everyone has heard from everyone, all agree.
    func test_three_replicas_converge_whatever_the_sync_order() {
        for seed in UInt64(1)...20 {
            var random = Generator(state: seed)
            var replicas = (0..<3).map { Replica(id: [UInt8](repeating: UInt8($0 + 1), count: 16)) }
            var settled = 0
            for _ in 0..<300 {
                let who = random.next(3)
                if random.next(4) == 0 {
                    let other = (who + 1 + random.next(2)) % 3
                    settled += merge(&replicas[who], from: replicas[other])
                    continue
                }
                replicas[who].clock += UInt64(random.next(2))  // equal times happen
                let uid = [UInt8(random.next(12))]
                let current = replicas[who].items[uid]
                let state = SyncItemState(uid: uid, version: (current?.version ?? 0) + 1, modified: replicas[who].clock,
                                          writer: replicas[who].id, deleted: current != nil && random.next(3) == 0)
                replicas[who].items[uid] = state
            }
            for _ in 0..<2 {
                for who in 0..<3 { for other in 0..<3 where other != who { settled += merge(&replicas[who], from: replicas[other]) } }
            }
            XCTAssertEqual(replicas[0].items, replicas[1].items, "seed \(seed)")
            XCTAssertEqual(replicas[1].items, replicas[2].items, "seed \(seed)")
            XCTAssertGreaterThan(settled, 0, "seed \(seed): the run had conflicts to settle")
        }
    }
}
