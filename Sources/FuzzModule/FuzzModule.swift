// Fuzz target for the PKCS#11 C API, in process: each input is a program of calls — templates of
// any types, lengths, counts and nesting; mechanisms with their parameters; handles real, stale
// and invented; calls in any order — run against one keychain made at start-up. Built as
// FuzzDecoders is (see there): libFuzzer with -DFUZZING, a replayer of files otherwise.
//
// The harness keeps the caller's side of the contract, as any host must: every pointer it passes
// points at as many bytes as the length beside it says (or is NULL), and structures that hold
// pointers (CK_GCM_PARAMS, nested templates, …) are built with real ones. Everything else —
// values, lengths, counts, types, handles, order — comes from the input.
import CPKCS11
import FuzzSupport
import Glibc
import PKCS11

/// Reads the input as a stream of small decisions; zeros once it runs out.
struct Program {
    let bytes: [UInt8]
    var position = 0

    var isAtEnd: Bool { position >= bytes.count }

    mutating func byte() -> UInt8 {
        guard position < bytes.count else { return 0 }
        defer { position += 1 }
        return bytes[position]
    }

    mutating func ulong() -> CK_ULONG {
        var value: CK_ULONG = 0
        for _ in 0..<4 { value = value << 8 | CK_ULONG(byte()) }
        return value
    }

    mutating func data(maximum: Int) -> [UInt8] {
        let count = Int(byte()) % (maximum + 1)
        var out: [UInt8] = []
        out.reserveCapacity(count)
        for _ in 0..<count { out.append(byte()) }
        return out
    }

    mutating func pick<T>(_ choices: [T]) -> T { choices[Int(byte()) % choices.count] }
}

/// Memory handed to the module for one call, freed afterwards.
final class Arena {
    private var blocks: [UnsafeMutableRawPointer] = []

    func bytes(_ value: [UInt8]) -> UnsafeMutableRawPointer {
        let block = UnsafeMutableRawPointer.allocate(byteCount: max(value.count, 1), alignment: 16)
        if !value.isEmpty { block.copyMemory(from: value, byteCount: value.count) }
        blocks.append(block)
        return block
    }

    func zeroed(_ count: Int) -> UnsafeMutableRawPointer { bytes([UInt8](repeating: 0, count: count)) }

    func value<T>(_ value: T) -> UnsafeMutablePointer<T> {
        let block = UnsafeMutablePointer<T>.allocate(capacity: 1)
        block.initialize(to: value)
        blocks.append(UnsafeMutableRawPointer(block))
        return block
    }

    func array<T>(_ values: [T]) -> UnsafeMutablePointer<T>? {
        guard !values.isEmpty else { return nil }
        let block = UnsafeMutablePointer<T>.allocate(capacity: values.count)
        block.initialize(from: values, count: values.count)
        blocks.append(UnsafeMutableRawPointer(block))
        return block
    }

    deinit { for block in blocks { block.deallocate() } }
}

enum ModuleFuzz {
    static let userPIN = Array("1234".utf8), soPIN = Array("12345678".utf8)
    static let vendor: CK_ULONG = 0x8000_0000 | 0x4B43_0000

    /// Attribute types worth trying (every one the module knows of, and a few it does not).
    static let attributeTypes: [CK_ULONG] = [
        0x000, 0x001, 0x002, 0x003, 0x010, 0x011, 0x012, 0x080, 0x081, 0x082, 0x086, 0x088, 0x089, 0x100, 0x101,
        0x102, 0x103, 0x104, 0x105, 0x106, 0x107, 0x108, 0x109, 0x10A, 0x10B, 0x10C, 0x110, 0x111, 0x120, 0x121,
        0x122, 0x123, 0x124, 0x125, 0x126, 0x127, 0x128, 0x160, 0x161, 0x162, 0x163, 0x164, 0x165, 0x166, 0x170,
        0x180, 0x181, 0x200, 0x202, 0x210, 0x211, 0x212, 0x600, 0x40000211, 0x40000212, 0x40000213, 0x40000600,
        vendor + 0x01, vendor + 0x02, vendor + 0x10, vendor + 0x11, vendor + 0x12, vendor + 0x19, vendor + 0x1B,
        vendor + 0x20, vendor + 0x22, vendor + 0x25, vendor + 0x26, 0x7FFF_FFFF, 0xFFFF_FFFF,
    ]
    /// Attribute-array attributes: their value is a nested CK_ATTRIBUTE array.
    static let templateTypes: Set<CK_ULONG> = [0x40000211, 0x40000212, 0x40000213]
    static let objectClasses: [CK_ULONG] = [0, 1, 2, 3, 4, 5, 8, 0x8000_0000 | 0x4B43_0001, 77]
    static let keyTypes: [CK_ULONG] = [0, 3, 0x10, 0x1F, 0x40, 0x41, 0x15, 0x2B]
    /// Mechanism numbers no token offers, beside the registry's (`mechanisms`).
    static let inventedMechanisms: [CK_ULONG] = [0x1234_5678, 0x8000_0000 | 0x4B43_0001, 0xFFFF_FFFF]  // the last two: vendor-defined
    /// The mechanisms to try: every one the module's registry offers (C_GetMechanismList of the
    /// fuzzed token, so a new row is fuzzed the day it is added) and a few invented ones.
    nonisolated(unsafe) static var mechanisms: [CK_ULONG] = inventedMechanisms

    /// One keychain, one logged-in session holding keys of every kind, for the whole run.
    struct Base {
        var session: CK_SESSION_HANDLE = 0
        var slot: CK_SLOT_ID = 0
        var keys: [CK_OBJECT_HANDLE] = []
    }
    nonisolated(unsafe) static var base: Base?

    /// The run's keychain folder, removed at exit.
    nonisolated(unsafe) static var keychainFolder: String?

    static func removeKeychainFolder() {
        guard let folder = keychainFolder, let entries = opendir(folder) else { return }
        while let entry = readdir(entries) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { unlink(folder + "/" + name) }
        }
        closedir(entries)
        rmdir(folder)
    }

    /// The step where set-up failed, for the message.
    nonisolated(unsafe) static var setUpFailure = ""

    static func setUp() -> Base? {
        let base = makeBase()
        if base == nil { print("FuzzModule: set-up failed at \(setUpFailure)") }
        return base
    }

    private static func step(_ name: String, _ rv: CK_RV) -> Bool {
        if rv != CKR_OK { setUpFailure = "\(name) (rv 0x\(String(rv, radix: 16)))" }
        return rv == CKR_OK
    }

    private static func makeBase() -> Base? {
        // In memory where the machine has it: the keychain's durable writes (fsync per token
        // object) would otherwise set the pace, not the module's code.
        let parent = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"
        var template = [CChar]((parent + "/keychain-fuzz.XXXXXX").utf8CString)
        guard let dir = mkdtemp(&template) else {
            setUpFailure = "mkdtemp"
            return nil
        }
        let path = String(cString: dir)
        keychainFolder = path
        atexit { ModuleFuzz.removeKeychainFolder() }
        setenv("KEYCHAIN_PKCS11_DIR", path, 1)
        setenv("KEYCHAIN_PKCS11_DEVICE_KEY", path + "/device-key", 1)
        setenv("KEYCHAIN_PKCS11_KDF_LOG_N", "10", 1)
        guard step("C_Initialize", PKCS11.C_Initialize(nil)) else { return nil }
        var slots = [CK_SLOT_ID](repeating: 0, count: 8)
        var count = CK_ULONG(slots.count)
        guard step("C_GetSlotList", PKCS11.C_GetSlotList(CK_BBOOL(CK_FALSE), &slots, &count)), count > 0 else { return nil }
        var state = Base()
        state.slot = slots[Int(count) - 1]
        var label = [CK_UTF8CHAR](repeating: 0x20, count: 32)
        label[0] = 0x66
        var so = soPIN, user = userPIN
        guard step("C_InitToken", PKCS11.C_InitToken(state.slot, &so, CK_ULONG(so.count), &label)) else { return nil }
        count = CK_ULONG(slots.count)
        guard step("C_GetSlotList(present)", PKCS11.C_GetSlotList(CK_BBOOL(CK_TRUE), &slots, &count)) else { return nil }
        var info = CK_TOKEN_INFO()
        guard let initialised = slots.prefix(Int(count)).first(where: {
            PKCS11.C_GetTokenInfo($0, &info) == CKR_OK && info.flags & CK_FLAGS(CKF_TOKEN_INITIALIZED) != 0
        }) else {
            setUpFailure = "finding the new keychain's slot"
            return nil
        }
        state.slot = initialised
        var mechanismCount: CK_ULONG = 0
        guard step("C_GetMechanismList(count)", PKCS11.C_GetMechanismList(state.slot, nil, &mechanismCount)) else { return nil }
        var offered = [CK_MECHANISM_TYPE](repeating: 0, count: Int(mechanismCount))
        guard step("C_GetMechanismList", PKCS11.C_GetMechanismList(state.slot, &offered, &mechanismCount)) else { return nil }
        mechanisms = Array(offered.prefix(Int(mechanismCount))) + inventedMechanisms
        guard step("C_OpenSession", PKCS11.C_OpenSession(state.slot, CK_FLAGS(CKF_SERIAL_SESSION | CKF_RW_SESSION), nil, nil, &state.session)),
              step("C_Login(SO)", PKCS11.C_Login(state.session, CK_USER_TYPE(CKU_SO), &so, CK_ULONG(so.count))),
              step("C_InitPIN", PKCS11.C_InitPIN(state.session, &user, CK_ULONG(user.count))),
              step("C_Logout", PKCS11.C_Logout(state.session)),
              step("C_Login", PKCS11.C_Login(state.session, CK_USER_TYPE(CKU_USER), &user, CK_ULONG(user.count))) else { return nil }
        // Keys every mechanism can use: AES, HMAC, P-256, Ed25519, RSA-2048, token and session.
        let arena = Arena()
        func attribute(_ type: CK_ULONG, _ value: [UInt8]) -> CK_ATTRIBUTE {
            CK_ATTRIBUTE(type: type, pValue: arena.bytes(value), ulValueLen: CK_ULONG(value.count))
        }
        func ulong(_ value: CK_ULONG) -> [UInt8] { withUnsafeBytes(of: value) { Array($0) } }
        let yes: [UInt8] = [1]
        let usage = [0x104, 0x105, 0x106, 0x107, 0x108, 0x10A, 0x10C].map { attribute(CK_ULONG($0), yes) }
        for (mechanism, length, token) in [(CK_ULONG(0x1080), CK_ULONG(32), false), (0x1080, 16, true), (0x350, 32, false)] {
            var m = CK_MECHANISM(mechanism: mechanism, pParameter: nil, ulParameterLen: 0)
            var t = usage + [attribute(0x161, ulong(length)), attribute(0x001, [token ? 1 : 0]), attribute(0x162, yes)]
            var key: CK_OBJECT_HANDLE = 0
            if PKCS11.C_GenerateKey(state.session, &m, &t, CK_ULONG(t.count), &key) == CKR_OK { state.keys.append(key) }
        }
        let p256: [UInt8] = [0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07], ed25519: [UInt8] = [0x06, 0x03, 0x2B, 0x65, 0x70]
        for (mechanism, parameters) in [(CK_ULONG(0x1040), [attribute(0x180, p256)]), (0x1055, [attribute(0x180, ed25519)]),
                                        (0x0, [attribute(0x121, ulong(2048))])] {
            var m = CK_MECHANISM(mechanism: mechanism, pParameter: nil, ulParameterLen: 0)
            var publicTemplate = parameters + [0x104, 0x10A, 0x106].map { attribute(CK_ULONG($0), yes) }
            var privateTemplate = [0x105, 0x108, 0x107, 0x10C, 0x162].map { attribute(CK_ULONG($0), yes) }
            var publicKey: CK_OBJECT_HANDLE = 0, privateKey: CK_OBJECT_HANDLE = 0
            if PKCS11.C_GenerateKeyPair(state.session, &m, &publicTemplate, CK_ULONG(publicTemplate.count), &privateTemplate,
                                 CK_ULONG(privateTemplate.count), &publicKey, &privateKey) == CKR_OK {
                state.keys += [publicKey, privateKey]
            }
        }
        return state
    }

    /// A template from the input: types, lengths and counts as it says, nesting one level deep.
    static func template(_ program: inout Program, _ arena: Arena, depth: Int = 0) -> (UnsafeMutablePointer<CK_ATTRIBUTE>?, CK_ULONG) {
        let count = Int(program.byte()) % 9
        var attributes: [CK_ATTRIBUTE] = []
        for _ in 0..<count {
            let selector = program.byte()
            let type: CK_ULONG = selector < 240 ? attributeTypes[Int(selector) % attributeTypes.count] : program.ulong()
            var value: [UInt8]
            switch program.byte() % 6 {
            case 0: value = withUnsafeBytes(of: CK_ULONG(program.byte())) { Array($0) }
            case 1: value = withUnsafeBytes(of: type == 0 ? objectClasses[Int(program.byte()) % objectClasses.count] : keyTypes[Int(program.byte()) % keyTypes.count]) { Array($0) }
            case 2: value = [program.byte() % 3]
            default: value = program.data(maximum: 80)
            }
            if templateTypes.contains(type) && depth == 0 && program.byte() % 2 == 0 {
                // A nested template, with real pointers; its length may still be wrong.
                let (nested, nestedCount) = template(&program, arena, depth: depth + 1)
                let bytes = Int(nestedCount) * MemoryLayout<CK_ATTRIBUTE>.stride
                let claimed = program.byte() % 4 == 0 ? max(0, bytes - Int(program.byte() % 24)) : bytes
                attributes.append(CK_ATTRIBUTE(type: type, pValue: UnsafeMutableRawPointer(nested), ulValueLen: CK_ULONG(nested == nil ? 0 : claimed)))
                continue
            }
            if templateTypes.contains(type) {
                // Not an array of CK_ATTRIBUTE: only a length that no array has is fair to pass.
                value = Array(value.prefix(MemoryLayout<CK_ATTRIBUTE>.stride - 1))
            }
            let null = program.byte() % 16 == 0
            attributes.append(CK_ATTRIBUTE(type: type, pValue: null ? nil : arena.bytes(value), ulValueLen: CK_ULONG(value.count)))
        }
        return (arena.array(attributes), CK_ULONG(attributes.count))
    }

    /// A mechanism from the input, with parameters of the shape its type has (built with real
    /// pointers where the structure holds some) or flat bytes for the others.
    static func mechanism(_ program: inout Program, _ arena: Arena) -> UnsafeMutablePointer<CK_MECHANISM> {
        let type = program.pick(mechanisms)
        var parameter: UnsafeMutableRawPointer?
        var length = 0
        switch type {
        case CK_ULONG(CKM_AES_GCM):
            let iv = program.data(maximum: 20), aad = program.data(maximum: 40)
            let p = CK_GCM_PARAMS(pIv: program.byte() % 8 == 0 ? nil : arena.bytes(iv).assumingMemoryBound(to: CK_BYTE.self), ulIvLen: CK_ULONG(iv.count),
                                  ulIvBits: CK_ULONG(iv.count * 8), pAAD: arena.bytes(aad).assumingMemoryBound(to: CK_BYTE.self),
                                  ulAADLen: CK_ULONG(aad.count), ulTagBits: program.pick([128, 96, 64, 0, 129, 200]))
            parameter = UnsafeMutableRawPointer(arena.value(p))
            length = MemoryLayout<CK_GCM_PARAMS>.size
        case CK_ULONG(CKM_RSA_PKCS_OAEP):
            let source = program.data(maximum: 16)
            let p = CK_RSA_PKCS_OAEP_PARAMS(hashAlg: program.pick([CKM_SHA_1, CKM_SHA256, CKM_SHA512, CKM_SHA224, 7].map { CK_ULONG($0) }), mgf: program.pick([1, 2, 3, 4, 9]),
                                            source: CK_ULONG(program.byte() % 3), pSourceData: source.isEmpty ? nil : arena.bytes(source),
                                            ulSourceDataLen: CK_ULONG(source.count))
            parameter = UnsafeMutableRawPointer(arena.value(p))
            length = MemoryLayout<CK_RSA_PKCS_OAEP_PARAMS>.size
        case CK_ULONG(CKM_AES_CCM):
            let nonce = program.data(maximum: 16), aad = program.data(maximum: 24)
            let p = CK_CCM_PARAMS(ulDataLen: CK_ULONG(program.byte() % 80), pNonce: arena.bytes(nonce).assumingMemoryBound(to: CK_BYTE.self), ulNonceLen: CK_ULONG(nonce.count),
                                  pAAD: aad.isEmpty ? nil : arena.bytes(aad).assumingMemoryBound(to: CK_BYTE.self), ulAADLen: CK_ULONG(aad.count),
                                  ulMACLen: program.pick([16, 8, 4, 5, 0, 18]))
            parameter = UnsafeMutableRawPointer(arena.value(p))
            length = MemoryLayout<CK_CCM_PARAMS>.size
        case CK_ULONG(CKM_CHACHA20): // the declared bits never exceed the bytes given
            let counter = program.data(maximum: 8), nonce = program.data(maximum: 12)
            let p = CK_CHACHA20_PARAMS(pBlockCounter: arena.bytes(counter).assumingMemoryBound(to: CK_BYTE.self),
                                       blockCounterBits: CK_ULONG(program.pick([counter.count, counter.count / 2]) * 8),
                                       pNonce: arena.bytes(nonce).assumingMemoryBound(to: CK_BYTE.self), ulNonceBits: CK_ULONG(program.pick([nonce.count, nonce.count / 2]) * 8))
            parameter = UnsafeMutableRawPointer(arena.value(p))
            length = MemoryLayout<CK_CHACHA20_PARAMS>.size
        case CK_ULONG(CKM_CHACHA20_POLY1305): // the nonce's length in bytes, or in bits when 12 or 8 bytes are there
            let nonce = program.data(maximum: 24), aad = program.data(maximum: 24)
            let inBits = (nonce.count == 12 || nonce.count == 8) && program.byte() % 2 == 0
            let p = CK_SALSA20_CHACHA20_POLY1305_PARAMS(pNonce: arena.bytes(nonce).assumingMemoryBound(to: CK_BYTE.self), ulNonceLen: CK_ULONG(inBits ? nonce.count * 8 : nonce.count),
                                                        pAAD: aad.isEmpty ? nil : arena.bytes(aad).assumingMemoryBound(to: CK_BYTE.self), ulAADLen: CK_ULONG(aad.count))
            parameter = UnsafeMutableRawPointer(arena.value(p))
            length = MemoryLayout<CK_SALSA20_CHACHA20_POLY1305_PARAMS>.size
        case CK_ULONG(CKM_HKDF_DERIVE), CK_ULONG(CKM_HKDF_DATA):
            let salt = program.data(maximum: 32), info = program.data(maximum: 32)
            let p = CK_HKDF_PARAMS(bExtract: CK_BBOOL(program.byte() % 3), bExpand: CK_BBOOL(program.byte() % 3),
                                   prfHashMechanism: program.pick([CKM_SHA256, CKM_SHA_1, CKM_SHA3_256, CKM_MD5, 7].map { CK_ULONG($0) }),
                                   ulSaltType: program.pick([1, 2, 4, 3, 0]), pSalt: salt.isEmpty ? nil : arena.bytes(salt).assumingMemoryBound(to: CK_BYTE.self),
                                   ulSaltLen: CK_ULONG(salt.count), hSaltKey: CK_ULONG(program.byte() % 16),
                                   pInfo: info.isEmpty ? nil : arena.bytes(info).assumingMemoryBound(to: CK_BYTE.self), ulInfoLen: CK_ULONG(info.count))
            parameter = UnsafeMutableRawPointer(arena.value(p))
            length = MemoryLayout<CK_HKDF_PARAMS>.size
        case CK_ULONG(CKM_PKCS5_PBKD2): // CK_PKCS5_PBKD2_PARAMS2, a few iterations (the input's time is short)
            let salt = program.data(maximum: 16), password = program.data(maximum: 16), prfData = program.byte() % 8 == 0 ? program.data(maximum: 4) : []
            let p = CK_PKCS5_PBKD2_PARAMS2(saltSource: program.pick([1, 1, 2]), pSaltSourceData: salt.isEmpty ? nil : arena.bytes(salt), ulSaltSourceDataLen: CK_ULONG(salt.count),
                                           iterations: program.pick([1, 2, 0, 100]), prf: program.pick([1, 4, 6, 2, 7, 9]),
                                           pPrfData: prfData.isEmpty ? nil : arena.bytes(prfData), ulPrfDataLen: CK_ULONG(prfData.count),
                                           pPassword: password.isEmpty ? nil : arena.bytes(password).assumingMemoryBound(to: CK_UTF8CHAR.self),
                                           ulPasswordLen: CK_ULONG(password.count))
            parameter = UnsafeMutableRawPointer(arena.value(p))
            length = MemoryLayout<CK_PKCS5_PBKD2_PARAMS2>.size
        case CK_ULONG(CKM_SP800_108_COUNTER_KDF), CK_ULONG(CKM_SP800_108_FEEDBACK_KDF), CK_ULONG(CKM_SP800_108_DOUBLE_PIPELINE_KDF):
            // CK_SP800_108_(FEEDBACK_)KDF_PARAMS with 0–4 data parameters and 0–2 more keys
            var fields: [CK_PRF_DATA_PARAM] = []
            for _ in 0..<Int(program.byte() % 5) {
                switch program.byte() % 5 {
                case 0:
                    let f = CK_SP800_108_COUNTER_FORMAT(bLittleEndian: CK_BBOOL(program.byte() % 3), ulWidthInBits: program.pick([8, 16, 32, 12, 64]))
                    fields.append(CK_PRF_DATA_PARAM(type: program.pick([CK_SP800_108_ITERATION_VARIABLE, CK_SP800_108_OPTIONAL_COUNTER]), pValue: UnsafeMutableRawPointer(arena.value(f)),
                                                    ulValueLen: CK_ULONG(MemoryLayout<CK_SP800_108_COUNTER_FORMAT>.size)))
                case 1:
                    fields.append(CK_PRF_DATA_PARAM(type: program.pick([CK_SP800_108_ITERATION_VARIABLE, CK_SP800_108_OPTIONAL_COUNTER]), pValue: nil, ulValueLen: 0))
                case 2:
                    let f = CK_SP800_108_DKM_LENGTH_FORMAT(dkmLengthMethod: program.pick([1, 2, 3]), bLittleEndian: CK_BBOOL(program.byte() % 2), ulWidthInBits: program.pick([8, 32, 64, 7]))
                    fields.append(CK_PRF_DATA_PARAM(type: CK_SP800_108_DKM_LENGTH, pValue: UnsafeMutableRawPointer(arena.value(f)),
                                                    ulValueLen: CK_ULONG(MemoryLayout<CK_SP800_108_DKM_LENGTH_FORMAT>.size)))
                case 3:
                    let bytes = program.data(maximum: 16)
                    fields.append(CK_PRF_DATA_PARAM(type: CK_SP800_108_BYTE_ARRAY, pValue: bytes.isEmpty ? nil : arena.bytes(bytes), ulValueLen: CK_ULONG(bytes.count)))
                default:
                    fields.append(CK_PRF_DATA_PARAM(type: CK_ULONG(program.byte()), pValue: nil, ulValueLen: 0))
                }
            }
            var keys: [CK_DERIVED_KEY] = []
            for _ in 0..<Int(program.byte() % 3) {
                let (t, c) = template(&program, arena)
                keys.append(CK_DERIVED_KEY(pTemplate: t, ulAttributeCount: c, phKey: program.byte() % 8 == 0 ? nil : arena.value(CK_OBJECT_HANDLE(0))))
            }
            let data = arena.array(fields), derived = arena.array(keys)
            let prf = program.pick([CKM_SHA256_HMAC, CKM_AES_CMAC, CKM_SHA3_256_HMAC, CKM_SHA_1, CKM_AES_GCM].map { CK_ULONG($0) })
            if type == CK_ULONG(CKM_SP800_108_FEEDBACK_KDF) {
                let iv = program.data(maximum: 32)
                let p = CK_SP800_108_FEEDBACK_KDF_PARAMS(prfType: prf, ulNumberOfDataParams: CK_ULONG(fields.count), pDataParams: data, ulIVLen: CK_ULONG(iv.count),
                                                         pIV: iv.isEmpty ? nil : arena.bytes(iv).assumingMemoryBound(to: CK_BYTE.self),
                                                         ulAdditionalDerivedKeys: CK_ULONG(keys.count), pAdditionalDerivedKeys: derived)
                parameter = UnsafeMutableRawPointer(arena.value(p))
                length = MemoryLayout<CK_SP800_108_FEEDBACK_KDF_PARAMS>.size
            } else {
                let p = CK_SP800_108_KDF_PARAMS(prfType: prf, ulNumberOfDataParams: CK_ULONG(fields.count), pDataParams: data,
                                                ulAdditionalDerivedKeys: CK_ULONG(keys.count), pAdditionalDerivedKeys: derived)
                parameter = UnsafeMutableRawPointer(arena.value(p))
                length = MemoryLayout<CK_SP800_108_KDF_PARAMS>.size
            }
        case CK_ULONG(CKM_RSA_AES_KEY_WRAP):
            let oaep = CK_RSA_PKCS_OAEP_PARAMS(hashAlg: program.pick([CKM_SHA256, CKM_SHA_1, CKM_SHA3_256].map { CK_ULONG($0) }), mgf: program.pick([2, 1, 7]),
                                               source: 1, pSourceData: nil, ulSourceDataLen: 0)
            let p = CK_RSA_AES_KEY_WRAP_PARAMS(ulAESKeyBits: program.pick([256, 128, 100]), pOAEPParams: program.byte() % 8 == 0 ? nil : arena.value(oaep))
            parameter = UnsafeMutableRawPointer(arena.value(p))
            length = MemoryLayout<CK_RSA_AES_KEY_WRAP_PARAMS>.size
        case CK_ULONG(CKM_ECDH1_COFACTOR_DERIVE):
            let shared = program.data(maximum: 16), point = program.data(maximum: 70)
            let p = CK_ECDH1_DERIVE_PARAMS(kdf: program.pick([1, 6, 0xB, 0xE]), ulSharedDataLen: CK_ULONG(shared.count),
                                           pSharedData: shared.isEmpty ? nil : arena.bytes(shared).assumingMemoryBound(to: CK_BYTE.self),
                                           ulPublicDataLen: CK_ULONG(point.count), pPublicData: arena.bytes(point).assumingMemoryBound(to: CK_BYTE.self))
            parameter = UnsafeMutableRawPointer(arena.value(p))
            length = MemoryLayout<CK_ECDH1_DERIVE_PARAMS>.size
        case CK_ULONG(CKM_ECDH1_DERIVE):
            let shared = program.data(maximum: 16), point = program.data(maximum: 70)
            let p = CK_ECDH1_DERIVE_PARAMS(kdf: CK_ULONG(program.byte() % 10), ulSharedDataLen: CK_ULONG(shared.count),
                                           pSharedData: shared.isEmpty ? nil : arena.bytes(shared).assumingMemoryBound(to: CK_BYTE.self),
                                           ulPublicDataLen: CK_ULONG(point.count), pPublicData: arena.bytes(point).assumingMemoryBound(to: CK_BYTE.self))
            parameter = UnsafeMutableRawPointer(arena.value(p))
            length = MemoryLayout<CK_ECDH1_DERIVE_PARAMS>.size
        case CK_ULONG(CKM_EDDSA): // CK_EDDSA_PARAMS, or none
            if program.byte() % 2 == 0 {
                let context = program.data(maximum: 40)
                let p = CK_EDDSA_PARAMS(phFlag: CK_BBOOL(program.byte() % 2), ulContextDataLen: CK_ULONG(context.count),
                                        pContextData: context.isEmpty ? nil : arena.bytes(context).assumingMemoryBound(to: CK_BYTE.self))
                parameter = UnsafeMutableRawPointer(arena.value(p))
                length = MemoryLayout<CK_EDDSA_PARAMS>.size
            }
        default: // flat parameters (IVs, CK_RSA_PKCS_PSS_PARAMS, CK_AES_CTR_PARAMS, lengths) or none
            let flat = program.data(maximum: 48)
            if !flat.isEmpty {
                parameter = arena.bytes(flat)
                length = flat.count
            }
        }
        // A wrong structure length, now and then: the module must refuse it, not read past it.
        if parameter != nil && program.byte() % 8 == 0 { length = max(0, length - 1 - Int(program.byte() % 8)) }
        return arena.value(CK_MECHANISM(mechanism: type, pParameter: parameter, ulParameterLen: CK_ULONG(length)))
    }

    /// An output buffer and its length: NULL (a length query), too small, or roomy.
    static func output(_ program: inout Program, _ arena: Arena) -> (UnsafeMutablePointer<CK_BYTE>?, UnsafeMutablePointer<CK_ULONG>) {
        let room = program.pick([0, 1, 16, 64, 300, 1024])
        let null = program.byte() % 4 == 0
        return (null ? nil : arena.zeroed(room).assumingMemoryBound(to: CK_BYTE.self), arena.value(CK_ULONG(room)))
    }

    static func run(_ input: [UInt8]) {
        if base == nil { base = setUp() }
        guard let state = base else { return }
        var program = Program(bytes: input)
        // The input's own session (the base session only holds the keys and the login).
        var first: CK_SESSION_HANDLE = 0
        guard PKCS11.C_OpenSession(state.slot, CK_FLAGS(CKF_SERIAL_SESSION | CKF_RW_SESSION), nil, nil, &first) == CKR_OK else { return }
        var sessions: [CK_SESSION_HANDLE] = [first]
        var opened: [CK_SESSION_HANDLE] = [first]
        var created: [CK_OBJECT_HANDLE] = []
        var steps = 0
        while !program.isAtEnd && steps < 64 {
            steps += 1
            let arena = Arena()
            let session = program.byte() % 8 == 0 || sessions.isEmpty ? program.ulong() : program.pick(sessions)
            func handle() -> CK_OBJECT_HANDLE {
                switch program.byte() % 4 {
                case 0: return program.ulong()
                case 1 where !created.isEmpty: return program.pick(created)
                default: return state.keys.isEmpty ? 0 : program.pick(state.keys)
                }
            }
            func data() -> (UnsafeMutablePointer<CK_BYTE>?, CK_ULONG) {
                let bytes = program.data(maximum: 200)
                return (program.byte() % 16 == 0 ? nil : arena.bytes(bytes).assumingMemoryBound(to: CK_BYTE.self), CK_ULONG(bytes.count))
            }
            switch program.byte() % 20 {
            case 0:
                let (t, c) = template(&program, arena)
                var object: CK_OBJECT_HANDLE = 0
                if PKCS11.C_CreateObject(session, t, c, &object) == CKR_OK { created.append(object) }
            case 1:
                let source = handle()
                let (t, c) = template(&program, arena)
                var object: CK_OBJECT_HANDLE = 0
                if PKCS11.C_CopyObject(session, source, t, c, &object) == CKR_OK { created.append(object) }
            case 2:
                if !created.isEmpty {
                    let index = Int(program.byte()) % created.count
                    if PKCS11.C_DestroyObject(session, created[index]) == CKR_OK { created.remove(at: index) }
                }
            case 3:
                // Attribute reads: size queries (NULL), short buffers, exact and roomy ones.
                let count = Int(program.byte()) % 6
                var attributes: [CK_ATTRIBUTE] = []
                for _ in 0..<count {
                    let type = program.pick(attributeTypes)
                    let room = program.pick([0, 1, 4, 8, 32, 300, 2048])
                    attributes.append(CK_ATTRIBUTE(type: type, pValue: program.byte() % 3 == 0 ? nil : arena.zeroed(room), ulValueLen: CK_ULONG(room)))
                }
                _ = PKCS11.C_GetAttributeValue(session, handle(), arena.array(attributes), CK_ULONG(count))
            case 4:
                let object = created.isEmpty ? handle() : program.pick(created)
                let (t, c) = template(&program, arena)
                _ = PKCS11.C_SetAttributeValue(session, object, t, c)
            case 5:
                let (t, c) = template(&program, arena)
                _ = PKCS11.C_FindObjectsInit(session, t, c)
                var found = [CK_OBJECT_HANDLE](repeating: 0, count: 8)
                var n: CK_ULONG = 0
                _ = PKCS11.C_FindObjects(session, &found, CK_ULONG(program.byte() % 9), &n)
                if program.byte() % 4 != 0 { _ = PKCS11.C_FindObjectsFinal(session) }
            case 6:
                let m = mechanism(&program, arena)
                let (t, c) = template(&program, arena)
                var key: CK_OBJECT_HANDLE = 0
                if PKCS11.C_GenerateKey(session, m, t, c, &key) == CKR_OK { created.append(key) }
            case 7:
                // Key pairs on the curves only: RSA generation would spend the input's time.
                let m = mechanism(&program, arena)
                guard m.pointee.mechanism == 0x1040 || m.pointee.mechanism == 0x1055 else { break }
                let (publicTemplate, publicCount) = template(&program, arena)
                let (privateTemplate, privateCount) = template(&program, arena)
                var publicKey: CK_OBJECT_HANDLE = 0, privateKey: CK_OBJECT_HANDLE = 0
                if PKCS11.C_GenerateKeyPair(session, m, publicTemplate, publicCount, privateTemplate, privateCount, &publicKey, &privateKey) == CKR_OK {
                    created += [publicKey, privateKey]
                }
            case 8:
                let m = program.byte() % 8 == 0 ? nil : mechanism(&program, arena)
                let key = handle()
                switch program.byte() % 5 {
                case 0: _ = PKCS11.C_EncryptInit(session, m, key)
                case 1: _ = PKCS11.C_DecryptInit(session, m, key)
                case 2: _ = PKCS11.C_SignInit(session, m, key)
                case 3: _ = PKCS11.C_VerifyInit(session, m, key)
                default: _ = PKCS11.C_DigestInit(session, m)
                }
            case 9:
                let (input, inputLength) = data()
                let (out, outLength) = output(&program, arena)
                switch program.byte() % 14 {
                case 0: _ = PKCS11.C_Encrypt(session, input, inputLength, out, outLength)
                case 1: _ = PKCS11.C_EncryptUpdate(session, input, inputLength, out, outLength)
                case 2: _ = PKCS11.C_EncryptFinal(session, out, outLength)
                case 3: _ = PKCS11.C_Decrypt(session, input, inputLength, out, outLength)
                case 4: _ = PKCS11.C_DecryptUpdate(session, input, inputLength, out, outLength)
                case 5: _ = PKCS11.C_DecryptFinal(session, out, outLength)
                case 6: _ = PKCS11.C_Sign(session, input, inputLength, out, outLength)
                case 7: _ = PKCS11.C_SignUpdate(session, input, inputLength)
                case 8: _ = PKCS11.C_SignFinal(session, out, outLength)
                case 9: _ = PKCS11.C_Verify(session, input, inputLength, out, outLength.pointee)
                case 10: _ = PKCS11.C_VerifyUpdate(session, input, inputLength)
                case 11: _ = PKCS11.C_VerifyFinal(session, out, outLength.pointee)
                case 12: _ = PKCS11.C_Digest(session, input, inputLength, out, outLength)
                default: _ = program.byte() % 2 == 0 ? PKCS11.C_DigestUpdate(session, input, inputLength) : PKCS11.C_DigestFinal(session, out, outLength)
                }
            case 10:
                let m = mechanism(&program, arena)
                let (out, outLength) = output(&program, arena)
                _ = PKCS11.C_WrapKey(session, m, handle(), handle(), out, outLength)
            case 11:
                let m = mechanism(&program, arena)
                let wrapping = handle()
                let (input, inputLength) = data()
                let (t, c) = template(&program, arena)
                var key: CK_OBJECT_HANDLE = 0
                if PKCS11.C_UnwrapKey(session, m, wrapping, input, inputLength, t, c, &key) == CKR_OK { created.append(key) }
            case 12:
                let m = mechanism(&program, arena)
                let baseKey = handle()
                let (t, c) = template(&program, arena)
                var key: CK_OBJECT_HANDLE = 0
                if PKCS11.C_DeriveKey(session, m, baseKey, t, c, &key) == CKR_OK { created.append(key) }
            case 13:
                // Logins with the right PINs only: wrong ones would lock the keychain for good.
                var user = userPIN, so = soPIN
                switch program.byte() % 5 {
                case 0: _ = PKCS11.C_Logout(session)
                case 1: _ = PKCS11.C_Login(session, CK_USER_TYPE(CKU_USER), &user, CK_ULONG(user.count))
                case 2: _ = PKCS11.C_Login(session, CK_USER_TYPE(CKU_CONTEXT_SPECIFIC), &user, CK_ULONG(user.count))
                case 3: _ = PKCS11.C_Login(session, CK_USER_TYPE(CKU_SO), &so, CK_ULONG(so.count))
                default: _ = PKCS11.C_Login(session, CK_USER_TYPE(program.ulong()), &user, CK_ULONG(user.count))
                }
            case 14:
                if program.byte() % 2 == 0 || opened.isEmpty {
                    var new: CK_SESSION_HANDLE = 0
                    let flags = program.pick([CK_FLAGS(CKF_SERIAL_SESSION), CK_FLAGS(CKF_SERIAL_SESSION | CKF_RW_SESSION), 0, CK_FLAGS(CKF_RW_SESSION)])
                    if PKCS11.C_OpenSession(state.slot, flags, nil, nil, &new) == CKR_OK { opened.append(new); sessions.append(new) }
                } else {
                    let index = Int(program.byte()) % opened.count
                    _ = PKCS11.C_CloseSession(opened[index])
                    sessions.removeAll { $0 == opened[index] }
                    opened.remove(at: index)
                }
            case 15:
                let size = program.byte() % 4 == 0 ? nil : arena.value(CK_ULONG(0))
                _ = PKCS11.C_GetObjectSize(session, handle(), size)
                var info = CK_SESSION_INFO()
                _ = PKCS11.C_GetSessionInfo(session, &info)
            case 16:
                var info = CK_MECHANISM_INFO()
                _ = PKCS11.C_GetMechanismInfo(state.slot, program.pick(mechanisms), &info)
                let length = Int(program.byte()) * 16
                _ = PKCS11.C_GenerateRandom(session, arena.zeroed(length).assumingMemoryBound(to: CK_BYTE.self), CK_ULONG(length))
            case 17:
                let (out, outLength) = output(&program, arena)
                _ = PKCS11.C_GetOperationState(session, out, outLength)
                let (input, inputLength) = data()
                _ = PKCS11.C_SetOperationState(session, input, inputLength, handle(), handle())
            case 18:
                _ = PKCS11.C_SessionCancel(session, program.ulong())
            default:
                let (input, inputLength) = data()
                _ = PKCS11.C_SeedRandom(session, input, inputLength)
            }
        }
        // Back to the starting state: the input's sessions closed (their objects go with them),
        // its token objects destroyed, the base session logged in as the user.
        for session in opened { _ = PKCS11.C_CloseSession(session) }
        var user = userPIN
        var info = CK_SESSION_INFO()
        if PKCS11.C_GetSessionInfo(state.session, &info) == CKR_OK, info.state != CK_STATE(CKS_RW_USER_FUNCTIONS) {
            _ = PKCS11.C_Logout(state.session)
            _ = PKCS11.C_Login(state.session, CK_USER_TYPE(CKU_USER), &user, CK_ULONG(user.count))
        }
        // Logged in again first: private token objects can only be destroyed by the user.
        for object in created { _ = PKCS11.C_DestroyObject(state.session, object) }
    }
}

#if FUZZING
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ bytes: UnsafePointer<UInt8>?, _ count: Int) -> CInt {
    ModuleFuzz.run(bytes.map { Array(UnsafeBufferPointer(start: $0, count: count)) } ?? [])
    return 0
}

/// The entry point SwiftPM links an executable target to.
@_cdecl("FuzzModule_main")
func fuzzerMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    FuzzHarness.runLibFuzzer(argc, argv, fuzzOne)
}
#else
@main
struct ReplayModule {
    static func main() {
        ModuleFuzz.base = ModuleFuzz.setUp()
        guard let base = ModuleFuzz.base else { exit(1) }
        let count = FuzzHarness.replay(CommandLine.arguments.dropFirst()) { ModuleFuzz.run($0) }
        _ = PKCS11.C_Finalize(nil)
        guard base.keys.count == 9 else {
            print("FuzzModule: \(base.keys.count) of the 9 base keys were made")
            exit(1)
        }
        print("FuzzModule: \(count) inputs replayed, no crash")
    }
}
#endif
