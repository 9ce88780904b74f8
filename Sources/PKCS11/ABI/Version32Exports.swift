import CPKCS11

/// The entry points PKCS#11 3.2 adds (the 3.2 function list, `FunctionLists.version32`):
/// key encapsulation (§5.18), verification with the signature given at init (§5.15) and the
/// session's validation flags (§5.6). The asynchronous functions and authenticated key wrapping
/// are not offered (the list's closures answer CKR_FUNCTION_NOT_SUPPORTED).
extension Exports {
    /// A data step of a verification (C_Verify… or C_VerifySignature…): an operation the other
    /// family began is refused and left active (VerifySignature.swift); otherwise as
    /// `operationStep`.
    @inline(__always)
    static func verificationStep(_ function: StaticString, _ session: CK_SESSION_HANDLE, signatureAtInit: Bool,
                                 _ body: (ModuleState) throws(CKError) -> Void) -> CK_RV {
        inSession(function, session) { state throws(CKError) in
            try state.requireVerificationFamily(session, signatureAtInit: signatureAtInit)
            do throws(CKError) { try body(state) } catch {
                state.endOperation(session, .verify, after: error)
                throw error
            }
        }
    }
}

func C_GetInfo_3_2(_ info: UnsafeMutablePointer<CK_INFO>?) -> CK_RV {
    Exports.run(#function) { () throws(CKError) in
        guard let info else { throw CKError.argumentsBad }
        info.pointee = try General.info(version: CK_VERSION(3, 2))
    }
}

// MARK: key encapsulation (§5.18)

/// A length query (NULL pCiphertext) makes no key and leaves *phKey as it was.
public func C_EncapsulateKey(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ k: CK_OBJECT_HANDLE, _ t: AttributePointer, _ c: CK_ULONG,
                             _ o: BytePointer, _ ol: ULongPointer, _ h: HandlePointer) -> CK_RV {
    Exports.inSession(#function, s) { state throws(CKError) in
        guard let h else { throw CKError.argumentsBad }
        let made = try state.encapsulateKey(s, mechanism: try CallerMechanism(m), publicKey: k, template: try CallerTemplate.read(t, count: c),
                                            ciphertext: try CallerOutput(o, ol))
        if let made { h.pointee = made }
    }
}

public func C_DecapsulateKey(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ k: CK_OBJECT_HANDLE, _ t: AttributePointer, _ c: CK_ULONG,
                             _ d: BytePointer, _ dl: CK_ULONG, _ h: HandlePointer) -> CK_RV {
    Exports.inSession(#function, s) { state throws(CKError) in
        guard let h else { throw CKError.argumentsBad }
        h.pointee = try state.decapsulateKey(s, mechanism: try CallerMechanism(m), privateKey: k, template: try CallerTemplate.read(t, count: c),
                                             ciphertext: try CallerBytes.input(d, count: dl))
    }
}

// MARK: verification with the signature at init (§5.15)

public func C_VerifySignatureInit(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ k: CK_OBJECT_HANDLE, _ g: BytePointer, _ gl: CK_ULONG) -> CK_RV {
    Exports.inSession(#function, s) { state throws(CKError) in
        // A NULL mechanism ends the active verification, as C_VerifyInit's does.
        guard m != nil else { return try state.cancel(s, .verify) }
        try state.verifySignatureInit(s, mechanism: try CallerMechanism(m), key: k, signature: try CallerBytes.input(g, count: gl))
    }
}
public func C_VerifySignature(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG) -> CK_RV {
    Exports.verificationStep(#function, s, signatureAtInit: true) { state throws(CKError) in
        try state.verifySignature(s, data: try CallerBytes.input(d, count: dl))
    }
}
public func C_VerifySignatureUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG) -> CK_RV {
    Exports.verificationStep(#function, s, signatureAtInit: true) { state throws(CKError) in
        try state.update(s, .verify, data: try CallerBytes.input(d, count: dl))
    }
}
public func C_VerifySignatureFinal(_ s: CK_SESSION_HANDLE) -> CK_RV {
    Exports.verificationStep(#function, s, signatureAtInit: true) { state throws(CKError) in
        try state.verifySignature(s, data: nil)
    }
}

// MARK: session validation flags (§5.6)

public func C_GetSessionValidationFlags(_ s: CK_SESSION_HANDLE, _ type: CK_SESSION_VALIDATION_FLAGS_TYPE, _ flags: UnsafeMutablePointer<CK_FLAGS>?) -> CK_RV {
    Exports.inSession(#function, s) { state throws(CKError) in
        guard let flags else { throw CKError.argumentsBad }
        flags.pointee = try state.sessionValidationFlags(s, type: type)
    }
}
