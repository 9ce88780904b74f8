import CPKCS11

/// A caller's CK_MECHANISM, read once with its parameter bounds checked.
struct CallerMechanism {
    let type: CK_MECHANISM_TYPE
    let parameter: MechanismParameter

    /// No mechanism parameter defined by PKCS#11 is anywhere near this size.
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
        parameter = MechanismParameter(pointer: mechanism.pParameter.map { UnsafeRawPointer($0) }, length: Int(mechanism.ulParameterLen))
    }

    private init(type: CK_MECHANISM_TYPE, parameter: MechanismParameter) {
        self.type = type
        self.parameter = parameter
    }

    /// A copy that stays valid after the call returns, for an operation finished later (a key
    /// opened by its application password at C_Login). Only flat parameters can be kept: those
    /// that point to more caller memory (an OAEP label, an EdDSA context) are refused.
    func ownedCopy() throws(CKError) -> CallerMechanism {
        if type == CK_MECHANISM_TYPE(CKM_EDDSA), !parameter.isEmpty {
            throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "EdDSA parameters with a key that waits for its application password")
        }
        if type == CK_MECHANISM_TYPE(CKM_RSA_PKCS_OAEP), try parameter.read(CK_RSA_PKCS_OAEP_PARAMS.self).ulSourceDataLen != 0 {
            throw CKError(CK_RV(CKR_MECHANISM_PARAM_INVALID), "an OAEP label with a key that waits for its application password")
        }
        guard let pointer = parameter.pointer, parameter.length > 0 else { return self }
        let owned = OwnedBytes(copying: UnsafeRawBufferPointer(start: pointer, count: parameter.length))
        return CallerMechanism(type: type, parameter: MechanismParameter(pointer: UnsafeRawPointer(owned.buffer.baseAddress), length: parameter.length, owner: owned))
    }
}
