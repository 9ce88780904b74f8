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
}
