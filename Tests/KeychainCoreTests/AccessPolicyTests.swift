import XCTest
@testable import KeychainCore

/// The one access-control rule set both keychainctl and the Swift API ask.
final class AccessPolicyTests: XCTestCase {
    private func policy(_ flags: AccessControlFlags, _ protection: ProtectionClass = .whenUnlocked) throws -> AccessPolicy {
        try AccessPolicy(protection: protection, flags: flags)
    }

    private func refusal(_ body: () throws -> Void) -> String? {
        do { try body() } catch let refusal as AccessPolicy.Refusal { return refusal.reason } catch { return "unexpected \(error)" }
        return nil
    }

    private func value(_ template: Template, _ type: AttributeType) -> [UInt8]? { template.first { $0.type == type }?.value }

    func test_apples_creation_rules_refuse_unknown_bits_and_lone_or_mixed_conjunctions() {
        XCTAssertNotNil(refusal { _ = try policy(AccessControlFlags(rawValue: 1 << 2)) }, "unknown bit")
        XCTAssertNotNil(refusal { _ = try policy([.userPresence, .devicePasscode, .and, .or]) }, "and with or")
        XCTAssertNotNil(refusal { _ = try policy([.userPresence, .and]) }, "a conjunction of one")
        XCTAssertNotNil(refusal { _ = try policy([.userPresence, .privateKeyUsage, .or]) }, "privateKeyUsage is not a constraint")
        XCTAssertNil(refusal { _ = try policy([.userPresence, .devicePasscode, .or]) })
        XCTAssertNil(refusal { _ = try policy([]) })
    }

    func test_application_password_with_presence_needs_and_or_or_for_every_door() throws {
        XCTAssertNotNil(refusal { try policy([.userPresence, .applicationPassword]).check(for: .password) })
        XCTAssertNotNil(refusal { try policy([.devicePasscode, .applicationPassword]).check(for: .privateKey) })
        XCTAssertNil(refusal { try policy([.userPresence, .applicationPassword, .or]).check(for: .password) })
        XCTAssertNil(refusal { try policy([.userPresence, .applicationPassword, .and]).check(for: .privateKey) })
    }

    func test_per_use_constraints_apply_to_private_keys_and_passwords_only() throws {
        for item in [AccessPolicy.Item.publicKey, .certificate] {
            XCTAssertNotNil(refusal { try policy([.userPresence]).check(for: item) }, "\(item)")
            XCTAssertNotNil(refusal { try policy([.applicationPassword]).check(for: item) }, "\(item)")
            XCTAssertNil(refusal { try policy([]).check(for: item) }, "\(item)")
        }
        XCTAssertNotNil(refusal { try policy([.privateKeyUsage]).check(for: .password) })
        XCTAssertNotNil(refusal { try policy([.privateKeyUsage]).check(for: .publicKey) })
        XCTAssertNil(refusal { try policy([.privateKeyUsage]).check(for: .privateKey) })
    }

    func test_a_private_key_with_any_constraint_stays_in_and_per_use_ones_ask_each_time() throws {
        let usage = try policy([.privateKeyUsage], .afterFirstUnlock).attributes(for: .privateKey) { [] }
        XCTAssertEqual(value(usage, .accessible), AttributeValue.ulong(ProtectionClass.afterFirstUnlock.rawValue))
        XCTAssertEqual(value(usage, .accessControl), AttributeValue.ulong(AccessControlFlags.privateKeyUsage.rawValue))
        XCTAssertEqual(value(usage, .sensitive), AttributeValue.bool(true))
        XCTAssertEqual(value(usage, .extractable), AttributeValue.bool(false))
        XCTAssertNil(value(usage, .alwaysAuthenticate))

        let presence = try policy([.userPresence]).attributes(for: .privateKey) { [] }
        XCTAssertEqual(value(presence, .alwaysAuthenticate), AttributeValue.bool(true))
        XCTAssertEqual(value(presence, .extractable), AttributeValue.bool(false))

        let password = try policy([.userPresence]).attributes(for: .password) { [] }
        XCTAssertNil(value(password, .alwaysAuthenticate), "a password asks through its credential, not CKA_ALWAYS_AUTHENTICATE")
        XCTAssertNil(value(password, .sensitive))
    }

    func test_the_application_password_is_asked_for_only_when_needed_and_after_the_checks() throws {
        var asked = 0
        _ = try policy([.userPresence]).attributes(for: .privateKey) { asked += 1; return [] }
        XCTAssertEqual(asked, 0)
        XCTAssertNotNil(refusal { _ = try policy([.applicationPassword]).attributes(for: .publicKey) { asked += 1; return [] } })
        XCTAssertEqual(asked, 0, "a refused item never asks")
        let template = try policy([.applicationPassword]).attributes(for: .privateKey) { asked += 1; return Array("pw".utf8) }
        XCTAssertEqual(asked, 1)
        XCTAssertEqual(value(template, .applicationPassword), Array("pw".utf8))
        XCTAssertEqual(value(template, .alwaysAuthenticate), AttributeValue.bool(true))
    }
}
