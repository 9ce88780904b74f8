import CPKCS11

/// PKCS#11 3.2 §5.6 C_GetSessionValidationFlags and §4.16.3.1 (validation indicators).
extension ModuleState {
    /// The session's validation flags of `type`. The module has no validation (no FIPS or
    /// Common Criteria indicators, no CKO_VALIDATION objects), so no operation is ever reported
    /// as meeting one: every type reads 0 — CKS_LAST_VALIDATION_OK, the one type the
    /// specification defines, and any other (the function's return values include no code for
    /// an unknown type; Kryoptic and pkcs11-check's checks answer CKR_OK with no flags too).
    func sessionValidationFlags(_ handle: CK_SESSION_HANDLE, type: CK_SESSION_VALIDATION_FLAGS_TYPE) throws(CKError) -> CK_FLAGS {
        _ = try session(handle)
        return 0
    }
}
