import CPKCS11
import Glibc
import XCTest
@testable import PKCS11

/// Inputs that once could crash the host (found by review): each now gets a precise CKR.
final class HostSafetyTests: ModuleTestCase {
    func test_a_template_carrying_gigabytes_is_refused_before_copying() {
        let slot = makeToken()
        let session = openSession(slot, readWrite: true)
        let size = 16 << 20
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: 0x41, count: size)
        var template = [CK_ATTRIBUTE](repeating: CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_LABEL), pValue: buffer, ulValueLen: CK_ULONG(size)), count: 1024)
        var handle: CK_OBJECT_HANDLE = 0
        XCTAssertRV(p11.C_CreateObject!(session, &template, 1024, &handle), CKR_ARGUMENTS_BAD)
    }

    func test_an_absurd_wrapped_key_length_is_refused_without_reading() {
        let slot = makeToken()
        let session = openSession(slot, readWrite: true)
        XCTAssertRV(login(session), CKR_OK)
        var kek: CK_OBJECT_HANDLE = 0
        let template: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_AES))),
                                           (UInt(CKA_VALUE), [UInt8](repeating: 1, count: 16)), (UInt(CKA_UNWRAP), [1]), (UInt(CKA_WRAP), [1])]
        XCTAssertRV(withTemplate(template) { p11.C_CreateObject!(session, $0, $1, &kek) }, CKR_OK)
        var small = [UInt8](repeating: 0, count: 24)
        var mechanism = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(UInt(CKM_AES_KEY_WRAP)), pParameter: nil, ulParameterLen: 0)
        var key: CK_OBJECT_HANDLE = 0
        XCTAssertRV(p11.C_UnwrapKey!(session, &mechanism, kek, &small, 0x8000_0008, nil, 0, &key), CKR_WRAPPED_KEY_LEN_RANGE)
        XCTAssertRV(p11.C_UnwrapKey!(session, &mechanism, 0xFFFF, &small, 24, nil, 0, &key), CKR_UNWRAPPING_KEY_HANDLE_INVALID)
        var length: CK_ULONG = 0
        XCTAssertRV(p11.C_WrapKey!(session, &mechanism, 0xFFFF, kek, nil, &length), CKR_WRAPPING_KEY_HANDLE_INVALID)
    }

    func test_hostile_files_in_the_keychain_folder_do_not_crash_slot_discovery() {
        _ = makeToken(label: "good")
        XCTAssertRV(p11.C_Finalize(nil), CKR_OK)
        // A database claiming a negative schema version, and a slot counter at CK_ULONG's limit.
        XCTAssertEqual(system("sqlite3 '\(directory)/evil.keychain-db' 'PRAGMA user_version = -1;' && echo 18446744073709551615 > '\(directory)/slot-ids'"), 0)
        XCTAssertRV(p11.C_Initialize(nil), CKR_OK)
        XCTAssertEqual(slots().count, 2, "the good keychain and the empty slot; the bad file is skipped")
        let second = makeToken(label: "second")
        XCTAssertEqual(tokenInfo(second).flags & CK_FLAGS(CKF_TOKEN_INITIALIZED), CK_FLAGS(CKF_TOKEN_INITIALIZED))
    }
}
