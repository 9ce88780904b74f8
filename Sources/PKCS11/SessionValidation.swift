import CPKCS11

/// PKCS#11 3.2 §5.6 C_GetSessionValidationFlags and §4.16.3.1 (validation indicators).
extension ModuleState {
    /// The session's validation flags of `type`. The module has no validation (no FIPS or
    /// Common Criteria indicators, no CKO_VALIDATION objects), so no operation is ever reported
    /// as meeting one: CKS_LAST_VALIDATION_OK, the one type the specification defines, reads 0.
    /// Another type is CKR_ARGUMENTS_BAD.
    func sessionValidationFlags(_ handle: CK_SESSION_HANDLE, type: CK_SESSION_VALIDATION_FLAGS_TYPE) throws(CKError) -> CK_FLAGS {
        _ = try session(handle)
        guard type == CK_SESSION_VALIDATION_FLAGS_TYPE(CKS_LAST_VALIDATION_OK) else {
            throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "no session validation flags of type 0x\(String(type, radix: 16))")
        }
        return 0
    }
}
