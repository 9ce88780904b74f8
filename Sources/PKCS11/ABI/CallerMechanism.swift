import CPKCS11
import KeychainCrypto

/// A caller's CK_MECHANISM, decoded at the boundary: its parameter structure — nested pointers
/// included — is read into owned Swift values (`MechanismParameter`) before any other code runs,
/// so nothing past this file reads the caller's parameter memory, and an operation finished
/// later (a key opened at C_Login by its application password) keeps its parameter as it was.
struct CallerMechanism: Sendable {
    let type: CK_MECHANISM_TYPE
    let parameter: MechanismParameter

    /// No mechanism parameter defined by PKCS#11 is anywhere near this size; nested buffers (an
    /// OAEP label, GCM additional data, ECDH shared data) are bounded alike.
    static let maximumParameterLength: CK_ULONG = 1 << 16

    init(_ pointer: UnsafeMutablePointer<CK_MECHANISM>?) throws(CKError) {
        guard let mechanism = pointer?.pointee else { throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "NULL mechanism") }
        guard mechanism.ulParameterLen <= Self.maximumParameterLength else {
            throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "mechanism parameter too long")
        }
        if mechanism.ulParameterLen > 0, mechanism.pParameter == nil {
            throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "mechanism parameter length without a pointer")
        }
        type = mechanism.mechanism
        let raw = UnsafeRawBufferPointer(start: mechanism.pParameter.map { UnsafeRawPointer($0) }, count: Int(mechanism.ulParameterLen))
        parameter = try Self.decode(type, raw)
    }

    /// For tests and internal callers: a mechanism with an already decoded parameter.
    init(type: CK_MECHANISM_TYPE, parameter: MechanismParameter) {
        self.type = type
        self.parameter = parameter
    }

    // MARK: decoding, by the structure each mechanism's parameter is

    private static func decode(_ type: CK_MECHANISM_TYPE, _ raw: UnsafeRawBufferPointer) throws(CKError) -> MechanismParameter {
        switch UInt(type) {
        case UInt(CKM_RSA_PKCS_PSS), UInt(CKM_SHA1_RSA_PKCS_PSS), UInt(CKM_SHA224_RSA_PKCS_PSS), UInt(CKM_SHA256_RSA_PKCS_PSS),
             UInt(CKM_SHA384_RSA_PKCS_PSS), UInt(CKM_SHA512_RSA_PKCS_PSS):
            let params = try read(CK_RSA_PKCS_PSS_PARAMS.self, raw)
            return .rsaPSS(hash: params.hashAlg, mgf: params.mgf, saltLength: params.sLen)
        case UInt(CKM_RSA_PKCS_OAEP):
            let params = try read(CK_RSA_PKCS_OAEP_PARAMS.self, raw)
            let label = params.source == CK_RSA_PKCS_OAEP_SOURCE_TYPE(CKZ_DATA_SPECIFIED)
                ? try bytes(params.pSourceData, params.ulSourceDataLen, what: "OAEP label") : []
            return .rsaOAEP(hash: params.hashAlg, mgf: params.mgf, source: params.source, sourceLength: params.ulSourceDataLen, label: label)
        case UInt(CKM_AES_GCM):
            return try gcm(raw)
        case UInt(CKM_AES_CTR):
            let params = try read(CK_AES_CTR_PARAMS.self, raw)
            return .counter(bits: params.ulCounterBits, block: withUnsafeBytes(of: params.cb) { Array($0) })
        case UInt(CKM_ECDH1_DERIVE):
            let params = try read(CK_ECDH1_DERIVE_PARAMS.self, raw)
            return .ecdh(kdf: params.kdf, sharedData: try bytes(params.pSharedData, params.ulSharedDataLen, what: "ECDH shared data"),
                         publicData: try bytes(params.pPublicData, params.ulPublicDataLen, what: "ECDH public data"))
        case 0x1057:  // CKM_EDDSA (PKCS#11 3.0)
            guard raw.count > 0 else { return .none }
            let params = try read(EdDSAParameters.self, raw)
            return .eddsa(prehash: params.prehash != 0, context: try bytes(params.context, params.contextLength, what: "EdDSA context"))
        case UInt(CKM_AES_ECB_ENCRYPT_DATA), UInt(CKM_DES3_ECB_ENCRYPT_DATA):
            let params = try read(CK_KEY_DERIVATION_STRING_DATA.self, raw)
            return .derivationData(iv: [], data: SecureBytes(try bytes(params.pData, params.ulLen, what: "data to encrypt")))
        case UInt(CKM_AES_CBC_ENCRYPT_DATA):
            let params = try read(CK_AES_CBC_ENCRYPT_DATA_PARAMS.self, raw)
            return .derivationData(iv: withUnsafeBytes(of: params.iv) { Array($0) },
                                   data: SecureBytes(try bytes(params.pData, params.length, what: "data to encrypt")))
        case UInt(CKM_DES3_CBC_ENCRYPT_DATA):
            let params = try read(CK_DES_CBC_ENCRYPT_DATA_PARAMS.self, raw)
            return .derivationData(iv: withUnsafeBytes(of: params.iv) { Array($0) },
                                   data: SecureBytes(try bytes(params.pData, params.length, what: "data to encrypt")))
        case UInt(CKM_AES_MAC_GENERAL), UInt(CKM_DES3_MAC_GENERAL):
            return .length(try read(CK_ULONG.self, raw))
        default:
            // Flat parameters: an IV, or the other party's public value (CKM_DH_PKCS_DERIVE).
            return raw.isEmpty ? .none : .bytes(Array(raw))
        }
    }

    /// CK_GCM_PARAMS as PKCS#11 3.0 and the 2.40 header define it (with ulIvBits), or the 2.40
    /// specification's text without ulIvBits, which Java's SunPKCS11 tries first.
    private static func gcm(_ raw: UnsafeRawBufferPointer) throws(CKError) -> MechanismParameter {
        if raw.count == MemoryLayout<GCMParametersWithoutIVBits>.size {
            let params = try read(GCMParametersWithoutIVBits.self, raw)
            return .gcm(iv: try bytes(params.iv, params.ivLength, what: "GCM IV"), additionalData: try bytes(params.aad, params.aadLength, what: "GCM AAD"),
                        tagBits: params.tagBits)
        }
        let params = try read(CK_GCM_PARAMS.self, raw)
        return .gcm(iv: try bytes(params.pIv, params.ulIvLen, what: "GCM IV"), additionalData: try bytes(params.pAAD, params.ulAADLen, what: "GCM AAD"),
                    tagBits: params.ulTagBits)
    }

    /// The parameter as a `T`, which must be exactly `MemoryLayout<T>.size` bytes.
    private static func read<T>(_ type: T.Type, _ raw: UnsafeRawBufferPointer) throws(CKError) -> T {
        guard let base = raw.baseAddress, raw.count == MemoryLayout<T>.size else {
            throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "the mechanism parameter must be a \(T.self) (\(MemoryLayout<T>.size) bytes)")
        }
        return base.loadUnaligned(as: T.self)
    }

    /// Bytes a parameter structure points to, bounded like the parameter itself.
    private static func bytes(_ pointer: UnsafeMutableRawPointer?, _ length: CK_ULONG, what: String) throws(CKError) -> [UInt8] {
        guard length > 0 else { return [] }
        guard let pointer, length <= maximumParameterLength else { throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "bad \(what)") }
        return Array(UnsafeRawBufferPointer(start: pointer, count: Int(length)))
    }

    private static func bytes(_ pointer: UnsafeMutablePointer<CK_BYTE>?, _ length: CK_ULONG, what: String) throws(CKError) -> [UInt8] {
        try bytes(pointer.map { UnsafeMutableRawPointer($0) }, length, what: what)
    }
}

/// A mechanism parameter as owned values: what the structure of each mechanism held.
enum MechanismParameter: Sendable {
    case none
    /// A flat parameter: an IV, or CKM_DH_PKCS_DERIVE's public value.
    case bytes([UInt8])
    /// CK_MAC_GENERAL_PARAMS.
    case length(CK_ULONG)
    /// CK_RSA_PKCS_PSS_PARAMS.
    case rsaPSS(hash: CK_MECHANISM_TYPE, mgf: CK_RSA_PKCS_MGF_TYPE, saltLength: CK_ULONG)
    /// CK_RSA_PKCS_OAEP_PARAMS; `label` read when the source is CKZ_DATA_SPECIFIED.
    case rsaOAEP(hash: CK_MECHANISM_TYPE, mgf: CK_RSA_PKCS_MGF_TYPE, source: CK_RSA_PKCS_OAEP_SOURCE_TYPE, sourceLength: CK_ULONG, label: [UInt8])
    /// CK_GCM_PARAMS.
    case gcm(iv: [UInt8], additionalData: [UInt8], tagBits: CK_ULONG)
    /// CK_AES_CTR_PARAMS.
    case counter(bits: CK_ULONG, block: [UInt8])
    /// CK_ECDH1_DERIVE_PARAMS.
    case ecdh(kdf: CK_ULONG, sharedData: [UInt8], publicData: [UInt8])
    /// CK_EDDSA_PARAMS.
    case eddsa(prehash: Bool, context: [UInt8])
    /// CK_KEY_DERIVATION_STRING_DATA (no IV) and the CBC encrypt-data parameters.
    case derivationData(iv: [UInt8], data: SecureBytes)

    var isEmpty: Bool {
        switch self {
        case .none: return true
        case .bytes(let bytes): return bytes.isEmpty
        default: return false
        }
    }

    func requireEmpty() throws(CKError) {
        guard isEmpty else { throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "this mechanism takes no parameter") }
    }

    /// A flat parameter of exactly `count` bytes (an IV).
    func flatBytes(count: Int, what: String) throws(CKError) -> [UInt8] {
        guard case .bytes(let bytes) = self, bytes.count == count else {
            throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "the \(what) must have \(count) bytes")
        }
        return bytes
    }
}

/// CK_EDDSA_PARAMS (PKCS#11 3.0), which the 2.40 header lacks: CK_BBOOL, CK_ULONG, CK_BYTE_PTR.
struct EdDSAParameters {
    var prehash: CK_BBOOL
    var contextLength: CK_ULONG
    var context: UnsafeMutablePointer<CK_BYTE>?
}

/// CK_GCM_PARAMS as the PKCS#11 2.40 specification's text gives it, without ulIvBits.
struct GCMParametersWithoutIVBits {
    var iv: UnsafeMutablePointer<CK_BYTE>?
    var ivLength: CK_ULONG
    var aad: UnsafeMutablePointer<CK_BYTE>?
    var aadLength: CK_ULONG
    var tagBits: CK_ULONG
}
