import CPKCS11
import XCTest
@testable import PKCS11

final class SessionTests: ModuleTestCase {
    private func state(_ session: CK_SESSION_HANDLE) -> CK_STATE {
        var info = CK_SESSION_INFO()
        XCTAssertRV(p11.C_GetSessionInfo!(session, &info), CKR_OK)
        return info.state
    }

    func test_open_session_rules() {
        let slot = makeToken()
        var session: CK_SESSION_HANDLE = 0
        XCTAssertRV(p11.C_OpenSession!(slot, 0, nil, nil, &session), CKR_SESSION_PARALLEL_NOT_SUPPORTED)
        XCTAssertRV(p11.C_OpenSession!(slot, CK_FLAGS(CKF_SERIAL_SESSION), nil, nil, nil), CKR_ARGUMENTS_BAD)
        XCTAssertRV(p11.C_OpenSession!(9999, CK_FLAGS(CKF_SERIAL_SESSION), nil, nil, &session), CKR_SLOT_ID_INVALID)
        XCTAssertRV(p11.C_OpenSession!(emptySlot(), CK_FLAGS(CKF_SERIAL_SESSION), nil, nil, &session), CKR_TOKEN_NOT_RECOGNIZED)
        XCTAssertRV(p11.C_CloseSession!(12345), CKR_SESSION_HANDLE_INVALID)
        var info = CK_SESSION_INFO()
        XCTAssertRV(p11.C_GetSessionInfo!(12345, &info), CKR_SESSION_HANDLE_INVALID)
        XCTAssertRV(p11.C_GetSessionInfo!(openSession(slot, readWrite: false), nil), CKR_ARGUMENTS_BAD)
    }

    func test_session_states_follow_login() {
        let slot = makeToken()
        let ro = openSession(slot, readWrite: false)
        let rw = openSession(slot, readWrite: true)
        XCTAssertEqual(state(ro), CK_STATE(CKS_RO_PUBLIC_SESSION))
        XCTAssertEqual(state(rw), CK_STATE(CKS_RW_PUBLIC_SESSION))
        XCTAssertRV(login(ro), CKR_OK)
        XCTAssertEqual(state(ro), CK_STATE(CKS_RO_USER_FUNCTIONS))
        XCTAssertEqual(state(rw), CK_STATE(CKS_RW_USER_FUNCTIONS), "login is shared by the application's sessions")
        XCTAssertRV(login(rw), CKR_USER_ALREADY_LOGGED_IN)
        // C_Login: a read-only session keeps the SO out, whoever is logged in (pkcs11-check's order).
        XCTAssertRV(login(rw, CKU_SO, pin: soPIN), CKR_SESSION_READ_ONLY_EXISTS)
        let other = openSession(makeToken(label: "other"), readWrite: true)
        XCTAssertRV(login(other), CKR_OK)
        XCTAssertRV(login(other, CKU_SO, pin: soPIN), CKR_USER_ANOTHER_ALREADY_LOGGED_IN, "no read-only session: the user's login is the reason")
        XCTAssertRV(p11.C_Logout!(rw), CKR_OK)
        XCTAssertRV(p11.C_Logout!(rw), CKR_USER_NOT_LOGGED_IN)
        XCTAssertRV(login(rw, CKU_SO, pin: soPIN), CKR_SESSION_READ_ONLY_EXISTS)
        XCTAssertRV(p11.C_CloseSession!(ro), CKR_OK)
        XCTAssertRV(login(rw, CKU_SO, pin: soPIN), CKR_OK)
        XCTAssertEqual(state(rw), CK_STATE(CKS_RW_SO_FUNCTIONS))
        var session: CK_SESSION_HANDLE = 0
        XCTAssertRV(p11.C_OpenSession!(slot, CK_FLAGS(CKF_SERIAL_SESSION), nil, nil, &session), CKR_SESSION_READ_WRITE_SO_EXISTS)
    }

    func test_login_argument_and_pin_errors() {
        let slot = makeToken()
        let session = openSession(slot, readWrite: true)
        XCTAssertRV(login(session, 7), CKR_USER_TYPE_INVALID)
        XCTAssertRV(p11.C_Login!(session, CK_USER_TYPE(CKU_USER), nil, 4), CKR_ARGUMENTS_BAD)
        XCTAssertRV(login(session, CKU_CONTEXT_SPECIFIC), CKR_USER_NOT_LOGGED_IN)
        XCTAssertRV(login(session, pin: Array("1235".utf8)), CKR_PIN_INCORRECT)
        XCTAssertRV(login(session, pin: [UInt8](repeating: 0x31, count: 300)), CKR_PIN_INCORRECT)
        XCTAssertRV(login(session), CKR_OK)
        XCTAssertRV(login(session, CKU_CONTEXT_SPECIFIC), CKR_OPERATION_NOT_INITIALIZED)
    }

    func test_wrong_pins_count_down_to_locked_and_the_so_unlocks() {
        let slot = makeToken()
        let session = openSession(slot, readWrite: true)
        for attempt in 1...10 {
            XCTAssertRV(login(session, pin: Array("0000".utf8)), CKR_PIN_INCORRECT, "attempt \(attempt)")
            let flags = tokenInfo(slot).flags
            XCTAssertEqual(flags & CK_FLAGS(CKF_USER_PIN_COUNT_LOW) != 0, attempt < 9, "count low after \(attempt)")
            XCTAssertEqual(flags & CK_FLAGS(CKF_USER_PIN_FINAL_TRY) != 0, attempt == 9, "final try after \(attempt)")
            XCTAssertEqual(flags & CK_FLAGS(CKF_USER_PIN_LOCKED) != 0, attempt == 10, "locked after \(attempt)")
        }
        XCTAssertRV(login(session), CKR_PIN_LOCKED)
        XCTAssertRV(login(session, CKU_SO, pin: soPIN), CKR_OK)
        var fresh = Array("4321".utf8)
        XCTAssertRV(p11.C_InitPIN!(session, &fresh, CK_ULONG(fresh.count)), CKR_OK)
        XCTAssertRV(p11.C_Logout!(session), CKR_OK)
        XCTAssertEqual(tokenInfo(slot).flags & CK_FLAGS(CKF_USER_PIN_LOCKED), 0)
        XCTAssertRV(login(session, pin: fresh), CKR_OK)
    }

    func test_init_pin_and_set_pin_rules() {
        let slot = makeToken()
        let ro = openSession(slot, readWrite: false)
        let rw = openSession(slot, readWrite: true)
        var pin = Array("9999".utf8)
        XCTAssertRV(p11.C_InitPIN!(rw, &pin, CK_ULONG(pin.count)), CKR_USER_NOT_LOGGED_IN)
        XCTAssertRV(login(rw), CKR_OK)
        XCTAssertRV(p11.C_InitPIN!(rw, &pin, CK_ULONG(pin.count)), CKR_USER_NOT_LOGGED_IN)
        var old = userPIN
        XCTAssertRV(p11.C_SetPIN!(ro, &old, CK_ULONG(old.count), &pin, CK_ULONG(pin.count)), CKR_SESSION_READ_ONLY)
        var tooShort = Array("99".utf8)
        XCTAssertRV(p11.C_SetPIN!(rw, &old, CK_ULONG(old.count), &tooShort, CK_ULONG(tooShort.count)), CKR_PIN_LEN_RANGE)
        var wrong = Array("0000".utf8)
        XCTAssertRV(p11.C_SetPIN!(rw, &wrong, CK_ULONG(wrong.count), &pin, CK_ULONG(pin.count)), CKR_PIN_INCORRECT)
        XCTAssertRV(p11.C_SetPIN!(rw, &old, CK_ULONG(old.count), &pin, CK_ULONG(pin.count)), CKR_OK)
        XCTAssertRV(p11.C_Logout!(rw), CKR_OK)
        XCTAssertRV(login(rw), CKR_PIN_INCORRECT)
        XCTAssertRV(login(rw, pin: pin), CKR_OK)
        XCTAssertRV(p11.C_InitPIN!(rw, nil, 0), CKR_ARGUMENTS_BAD)
    }

    func test_closing_the_last_session_logs_out() {
        let slot = makeToken()
        let first = openSession(slot, readWrite: true)
        XCTAssertRV(login(first), CKR_OK)
        XCTAssertRV(p11.C_CloseAllSessions!(slot), CKR_OK)
        XCTAssertRV(p11.C_CloseSession!(first), CKR_SESSION_HANDLE_INVALID)
        let second = openSession(slot, readWrite: true)
        XCTAssertEqual(state(second), CK_STATE(CKS_RW_PUBLIC_SESSION))
        XCTAssertRV(p11.C_CloseAllSessions!(9999), CKR_SLOT_ID_INVALID)
    }

    func test_legacy_and_unsupported_functions_answer_precisely() {
        let slot = makeToken()
        let session = openSession(slot, readWrite: false)
        XCTAssertRV(p11.C_GetFunctionStatus!(session), CKR_FUNCTION_NOT_PARALLEL)
        XCTAssertRV(p11.C_CancelFunction!(session), CKR_FUNCTION_NOT_PARALLEL)
        var length: CK_ULONG = 0
        XCTAssertRV(p11.C_GetOperationState!(session, nil, &length), CKR_FUNCTION_NOT_SUPPORTED)
        XCTAssertRV(p11.C_SignRecoverInit!(session, nil, 0), CKR_FUNCTION_NOT_SUPPORTED, "no mechanism recovers data")
        XCTAssertRV(p11.C_SignRecoverInit!(777, nil, 0), CKR_SESSION_HANDLE_INVALID)
        XCTAssertRV(FunctionLists.version30.pointee.C_SessionCancel(session, CK_FLAGS(CKF_FIND_OBJECTS)), CKR_OK)
        var pin = userPIN
        XCTAssertRV(FunctionLists.version30.pointee.C_LoginUser(session, CK_USER_TYPE(CKU_USER), &pin, CK_ULONG(pin.count), nil, 0), CKR_OK)
    }

    func test_random_numbers() {
        let slot = makeToken()
        let session = openSession(slot, readWrite: false)
        var a = [UInt8](repeating: 0, count: 64), b = [UInt8](repeating: 0, count: 64)
        XCTAssertRV(p11.C_GenerateRandom!(session, &a, 64), CKR_OK)
        XCTAssertRV(p11.C_GenerateRandom!(session, &b, 64), CKR_OK)
        XCTAssertNotEqual(a, b)
        XCTAssertRV(p11.C_GenerateRandom!(session, nil, 16), CKR_ARGUMENTS_BAD)
        XCTAssertRV(p11.C_GenerateRandom!(session, nil, 0), CKR_OK)
        XCTAssertRV(p11.C_GenerateRandom!(999, &a, 8), CKR_SESSION_HANDLE_INVALID)
        XCTAssertRV(p11.C_SeedRandom!(session, &a, 64), CKR_OK)
        XCTAssertRV(p11.C_SeedRandom!(session, nil, 64), CKR_ARGUMENTS_BAD)
    }
}
