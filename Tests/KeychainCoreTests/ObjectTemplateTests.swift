import XCTest
@testable import KeychainCore

let dataClass = AttributeValue.ulong(ObjectClass.data.rawValue)

final class ObjectTemplateTests: XCTestCase {
    private let uid = Array("00112233445566778899aabbccddeeff".utf8)

    private func code(_ body: () throws -> Void) -> KeychainError.Code? {
        do {
            try body()
            return nil
        } catch {
            return (error as? KeychainError)?.code
        }
    }

    func test_create_fills_defaults_and_unique_id() throws {
        let object = try ObjectTemplate.create([(.objectClass, dataClass), (.label, Array("L".utf8))], uniqueID: uid, policy: .compatible)
        XCTAssertEqual(object[.label], Array("L".utf8))
        XCTAssertEqual(object[.token], [0])
        XCTAssertEqual(object[.isPrivate], [1], "keychain items default to WhenUnlocked: private")
        XCTAssertEqual(object[.modifiable], [1])
        XCTAssertEqual(object[.copyable], [1])
        XCTAssertEqual(object[.destroyable], [1])
        XCTAssertEqual(object[.value], [])
        XCTAssertEqual(object[.application], [])
        XCTAssertEqual(object[.objectID], [])
        XCTAssertEqual(object[.uniqueID], uid)
    }

    func test_unique_ids_are_16_random_bytes_shown_as_lower_case_hex() throws {
        let first = try UniqueID.random(), second = try UniqueID.random()
        XCTAssertEqual(first.bytes.count, 16)
        XCTAssertNotEqual(first.bytes, second.bytes)
        XCTAssertEqual(UniqueID(bytes: [0x00, 0x0A, 0xF0, 0xFF]).text, Array("000af0ff".utf8))
        let expected = first.bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        XCTAssertEqual(String(decoding: first.text, as: UTF8.self), expected)
    }

    func test_create_refusals_have_precise_codes() {
        XCTAssertEqual(code { _ = try ObjectTemplate.create([(.label, [])], uniqueID: uid, policy: .compatible) }, .templateIncomplete)
        XCTAssertEqual(code { _ = try ObjectTemplate.create([(.objectClass, [0, 0])], uniqueID: uid, policy: .compatible) }, .attributeValueInvalid)
        XCTAssertEqual(code { _ = try ObjectTemplate.create([(.objectClass, AttributeValue.ulong(0x1234))], uniqueID: uid, policy: .compatible) }, .attributeValueInvalid)
        XCTAssertEqual(code { _ = try ObjectTemplate.create([(.objectClass, dataClass), (.token, [1, 0])], uniqueID: uid, policy: .compatible) }, .attributeValueInvalid)
        XCTAssertEqual(code { _ = try ObjectTemplate.create([(.objectClass, dataClass), (.uniqueID, [1])], uniqueID: uid, policy: .compatible) }, .attributeReadOnly)
        XCTAssertEqual(code { _ = try ObjectTemplate.create([(.objectClass, dataClass), (AttributeType(0x100), dataClass)], uniqueID: uid, policy: .compatible) }, .attributeTypeInvalid)
        XCTAssertEqual(code { _ = try ObjectTemplate.create([(.objectClass, dataClass), (.label, []), (.label, [1])], uniqueID: uid, policy: .compatible) }, .templateInconsistent)
        XCTAssertEqual(code { _ = try ObjectTemplate.create([(.objectClass, dataClass), (.creationTime, AttributeValue.ulong(1))], uniqueID: uid, policy: .compatible) }, .attributeReadOnly)
    }

    func test_set_follows_the_attribute_table() throws {
        let object = try ObjectTemplate.create([(.objectClass, dataClass)], uniqueID: uid, policy: .compatible)
        let relabelled = try ObjectTemplate.set([(.label, Array("new".utf8)), (.value, [1, 2])], on: object)
        XCTAssertEqual(relabelled[.label], Array("new".utf8))
        XCTAssertEqual(relabelled[.value], [1, 2])
        XCTAssertEqual(code { _ = try ObjectTemplate.set([(.token, [1])], on: object) }, .attributeReadOnly)
        XCTAssertEqual(code { _ = try ObjectTemplate.set([(.isPrivate, [0])], on: object) }, .attributeReadOnly)
        XCTAssertEqual(code { _ = try ObjectTemplate.set([(.objectClass, AttributeValue.ulong(3))], on: object) }, .attributeReadOnly)
        XCTAssertEqual(code { _ = try ObjectTemplate.set([(.uniqueID, [1])], on: object) }, .attributeReadOnly)
        XCTAssertNoThrow(try ObjectTemplate.set([(.isPrivate, [1])], on: object), "setting the current value is allowed")
        let notCopyable = try ObjectTemplate.set([(.copyable, [0])], on: object)
        XCTAssertEqual(code { _ = try ObjectTemplate.set([(.copyable, [1])], on: notCopyable) }, .attributeReadOnly)
        let fixed = try ObjectTemplate.create([(.objectClass, dataClass), (.modifiable, [0])], uniqueID: uid, policy: .compatible)
        XCTAssertEqual(code { _ = try ObjectTemplate.set([(.label, [1])], on: fixed) }, .actionProhibited)
    }

    func test_copy_may_change_storage_flags_only() throws {
        let object = try ObjectTemplate.create([(.objectClass, dataClass), (.value, [7])], uniqueID: uid, policy: .compatible)
        let other = Array("ffeeddccbbaa99887766554433221100".utf8)
        let copy = try ObjectTemplate.copy(object, with: [(.token, [1]), (.modifiable, [0])], uniqueID: other)
        XCTAssertEqual(copy[.token], [1])
        XCTAssertEqual(copy[.isPrivate], [1])
        XCTAssertEqual(code { _ = try ObjectTemplate.copy(object, with: [(.isPrivate, [0])], uniqueID: other) }, .attributeReadOnly,
                       "CKA_PRIVATE never goes from TRUE to FALSE")
        XCTAssertEqual(copy[.value], [7])
        XCTAssertEqual(copy[.uniqueID], other)
        XCTAssertEqual(code { _ = try ObjectTemplate.copy(object, with: [(.uniqueID, [1])], uniqueID: other) }, .attributeReadOnly)
        XCTAssertEqual(code { _ = try ObjectTemplate.copy(object, with: [(AttributeType(0x100), [1])], uniqueID: other) }, .attributeTypeInvalid)
        let sealed = try ObjectTemplate.create([(.objectClass, dataClass), (.copyable, [0])], uniqueID: uid, policy: .compatible)
        XCTAssertEqual(code { _ = try ObjectTemplate.copy(sealed, with: [], uniqueID: other) }, .actionProhibited)
    }

    func test_matching_is_exact() throws {
        let object = try ObjectTemplate.create([(.objectClass, dataClass), (.label, Array("a".utf8))], uniqueID: uid, policy: .compatible)
        XCTAssertTrue(object.matches([]))
        XCTAssertTrue(object.matches([(.label, Array("a".utf8)), (.objectClass, dataClass)]))
        XCTAssertFalse(object.matches([(.label, Array("ab".utf8))]))
        XCTAssertFalse(object.matches([(AttributeType(0x100), [])]))
    }
}
