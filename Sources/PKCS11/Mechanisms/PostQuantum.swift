import CPKCS11
import KeychainCore
import KeychainCrypto

/// ML-DSA signing and verifying (PKCS#11 3.2 §6.67.5, CKM_ML_DSA): the message is collected
/// (C_SignUpdate parts included) and signed or verified whole, since the library's API takes the
/// whole message.
final class LatticeSigner {
    let key: LatticeKey
    let context: [UInt8]
    private var message: [UInt8] = []

    init(key: LatticeKey, context: [UInt8]) {
        self.key = key
        self.context = context
    }

    var signatureLength: Int { key.parameterSet.signatureLength }

    func update(_ data: UnsafeRawBufferPointer) throws(CKError) {
        guard data.count <= Int.max - message.count else { throw CKError(CK_RV(CKR_DATA_LEN_RANGE), "message too long") }
        message.append(contentsOf: data)
    }

    func sign() throws(CKError) -> [UInt8] {
        do {
            return try message.withUnsafeBytes { bytes in try key.sign(bytes, context: context) }
        } catch let error as CryptoError {
            throw CKError(CK_RV(error.code == .invalidInput ? CKR_KEY_TYPE_INCONSISTENT : CKR_DEVICE_ERROR), error.reason)
        } catch {
            throw CKError(CK_RV(CKR_DEVICE_ERROR), "\(error)")
        }
    }

    func verify(_ signature: [UInt8]) throws(CKError) -> Bool {
        do {
            return try message.withUnsafeBytes { bytes in try key.verify(signature, message: bytes, context: context) }
        } catch let error as CryptoError {
            throw CKError(CK_RV(CKR_KEY_TYPE_INCONSISTENT), error.reason)
        } catch {
            throw CKError(CK_RV(CKR_DEVICE_ERROR), "\(error)")
        }
    }
}

extension Mechanisms {
    /// ML-DSA and ML-KEM (PKCS#11 3.2 §6.67, §6.68). The key sizes are, as the text says, the
    /// range of the offered sets' public keys in bytes (the parameter set chooses the key).
    static func addLattice(_ table: inout [CK_MECHANISM_TYPE: Mechanism]) {
        let dsa = LatticeParameterSet.allCases.filter { $0.isSignature && $0.isOffered }.map(\.publicKeyLength)
        let kem = LatticeParameterSet.allCases.filter { !$0.isSignature && $0.isOffered }.map(\.publicKeyLength)
        let (dsaMin, dsaMax) = (dsa.min() ?? 0, dsa.max() ?? 0), (kemMin, kemMax) = (kem.min() ?? 0, kem.max() ?? 0)
        table.add(UInt(CKM_ML_DSA_KEY_PAIR_GEN), dsaMin, dsaMax, UInt(CKF_GENERATE_KEY_PAIR)) { $0.generates = .mlDSA }
        table.add(UInt(CKM_ML_DSA), dsaMin, dsaMax, UInt(CKF_SIGN | CKF_VERIFY)) {
            $0.keyTypes = [.mlDSA]
            $0.signsWithLattice = true
        }
        table.add(UInt(CKM_ML_KEM_KEY_PAIR_GEN), kemMin, kemMax, UInt(CKF_GENERATE_KEY_PAIR)) { $0.generates = .mlKEM }
        table.add(UInt(CKM_ML_KEM), kemMin, kemMax, UInt(CKF_ENCAPSULATE | CKF_DECAPSULATE)) {
            $0.keyTypes = [.mlKEM]
            $0.encapsulates = true
        }
    }

    /// CKM_ML_DSA's context: none given is hedged signing with an empty context;
    /// CK_SIGN_ADDITIONAL_CONTEXT may ask for hedging (preferred or required: this module always
    /// hedges) and give up to 255 bytes of context. Deterministic signing is not in the library's
    /// API: CKH_DETERMINISTIC_REQUIRED is CKR_MECHANISM_PARAM_INVALID, never a hedged signature.
    static func mlDSAContext(_ parameter: MechanismParameter) throws(CKError) -> [UInt8] {
        switch parameter {
        case .none:
            return []
        case .signContext(let hedge, let context):
            switch hedge {
            case CK_ULONG(CKH_HEDGE_PREFERRED), CK_ULONG(CKH_HEDGE_REQUIRED): break
            case CK_ULONG(CKH_DETERMINISTIC_REQUIRED): throw paramInvalid("deterministic ML-DSA signing is not offered (the library signs hedged only)")
            default: throw paramInvalid("unknown hedgeVariant \(hedge)")
            }
            guard context.count <= 255 else { throw paramInvalid("an ML-DSA context has at most 255 bytes, not \(context.count)") }
            return context
        default:
            throw paramInvalid("CKM_ML_DSA takes CK_SIGN_ADDITIONAL_CONTEXT or nothing")
        }
    }
}

extension ModuleState {
    /// C_SignInit / C_VerifyInit with CKM_ML_DSA.
    func latticeSignatureOperation(_ mechanism: CallerMechanism, entry: Mechanism, key handle: CK_OBJECT_HANDLE, signing: Bool, session: Session,
                                   token: Token) throws(CKError) -> ActiveOperation {
        let context = try Mechanisms.mlDSAContext(mechanism.parameter)
        let key = try latticeKey(handle, session: session, token: token, objectClass: signing ? .privateKey : .publicKey,
                                 usage: signing ? .sign : .verify, mechanism: entry)
        guard key.parameterSet.isSignature else { throw CKError(CK_RV(CKR_KEY_TYPE_INCONSISTENT), "not an ML-DSA key") }
        let signer = LatticeSigner(key: key, context: context)
        let active = ActiveOperation(engine: .lattice(signer), outputLength: signer.signatureLength)
        if signing { active.alwaysAuthenticate = try alwaysAuthenticates(handle, session: session, token: token) }
        return active
    }

    /// C_GenerateKeyPair with CKM_ML_DSA_KEY_PAIR_GEN or CKM_ML_KEM_KEY_PAIR_GEN.
    func latticeKeyPair(_ keyType: KeyType, mechanism: CallerMechanism, publicTemplate: Template, privateTemplate: Template, token: Token,
                        uniqueIDs: (public: [UInt8], private: [UInt8])) throws(CKError) -> (publicKey: ObjectAttributes, privateKey: ObjectAttributes) {
        let set = try translating { () throws(KeychainError) in
            try KeyGeneration.latticeRequest(keyType: keyType, publicTemplate: publicTemplate, privateTemplate: privateTemplate)
        }
        let key: LatticeKey
        do throws(CryptoError) { key = try LatticeKey.generate(set) } catch { throw CKError(CK_RV(CKR_DEVICE_ERROR), "key generation failed: \(error.reason)") }
        return try translating { () throws(KeychainError) in
            try KeyGeneration.latticeObjects(for: key, keyType: keyType, mechanism: UInt(mechanism.type), publicTemplate: publicTemplate,
                                             privateTemplate: privateTemplate, uniqueIDs: uniqueIDs, bySecurityOfficer: token.login == .securityOfficer)
        }
    }
}
