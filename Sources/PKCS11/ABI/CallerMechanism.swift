import CPKCS11
import KeychainCore
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
             UInt(CKM_SHA384_RSA_PKCS_PSS), UInt(CKM_SHA512_RSA_PKCS_PSS),
             UInt(CKM_SHA3_224_RSA_PKCS_PSS), UInt(CKM_SHA3_256_RSA_PKCS_PSS), UInt(CKM_SHA3_384_RSA_PKCS_PSS), UInt(CKM_SHA3_512_RSA_PKCS_PSS):
            let params = try read(CK_RSA_PKCS_PSS_PARAMS.self, raw)
            return .rsaPSS(hash: params.hashAlg, mgf: params.mgf, saltLength: params.sLen)
        case UInt(CKM_RSA_PKCS_OAEP):
            return try oaep(try read(CK_RSA_PKCS_OAEP_PARAMS.self, raw))
        case UInt(CKM_RSA_AES_KEY_WRAP):
            let params = try read(CK_RSA_AES_KEY_WRAP_PARAMS.self, raw)
            guard let oaepParams = params.pOAEPParams else { throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "CKM_RSA_AES_KEY_WRAP needs pOAEPParams") }
            return .rsaAESKeyWrap(aesKeyBits: params.ulAESKeyBits, oaep: try oaep(oaepParams.pointee))
        case UInt(CKM_AES_GCM):
            return try gcm(raw)
        case UInt(CKM_AES_CTR):
            let params = try read(CK_AES_CTR_PARAMS.self, raw)
            return .counter(bits: params.ulCounterBits, block: withUnsafeBytes(of: params.cb) { Array($0) })
        case UInt(CKM_ECDH1_DERIVE), UInt(CKM_ECDH1_COFACTOR_DERIVE):
            let params = try read(CK_ECDH1_DERIVE_PARAMS.self, raw)
            return .ecdh(kdf: params.kdf, sharedData: try bytes(params.pSharedData, params.ulSharedDataLen, what: "ECDH shared data"),
                         publicData: try bytes(params.pPublicData, params.ulPublicDataLen, what: "ECDH public data"))
        case UInt(CKM_ML_DSA):
            // CK_SIGN_ADDITIONAL_CONTEXT, or nothing (hedged, empty context).
            guard raw.count > 0 else { return .none }
            let params = try read(CK_SIGN_ADDITIONAL_CONTEXT.self, raw)
            return .signContext(hedge: params.hedgeVariant, context: try bytes(params.pContext, params.ulContextLen, what: "ML-DSA context"))
        case UInt(CKM_EDDSA):
            guard raw.count > 0 else { return .none }
            let params = try read(CK_EDDSA_PARAMS.self, raw)
            return .eddsa(prehash: params.phFlag != 0, context: try bytes(params.pContextData, params.ulContextDataLen, what: "EdDSA context"))
        case UInt(CKM_AES_ECB_ENCRYPT_DATA), UInt(CKM_DES3_ECB_ENCRYPT_DATA):
            let params = try read(CK_KEY_DERIVATION_STRING_DATA.self, raw)
            return .derivationData(iv: [], data: SecureBytes(try bytes(params.pData, params.ulLen, what: "data to encrypt")))
        case UInt(CKM_CONCATENATE_BASE_AND_DATA), UInt(CKM_CONCATENATE_DATA_AND_BASE), UInt(CKM_XOR_BASE_AND_DATA):
            let params = try read(CK_KEY_DERIVATION_STRING_DATA.self, raw)
            return .derivationData(iv: [], data: SecureBytes(try bytes(params.pData, params.ulLen, what: "derivation data")))
        case UInt(CKM_CONCATENATE_BASE_AND_KEY):
            return .keyHandle(try read(CK_OBJECT_HANDLE.self, raw))
        case UInt(CKM_EXTRACT_KEY_FROM_KEY):
            return .bitIndex(try read(CK_ULONG.self, raw))  // CK_EXTRACT_PARAMS
        case UInt(CKM_AES_CBC_ENCRYPT_DATA):
            let params = try read(CK_AES_CBC_ENCRYPT_DATA_PARAMS.self, raw)
            return .derivationData(iv: withUnsafeBytes(of: params.iv) { Array($0) },
                                   data: SecureBytes(try bytes(params.pData, params.length, what: "data to encrypt")))
        case UInt(CKM_DES3_CBC_ENCRYPT_DATA):
            let params = try read(CK_DES_CBC_ENCRYPT_DATA_PARAMS.self, raw)
            return .derivationData(iv: withUnsafeBytes(of: params.iv) { Array($0) },
                                   data: SecureBytes(try bytes(params.pData, params.length, what: "data to encrypt")))
        case UInt(CKM_AES_MAC_GENERAL), UInt(CKM_DES3_MAC_GENERAL), UInt(CKM_AES_CMAC_GENERAL), UInt(CKM_SHA_1_HMAC_GENERAL),
             UInt(CKM_SHA224_HMAC_GENERAL), UInt(CKM_SHA256_HMAC_GENERAL), UInt(CKM_SHA384_HMAC_GENERAL), UInt(CKM_SHA512_HMAC_GENERAL),
             UInt(CKM_MD5_HMAC_GENERAL), UInt(CKM_SHA3_224_HMAC_GENERAL), UInt(CKM_SHA3_256_HMAC_GENERAL), UInt(CKM_SHA3_384_HMAC_GENERAL),
             UInt(CKM_SHA3_512_HMAC_GENERAL):
            return .length(try read(CK_ULONG.self, raw))
        case UInt(CKM_HKDF_DERIVE), UInt(CKM_HKDF_DATA):
            let params = try read(CK_HKDF_PARAMS.self, raw)
            guard params.bExtract <= 1, params.bExpand <= 1 else { throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "CK_BBOOL fields must be 0 or 1") }
            // Only the fields the chosen steps use are read (the others may hold anything).
            let readsSalt = params.bExtract == 1 && params.ulSaltType == CKF_HKDF_SALT_DATA
            return .hkdf(extract: params.bExtract == 1, expand: params.bExpand == 1, prf: params.prfHashMechanism, saltType: params.ulSaltType,
                         salt: readsSalt ? try bytes(params.pSalt, params.ulSaltLen, what: "HKDF salt") : [], saltKey: params.hSaltKey,
                         info: params.bExpand == 1 ? try bytes(params.pInfo, params.ulInfoLen, what: "HKDF info") : [])
        case UInt(CKM_PKCS5_PBKD2):
            return try pbkdf2(raw)
        case UInt(CKM_SP800_108_COUNTER_KDF), UInt(CKM_SP800_108_DOUBLE_PIPELINE_KDF):
            let params = try read(CK_SP800_108_KDF_PARAMS.self, raw)
            return .sp800108(prf: params.prfType, fields: try sp800108Fields(params.pDataParams, count: params.ulNumberOfDataParams), iv: [],
                             additionalKeys: try additionalKeys(params.pAdditionalDerivedKeys, count: params.ulAdditionalDerivedKeys))
        case UInt(CKM_SP800_108_FEEDBACK_KDF):
            let params = try read(CK_SP800_108_FEEDBACK_KDF_PARAMS.self, raw)
            return .sp800108(prf: params.prfType, fields: try sp800108Fields(params.pDataParams, count: params.ulNumberOfDataParams),
                             iv: try bytes(params.pIV, params.ulIVLen, what: "SP 800-108 IV"),
                             additionalKeys: try additionalKeys(params.pAdditionalDerivedKeys, count: params.ulAdditionalDerivedKeys))
        case UInt(CKM_AES_CCM):
            let params = try read(CK_CCM_PARAMS.self, raw)
            return .ccm(dataLength: params.ulDataLen, nonce: try bytes(params.pNonce, params.ulNonceLen, what: "CCM nonce"),
                        additionalData: try bytes(params.pAAD, params.ulAADLen, what: "CCM AAD"), macLength: params.ulMACLen)
        case UInt(CKM_CHACHA20):
            let params = try read(CK_CHACHA20_PARAMS.self, raw)
            guard params.blockCounterBits == 32 || params.blockCounterBits == 64, params.ulNonceBits == 96 || params.ulNonceBits == 64 else {
                throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "ChaCha20 takes a 32-bit counter and a 96-bit nonce, or 64 and 64")
            }
            return .chacha20(counter: try bytes(params.pBlockCounter, params.blockCounterBits / 8, what: "ChaCha20 block counter"),
                             nonce: try bytes(params.pNonce, params.ulNonceBits / 8, what: "ChaCha20 nonce"))
        case UInt(CKM_CHACHA20_POLY1305):
            let params = try read(CK_SALSA20_CHACHA20_POLY1305_PARAMS.self, raw)
            // ulNonceLen: "in bits" says the 3.0 text (96, 64), in bytes say NSS, Kryoptic and the
            // name (12, 8); neither reading of one is a valid length in the other, so both are taken.
            // Checked before pNonce is read: any other length could run past the caller's buffer.
            guard [8, 12, 64, 96].contains(params.ulNonceLen) else {
                throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "the ChaCha20-Poly1305 nonce must have 12 or 8 bytes (96 or 64 bits)")
            }
            let nonceBytes = params.ulNonceLen == 96 || params.ulNonceLen == 64 ? params.ulNonceLen / 8 : params.ulNonceLen
            return .aead(nonce: try bytes(params.pNonce, nonceBytes, what: "ChaCha20-Poly1305 nonce"),
                         additionalData: try bytes(params.pAAD, params.ulAADLen, what: "ChaCha20-Poly1305 AAD"))
        default:
            // Flat parameters: an IV, or the other party's public value (CKM_DH_PKCS_DERIVE).
            return raw.isEmpty ? .none : .bytes(Array(raw))
        }
    }

    /// CK_GCM_PARAMS as PKCS#11 3.0 and the 2.40 header define it (with ulIvBits), or the 2.40
    /// specification's text without ulIvBits, which Java's SunPKCS11 tries first.
    private static func gcm(_ raw: UnsafeRawBufferPointer) throws(CKError) -> MechanismParameter {
        if raw.count == MemoryLayout<KC_GCM_PARAMS_WITHOUT_IV_BITS>.size {
            let params = try read(KC_GCM_PARAMS_WITHOUT_IV_BITS.self, raw)
            return .gcm(iv: try bytes(params.pIv, params.ulIvLen, what: "GCM IV"), additionalData: try bytes(params.pAAD, params.ulAADLen, what: "GCM AAD"),
                        tagBits: params.ulTagBits)
        }
        let params = try read(CK_GCM_PARAMS.self, raw)
        return .gcm(iv: try bytes(params.pIv, params.ulIvLen, what: "GCM IV"), additionalData: try bytes(params.pAAD, params.ulAADLen, what: "GCM AAD"),
                    tagBits: params.ulTagBits)
    }

    /// CK_PKCS5_PBKD2_PARAMS2 (3.0: ulPasswordLen is the length) or CK_PKCS5_PBKD2_PARAMS (2.40:
    /// a pointer to it) — the same size. A value up to 64 KiB is a length; an 8-aligned value
    /// from 2^32 up is the pointer a 2.40 caller (NSS) gives (x86-64 Linux maps no user data
    /// below 4 GiB for a 64-bit process's heap and stacks; a 2.40 caller's CK_ULONG is on one of
    /// them); anything between is refused rather than guessed at.
    private static func pbkdf2(_ raw: UnsafeRawBufferPointer) throws(CKError) -> MechanismParameter {
        let params = try read(CK_PKCS5_PBKD2_PARAMS2.self, raw)
        var passwordLength = params.ulPasswordLen
        if passwordLength > maximumParameterLength {
            guard passwordLength >= 1 << 32, passwordLength % 8 == 0,
                  let pointer = UnsafeRawPointer(bitPattern: UInt(passwordLength)) else {
                throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "bad PBKDF2 password length")
            }
            passwordLength = pointer.loadUnaligned(as: CK_ULONG.self)
        }
        guard passwordLength <= maximumParameterLength, passwordLength == 0 || params.pPassword != nil else {
            throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "bad PBKDF2 password")
        }
        let password = SecureBytes(count: Int(passwordLength))
        if passwordLength > 0, let source = params.pPassword {
            password.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(start: source, count: Int(passwordLength))) }
        }
        guard params.ulPrfDataLen == 0 else { throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "PBKDF2 PRF data must be empty") }
        return .pbkdf2(saltSource: params.saltSource, salt: try bytes(params.pSaltSourceData, params.ulSaltSourceDataLen, what: "PBKDF2 salt"),
                       iterations: params.iterations, prf: params.prf, password: password)
    }

    private static func oaep(_ params: CK_RSA_PKCS_OAEP_PARAMS) throws(CKError) -> MechanismParameter {
        let label = params.source == CK_RSA_PKCS_OAEP_SOURCE_TYPE(CKZ_DATA_SPECIFIED)
            ? try bytes(params.pSourceData, params.ulSourceDataLen, what: "OAEP label") : []
        return .rsaOAEP(hash: params.hashAlg, mgf: params.mgf, source: params.source, sourceLength: params.ulSourceDataLen, label: label)
    }

    /// The most data parameters and additional keys an SP 800-108 parameter may list.
    static let maximumListCount: CK_ULONG = 64

    /// CK_PRF_DATA_PARAM[]: byte arrays, the iteration variable and the optional counter (with
    /// CK_SP800_108_COUNTER_FORMAT, or none), the DKM length (CK_SP800_108_DKM_LENGTH_FORMAT).
    private static func sp800108Fields(_ pointer: UnsafeMutablePointer<CK_PRF_DATA_PARAM>?, count: CK_ULONG) throws(CKError) -> [SP800108.Field] {
        guard count > 0, count <= maximumListCount, let pointer else {
            throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "SP 800-108 needs 1 to \(maximumListCount) data parameters")
        }
        var fields: [SP800108.Field] = []
        for index in 0..<Int(count) {
            let entry = UnsafeRawPointer(pointer).loadUnaligned(fromByteOffset: index * MemoryLayout<CK_PRF_DATA_PARAM>.stride, as: CK_PRF_DATA_PARAM.self)
            let value = UnsafeRawBufferPointer(start: entry.pValue.map { UnsafeRawPointer($0) }, count: entry.pValue == nil ? 0 : Int(min(entry.ulValueLen, maximumParameterLength)))
            guard entry.ulValueLen <= maximumParameterLength, entry.ulValueLen == 0 || entry.pValue != nil else {
                throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "bad SP 800-108 data parameter")
            }
            switch entry.type {
            case CK_SP800_108_ITERATION_VARIABLE, CK_SP800_108_OPTIONAL_COUNTER:
                var format: SP800108.IntegerFormat?
                if entry.ulValueLen > 0 {
                    let counter = try read(CK_SP800_108_COUNTER_FORMAT.self, value)
                    guard counter.bLittleEndian <= 1, [8, 16, 24, 32].contains(counter.ulWidthInBits) else {
                        throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "an SP 800-108 counter is 8, 16, 24 or 32 bits")
                    }
                    format = SP800108.IntegerFormat(bits: Int(counter.ulWidthInBits), littleEndian: counter.bLittleEndian == 1)
                }
                if entry.type == CK_SP800_108_ITERATION_VARIABLE {
                    fields.append(.iteration(format))
                } else {
                    guard let format else { throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "the optional counter needs its format") }
                    fields.append(.counter(format))
                }
            case CK_SP800_108_DKM_LENGTH:
                let length = try read(CK_SP800_108_DKM_LENGTH_FORMAT.self, value)
                let methods = [CK_SP800_108_DKM_LENGTH_SUM_OF_KEYS, CK_SP800_108_DKM_LENGTH_SUM_OF_SEGMENTS]
                guard length.bLittleEndian <= 1, length.ulWidthInBits % 8 == 0, (8...64).contains(length.ulWidthInBits), methods.contains(length.dkmLengthMethod) else {
                    throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "bad SP 800-108 DKM length format")
                }
                fields.append(.length(length.dkmLengthMethod == CK_SP800_108_DKM_LENGTH_SUM_OF_KEYS ? .sumOfKeys : .sumOfSegments,
                                      SP800108.IntegerFormat(bits: Int(length.ulWidthInBits), littleEndian: length.bLittleEndian == 1)))
            case CK_SP800_108_BYTE_ARRAY:
                guard entry.ulValueLen > 0 else { throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "an SP 800-108 byte array cannot be empty") }
                fields.append(.bytes(Array(value)))
            default:
                throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "unknown SP 800-108 data parameter type \(entry.type)")
            }
        }
        return fields
    }

    /// CK_DERIVED_KEY[]: each additional key's template, read now, and where its handle goes.
    private static func additionalKeys(_ pointer: UnsafeMutablePointer<CK_DERIVED_KEY>?, count: CK_ULONG) throws(CKError) -> [AdditionalDerivedKey] {
        guard count > 0 else { return [] }
        guard count <= maximumListCount, let pointer else { throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "bad additional derived keys") }
        var keys: [AdditionalDerivedKey] = []
        for index in 0..<Int(count) {
            let entry = UnsafeRawPointer(pointer).loadUnaligned(fromByteOffset: index * MemoryLayout<CK_DERIVED_KEY>.stride, as: CK_DERIVED_KEY.self)
            guard let handle = entry.phKey else { throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "an additional derived key needs phKey") }
            keys.append(AdditionalDerivedKey(template: try CallerTemplate.read(entry.pTemplate, count: entry.ulAttributeCount),
                                             handleAddress: UInt(bitPattern: handle)))
        }
        return keys
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
    /// CK_RSA_AES_KEY_WRAP_PARAMS: the one-time AES key's size and the OAEP parameters (`.rsaOAEP`).
    indirect case rsaAESKeyWrap(aesKeyBits: CK_ULONG, oaep: MechanismParameter)
    /// CK_GCM_PARAMS.
    case gcm(iv: [UInt8], additionalData: [UInt8], tagBits: CK_ULONG)
    /// CK_AES_CTR_PARAMS.
    case counter(bits: CK_ULONG, block: [UInt8])
    /// CK_ECDH1_DERIVE_PARAMS.
    case ecdh(kdf: CK_ULONG, sharedData: [UInt8], publicData: [UInt8])
    /// CK_EDDSA_PARAMS.
    case eddsa(prehash: Bool, context: [UInt8])
    /// CK_SIGN_ADDITIONAL_CONTEXT (3.2): CKH_* hedging and a context of up to 255 bytes.
    case signContext(hedge: CK_ULONG, context: [UInt8])
    /// CK_HKDF_PARAMS.
    case hkdf(extract: Bool, expand: Bool, prf: CK_MECHANISM_TYPE, saltType: CK_ULONG, salt: [UInt8], saltKey: CK_OBJECT_HANDLE, info: [UInt8])
    /// CK_PKCS5_PBKD2_PARAMS2 (or the 2.40 form).
    case pbkdf2(saltSource: CK_ULONG, salt: [UInt8], iterations: CK_ULONG, prf: CK_ULONG, password: SecureBytes)
    /// CK_SP800_108_KDF_PARAMS and CK_SP800_108_FEEDBACK_KDF_PARAMS (`iv` empty for the former).
    case sp800108(prf: CK_MECHANISM_TYPE, fields: [SP800108.Field], iv: [UInt8], additionalKeys: [AdditionalDerivedKey])
    /// CK_CCM_PARAMS.
    case ccm(dataLength: CK_ULONG, nonce: [UInt8], additionalData: [UInt8], macLength: CK_ULONG)
    /// CK_CHACHA20_PARAMS: the block counter's bytes (4 or 8, as the ChaCha20 state holds them,
    /// little-endian) and the nonce (12 or 8 bytes).
    case chacha20(counter: [UInt8], nonce: [UInt8])
    /// CK_SALSA20_CHACHA20_POLY1305_PARAMS.
    case aead(nonce: [UInt8], additionalData: [UInt8])
    /// CK_KEY_DERIVATION_STRING_DATA (no IV) and the CBC encrypt-data parameters.
    case derivationData(iv: [UInt8], data: SecureBytes)
    /// CKM_CONCATENATE_BASE_AND_KEY's other key.
    case keyHandle(CK_OBJECT_HANDLE)
    /// CK_EXTRACT_PARAMS: the base key's bit that becomes the new key's first.
    case bitIndex(CK_ULONG)

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

/// An SP 800-108 additional key: its template, and the caller's CK_OBJECT_HANDLE to fill (an
/// address, written by C_DeriveKey's export once every key is stored).
struct AdditionalDerivedKey: Sendable {
    let template: Template
    let handleAddress: UInt
}
