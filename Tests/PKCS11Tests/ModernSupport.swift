import CPKCS11
import KeychainCore
import XCTest
@testable import PKCS11

/// PKCS#11 3.x numbers that neither the system's 2.40 header nor Include/keychain-pkcs11.h
/// (which adds what the module implements) defines: mechanism flags and the 3.2 post-quantum
/// names the module does not offer. Given here once, as the specification names and numbers
/// them, so that the tests themselves use names only.
enum Spec3 {
    /// Mechanism flags of PKCS#11 3.0 (message-based functions, EC capabilities) and 3.2 (KEM).
    static let CKF_MESSAGE_ENCRYPT = CK_FLAGS(1) << 1
    static let CKF_MESSAGE_DECRYPT = CK_FLAGS(1) << 2
    static let CKF_MESSAGE_SIGN = CK_FLAGS(1) << 3
    static let CKF_MESSAGE_VERIFY = CK_FLAGS(1) << 4
    static let CKF_MULTI_MESSAGE = CK_FLAGS(1) << 5
    static let CKF_EC_F_2M = CK_FLAGS(1) << 21
    static let CKF_EC_ECPARAMETERS = CK_FLAGS(1) << 22
    static let CKF_EC_CURVENAME = CK_FLAGS(1) << 26
    static let CKF_ENCAPSULATE = CK_FLAGS(1) << 28
    static let CKF_DECAPSULATE = CK_FLAGS(1) << 29
    /// In the 2.40 header too, but as a cast, which Swift does not import.
    static let CKF_EXTENSION = CK_FLAGS(1) << 31

    /// The post-quantum mechanisms of PKCS#11 3.2.
    static let CKM_ML_KEM_KEY_PAIR_GEN: UInt = 15
    static let CKM_ML_KEM: UInt = 23
    static let CKM_ML_DSA_KEY_PAIR_GEN: UInt = 28
    static let CKM_ML_DSA: UInt = 29
    static let CKA_PARAMETER_SET: UInt = 1565
}

/// C memory for mechanism parameters and templates that point to further memory (nonces,
/// additional data, nested structures, handles the module writes). Every block stays until the
/// test's tearDown, so nothing a parameter points to is freed while the module may read it.
final class ParameterMemory {
    private var blocks: [UnsafeMutableRawPointer] = []

    func copy<T>(_ value: T) -> UnsafeMutablePointer<T> {
        copy(array: [value])
    }

    func copy<T>(array values: [T]) -> UnsafeMutablePointer<T> {
        let pointer = UnsafeMutablePointer<T>.allocate(capacity: max(values.count, 1))
        pointer.initialize(from: values, count: values.count)
        blocks.append(UnsafeMutableRawPointer(pointer))
        return pointer
    }

    /// Bytes for a CK_BYTE_PTR field; NULL for none, as a caller leaves an absent field.
    func bytes(_ data: [UInt8]) -> UnsafeMutablePointer<CK_BYTE>? {
        data.isEmpty ? nil : copy(array: data)
    }

    /// Bytes for a CK_VOID_PTR field; NULL for none.
    func raw(_ data: [UInt8]) -> UnsafeMutableRawPointer? {
        bytes(data).map { UnsafeMutableRawPointer($0) }
    }

    /// A CK_ATTRIBUTE array from (type, value) pairs.
    func template(_ attributes: [(UInt, [UInt8])]) -> (UnsafeMutablePointer<CK_ATTRIBUTE>, CK_ULONG) {
        let array = attributes.map { CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE($0.0), pValue: raw($0.1), ulValueLen: CK_ULONG($0.1.count)) }
        return (copy(array: array), CK_ULONG(array.count))
    }

    /// A CK_MECHANISM without a parameter, or with a flat one (an IV, a tweak, an initial value).
    func mechanism(_ type: UInt, flat: [UInt8] = []) -> UnsafeMutablePointer<CK_MECHANISM> {
        copy(CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(type), pParameter: raw(flat), ulParameterLen: CK_ULONG(flat.count)))
    }

    /// A CK_MECHANISM whose parameter is the structure `parameter`; `length` overrides its
    /// ulParameterLen (a caller that gives the wrong size).
    func mechanism<T>(_ type: UInt, _ parameter: T, length: Int? = nil) -> UnsafeMutablePointer<CK_MECHANISM> {
        let stored = copy(parameter)
        return copy(CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(type), pParameter: UnsafeMutableRawPointer(stored),
                                 ulParameterLen: CK_ULONG(length ?? MemoryLayout<T>.size)))
    }

    func releaseAll() {
        blocks.forEach { $0.deallocate() }
        blocks = []
    }
}

/// What the tests of the PKCS#11 3.x mechanisms share: parameter memory, readable keys of known
/// value, and each operation as one call returning its exact CK_RV and output.
class ModernMechanismTestCase: ModuleTestCase {
    let memory = ParameterMemory()

    override func tearDown() {
        super.tearDown()
        memory.releaseAll()
    }

    static let readable: [(UInt, [UInt8])] = [(UInt(CKA_TOKEN), [0]), (UInt(CKA_SENSITIVE), [0]), (UInt(CKA_EXTRACTABLE), [1])]

    /// A session secret key of known value that the test may read back, with the usages given.
    func readableKey(_ session: CK_SESSION_HANDLE, _ type: UInt, _ value: [UInt8], _ usages: UInt...) -> CK_OBJECT_HANDLE {
        secretKey(session, type: type, value: value, extra: Self.readable + usages.map { ($0, [1]) })
    }

    /// The template of a readable session secret key.
    func readableTemplate(_ type: UInt = UInt(CKK_GENERIC_SECRET), length: UInt? = nil, _ usages: UInt...) -> [(UInt, [UInt8])] {
        var template: [(UInt, [UInt8])] = [(UInt(CKA_CLASS), Self.ulong(UInt(CKO_SECRET_KEY))), (UInt(CKA_KEY_TYPE), Self.ulong(type))] + Self.readable
        if let length { template.append((UInt(CKA_VALUE_LEN), Self.ulong(length))) }
        return template + usages.map { ($0, [1]) }
    }

    /// Runs `body` with a fresh output buffer; returns the CK_RV and the bytes the call reported.
    private func output(_ capacity: Int, _ body: (UnsafeMutablePointer<CK_BYTE>, UnsafeMutablePointer<CK_ULONG>) -> CK_RV) -> (CK_RV, [UInt8]) {
        var buffer = [UInt8](repeating: 0, count: capacity)
        var length = CK_ULONG(capacity)
        let result = buffer.withUnsafeMutableBufferPointer { pointer in
            pointer.baseAddress.map { body($0, &length) } ?? CK_RV(CKR_GENERAL_ERROR)
        }
        return (result, result == CK_RV(CKR_OK) ? Array(buffer.prefix(Int(length))) : [])
    }

    func encrypt(_ session: CK_SESSION_HANDLE, _ mechanism: UnsafeMutablePointer<CK_MECHANISM>, _ key: CK_OBJECT_HANDLE, _ data: [UInt8]) -> (CK_RV, [UInt8]) {
        let initialised = p11.C_EncryptInit!(session, mechanism, key)
        guard initialised == CK_RV(CKR_OK) else { return (initialised, []) }
        var input = data
        return output(data.count + 256) { p11.C_Encrypt!(session, &input, CK_ULONG(input.count), $0, $1) }
    }

    func decrypt(_ session: CK_SESSION_HANDLE, _ mechanism: UnsafeMutablePointer<CK_MECHANISM>, _ key: CK_OBJECT_HANDLE, _ data: [UInt8]) -> (CK_RV, [UInt8]) {
        let initialised = p11.C_DecryptInit!(session, mechanism, key)
        guard initialised == CK_RV(CKR_OK) else { return (initialised, []) }
        var input = data
        return output(data.count + 256) { p11.C_Decrypt!(session, &input, CK_ULONG(input.count), $0, $1) }
    }

    func sign(_ session: CK_SESSION_HANDLE, _ mechanism: UnsafeMutablePointer<CK_MECHANISM>, _ key: CK_OBJECT_HANDLE, _ data: [UInt8]) -> (CK_RV, [UInt8]) {
        let initialised = p11.C_SignInit!(session, mechanism, key)
        guard initialised == CK_RV(CKR_OK) else { return (initialised, []) }
        var input = data
        return output(1024) { p11.C_Sign!(session, &input, CK_ULONG(input.count), $0, $1) }
    }

    func verify(_ session: CK_SESSION_HANDLE, _ mechanism: UnsafeMutablePointer<CK_MECHANISM>, _ key: CK_OBJECT_HANDLE, _ data: [UInt8],
                _ signature: [UInt8]) -> CK_RV {
        let initialised = p11.C_VerifyInit!(session, mechanism, key)
        guard initialised == CK_RV(CKR_OK) else { return initialised }
        var input = data, signature = signature
        return p11.C_Verify!(session, &input, CK_ULONG(input.count), &signature, CK_ULONG(signature.count))
    }

    func derive(_ session: CK_SESSION_HANDLE, _ mechanism: UnsafeMutablePointer<CK_MECHANISM>, _ base: CK_OBJECT_HANDLE,
                _ template: [(UInt, [UInt8])]) -> (CK_RV, CK_OBJECT_HANDLE) {
        var handle: CK_OBJECT_HANDLE = 0
        let (attributes, count) = memory.template(template)
        return (p11.C_DeriveKey!(session, mechanism, base, attributes, count, &handle), handle)
    }

    /// The value of the key `derive` makes, or nil (with the CK_RV reported) when it fails.
    func derivedValue(_ session: CK_SESSION_HANDLE, _ mechanism: UnsafeMutablePointer<CK_MECHANISM>, _ base: CK_OBJECT_HANDLE,
                      _ template: [(UInt, [UInt8])], file: StaticString = #filePath, line: UInt = #line) -> [UInt8]? {
        let (result, handle) = derive(session, mechanism, base, template)
        XCTAssertRV(result, CKR_OK, "C_DeriveKey", file: file, line: line)
        return result == CK_RV(CKR_OK) ? value(session, handle).1 : nil
    }

    func generateKey(_ session: CK_SESSION_HANDLE, _ mechanism: UnsafeMutablePointer<CK_MECHANISM>, _ template: [(UInt, [UInt8])]) -> (CK_RV, CK_OBJECT_HANDLE) {
        var handle: CK_OBJECT_HANDLE = 0
        let (attributes, count) = memory.template(template)
        return (p11.C_GenerateKey!(session, mechanism, attributes, count, &handle), handle)
    }

    func generateKeyPair(_ session: CK_SESSION_HANDLE, _ type: UInt, public publicTemplate: [(UInt, [UInt8])],
                         private privateTemplate: [(UInt, [UInt8])]) -> (CK_RV, CK_OBJECT_HANDLE, CK_OBJECT_HANDLE) {
        var publicKey: CK_OBJECT_HANDLE = 0, privateKey: CK_OBJECT_HANDLE = 0
        let (pt, pc) = memory.template(publicTemplate), (vt, vc) = memory.template(privateTemplate)
        let result = p11.C_GenerateKeyPair!(session, memory.mechanism(type), pt, pc, vt, vc, &publicKey, &privateKey)
        return (result, publicKey, privateKey)
    }

    func wrap(_ session: CK_SESSION_HANDLE, _ mechanism: UnsafeMutablePointer<CK_MECHANISM>, _ wrappingKey: CK_OBJECT_HANDLE,
              _ key: CK_OBJECT_HANDLE) -> (CK_RV, [UInt8]) {
        output(4096) { p11.C_WrapKey!(session, mechanism, wrappingKey, key, $0, $1) }
    }

    func unwrap(_ session: CK_SESSION_HANDLE, _ mechanism: UnsafeMutablePointer<CK_MECHANISM>, _ unwrappingKey: CK_OBJECT_HANDLE,
                _ blob: [UInt8], _ template: [(UInt, [UInt8])]) -> (CK_RV, CK_OBJECT_HANDLE) {
        var handle: CK_OBJECT_HANDLE = 0
        var wrapped = blob
        let (attributes, count) = memory.template(template)
        return (p11.C_UnwrapKey!(session, mechanism, unwrappingKey, &wrapped, CK_ULONG(wrapped.count), attributes, count, &handle), handle)
    }

    /// A CK_ULONG attribute of an object.
    func ulongValue(_ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE, _ type: UInt) -> UInt? {
        guard let bytes = value(session, object, type).1, bytes.count == MemoryLayout<UInt>.size else { return nil }
        return bytes.withUnsafeBytes { $0.loadUnaligned(as: UInt.self) }
    }

    /// `data` with one bit of the byte at `index` (from the end when negative) changed.
    static func flipped(_ data: [UInt8], at index: Int = -1) -> [UInt8] {
        var copy = data
        copy[index < 0 ? copy.count + index : index] ^= 1
        return copy
    }
}
