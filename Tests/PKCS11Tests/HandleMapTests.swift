import XCTest
@testable import PKCS11

/// The handle table behaves as a dictionary would: checked against one under a long random mix
/// of inserts, replacements, removals and lookups (present and absent keys, growth, tombstones).
final class HandleMapTests: XCTestCase {
    func test_agrees_with_a_dictionary_under_random_changes() {
        var map = HandleMap<String>()
        var reference: [UInt: String] = [:]
        var generator = SystemRandomNumberGenerator()
        for step in 0..<20_000 {
            // Keys as the module hands them out (small, in runs) and some far-off ones.
            let key: UInt = step % 7 == 0 ? UInt.random(in: 0...UInt.max, using: &generator) : UInt.random(in: 0..<600, using: &generator)
            switch UInt8.random(in: 0..<4, using: &generator) {
            case 0, 1:
                map[key] = "v\(step)"
                reference[key] = "v\(step)"
            case 2:
                XCTAssertEqual(map.removeValue(forKey: key), reference.removeValue(forKey: key))
            default:
                XCTAssertEqual(map[key], reference[key])
            }
            XCTAssertEqual(map.count, reference.count)
        }
        XCTAssertEqual(Dictionary(uniqueKeysWithValues: map.map { ($0.key, $0.value) }), reference)
        XCTAssertEqual(Set(map.keys), Set(reference.keys))
        XCTAssertEqual(map.values.sorted(), reference.values.sorted())
        map.removeAll()
        XCTAssertTrue(map.isEmpty)
        XCTAssertNil(map[reference.keys.first ?? 1])
    }

    func test_removed_keys_leave_other_keys_findable_in_their_probe_run() {
        var map = HandleMap<Int>()
        for key in 1...1000 { map[UInt(key)] = key }
        for key in stride(from: 1, through: 1000, by: 2) { map[UInt(key)] = nil }
        for key in 1...1000 { XCTAssertEqual(map[UInt(key)], key % 2 == 0 ? key : nil) }
        for key in 1001...3000 { map[UInt(key)] = key }
        XCTAssertEqual(map.count, 500 + 2000)
        XCTAssertEqual(map[2999], 2999)
        XCTAssertNil(map[0])
    }
}
