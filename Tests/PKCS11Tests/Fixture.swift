import CPKCS11
import Glibc
import XCTest
@testable import PKCS11

/// The module's function list, called in-process as a host would call it.
let p11 = FunctionLists.version240.pointee

let soPIN = Array("12345678".utf8)
let userPIN = Array("1234".utf8)

/// Bytes from hexadecimal text (test vectors).
func hex(_ text: String) -> [UInt8] {
    var bytes: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2, limitedBy: text.endIndex) ?? text.endIndex
        bytes.append(UInt8(text[index..<next], radix: 16) ?? 0)
        index = next
    }
    return bytes
}

func rv(_ value: CK_RV) -> String { "0x" + String(value, radix: 16) }

/// A PKCS#11 test against a fresh keychain directory: C_Initialize in setUp, C_Finalize in tearDown.
class ModuleTestCase: XCTestCase {
    var directory = ""

    override func setUp() {
        var template = Array("/tmp/kc-p11.XXXXXX".utf8CString)
        directory = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        setenv("KEYCHAIN_PKCS11_DIR", directory, 1)
        setenv("KEYCHAIN_PKCS11_DEVICE_KEY", directory + "/.device-key", 1)
        setenv("KEYCHAIN_PKCS11_KDF_LOG_N", "8", 1)
        XCTAssertEqual(p11.C_Initialize(nil), CK_RV(CKR_OK))
    }

    override func tearDown() {
        _ = p11.C_Finalize(nil)
        _ = system("rm -rf '\(directory)'")
    }

    func XCTAssertRV(_ actual: CK_RV, _ expected: UInt, _ message: String = "", file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertEqual(rv(actual), rv(CK_RV(expected)), message, file: file, line: line)
    }

    func slots() -> [CK_SLOT_ID] {
        var count: CK_ULONG = 0
        XCTAssertRV(p11.C_GetSlotList!(0, nil, &count), CKR_OK)
        var list = [CK_SLOT_ID](repeating: 0, count: Int(count))
        XCTAssertRV(p11.C_GetSlotList!(0, &list, &count), CKR_OK)
        return list
    }

    func tokenInfo(_ slot: CK_SLOT_ID) -> CK_TOKEN_INFO {
        var info = CK_TOKEN_INFO()
        XCTAssertRV(p11.C_GetTokenInfo!(slot, &info), CKR_OK)
        return info
    }

    func emptySlot() -> CK_SLOT_ID {
        slots().first { tokenInfo($0).flags & CK_FLAGS(CKF_TOKEN_INITIALIZED) == 0 } ?? CK_SLOT_ID.max
    }

    /// Creates a keychain in the empty slot with the SO PIN and user PIN; returns its slot.
    func makeToken(label: String = "test") -> CK_SLOT_ID {
        let slot = emptySlot()
        var padded = Array(label.utf8) + [UInt8](repeating: 0x20, count: 32 - label.utf8.count)
        var pin = soPIN
        XCTAssertRV(p11.C_InitToken!(slot, &pin, CK_ULONG(pin.count), &padded), CKR_OK)
        let session = openSession(slot, readWrite: true)
        XCTAssertRV(p11.C_Login!(session, CK_USER_TYPE(CKU_SO), &pin, CK_ULONG(pin.count)), CKR_OK)
        var user = userPIN
        XCTAssertRV(p11.C_InitPIN!(session, &user, CK_ULONG(user.count)), CKR_OK)
        XCTAssertRV(p11.C_CloseSession!(session), CKR_OK)
        return slot
    }

    /// Runs `body` with the module initialised again under `KEYCHAIN_PKCS11_KEY_POLICY=modern`.
    func withModernPolicy(_ body: () -> Void) {
        XCTAssertRV(p11.C_Finalize!(nil), CKR_OK)
        setenv("KEYCHAIN_PKCS11_KEY_POLICY", "modern", 1)
        defer {
            unsetenv("KEYCHAIN_PKCS11_KEY_POLICY")
            _ = p11.C_Finalize!(nil)
            _ = p11.C_Initialize!(nil)
        }
        XCTAssertRV(p11.C_Initialize!(nil), CKR_OK)
        body()
    }

    /// A read-write session on a new token, logged in as the user.
    func userSession() -> CK_SESSION_HANDLE {
        let session = openSession(makeToken(), readWrite: true)
        XCTAssertRV(login(session), CKR_OK)
        return session
    }

    func openSession(_ slot: CK_SLOT_ID, readWrite: Bool) -> CK_SESSION_HANDLE {
        var session: CK_SESSION_HANDLE = 0
        let flags = CK_FLAGS(CKF_SERIAL_SESSION) | (readWrite ? CK_FLAGS(CKF_RW_SESSION) : 0)
        XCTAssertRV(p11.C_OpenSession!(slot, flags, nil, nil, &session), CKR_OK)
        return session
    }

    func login(_ session: CK_SESSION_HANDLE, _ type: UInt = CKU_USER, pin: [UInt8] = userPIN) -> CK_RV {
        var pin = pin
        return p11.C_Login!(session, CK_USER_TYPE(type), &pin, CK_ULONG(pin.count))
    }

    /// A secret key with a known value, made by C_CreateObject (a session key unless `extra` says).
    func secretKey(_ session: CK_SESSION_HANDLE, type: UInt, value: [UInt8], extra: [(UInt, [UInt8])] = []) -> CK_OBJECT_HANDLE {
        var handle: CK_OBJECT_HANDLE = 0
        let template: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(type)),
                                           (UInt(CKA_VALUE), value)] + extra
        XCTAssertRV(withTemplate(template) { p11.C_CreateObject!(session, $0, $1, &handle) }, CKR_OK)
        return handle
    }

    /// Calls `body` with a CK_ATTRIBUTE array built from (type, bytes) pairs.
    func withTemplate<R>(_ attributes: [(UInt, [UInt8])], _ body: (UnsafeMutablePointer<CK_ATTRIBUTE>?, CK_ULONG) -> R) -> R {
        var storage = attributes.map { $0.1 }
        return storage.withUnsafeMutableBufferPointer { values in
            var template = attributes.indices.map { index in
                values[index].withUnsafeMutableBytes { CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(attributes[index].0), pValue: $0.baseAddress, ulValueLen: CK_ULONG(attributes[index].1.count)) }
            }
            return template.withUnsafeMutableBufferPointer { body($0.baseAddress, CK_ULONG($0.count)) }
        }
    }

    /// A mechanism without a parameter.
    func mechanism(_ type: UInt, _ body: (UnsafeMutablePointer<CK_MECHANISM>) -> CK_RV) -> CK_RV {
        var mechanism = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(type), pParameter: nil, ulParameterLen: 0)
        return body(&mechanism)
    }

    /// A mechanism with a parameter that stays valid for the whole call.
    func mechanism<T>(_ type: UInt, parameter: T, length: Int? = nil, _ body: (UnsafeMutablePointer<CK_MECHANISM>) -> CK_RV) -> CK_RV {
        var parameter = parameter
        return withUnsafeMutableBytes(of: &parameter) { bytes in
            var mechanism = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(type), pParameter: bytes.baseAddress, ulParameterLen: CK_ULONG(length ?? bytes.count))
            return body(&mechanism)
        }
    }

    /// The value of a secret key derived by ECDH from `mine` and the public key `theirs`
    /// (made extractable so the tests can compare both sides).
    func agreedSecret(_ session: CK_SESSION_HANDLE, mine: CK_OBJECT_HANDLE, theirs: CK_OBJECT_HANDLE, kdf: UInt, length: UInt?) -> (CK_RV, [UInt8]) {
        var point = value(session, theirs, UInt(CKA_EC_POINT)).1 ?? []
        var derived: CK_OBJECT_HANDLE = 0
        var template: [(UInt, [UInt8])] = [(UInt(CKA_KEY_TYPE), Self.ulong(UInt(CKK_GENERIC_SECRET))), (UInt(CKA_SENSITIVE), [0]), (UInt(CKA_EXTRACTABLE), [1])]
        if let length { template.append((UInt(CKA_VALUE_LEN), Self.ulong(length))) }
        let result = point.withUnsafeMutableBufferPointer { buffer in
            let params = CK_ECDH1_DERIVE_PARAMS(kdf: CK_ULONG(kdf), ulSharedDataLen: 0, pSharedData: nil,
                                                ulPublicDataLen: CK_ULONG(buffer.count), pPublicData: buffer.baseAddress)
            return withTemplate(template) { t, c in
                mechanism(UInt(CKM_ECDH1_DERIVE), parameter: params) { p11.C_DeriveKey!(session, $0, mine, t, c, &derived) }
            }
        }
        guard result == CK_RV(CKR_OK) else { return (result, []) }
        return (result, value(session, derived).1 ?? [])
    }

    static func ulong(_ value: UInt) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }
    static let dataClass = ulong(UInt(CKO_DATA))

    func createData(_ session: CK_SESSION_HANDLE, token: Bool, isPrivate: Bool, label: String, value: [UInt8], expect: UInt = CKR_OK) -> CK_OBJECT_HANDLE {
        var handle: CK_OBJECT_HANDLE = 0
        let result = withTemplate([(UInt(CKA_CLASS), Self.dataClass), (UInt(CKA_TOKEN), [token ? 1 : 0]), (UInt(CKA_PRIVATE), [isPrivate ? 1 : 0]),
                                   (UInt(CKA_LABEL), Array(label.utf8)), (UInt(CKA_VALUE), value)]) { p11.C_CreateObject!(session, $0, $1, &handle) }
        XCTAssertRV(result, expect)
        return handle
    }

    func find(_ session: CK_SESSION_HANDLE, _ attributes: [(UInt, [UInt8])]) -> [CK_OBJECT_HANDLE] {
        XCTAssertRV(withTemplate(attributes) { p11.C_FindObjectsInit!(session, $0, $1) }, CKR_OK)
        var found: [CK_OBJECT_HANDLE] = []
        var batch = [CK_OBJECT_HANDLE](repeating: 0, count: 3)
        while true {
            var count: CK_ULONG = 0
            XCTAssertRV(p11.C_FindObjects!(session, &batch, CK_ULONG(batch.count), &count), CKR_OK)
            if count == 0 { break }
            found += batch.prefix(Int(count))
        }
        XCTAssertRV(p11.C_FindObjectsFinal!(session), CKR_OK)
        return found
    }

    func value(_ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE, _ type: UInt = UInt(CKA_VALUE)) -> (CK_RV, [UInt8]?) {
        var attribute = CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(type), pValue: nil, ulValueLen: 0)
        let first = p11.C_GetAttributeValue!(session, object, &attribute, 1)
        guard first == CK_RV(CKR_OK) else { return (first, nil) }
        var bytes = [UInt8](repeating: 0, count: Int(attribute.ulValueLen))
        let second = bytes.withUnsafeMutableBytes { buffer -> CK_RV in
            attribute.pValue = buffer.baseAddress
            return p11.C_GetAttributeValue!(session, object, &attribute, 1)
        }
        return (second, bytes)
    }
}
