import Glibc
@testable import KeychainCore
import KeychainStore
import KeychainCrypto
import XCTest
@testable import KeychainSync

/// Devices as users meet them, in one process: each a keychain with its own master and device
/// key and its own git work tree, one bare repository as the remote (file://).
final class SyncEngineTests: SyncTestCase {
    private func edit(_ device: Device, uid: [UInt8], secret: String) throws {
        let id = try XCTUnwrap(try device.keychain.store.objectID(uid: uid))
        var object = try device.keychain.object(id: id, master: device.master)
        object[.value] = Array(secret.utf8)
        try device.keychain.replace(id: id, with: object, master: device.master)
    }

    /// a sets up a circle ("laptop"), b ("desktop") joins, approved by a; b, then a, have synced.
    private func circleOfTwo() throws -> (Device, Device) {
        let a = try device("a"), b = try device("b")
        _ = try a.engine.setup(remote: remote, deviceName: "laptop")
        try join(b, approvedBy: a)
        _ = try b.engine.sync()
        _ = try a.engine.sync()
        return (a, b)
    }

    /// a sets up a circle ("laptop"), b ("desktop") and c join, approved by a; each has synced once.
    private func circleOfThree() throws -> (Device, Device, Device) {
        let a = try device("a"), b = try device("b"), c = try device("c")
        _ = try a.engine.setup(remote: remote, deviceName: "laptop")
        try join(b, approvedBy: a)
        _ = try b.engine.sync()
        try join(c, approvedBy: a)
        _ = try c.engine.sync()
        return (a, b, c)
    }

    private func join(_ joiner: Device, approvedBy member: Device) throws {
        let code = try joiner.engine.requestJoin(remote: remote, deviceName: "desktop")
        XCTAssertEqual(code.count, CircleLog.pairingCodeLength)
        _ = try member.engine.approve(code: code)
    }

    func test_an_item_added_on_one_device_reads_on_a_second_and_edits_and_deletes_follow() throws {
        let a = try device("a"), b = try device("b")
        let uid = try addPassword(a, account: "alice", secret: "s3cret")
        try addPassword(a, account: "local", secret: "stays here", sync: false)
        XCTAssertEqual(try a.engine.setup(remote: remote, deviceName: "laptop").sent, 1)
        try join(b, approvedBy: a)
        XCTAssertEqual(try b.engine.sync().received, 1)
        XCTAssertEqual(try secrets(b), ["alice": "s3cret"])
        // The same uid on both devices (CKA_UNIQUE_ID, the persistent reference).
        XCTAssertNotNil(try b.keychain.store.objectID(uid: uid))

        try edit(b, uid: uid, secret: "changed on b")
        XCTAssertEqual(try b.engine.sync().sent, 1)
        XCTAssertEqual(try a.engine.sync().received, 1)
        XCTAssertEqual(try secrets(a), ["alice": "changed on b"])

        let id = try XCTUnwrap(try a.keychain.store.objectID(uid: uid))
        try a.keychain.remove(id: id, master: a.master)
        XCTAssertEqual(try a.engine.sync().sent, 1)
        XCTAssertEqual(try b.engine.sync().received, 1)
        XCTAssertEqual(try secrets(b), [:])
        // Nothing more to do: a sync with no change sends and receives nothing.
        let idle = try b.engine.sync()
        XCTAssertEqual([idle.sent, idle.received, idle.settled], [0, 0, 0])
    }

    func test_syncs_with_nothing_new_push_nothing() throws {
        let a = try device("a"), b = try device("b")
        try addPassword(a, account: "alice", secret: "s3cret")
        _ = try a.engine.setup(remote: remote, deviceName: "laptop")
        try join(b, approvedBy: a)
        XCTAssertEqual(try b.engine.sync().received, 1)
        _ = try a.engine.sync()  // a reads b's manifest
        let remoteHead = { try Subprocess.run(["git", "--git-dir", self.root + "/remote.git", "rev-parse", "main"]).outputText }
        let head = try remoteHead()
        for device in [a, b, a, b] {
            let idle = try device.engine.sync()
            XCTAssertEqual([idle.sent, idle.received, idle.settled], [0, 0, 0])
        }
        // No new manifest and no merge commit: two idle devices do not keep each other busy.
        XCTAssertEqual(try remoteHead(), head)
        try addPassword(b, account: "bob", secret: "2")
        XCTAssertEqual(try b.engine.sync().sent, 1)
        XCTAssertEqual(try a.engine.sync().received, 1)
        XCTAssertEqual(try secrets(a), ["alice": "s3cret", "bob": "2"])
    }

    func test_offline_edits_on_two_devices_converge_and_are_counted() throws {
        let a = try device("a"), b = try device("b")
        let uid = try addPassword(a, account: "alice", secret: "first")
        _ = try a.engine.setup(remote: remote, deviceName: "laptop")
        try join(b, approvedBy: a)
        _ = try b.engine.sync()
        try edit(a, uid: uid, secret: "from a")
        try addPassword(a, account: "only-a", secret: "1")
        sleep(1)  // b's edit is the later one (modification times have second resolution)
        try edit(b, uid: uid, secret: "from b")
        try addPassword(b, account: "only-b", secret: "2")
        _ = try a.engine.sync()
        let settledOnB = try b.engine.sync()  // rejected or not, b ends up merged
        XCTAssertEqual(settledOnB.settled, 1)
        _ = try a.engine.sync()
        XCTAssertEqual(try secrets(a), try secrets(b))
        XCTAssertEqual(try secrets(a), ["alice": "from b", "only-a": "1", "only-b": "2"])
    }

    func test_a_device_that_was_not_approved_reads_nothing() throws {
        let a = try device("a"), b = try device("b")
        try addPassword(a, account: "alice", secret: "s3cret")
        _ = try a.engine.setup(remote: remote, deviceName: "laptop")
        _ = try b.engine.requestJoin(remote: remote, deviceName: "desktop")
        XCTAssertThrowsError(try b.engine.sync()) { XCTAssertEqual(($0 as? SyncError)?.kind, .withheld, "\($0)") }
        XCTAssertEqual(try secrets(b), [:])
        XCTAssertThrowsError(try a.engine.approve(code: "AAAAAAAAAAAA"))
    }

    func test_the_remote_holds_no_label_account_or_secret_in_clear() throws {
        let a = try device("a")
        try addPassword(a, account: "alice-the-account", secret: "very-secret-value")
        _ = try a.engine.setup(remote: remote, deviceName: "laptop")
        // Every object of the repository, decompressed: blobs, trees (file names), commits.
        let objects = try Subprocess.run(["git", "--git-dir", root + "/remote.git", "cat-file", "--batch-all-objects", "--batch"])
        XCTAssertTrue(objects.succeeded)
        XCTAssertGreaterThan(objects.output.count, 2000)
        for word in ["alice-the-account", "very-secret-value", "example.com", "laptop"] {
            XCTAssertNil(objects.output.firstRange(of: Array(word.utf8)), word)
        }
        XCTAssertNotNil(objects.output.firstRange(of: Array("@keychain-pkcs11".utf8)), "the search reads the objects")
    }

    func test_an_edited_file_on_the_remote_is_refused_and_nothing_applied() throws {
        let a = try device("a"), b = try device("b")
        try addPassword(a, account: "alice", secret: "s3cret")
        _ = try a.engine.setup(remote: remote, deviceName: "laptop")
        try join(b, approvedBy: a)
        // The remote's holder flips a byte of the item file.
        let clone = root + "/mallory"
        XCTAssertTrue(try Subprocess.run(["git", "clone", "-q", remote, clone]).succeeded)
        let item = try XCTUnwrap(WorkTreeFiles.list(clone + "/items").first)
        var bytes = try XCTUnwrap(WorkTreeFiles.read(clone + "/items/" + item))
        bytes[bytes.count - 1] ^= 1
        try WorkTreeFiles.write(bytes, to: clone + "/items/" + item)
        let mallory = GitRepository(directory: clone, remote: remote, device: "mallory")
        try mallory.commitAll("edit")
        XCTAssertEqual(try mallory.push(), .pushed)
        XCTAssertThrowsError(try b.engine.sync()) { XCTAssertEqual(($0 as? SyncError)?.kind, .tampered, "\($0)") }
        XCTAssertEqual(try secrets(b), [:])
    }

    // A removed device cannot read what is written afterwards: the key rotated to the others only.
    func test_a_removed_device_cannot_read_an_item_added_after_its_removal() throws {
        let a = try device("a"), b = try device("b"), c = try device("c")
        try addPassword(a, account: "before", secret: "1")
        _ = try a.engine.setup(remote: remote, deviceName: "laptop")
        try join(b, approvedBy: a)
        _ = try b.engine.sync()
        let codeC = try c.engine.requestJoin(remote: remote, deviceName: "server")
        _ = try b.engine.approve(code: codeC)  // any member approves
        _ = try c.engine.sync()
        XCTAssertEqual(try secrets(c), ["before": "1"])
        XCTAssertEqual(Set(try a.engine.devices().compactMap(\.name)), ["laptop", "desktop", "server"])

        let removed = try a.engine.removeDevice("desktop")
        XCTAssertEqual(removed, Hex.string(try XCTUnwrap(try b.engine.deviceID())))
        try addPassword(a, account: "after", secret: "2")
        _ = try a.engine.sync()
        _ = try c.engine.sync()
        XCTAssertEqual(try secrets(c), ["before": "1", "after": "2"])
        // b is no longer a member, and the new generation's key is not wrapped to it.
        XCTAssertThrowsError(try b.engine.sync()) { XCTAssertEqual(($0 as? SyncError)?.kind, .withheld, "\($0)") }
        XCTAssertEqual(try secrets(b), ["before": "1"])
        let clone = root + "/check"
        XCTAssertTrue(try Subprocess.run(["git", "clone", "-q", remote, clone]).succeeded)
        XCTAssertEqual(WorkTreeFiles.list(clone + "/circle/keys/2"), [try a.engine.deviceID(), try c.engine.deviceID()].compactMap { $0.map(Hex.string) }.sorted())
        XCTAssertEqual(Set(try a.engine.devices().compactMap(\.name)), ["laptop", "server"])
    }

    // The remote's holder force-pushes an old history: every device remembers the counters it saw.
    func test_a_remote_rolled_back_to_an_older_history_is_refused() throws {
        let a = try device("a"), b = try device("b")
        try addPassword(a, account: "one", secret: "1")
        _ = try a.engine.setup(remote: remote, deviceName: "laptop")
        try join(b, approvedBy: a)
        _ = try b.engine.sync()
        let old = try Subprocess.run(["git", "--git-dir", root + "/remote.git", "rev-parse", "main"]).outputText.trimmedLines
        try addPassword(a, account: "two", secret: "2")
        _ = try a.engine.sync()
        _ = try b.engine.sync()
        XCTAssertEqual(try secrets(b), ["one": "1", "two": "2"])
        XCTAssertTrue(try Subprocess.run(["git", "--git-dir", root + "/remote.git", "update-ref", "refs/heads/main", old]).succeeded)
        // b's work tree still has the newer history; a fresh clone of b's state sees the old one.
        _ = try Subprocess.run(["rm", "-rf", root + "/b-sync"])
        XCTAssertThrowsError(try b.engine.sync()) { XCTAssertEqual(($0 as? SyncError)?.kind, .rolledBack, "\($0)") }
        XCTAssertEqual(try secrets(b), ["one": "1", "two": "2"])
    }

    func test_leaving_forgets_the_circle_and_keeps_the_items() throws {
        let a = try device("a"), b = try device("b")
        try addPassword(a, account: "one", secret: "1")
        _ = try a.engine.setup(remote: remote, deviceName: "laptop")
        try join(b, approvedBy: a)
        _ = try b.engine.sync()
        try b.engine.leave()
        XCTAssertNil(try b.engine.deviceID())
        XCTAssertEqual(try secrets(b), ["one": "1"])
        // b asked to leave; a's next sync carries it out.
        XCTAssertEqual(Set(try a.engine.devices().compactMap(\.name)), ["laptop", "desktop"])  // listed by id: either order
        let report = try a.engine.sync()
        XCTAssertEqual([report.received, report.devicesRemoved], [0, 1])
        XCTAssertEqual(try a.engine.devices().map(\.name), ["laptop"])
        let idle = try a.engine.sync()
        XCTAssertEqual([idle.sent, idle.received, idle.devicesRemoved], [0, 0, 0])
    }

    func test_items_a_device_wrote_just_before_leaving_stay_readable_for_the_others() throws {
        let (a, b, c) = try circleOfThree()
        // b's last item: its leave syncs it first, and no other device has synced it when b goes.
        try addPassword(b, account: "last from b", secret: "1")
        let bID = Hex.string(try XCTUnwrap(try b.engine.deviceID()))
        try b.engine.leave()
        // a's sync receives it and removes b, its manifest vouching for b's last item; c, which
        // never synced while b was a member, reads it after (with a self-removal, whose commit
        // deleted b's manifest, both refused the remote: "listed by no device's manifest").
        let report = try a.engine.sync()
        XCTAssertEqual([report.received, report.devicesRemoved], [1, 1])
        XCTAssertEqual(try c.engine.sync().received, 1)
        XCTAssertEqual(try secrets(a), ["last from b": "1"])
        XCTAssertEqual(try secrets(c), ["last from b": "1"])
        XCTAssertFalse(try a.engine.devices().contains { $0.id == bID })
        // A request to leave signed by someone else is passed over.
        let clone = root + "/forger"
        XCTAssertTrue(try Subprocess.run(["git", "clone", "-q", remote, clone]).succeeded)
        let cID = try XCTUnwrap(try c.engine.deviceID())
        try WorkTreeFiles.makeDirectory(clone + "/circle/leaving")
        try WorkTreeFiles.write([UInt8](repeating: 7, count: 64), to: clone + "/circle/leaving/" + Hex.string(cID))
        for arguments in [["add", "-A"], ["-c", "user.name=x", "-c", "user.email=x@x", "commit", "-q", "-m", "forged"], ["push", "-q", "origin", "main"]] {
            XCTAssertTrue(try Subprocess.run(["git", "-C", clone] + arguments).succeeded, "\(arguments)")
        }
        XCTAssertEqual(try a.engine.sync().devicesRemoved, 0)
        XCTAssertTrue(try a.engine.devices().contains { $0.id == Hex.string(cID) })
    }

    /// A small deterministic generator (the run can be replayed from its seed).
    private struct Generator {
        var state: UInt64
        mutating func next(_ bound: Int) -> Int {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            return Int((state >> 33) % UInt64(bound))
        }
    }

    // A few hundred random adds, edits, deletes and syncs on three devices, in random order, with
    // edits and deletes of one item on several devices between syncs; once every device has synced
    // twice more, all hold the same items with the same values.
    func test_random_operations_on_three_devices_converge() throws {
        let devices = try ["a", "b", "c"].map { try device($0) }
        _ = try devices[0].engine.setup(remote: remote, deviceName: "a")
        for joiner in devices.dropFirst() {
            try join(joiner, approvedBy: devices[0])
            _ = try joiner.engine.sync()
        }
        var random = Generator(state: 47)
        var settled = 0, added = 0
        for step in 0..<300 {
            let who = random.next(3)
            let device = devices[who]
            let items = try secrets(device)
            switch random.next(6) {
            case 0:
                // Mostly names of their own; sometimes a name another device may add too.
                let account = random.next(4) == 0 ? "shared-\(random.next(3))" : "\(["a", "b", "c"][who])-\(step)"
                guard items[account] == nil else { continue }
                try addPassword(device, account: account, secret: "v\(step)")
                added += 1
            case 1, 2:
                guard let account = items.keys.sorted().dropFirst(random.next(max(items.count, 1))).first else { continue }
                let uid = try XCTUnwrap(try uidOf(device, account: account))
                try edit(device, uid: uid, secret: "\(account) edited at \(step) on \(who)")
            case 3:
                guard let account = items.keys.sorted().dropFirst(random.next(max(items.count, 1))).first else { continue }
                let uid = try XCTUnwrap(try uidOf(device, account: account))
                try device.keychain.removeSynchronized(uid: uid, master: device.master)
            default:
                settled += try device.engine.sync().settled
            }
        }
        for _ in 0..<2 { for device in devices { settled += try device.engine.sync().settled } }
        let final = try secrets(devices[0])
        XCTAssertEqual(try secrets(devices[1]), final)
        XCTAssertEqual(try secrets(devices[2]), final)
        XCTAssertGreaterThan(added, 20)
        XCTAssertGreaterThan(final.count, 0)
        XCTAssertGreaterThan(settled, 0, "the run had conflicts to settle")
        for device in devices { XCTAssertEqual(try device.engine.status().pending, 0) }
    }

    // The same account and service added on two devices before either synced: two items, one
    // name. Both devices end with one of them (the later), whichever syncs first.
    func test_the_same_item_added_on_two_devices_settles_to_one() throws {
        let a = try device("a"), b = try device("b")
        _ = try a.engine.setup(remote: remote, deviceName: "laptop")
        try join(b, approvedBy: a)
        _ = try b.engine.sync()
        try addPassword(a, account: "wifi", secret: "from a")
        sleep(1)
        try addPassword(b, account: "wifi", secret: "from b")
        _ = try a.engine.sync()
        XCTAssertEqual(try b.engine.sync().settled, 1)
        _ = try a.engine.sync()
        XCTAssertEqual(try secrets(a), ["wifi": "from b"])
        XCTAssertEqual(try secrets(b), ["wifi": "from b"])
        XCTAssertEqual(try a.keychain.synchronizableItems(master: a.master).count, 1)
    }

    // The remote's holder replaces the key wrapped for a newly approved device with one of its
    // own (wrapping needs only the device's public key, which the log shows): the device refuses
    // it, and what it would have sent stays unsent.
    func test_a_circle_key_planted_for_a_new_device_is_refused() throws {
        let a = try device("a"), b = try device("b")
        _ = try a.engine.setup(remote: remote, deviceName: "laptop")
        try addPassword(b, account: "b-secret", secret: "only for the circle")
        let code = try b.engine.requestJoin(remote: remote, deviceName: "desktop")
        _ = try a.engine.approve(code: code)
        let clone = root + "/mallory"
        XCTAssertTrue(try Subprocess.run(["git", "clone", "-q", remote, clone]).succeeded)
        let event = try XCTUnwrap(CircleEvent.parse(try XCTUnwrap(WorkTreeFiles.read(clone + "/circle/log/1"))))
        let mallory = try SoftwareDeviceIdentity.generate()
        let planted = try CircleKeyWrap.wrap(SecureBytes(Array(repeating: 0x66, count: 32)), generation: 1, circle: event.event.circle,
                                             to: event.event.subject, publicKeyInfo: event.event.subjectKey, by: event.event.signer, signer: mallory)
        try WorkTreeFiles.write(planted, to: clone + "/circle/keys/1/" + Hex.string(event.event.subject))
        let repository = GitRepository(directory: clone, remote: remote, device: "mallory")
        try repository.commitAll("plant")
        XCTAssertEqual(try repository.push(), .pushed)
        XCTAssertThrowsError(try b.engine.sync()) { XCTAssertEqual(($0 as? SyncError)?.kind, .badSignature, "\($0)") }
        XCTAssertFalse(try b.engine.isMember())
        XCTAssertEqual(WorkTreeFiles.list(clone + "/items"), [])
    }

    private func uidOf(_ device: Device, account: String) throws -> [UInt8]? {
        for item in try device.keychain.synchronizableItems(master: device.master) {
            let object = ObjectAttributes(recordAttributes: try item.record.withUnsafeBytes { try AttributeRecord.decode($0) })
            if object[.account] == Array(account.utf8) { return item.uid }
        }
        return nil
    }

    func test_a_sync_with_nothing_new_is_answered_without_the_master_key() throws {
        let a = try device("a"), b = try device("b")
        try addPassword(a, account: "alice", secret: "s3cret")
        _ = try a.engine.setup(remote: remote, deviceName: "laptop")
        try join(b, approvedBy: a)
        XCTAssertEqual(try b.engine.sync().received, 1)
        let lockedA = SyncEngine(keychain: a.keychain, master: nil, workTree: a.engine.workTree)
        let lockedB = SyncEngine(keychain: b.keychain, master: nil, workTree: b.engine.workTree)
        // b has just received (its own writes only) and pushed its manifest: nothing new for b.
        XCTAssertEqual(try lockedB.quickSync(), SyncReport())
        // a has not seen b's manifest yet: the remote moved, so a full sync, and only then quick.
        XCTAssertNil(try lockedA.quickSync())
        XCTAssertThrowsError(try lockedA.sync()) { XCTAssertTrue(($0 as? SyncError)?.reason.contains("locked") == true, "\($0)") }
        _ = try a.engine.sync()
        let full = try XCTUnwrap(try a.engine.status().lastSync)
        usleep(20_000)
        XCTAssertEqual(try lockedA.quickSync(), SyncReport())
        // The quick answer is a sync too: status's last sync moves (without a keychain write).
        XCTAssertGreaterThan(try XCTUnwrap(try a.engine.status().lastSync), full)

        // A change here is not missed: no quick answer, and the full sync sends it.
        try addPassword(a, account: "bob", secret: "2")
        XCTAssertNil(try lockedA.quickSync())
        XCTAssertEqual(try a.engine.sync().sent, 1)
        // A change on the remote is not missed either: b's fetch brings it.
        XCTAssertNil(try lockedB.quickSync())
        XCTAssertEqual(try b.engine.sync(tryingQuick: false).received, 1)
        XCTAssertEqual(try secrets(b)["bob"], "2")
        XCTAssertEqual(try lockedB.quickSync(), SyncReport())
        // Any write to the keychain, even of an item that does not sync, asks for a full sync.
        try addPassword(b, account: "local", secret: "stays", sync: false)
        XCTAssertNil(try lockedB.quickSync())
        let idle = try b.engine.sync()
        XCTAssertEqual([idle.sent, idle.received, idle.settled], [0, 0, 0])
        XCTAssertEqual(try lockedB.quickSync(), SyncReport())
        // So does a commit in the work tree that the remote does not have.
        _ = try Subprocess.run(["git", "-C", b.engine.workTree, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x"])
        XCTAssertNil(try lockedB.quickSync())
    }

    func test_more_items_than_one_batch_are_received_in_one_sync() throws {
        let a = try device("a"), b = try device("b")
        let count = SyncEngine.applyBatch * 2 + 7
        for index in 0..<count { try addPassword(a, account: "user\(index)", secret: "secret \(index)") }
        XCTAssertEqual(try a.engine.setup(remote: remote, deviceName: "laptop").sent, count)
        try join(b, approvedBy: a)
        XCTAssertEqual(try b.engine.sync().received, count)
        let expected = Dictionary(uniqueKeysWithValues: (0..<count).map { ("user\($0)", "secret \($0)") })
        XCTAssertEqual(try secrets(b), expected)
        // What was applied is remembered: nothing comes back as a change of b's.
        let idle = try b.engine.sync(tryingQuick: false)
        XCTAssertEqual([idle.sent, idle.received, idle.settled], [0, 0, 0])
    }

    func test_what_a_sync_cut_short_left_in_the_work_tree_is_cleared_by_the_next() throws {
        let a = try device("a")
        _ = try a.engine.setup(remote: remote, deviceName: "laptop")
        let marker = a.engine.workTree + ".unfinished"
        XCTAssertNotEqual(access(marker, F_OK), 0, "a sync that completed leaves no marker")
        // What a sync killed after writing its files leaves: files not committed, and the marker.
        try WorkTreeFiles.write(Array("half-written".utf8), to: a.engine.workTree + "/items/stray")
        XCTAssertEqual(close(open(marker, O_WRONLY | O_CREAT, 0o600)), 0)
        try addPassword(a, account: "alice", secret: "s3cret")
        XCTAssertEqual(try a.engine.sync().sent, 1)
        XCTAssertNotEqual(access(a.engine.workTree + "/items/stray", F_OK), 0)
        let listed = try Subprocess.run(["git", "--git-dir", root + "/remote.git", "ls-tree", "-r", "--name-only", "main"]).outputText
        XCTAssertFalse(listed.contains("stray"))
        XCTAssertNotEqual(access(marker, F_OK), 0)
    }

    func test_items_last_written_by_a_removed_device_stay_readable_for_the_others() throws {
        let (a, b, c) = try circleOfThree()
        _ = try a.engine.sync()
        // b writes an item and syncs; a removes b without having synced since.
        try addPassword(b, account: "from b", secret: "1")
        XCTAssertEqual(try b.engine.sync().sent, 1)
        _ = try a.engine.removeDevice(Hex.string(try XCTUnwrap(try b.engine.deviceID())))
        // The item b wrote is still vouched for: a (which synced as it removed b) and c read it,
        // nothing is refused.
        XCTAssertEqual(try a.engine.sync().received, 0)
        XCTAssertEqual(try c.engine.sync().received, 1)
        XCTAssertEqual(try secrets(c), ["from b": "1"])
        XCTAssertEqual(try secrets(a), ["from b": "1"])
    }

    func test_a_sync_that_only_receives_pushes_nothing() throws {
        let (a, b) = try circleOfTwo()
        try addPassword(a, account: "alice", secret: "1")
        XCTAssertEqual(try a.engine.sync().sent, 1)
        let remoteHead = { try Subprocess.run(["git", "--git-dir", self.root + "/remote.git", "rev-parse", "main"]).outputText }
        let head = try remoteHead()
        XCTAssertEqual(try b.engine.sync().received, 1)
        XCTAssertEqual(try remoteHead(), head, "b wrote no manifest, committed and pushed nothing")
        // Both are where their last syncs left them: nothing new for either.
        for device in [a, b] {
            XCTAssertEqual(try SyncEngine(keychain: device.keychain, master: nil, workTree: device.engine.workTree).quickSync(), SyncReport())
        }
        // A quick check that fetched and found something leaves the fetch to the full sync.
        try addPassword(b, account: "bob", secret: "2")
        let locked = SyncEngine(keychain: b.keychain, master: nil, workTree: b.engine.workTree)
        XCTAssertNil(try locked.quickSync())
        XCTAssertTrue(locked.fetchedByQuickSync)
        XCTAssertEqual(try b.engine.sync(tryingQuick: false, fetched: true).sent, 1)
        XCTAssertEqual(try a.engine.sync().received, 1)
    }

    func test_a_lock_file_a_killed_git_left_does_not_fail_the_next_sync() throws {
        let (a, b) = try circleOfTwo()
        try addPassword(a, account: "alice", secret: "1")
        XCTAssertEqual(try a.engine.sync().sent, 1)
        // b's quick check was killed in its fetch: the ref lock stays, and no marker (the quick
        // check makes none). The next sync must neither fail nor stop at the quick check.
        let lock = b.engine.workTree + "/.git/refs/remotes/origin/main.lock"
        XCTAssertEqual(close(open(lock, O_WRONLY | O_CREAT, 0o600)), 0)
        XCTAssertNotEqual(access(b.engine.workTree + ".unfinished", F_OK), 0)
        XCTAssertEqual(try b.engine.sync().received, 1)
        XCTAssertEqual(try secrets(b), ["alice": "1"])
        XCTAssertNotEqual(access(lock, F_OK), 0)
    }
}
