import CPKCS11
import XCTest
@testable import PKCS11

final class GeneralTests: ModuleTestCase {
    func test_calls_before_initialize_and_after_finalize_are_refused() {
        XCTAssertRV(p11.C_Finalize(nil), CKR_OK)
        var count: CK_ULONG = 0
        XCTAssertRV(p11.C_GetSlotList!(0, nil, &count), CKR_CRYPTOKI_NOT_INITIALIZED)
        XCTAssertRV(p11.C_Finalize(nil), CKR_CRYPTOKI_NOT_INITIALIZED)
        var info = CK_INFO()
        XCTAssertRV(p11.C_GetInfo(&info), CKR_CRYPTOKI_NOT_INITIALIZED)
        XCTAssertRV(p11.C_Initialize(nil), CKR_OK)
        XCTAssertRV(p11.C_Initialize(nil), CKR_CRYPTOKI_ALREADY_INITIALIZED)
    }

    func test_initialize_arguments_are_validated() {
        XCTAssertRV(p11.C_Finalize(nil), CKR_OK)
        var args = CK_C_INITIALIZE_ARGS()
        args.CreateMutex = { _ in CK_RV(CKR_OK) }
        XCTAssertRV(p11.C_Initialize(&args), CKR_ARGUMENTS_BAD)
        args.DestroyMutex = { _ in CK_RV(CKR_OK) }
        args.LockMutex = { _ in CK_RV(CKR_OK) }
        args.UnlockMutex = { _ in CK_RV(CKR_OK) }
        XCTAssertRV(p11.C_Initialize(&args), CKR_CANT_LOCK)
        args.flags = CK_FLAGS(CKF_OS_LOCKING_OK)
        XCTAssertRV(p11.C_Initialize(&args), CKR_OK)
        var reserved: UInt8 = 0
        XCTAssertRV(p11.C_Finalize(&reserved), CKR_ARGUMENTS_BAD)
    }

    func test_info_reports_versions_and_blank_padded_strings() {
        var info = CK_INFO()
        XCTAssertRV(p11.C_GetInfo(nil), CKR_ARGUMENTS_BAD)
        XCTAssertRV(p11.C_GetInfo(&info), CKR_OK)
        XCTAssertEqual(info.cryptokiVersion.major, 2)
        XCTAssertEqual(info.cryptokiVersion.minor, 40)
        let manufacturer = withUnsafeBytes(of: info.manufacturerID) { Array($0) }
        XCTAssertFalse(manufacturer.contains(0))
        XCTAssertEqual(String(decoding: manufacturer, as: UTF8.self), "Keychain PKCS#11" + String(repeating: " ", count: 16))
        XCTAssertRV(FunctionLists.version30.pointee.C_GetInfo(&info), CKR_OK)
        XCTAssertEqual(info.cryptokiVersion.major, 3)
        XCTAssertEqual(info.cryptokiVersion.minor, 0)
        XCTAssertRV(FunctionLists.version32.pointee.C_GetInfo(&info), CKR_OK)
        XCTAssertEqual(info.cryptokiVersion.major, 3)
        XCTAssertEqual(info.cryptokiVersion.minor, 2)
        XCTAssertRV(FunctionLists.version32.pointee.C_GetInfo(nil), CKR_ARGUMENTS_BAD)
        XCTAssertRV(p11.C_GetInfo(&info), CKR_OK)
        XCTAssertEqual([info.cryptokiVersion.major, info.cryptokiVersion.minor], [2, 40], "the 2.40 list keeps its version")
    }

    func test_interfaces_offer_3_0_by_default_and_3_2_and_2_40_on_request() {
        var count: CK_ULONG = 0
        XCTAssertRV(PKCS11.C_GetInterfaceList(nil, &count), CKR_OK)
        XCTAssertEqual(count, 3)
        XCTAssertRV(PKCS11.C_GetInterfaceList(nil, nil), CKR_ARGUMENTS_BAD)
        var one = [CK_INTERFACE](repeating: CK_INTERFACE(), count: 1)
        count = 1
        XCTAssertRV(PKCS11.C_GetInterfaceList(&one, &count), CKR_BUFFER_TOO_SMALL)
        XCTAssertEqual(count, 3)
        var all = [CK_INTERFACE](repeating: CK_INTERFACE(), count: 4)
        count = 4
        XCTAssertRV(PKCS11.C_GetInterfaceList(&all, &count), CKR_OK)
        XCTAssertEqual(count, 3)
        XCTAssertEqual(all.prefix(3).map(\.pFunctionList), [UnsafeMutableRawPointer(FunctionLists.version30), UnsafeMutableRawPointer(FunctionLists.version32),
                                                            UnsafeMutableRawPointer(FunctionLists.version240)])
        XCTAssertEqual(all.prefix(3).map { String(cString: UnsafeRawPointer($0.pInterfaceName!).assumingMemoryBound(to: CChar.self)) }, ["PKCS 11", "PKCS 11", "PKCS 11"])
        XCTAssertEqual(all.prefix(3).map(\.flags), [0, 0, 0])
        let versions = all.prefix(3).map { $0.pFunctionList!.assumingMemoryBound(to: CK_VERSION.self).pointee }
        XCTAssertEqual(versions.map { [$0.major, $0.minor] }, [[3, 0], [3, 2], [2, 40]], "each list reports the version of its layout")

        var interface: UnsafeMutablePointer<CK_INTERFACE>?
        XCTAssertRV(PKCS11.C_GetInterface(nil, nil, &interface, 0), CKR_OK)
        XCTAssertEqual(interface?.pointee.pFunctionList, UnsafeMutableRawPointer(FunctionLists.version30), "no version: 3.0, the default")
        var name = Array("PKCS 11".utf8) + [0]
        for (major, minor, list) in [(2, 40, UnsafeMutableRawPointer(FunctionLists.version240)), (3, 0, UnsafeMutableRawPointer(FunctionLists.version30)),
                                     (3, 2, UnsafeMutableRawPointer(FunctionLists.version32))] {
            var version = CK_VERSION(major: CK_BYTE(major), minor: CK_BYTE(minor))
            interface = nil
            XCTAssertRV(PKCS11.C_GetInterface(&name, &version, &interface, 0), CKR_OK, "\(major).\(minor)")
            XCTAssertEqual(interface?.pointee.pFunctionList, list, "\(major).\(minor)")
        }
        var version32 = CK_VERSION(major: 3, minor: 2)
        XCTAssertRV(PKCS11.C_GetInterface(nil, &version32, &interface, 0), CKR_OK, "a NULL name with a version")
        XCTAssertEqual(interface?.pointee.pFunctionList, UnsafeMutableRawPointer(FunctionLists.version32))
        var version31 = CK_VERSION(major: 3, minor: 1)
        XCTAssertRV(PKCS11.C_GetInterface(&name, &version31, &interface, 0), CKR_ARGUMENTS_BAD, "no 3.1 list")
        var other = Array("Vendor".utf8) + [0]
        XCTAssertRV(PKCS11.C_GetInterface(&other, nil, &interface, 0), CKR_ARGUMENTS_BAD)
        XCTAssertRV(PKCS11.C_GetInterface(nil, nil, &interface, CK_FLAGS(CKF_INTERFACE_FORK_SAFE)), CKR_ARGUMENTS_BAD)
        XCTAssertRV(PKCS11.C_GetInterface(nil, nil, nil, 0), CKR_ARGUMENTS_BAD)
    }

    /// Hosts call through the lists without NULL checks: every entry of every list is set, and the
    /// 3.2 list begins with the 3.0 list's entries (only C_GetInfo differs, reporting 3.2).
    func test_every_function_list_entry_is_set_and_3_2_extends_3_0() {
        func entries<T>(_ list: UnsafeMutablePointer<T>) -> [UInt] {
            UnsafeRawPointer(list).withMemoryRebound(to: UInt.self, capacity: MemoryLayout<T>.size / 8) { words in
                (1..<MemoryLayout<T>.size / 8).map { words[$0] }
            }
        }
        let list240 = entries(FunctionLists.version240), list30 = entries(FunctionLists.version30), list32 = entries(FunctionLists.version32)
        XCTAssertEqual([list240.count, list30.count, list32.count], [68, 92, 104])
        XCTAssertFalse(list240.contains(0))
        XCTAssertFalse(list30.contains(0))
        XCTAssertFalse(list32.contains(0))
        let getInfo = 2
        for index in 0..<92 where index != getInfo { XCTAssertEqual(list32[index], list30[index], "3.0 entry \(index)") }
        XCTAssertNotEqual(list32[getInfo], list30[getInfo])
        XCTAssertEqual(Array(list30.prefix(68).enumerated().filter { $0.offset != getInfo }.map(\.element)),
                       Array(list240.enumerated().filter { $0.offset != getInfo }.map(\.element)))
    }

    func test_struct_layouts_match_the_c_abi() {
        XCTAssertEqual(MemoryLayout<CK_ATTRIBUTE>.size, 24)
        XCTAssertEqual(MemoryLayout<CK_INFO>.size, 88)
        XCTAssertEqual(MemoryLayout<CK_TOKEN_INFO>.size, 208)
        XCTAssertEqual(MemoryLayout<CK_SLOT_INFO>.size, 112)
        XCTAssertEqual(MemoryLayout<CK_SESSION_INFO>.size, 32)
        XCTAssertEqual(MemoryLayout<CK_FUNCTION_LIST>.size, 8 + 68 * 8)
        XCTAssertEqual(MemoryLayout<CK_FUNCTION_LIST_3_0>.size, 8 + 92 * 8)
        XCTAssertEqual(MemoryLayout<CK_FUNCTION_LIST_3_2>.size, 8 + 104 * 8)
        XCTAssertEqual(MemoryLayout.offset(of: \CK_FUNCTION_LIST_3_2.C_EncapsulateKey), 8 + 92 * 8, "the 3.2 entries follow the 3.0 ones")
        XCTAssertEqual(MemoryLayout.offset(of: \CK_FUNCTION_LIST_3_2.C_UnwrapKeyAuthenticated), 8 + 103 * 8)
        XCTAssertEqual(MemoryLayout<CK_ASYNC_DATA>.size, 40)
        XCTAssertEqual(MemoryLayout<CK_INTERFACE>.size, 24)
    }
}

final class SlotAndTokenTests: ModuleTestCase {
    func test_slot_list_uses_the_call_twice_convention() {
        var count: CK_ULONG = 0
        XCTAssertRV(p11.C_GetSlotList!(0, nil, nil), CKR_ARGUMENTS_BAD)
        XCTAssertRV(p11.C_GetSlotList!(0, nil, &count), CKR_OK)
        XCTAssertEqual(count, 1, "a fresh directory has only the empty slot")
        _ = makeToken()
        XCTAssertRV(p11.C_GetSlotList!(1, nil, &count), CKR_OK)
        XCTAssertEqual(count, 2)
        var short = [CK_SLOT_ID](repeating: 0, count: 1)
        count = 1
        XCTAssertRV(p11.C_GetSlotList!(0, &short, &count), CKR_BUFFER_TOO_SMALL)
        XCTAssertEqual(count, 2)
    }

    func test_the_empty_slot_id_becomes_the_keychain_id_and_ids_stay() {
        let empty = emptySlot()
        let first = makeToken(label: "first")
        XCTAssertEqual(first, empty)
        let second = makeToken(label: "second")
        XCTAssertNotEqual(second, first)
        XCTAssertRV(p11.C_Finalize(nil), CKR_OK)
        XCTAssertRV(p11.C_Initialize(nil), CKR_OK)
        var info = CK_TOKEN_INFO()
        XCTAssertRV(p11.C_GetTokenInfo!(first, &info), CKR_OK)
        XCTAssertEqual(PaddedString.read(withUnsafeBytes(of: info.label) { $0.bindMemory(to: UInt8.self).baseAddress! }, count: 32), "first")
        XCTAssertRV(p11.C_GetTokenInfo!(second, &info), CKR_OK)
        XCTAssertEqual(PaddedString.read(withUnsafeBytes(of: info.label) { $0.bindMemory(to: UInt8.self).baseAddress! }, count: 32), "second")
    }

    func test_token_info_reports_flags_counts_and_padding() {
        let slot = makeToken()
        let info = tokenInfo(slot)
        let expected = CK_FLAGS(CKF_RNG | CKF_LOGIN_REQUIRED | CKF_TOKEN_INITIALIZED | CKF_USER_PIN_INITIALIZED)
        XCTAssertEqual(info.flags, expected)
        XCTAssertEqual(info.ulMinPinLen, 4)
        XCTAssertEqual(info.ulMaxPinLen, 256)
        XCTAssertEqual(info.ulSessionCount, 0)
        let serial = withUnsafeBytes(of: info.serialNumber) { Array($0) }
        XCTAssertEqual(serial.count, 16)
        XCTAssertTrue(serial.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
        XCTAssertFalse(withUnsafeBytes(of: info.label) { Array($0) }.contains(0))
        let session = openSession(slot, readWrite: true)
        _ = openSession(slot, readWrite: false)
        XCTAssertEqual(tokenInfo(slot).ulSessionCount, 2)
        XCTAssertEqual(tokenInfo(slot).ulRwSessionCount, 1)
        XCTAssertRV(p11.C_CloseSession!(session), CKR_OK)
        XCTAssertEqual(tokenInfo(slot).ulRwSessionCount, 0)
    }

    func test_bad_slots_and_null_pointers() {
        var info = CK_TOKEN_INFO()
        var slotInfo = CK_SLOT_INFO()
        XCTAssertRV(p11.C_GetTokenInfo!(9999, &info), CKR_SLOT_ID_INVALID)
        XCTAssertRV(p11.C_GetSlotInfo!(9999, &slotInfo), CKR_SLOT_ID_INVALID)
        XCTAssertRV(p11.C_GetTokenInfo!(emptySlot(), nil), CKR_ARGUMENTS_BAD)
        XCTAssertRV(p11.C_GetSlotInfo!(emptySlot(), &slotInfo), CKR_OK)
        XCTAssertEqual(slotInfo.flags & CK_FLAGS(CKF_TOKEN_PRESENT), CK_FLAGS(CKF_TOKEN_PRESENT))
        var count: CK_ULONG = 0
        XCTAssertRV(p11.C_GetMechanismList!(emptySlot(), nil, &count), CKR_OK)
        XCTAssertGreaterThan(count, 0)
        XCTAssertRV(p11.C_GetMechanismList!(9999, nil, &count), CKR_SLOT_ID_INVALID)
        var mechanism = CK_MECHANISM_INFO()
        XCTAssertRV(p11.C_GetMechanismInfo!(emptySlot(), CK_MECHANISM_TYPE(CKM_RC4), &mechanism), CKR_MECHANISM_INVALID)
        XCTAssertRV(p11.C_GetMechanismInfo!(emptySlot(), CK_MECHANISM_TYPE(CKM_SHA256), nil), CKR_ARGUMENTS_BAD)
    }

    func test_init_token_rules() {
        let slot = makeToken()
        var label = [UInt8](repeating: 0x20, count: 32)
        var wrong = Array("87654321".utf8)
        var short = Array("12".utf8)
        var pin = soPIN
        XCTAssertRV(p11.C_InitToken!(emptySlot(), &short, CK_ULONG(short.count), &label), CKR_PIN_LEN_RANGE)
        XCTAssertRV(p11.C_InitToken!(slot, nil, 0, &label), CKR_ARGUMENTS_BAD)
        XCTAssertRV(p11.C_InitToken!(slot, &pin, CK_ULONG(pin.count), nil), CKR_ARGUMENTS_BAD)
        let session = openSession(slot, readWrite: false)
        XCTAssertRV(p11.C_InitToken!(slot, &pin, CK_ULONG(pin.count), &label), CKR_SESSION_EXISTS)
        XCTAssertRV(p11.C_CloseSession!(session), CKR_OK)
        XCTAssertRV(p11.C_InitToken!(slot, &wrong, CK_ULONG(wrong.count), &label), CKR_PIN_INCORRECT)
        XCTAssertEqual(tokenInfo(slot).flags & CK_FLAGS(CKF_SO_PIN_COUNT_LOW), CK_FLAGS(CKF_SO_PIN_COUNT_LOW))
        XCTAssertRV(p11.C_InitToken!(slot, &pin, CK_ULONG(pin.count), &label), CKR_OK)
        XCTAssertEqual(tokenInfo(slot).flags & CK_FLAGS(CKF_USER_PIN_INITIALIZED), 0, "re-initialising clears the user PIN")
    }

    func test_slot_event_reports_a_keychain_created_elsewhere() {
        var slot: CK_SLOT_ID = 0
        XCTAssertRV(p11.C_WaitForSlotEvent!(CK_FLAGS(CKF_DONT_BLOCK), &slot, nil), CKR_NO_EVENT)
        XCTAssertRV(p11.C_WaitForSlotEvent!(0, &slot, nil), CKR_FUNCTION_NOT_SUPPORTED)
        XCTAssertRV(p11.C_WaitForSlotEvent!(CK_FLAGS(CKF_DONT_BLOCK), nil, nil), CKR_ARGUMENTS_BAD)
        let empty = emptySlot()
        // Another process creates a keychain: simulate with a second directory handle.
        XCTAssertNoThrow(try soPIN.withUnsafeBytes {
            _ = try KeychainDirectoryForTests.create(directory: directory, so: $0)
        })
        XCTAssertRV(p11.C_WaitForSlotEvent!(CK_FLAGS(CKF_DONT_BLOCK), &slot, nil), CKR_OK)
        XCTAssertEqual(slot, empty)
    }
}
