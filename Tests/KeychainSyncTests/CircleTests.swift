import KeychainCrypto
import XCTest
@testable import KeychainSync

final class CircleTests: XCTestCase {
    private let circle = [UInt8](repeating: 0xC1, count: 16)
    private let founder = [UInt8](repeating: 0x01, count: 16), second = [UInt8](repeating: 0x02, count: 16)
    private let intruder = [UInt8](repeating: 0x66, count: 16)

    private struct Log {
        var files: [[UInt8]] = []
        mutating func append(_ kind: CircleEvent.Kind, generation: UInt32, subject: [UInt8], key: [UInt8], signer: [UInt8], by identity: DeviceIdentity,
                             circle: [UInt8]) throws {
            let previous = try files.last.map { try CircleLog.hash($0) } ?? [UInt8](repeating: 0, count: 32)
            let event = CircleEvent(kind: kind, index: UInt32(files.count), previous: previous, circle: circle, generation: generation,
                                    subject: subject, subjectKey: key, signer: signer)
            files.append(try event.signed(by: identity))
        }
    }

    private func expect(_ kind: SyncError.Kind, _ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try body(), file: file, line: line) { XCTAssertEqual(($0 as? SyncError)?.kind, kind, "\($0)", file: file, line: line) }
    }

    func test_a_log_of_genesis_add_and_remove_gives_the_members_and_the_generation() throws {
        let a = try SoftwareDeviceIdentity.generate(), b = try SoftwareDeviceIdentity.generate()
        var log = Log()
        try log.append(.genesis, generation: 1, subject: founder, key: a.publicKeyInfo, signer: founder, by: a, circle: circle)
        let genesis = try CircleLog.hash(log.files[0])
        try log.append(.add, generation: 1, subject: second, key: b.publicKeyInfo, signer: founder, by: a, circle: circle)
        var members = try CircleLog.verify(log.files, genesis: genesis)
        XCTAssertEqual(Set(members.members.keys), [Hex.string(founder), Hex.string(second)])
        XCTAssertEqual(members.generation, 1)
        try log.append(.remove, generation: 2, subject: founder, key: a.publicKeyInfo, signer: second, by: b, circle: circle)
        members = try CircleLog.verify(log.files, genesis: genesis)
        XCTAssertEqual(Set(members.members.keys), [Hex.string(second)])
        XCTAssertEqual(members.generation, 2)
        XCTAssertEqual(members.head, try CircleLog.hash(log.files[2]))
    }

    // The remote's holder makes a key of their own and appends an `add` for it: signed by no member.
    func test_the_remotes_holder_cannot_add_a_device_of_their_own() throws {
        let a = try SoftwareDeviceIdentity.generate(), mallory = try SoftwareDeviceIdentity.generate()
        var log = Log()
        try log.append(.genesis, generation: 1, subject: founder, key: a.publicKeyInfo, signer: founder, by: a, circle: circle)
        let genesis = try CircleLog.hash(log.files[0])
        var forged = log
        try forged.append(.add, generation: 1, subject: intruder, key: mallory.publicKeyInfo, signer: intruder, by: mallory, circle: circle)
        expect(.badSignature) { _ = try CircleLog.verify(forged.files, genesis: genesis) }
        var claimed = log
        try claimed.append(.add, generation: 1, subject: intruder, key: mallory.publicKeyInfo, signer: founder, by: mallory, circle: circle)
        expect(.badSignature) { _ = try CircleLog.verify(claimed.files, genesis: genesis) }
        // A whole new circle under the same name is not the pinned one.
        var other = Log()
        try other.append(.genesis, generation: 1, subject: intruder, key: mallory.publicKeyInfo, signer: intruder, by: mallory, circle: circle)
        expect(.tampered) { _ = try CircleLog.verify(other.files, genesis: genesis) }
        // Events out of order or with an edited byte.
        var added = log
        try added.append(.add, generation: 1, subject: second, key: mallory.publicKeyInfo, signer: founder, by: a, circle: circle)
        var edited = added.files
        edited[1][20] ^= 1
        expect(.tampered) { _ = try CircleLog.verify(edited, genesis: genesis) }
        expect(.withheld) { _ = try CircleLog.verify([], genesis: genesis) }
    }

    func test_the_pairing_code_is_twelve_base32_characters_bound_to_the_key() throws {
        let a = try SoftwareDeviceIdentity.generate(), b = try SoftwareDeviceIdentity.generate()
        let genesis = [UInt8](repeating: 9, count: 32)
        let code = try CircleLog.pairingCode(genesis: genesis, device: second, publicKeyInfo: a.publicKeyInfo)
        XCTAssertEqual(code.count, 12)
        XCTAssertTrue(code.allSatisfy { "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".contains($0) })
        XCTAssertEqual(code, try CircleLog.pairingCode(genesis: genesis, device: second, publicKeyInfo: a.publicKeyInfo))
        XCTAssertNotEqual(code, try CircleLog.pairingCode(genesis: genesis, device: second, publicKeyInfo: b.publicKeyInfo))
        XCTAssertNotEqual(code, try CircleLog.pairingCode(genesis: [UInt8](repeating: 8, count: 32), device: second, publicKeyInfo: a.publicKeyInfo))
    }

    func test_a_wrapped_circle_key_opens_only_for_its_member_generation_and_circle_and_only_signed_by_a_member() throws {
        let member = try SoftwareDeviceIdentity.generate(), removed = try SoftwareDeviceIdentity.generate()
        let approver = try SoftwareDeviceIdentity.generate(), mallory = try SoftwareDeviceIdentity.generate()
        let wrappers = [Hex.string(founder): approver.publicKeyInfo]
        let key = SecureBytes(Array(repeating: 0x5A, count: 32))
        let wrapped = try CircleKeyWrap.wrap(key, generation: 2, circle: circle, to: second, publicKeyInfo: member.publicKeyInfo, by: founder, signer: approver)
        XCTAssertEqual(try CircleKeyWrap.unwrap(wrapped, generation: 2, circle: circle, device: second, identity: member, wrappers: wrappers).bytes, key.bytes)
        expect(.tampered) { _ = try CircleKeyWrap.unwrap(wrapped, generation: 2, circle: circle, device: second, identity: removed, wrappers: wrappers) }
        expect(.badSignature) { _ = try CircleKeyWrap.unwrap(wrapped, generation: 3, circle: circle, device: second, identity: member, wrappers: wrappers) }
        expect(.badSignature) { _ = try CircleKeyWrap.unwrap(wrapped, generation: 2, circle: circle, device: founder, identity: member, wrappers: wrappers) }
        // The remote's holder wraps a key of their own to the member: the wrapping needs only the
        // member's public key, but the signature is not a member's.
        let planted = try CircleKeyWrap.wrap(SecureBytes(Array(repeating: 0x66, count: 32)), generation: 2, circle: circle, to: second,
                                             publicKeyInfo: member.publicKeyInfo, by: founder, signer: mallory)
        expect(.badSignature) { _ = try CircleKeyWrap.unwrap(planted, generation: 2, circle: circle, device: second, identity: member, wrappers: wrappers) }
        let claimed = try CircleKeyWrap.wrap(SecureBytes(Array(repeating: 0x66, count: 32)), generation: 2, circle: circle, to: second,
                                             publicKeyInfo: member.publicKeyInfo, by: intruder, signer: mallory)
        expect(.badSignature) { _ = try CircleKeyWrap.unwrap(claimed, generation: 2, circle: circle, device: second, identity: member, wrappers: wrappers) }
        // The device key survives its sealed form.
        let copy = try SoftwareDeviceIdentity.read(privateKeyInfo: member.privateKeyInfo())
        XCTAssertEqual(copy.publicKeyInfo, member.publicKeyInfo)
        XCTAssertEqual(try CircleKeyWrap.unwrap(wrapped, generation: 2, circle: circle, device: second, identity: copy, wrappers: wrappers).bytes, key.bytes)
    }
}
