import CPKCS11

/// PKCS#11 3.2 §5.15: verification with the signature given first, at C_VerifySignatureInit;
/// C_VerifySignature, or C_VerifySignatureUpdate then C_VerifySignatureFinal, bring the data.
///
/// It is the session's verification operation (the specification names both kinds so, and
/// CKF_VERIFY covers both), one at a time: C_VerifyInit while one begun by C_VerifySignatureInit
/// is active is CKR_OPERATION_ACTIVE and the other way round; a NULL mechanism to either Init, or
/// C_SessionCancel(CKF_VERIFY), ends whichever is active. A data call of one family on an
/// operation the other family began (C_Verify after C_VerifySignatureInit, C_VerifySignature
/// after C_VerifyInit) finds no operation of its kind: CKR_OPERATION_NOT_INITIALIZED, and that
/// operation stays as it was. The data steps are C_Verify's (`verify`, `update`, `step`), with
/// the signature kept on the operation (`ActiveOperation.expectedSignature`).
extension ModuleState {
    /// C_VerifySignatureInit: as C_VerifyInit, keeping the signature. A signature of the wrong
    /// length is CKR_SIGNATURE_LEN_RANGE here, and then no operation is active (§5.15 allows it).
    func verifySignatureInit(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism, key: CK_OBJECT_HANDLE,
                             signature: UnsafeRawBufferPointer) throws(CKError) {
        try verifyInit(handle, mechanism: mechanism, key: key)
        let session = try session(handle)
        guard let operation = session.operations[.verify] else {
            throw CKError(CK_RV(CKR_GENERAL_ERROR), "the verification did not start")
        }
        // An operation waiting for its key's credential does not know its length yet: the final
        // step checks it.
        if operation.pending == nil, signature.count != operation.outputLength {
            session.operations[.verify] = nil
            throw CKError(CK_RV(CKR_SIGNATURE_LEN_RANGE), "a signature has \(operation.outputLength) bytes")
        }
        operation.expectedSignature = Array(signature)
    }

    /// C_VerifySignature (with data) and C_VerifySignatureFinal (data == nil): C_Verify's and
    /// C_VerifyFinal's step with the signature given at init.
    func verifySignature(_ handle: CK_SESSION_HANDLE, data: UnsafeRawBufferPointer?) throws(CKError) {
        let expected = try session(handle).operations[.verify]?.expectedSignature ?? []
        // The outcome is carried out of the untyped-throws closure (a typed-throws closure there
        // crashes Swift 6.3's IR generation).
        var outcome: Result<Void, CKError> = .success(())
        expected.withUnsafeBytes { signature in
            do throws(CKError) { try verify(handle, data: data, signature: signature) } catch { outcome = .failure(error) }
        }
        try outcome.get()
    }

    /// Before a data call of either family: an active verification the other family began is
    /// refused as no operation of this call's kind, and left active. (Without any verification
    /// the step itself answers CKR_OPERATION_NOT_INITIALIZED, after the usual argument checks.)
    func requireVerificationFamily(_ handle: CK_SESSION_HANDLE, signatureAtInit: Bool) throws(CKError) {
        guard let operation = try session(handle).operations[.verify] else { return }
        guard (operation.expectedSignature != nil) == signatureAtInit else {
            throw CKError(CK_RV(CKR_OPERATION_NOT_INITIALIZED),
                          signatureAtInit ? "the active verification was begun by C_VerifyInit" : "the active verification was begun by C_VerifySignatureInit")
        }
    }
}
