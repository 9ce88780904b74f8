import CPKCS11
import Glibc
import KeychainCrypto

/// Another PKCS#11 module loaded into keychainctl (SoftHSM for `migrate`, this project's own
/// module for `--version`): dlopen, C_GetFunctionList, and the few calls keychainctl makes,
/// each returning its CK_RV as an error.
final class ForeignModule {
    struct Failure: Error {
        let function: String
        let rv: CK_RV
        var text: String { "\(function) returned \(ForeignModule.name(of: rv))" }
    }

    let path: String
    private let handle: UnsafeMutableRawPointer
    private let functions: UnsafeMutablePointer<CK_FUNCTION_LIST>
    private var initialized = false

    /// Loads the module; nil and a reason when the file is not a PKCS#11 module.
    init(path: String) throws(ModuleLoadError) {
        self.path = path
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            throw ModuleLoadError(reason: dlerror().map { String(cString: $0) } ?? "dlopen failed")
        }
        guard let symbol = dlsym(handle, "C_GetFunctionList") else {
            dlclose(handle)
            throw ModuleLoadError(reason: "\(path) has no C_GetFunctionList: not a PKCS#11 module")
        }
        typealias GetFunctionList = @convention(c) (UnsafeMutablePointer<UnsafeMutablePointer<CK_FUNCTION_LIST>?>?) -> CK_RV
        let getFunctionList = unsafeBitCast(symbol, to: GetFunctionList.self)
        var list: UnsafeMutablePointer<CK_FUNCTION_LIST>?
        guard getFunctionList(&list) == CKR_OK, let list else {
            dlclose(handle)
            throw ModuleLoadError(reason: "C_GetFunctionList of \(path) failed")
        }
        self.handle = handle
        self.functions = list
    }

    struct ModuleLoadError: Error { let reason: String }

    deinit {
        if initialized { _ = functions.pointee.C_Finalize?(nil) }
        // The module stays mapped: some modules leave threads or atexit handlers behind.
    }

    private func check(_ function: String, _ rv: CK_RV?) throws(Failure) {
        guard let rv else { throw Failure(function: function, rv: CK_RV(CKR_FUNCTION_NOT_SUPPORTED)) }
        guard rv == CKR_OK else { throw Failure(function: function, rv: rv) }
    }

    func initialize() throws(Failure) {
        var arguments = CK_C_INITIALIZE_ARGS(CreateMutex: nil, DestroyMutex: nil, LockMutex: nil, UnlockMutex: nil,
                                             flags: CK_FLAGS(CKF_OS_LOCKING_OK), pReserved: nil)
        let rv = withUnsafeMutablePointer(to: &arguments) { functions.pointee.C_Initialize?(UnsafeMutableRawPointer($0)) }
        if rv == CK_RV(CKR_CRYPTOKI_ALREADY_INITIALIZED) { return }
        try check("C_Initialize", rv)
        initialized = true
    }

    struct Info {
        let cryptoki: CK_VERSION
        let library: CK_VERSION
        let manufacturer: String
        let description: String
    }

    func info() throws(Failure) -> Info {
        var info = CK_INFO()
        try check("C_GetInfo", functions.pointee.C_GetInfo?(&info))
        return Info(cryptoki: info.cryptokiVersion, library: info.libraryVersion,
                    manufacturer: Self.text(info.manufacturerID), description: Self.text(info.libraryDescription))
    }

    /// The slots with a token, and each token's label.
    func tokens() throws(Failure) -> [(slot: CK_SLOT_ID, label: String, serial: String)] {
        var count: CK_ULONG = 0
        try check("C_GetSlotList", functions.pointee.C_GetSlotList?(CK_BBOOL(CK_TRUE), nil, &count))
        var slots = [CK_SLOT_ID](repeating: 0, count: Int(count))
        try check("C_GetSlotList", functions.pointee.C_GetSlotList?(CK_BBOOL(CK_TRUE), &slots, &count))
        var found: [(CK_SLOT_ID, String, String)] = []
        for slot in slots.prefix(Int(count)) {
            var token = CK_TOKEN_INFO()
            guard functions.pointee.C_GetTokenInfo?(slot, &token) == CKR_OK else { continue }
            guard token.flags & CK_FLAGS(CKF_TOKEN_INITIALIZED) != 0 else { continue }
            found.append((slot, Self.text(token.label), Self.text(token.serialNumber)))
        }
        return found
    }

    func openSession(slot: CK_SLOT_ID) throws(Failure) -> CK_SESSION_HANDLE {
        var session: CK_SESSION_HANDLE = 0
        try check("C_OpenSession", functions.pointee.C_OpenSession?(slot, CK_FLAGS(CKF_SERIAL_SESSION | CKF_RW_SESSION), nil, nil, &session))
        return session
    }

    func closeSession(_ session: CK_SESSION_HANDLE) { _ = functions.pointee.C_CloseSession?(session) }

    func login(_ session: CK_SESSION_HANDLE, pin: UnsafeRawBufferPointer) throws(Failure) {
        let rv = functions.pointee.C_Login?(session, CK_USER_TYPE(CKU_USER),
                                             UnsafeMutablePointer(mutating: pin.baseAddress?.assumingMemoryBound(to: CK_UTF8CHAR.self)),
                                             CK_ULONG(pin.count))
        if rv == CK_RV(CKR_USER_ALREADY_LOGGED_IN) { return }
        try check("C_Login", rv)
    }

    func logout(_ session: CK_SESSION_HANDLE) { _ = functions.pointee.C_Logout?(session) }

    /// Every object the session sees.
    func objects(_ session: CK_SESSION_HANDLE) throws(Failure) -> [CK_OBJECT_HANDLE] {
        try check("C_FindObjectsInit", functions.pointee.C_FindObjectsInit?(session, nil, 0))
        var all: [CK_OBJECT_HANDLE] = []
        var batch = [CK_OBJECT_HANDLE](repeating: 0, count: 64)
        while true {
            var count: CK_ULONG = 0
            let rv = functions.pointee.C_FindObjects?(session, &batch, CK_ULONG(batch.count), &count)
            if rv != CK_RV(CKR_OK) {
                _ = functions.pointee.C_FindObjectsFinal?(session)
                try check("C_FindObjects", rv)
            }
            if count == 0 { break }
            all += batch.prefix(Int(min(count, CK_ULONG(batch.count))))
        }
        try check("C_FindObjectsFinal", functions.pointee.C_FindObjectsFinal?(session))
        return all
    }

    /// One attribute's value, or nil when the object has none or will not reveal it
    /// (CKR_ATTRIBUTE_SENSITIVE, CKR_ATTRIBUTE_TYPE_INVALID).
    func attribute(_ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE, _ type: CK_ATTRIBUTE_TYPE) -> [UInt8]? {
        var template = CK_ATTRIBUTE(type: type, pValue: nil, ulValueLen: 0)
        guard functions.pointee.C_GetAttributeValue?(session, object, &template, 1) == CKR_OK,
              template.ulValueLen != CK_ULONG.max, template.ulValueLen <= 16 << 20 else { return nil }
        var value = [UInt8](repeating: 0, count: Int(template.ulValueLen))
        let rv = value.withUnsafeMutableBytes { buffer -> CK_RV? in
            template.pValue = buffer.baseAddress
            return functions.pointee.C_GetAttributeValue?(session, object, &template, 1)
        }
        guard rv == CKR_OK, template.ulValueLen <= value.count else {
            wipe(&value)
            return nil
        }
        value.removeLast(value.count - Int(template.ulValueLen))
        return value
    }

    func ulong(_ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE, _ type: CK_ATTRIBUTE_TYPE) -> CK_ULONG? {
        guard let bytes = attribute(session, object, type), bytes.count == MemoryLayout<CK_ULONG>.size else { return nil }
        return bytes.withUnsafeBytes { $0.loadUnaligned(as: CK_ULONG.self) }
    }

    func bool(_ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE, _ type: CK_ATTRIBUTE_TYPE) -> Bool? {
        attribute(session, object, type).map { $0.first.map { $0 != 0 } ?? false }
    }

    /// Makes a session AES-256 key the caller may read (the migration's transport key).
    func generateTransportKey(_ session: CK_SESSION_HANDLE) throws(Failure) -> CK_OBJECT_HANDLE {
        var mechanism = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_AES_KEY_GEN), pParameter: nil, ulParameterLen: 0)
        var yes = CK_BBOOL(CK_TRUE), no = CK_BBOOL(CK_FALSE)
        var length = CK_ULONG(32)
        var keyClass = CK_OBJECT_CLASS(CKO_SECRET_KEY), keyType = CK_KEY_TYPE(CKK_AES)
        var key: CK_OBJECT_HANDLE = 0
        let rv = withUnsafeMutableBytes(of: &yes) { yes in
            withUnsafeMutableBytes(of: &no) { no in
                withUnsafeMutableBytes(of: &length) { length in
                    withUnsafeMutableBytes(of: &keyClass) { keyClass in
                        withUnsafeMutableBytes(of: &keyType) { keyType -> CK_RV? in
                            var template = [
                                CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_CLASS), pValue: keyClass.baseAddress, ulValueLen: CK_ULONG(keyClass.count)),
                                CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_KEY_TYPE), pValue: keyType.baseAddress, ulValueLen: CK_ULONG(keyType.count)),
                                CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_VALUE_LEN), pValue: length.baseAddress, ulValueLen: CK_ULONG(length.count)),
                                CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_TOKEN), pValue: no.baseAddress, ulValueLen: 1),
                                CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_SENSITIVE), pValue: no.baseAddress, ulValueLen: 1),
                                CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_EXTRACTABLE), pValue: yes.baseAddress, ulValueLen: 1),
                                CK_ATTRIBUTE(type: CK_ATTRIBUTE_TYPE(CKA_WRAP), pValue: yes.baseAddress, ulValueLen: 1),
                            ]
                            return functions.pointee.C_GenerateKey?(session, &mechanism, &template, CK_ULONG(template.count), &key)
                        }
                    }
                }
            }
        }
        try check("C_GenerateKey", rv)
        return key
    }

    /// C_WrapKey with CKM_AES_KEY_WRAP_PAD (RFC 5649).
    func wrap(_ session: CK_SESSION_HANDLE, key: CK_OBJECT_HANDLE, with wrappingKey: CK_OBJECT_HANDLE) throws(Failure) -> [UInt8] {
        var mechanism = CK_MECHANISM(mechanism: CK_MECHANISM_TYPE(CKM_AES_KEY_WRAP_PAD), pParameter: nil, ulParameterLen: 0)
        var length: CK_ULONG = 0
        try check("C_WrapKey", functions.pointee.C_WrapKey?(session, &mechanism, wrappingKey, key, nil, &length))
        guard length <= 1 << 20 else { throw Failure(function: "C_WrapKey", rv: CK_RV(CKR_GENERAL_ERROR)) }
        var out = [UInt8](repeating: 0, count: Int(length))
        try check("C_WrapKey", functions.pointee.C_WrapKey?(session, &mechanism, wrappingKey, key, &out, &length))
        out.removeLast(out.count - Int(min(length, CK_ULONG(out.count))))
        return out
    }

    func destroy(_ session: CK_SESSION_HANDLE, _ object: CK_OBJECT_HANDLE) { _ = functions.pointee.C_DestroyObject?(session, object) }

    /// A blank-padded fixed-size field as text.
    static func text<T>(_ field: T) -> String {
        var copy = field
        let bytes = withUnsafeBytes(of: &copy) { Array($0) }
        var end = bytes.count
        while end > 0, bytes[end - 1] == 0x20 || bytes[end - 1] == 0 { end -= 1 }
        return String(decoding: bytes.prefix(end), as: UTF8.self)
    }

    /// "CKR_PIN_INCORRECT (0xa0)" for the values people meet; hex otherwise.
    static func name(of rv: CK_RV) -> String {
        let names: [Int: String] = [Int(CKR_PIN_INCORRECT): "CKR_PIN_INCORRECT", Int(CKR_PIN_LOCKED): "CKR_PIN_LOCKED",
                                    Int(CKR_KEY_UNEXTRACTABLE): "CKR_KEY_UNEXTRACTABLE", Int(CKR_MECHANISM_INVALID): "CKR_MECHANISM_INVALID",
                                    Int(CKR_KEY_NOT_WRAPPABLE): "CKR_KEY_NOT_WRAPPABLE", Int(CKR_FUNCTION_NOT_SUPPORTED): "CKR_FUNCTION_NOT_SUPPORTED",
                                    Int(CKR_USER_PIN_NOT_INITIALIZED): "CKR_USER_PIN_NOT_INITIALIZED", Int(CKR_TOKEN_NOT_PRESENT): "CKR_TOKEN_NOT_PRESENT",
                                    Int(CKR_GENERAL_ERROR): "CKR_GENERAL_ERROR", Int(CKR_ARGUMENTS_BAD): "CKR_ARGUMENTS_BAD"]
        let hex = "0x" + String(rv, radix: 16)
        return names[Int(rv)].map { "\($0) (\(hex))" } ?? hex
    }
}
