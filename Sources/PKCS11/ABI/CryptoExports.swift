import CPKCS11

/// The cryptographic entry points (PKCS#11's encryption, digest, signing, key management and
/// random-number functions). Signatures with recovery are not offered (`Exports.notOffered`).
public func C_EncryptInit(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ k: CK_OBJECT_HANDLE) -> CK_RV {
    if let parameters = CallerKeptParameters(m), let rv = SymmetricFastPath.initialize(s, parameters, k, encrypting: true) { return rv }
    return Exports.inSession(#function, s) { state throws(CKError) in
        // PKCS#11 3.0: a NULL mechanism ends the active operation.
        guard m != nil else { return try state.cancel(s, .encrypt) }
        try state.cipherInit(s, mechanism: try CallerMechanism(m), key: k, encrypting: true)
    }
}
public func C_Encrypt(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV {
    if let input = try? CallerBytes.input(d, count: dl), let output = try? CallerOutput(o, ol),
       let rv = SymmetricFastPath.singlePart(s, input: input, output: output, encrypting: true) { return rv }
    return Exports.operationStep(#function, s, .encrypt) { state throws(CKError) in
        try state.cipherSinglePart(s, encrypting: true, input: try CallerBytes.input(d, count: dl), output: try CallerOutput(o, ol))
    }
}
public func C_EncryptUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV {
    Exports.operationStep(#function, s, .encrypt) { state throws(CKError) in
        try state.cipherUpdate(s, encrypting: true, input: try CallerBytes.input(d, count: dl), output: try CallerOutput(o, ol))
    }
}
public func C_EncryptFinal(_ s: CK_SESSION_HANDLE, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV {
    Exports.operationStep(#function, s, .encrypt) { state throws(CKError) in
        try state.cipherFinal(s, encrypting: true, output: try CallerOutput(o, ol))
    }
}
public func C_DecryptInit(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ k: CK_OBJECT_HANDLE) -> CK_RV {
    if let parameters = CallerKeptParameters(m), let rv = SymmetricFastPath.initialize(s, parameters, k, encrypting: false) { return rv }
    return Exports.inSession(#function, s) { state throws(CKError) in
        // PKCS#11 3.0: a NULL mechanism ends the active operation.
        guard m != nil else { return try state.cancel(s, .decrypt) }
        try state.cipherInit(s, mechanism: try CallerMechanism(m), key: k, encrypting: false)
    }
}
public func C_Decrypt(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV {
    if let input = try? CallerBytes.input(d, count: dl), let output = try? CallerOutput(o, ol),
       let rv = SymmetricFastPath.singlePart(s, input: input, output: output, encrypting: false) { return rv }
    return Exports.operationStep(#function, s, .decrypt) { state throws(CKError) in
        try state.cipherSinglePart(s, encrypting: false, input: try CallerBytes.input(d, count: dl), output: try CallerOutput(o, ol))
    }
}
public func C_DecryptUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV {
    Exports.operationStep(#function, s, .decrypt) { state throws(CKError) in
        try state.cipherUpdate(s, encrypting: false, input: try CallerBytes.input(d, count: dl), output: try CallerOutput(o, ol))
    }
}
public func C_DecryptFinal(_ s: CK_SESSION_HANDLE, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV {
    Exports.operationStep(#function, s, .decrypt) { state throws(CKError) in
        try state.cipherFinal(s, encrypting: false, output: try CallerOutput(o, ol))
    }
}
public func C_DigestInit(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer) -> CK_RV {
    Exports.inSession(#function, s) { state throws(CKError) in
        // PKCS#11 3.0: a NULL mechanism ends the active operation.
        guard m != nil else { return try state.cancel(s, .digest) }
        try state.digestInit(s, mechanism: try CallerMechanism(m))
    }
}
public func C_Digest(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV {
    Exports.operationStep(#function, s, .digest) { state throws(CKError) in
        try state.finishSinglePart(s, .digest, data: try CallerBytes.input(d, count: dl), output: try CallerOutput(o, ol))
    }
}
public func C_DigestUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG) -> CK_RV {
    Exports.operationStep(#function, s, .digest) { state throws(CKError) in
        try state.update(s, .digest, data: try CallerBytes.input(d, count: dl))
    }
}
public func C_DigestKey(_ s: CK_SESSION_HANDLE, _ k: CK_OBJECT_HANDLE) -> CK_RV {
    Exports.operationStep(#function, s, .digest) { state throws(CKError) in
        try state.digestKey(s, key: k)
    }
}
public func C_DigestFinal(_ s: CK_SESSION_HANDLE, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV {
    Exports.operationStep(#function, s, .digest) { state throws(CKError) in
        try state.finishMultiPart(s, .digest, output: try CallerOutput(o, ol))
    }
}
public func C_SignInit(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ k: CK_OBJECT_HANDLE) -> CK_RV {
    Exports.inSession(#function, s) { state throws(CKError) in
        // PKCS#11 3.0: a NULL mechanism ends the active operation.
        guard m != nil else { return try state.cancel(s, .sign) }
        try state.signInit(s, mechanism: try CallerMechanism(m), key: k)
    }
}
public func C_Sign(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV {
    Exports.operationStep(#function, s, .sign) { state throws(CKError) in
        try state.finishSinglePart(s, .sign, data: try CallerBytes.input(d, count: dl), output: try CallerOutput(o, ol))
    }
}
public func C_SignUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG) -> CK_RV {
    Exports.operationStep(#function, s, .sign) { state throws(CKError) in
        try state.update(s, .sign, data: try CallerBytes.input(d, count: dl))
    }
}
public func C_SignFinal(_ s: CK_SESSION_HANDLE, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV {
    Exports.operationStep(#function, s, .sign) { state throws(CKError) in
        try state.finishMultiPart(s, .sign, output: try CallerOutput(o, ol))
    }
}
public func C_SignRecoverInit(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ k: CK_OBJECT_HANDLE) -> CK_RV { Exports.notOffered(#function, s) }
public func C_SignRecover(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { Exports.notOffered(#function, s) }
public func C_VerifyInit(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ k: CK_OBJECT_HANDLE) -> CK_RV {
    Exports.inSession(#function, s) { state throws(CKError) in
        // PKCS#11 3.0: a NULL mechanism ends the active operation.
        guard m != nil else { return try state.cancel(s, .verify) }
        try state.verifyInit(s, mechanism: try CallerMechanism(m), key: k)
    }
}
public func C_Verify(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ g: BytePointer, _ gl: CK_ULONG) -> CK_RV {
    Exports.verificationStep(#function, s, signatureAtInit: false) { state throws(CKError) in
        try state.verify(s, data: try CallerBytes.input(d, count: dl), signature: try CallerBytes.input(g, count: gl))
    }
}
public func C_VerifyUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG) -> CK_RV {
    Exports.verificationStep(#function, s, signatureAtInit: false) { state throws(CKError) in
        try state.update(s, .verify, data: try CallerBytes.input(d, count: dl))
    }
}
public func C_VerifyFinal(_ s: CK_SESSION_HANDLE, _ g: BytePointer, _ gl: CK_ULONG) -> CK_RV {
    Exports.verificationStep(#function, s, signatureAtInit: false) { state throws(CKError) in
        try state.verify(s, data: nil, signature: try CallerBytes.input(g, count: gl))
    }
}
public func C_VerifyRecoverInit(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ k: CK_OBJECT_HANDLE) -> CK_RV { Exports.notOffered(#function, s) }
public func C_VerifyRecover(_ s: CK_SESSION_HANDLE, _ g: BytePointer, _ gl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { Exports.notOffered(#function, s) }
public func C_DigestEncryptUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { Exports.notOffered(#function, s) }
public func C_DecryptDigestUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { Exports.notOffered(#function, s) }
public func C_SignEncryptUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { Exports.notOffered(#function, s) }
public func C_DecryptVerifyUpdate(_ s: CK_SESSION_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV { Exports.notOffered(#function, s) }
public func C_GenerateKey(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ t: AttributePointer, _ c: CK_ULONG, _ k: HandlePointer) -> CK_RV {
    Exports.inSession(#function, s) { state throws(CKError) in
        guard let k else { throw CKError.argumentsBad }
        k.pointee = try state.generateKey(s, mechanism: try CallerMechanism(m), template: try CallerTemplate.read(t, count: c))
    }
}
public func C_GenerateKeyPair(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ pt: AttributePointer, _ pc: CK_ULONG, _ vt: AttributePointer, _ vc: CK_ULONG,
                                     _ pk: HandlePointer, _ vk: HandlePointer) -> CK_RV {
    Exports.inSession(#function, s) { state throws(CKError) in
        guard let pk, let vk else { throw CKError.argumentsBad }
        let handles = try state.generateKeyPair(s, mechanism: try CallerMechanism(m), publicTemplate: try CallerTemplate.read(pt, count: pc),
                                                privateTemplate: try CallerTemplate.read(vt, count: vc))
        pk.pointee = handles.publicKey
        vk.pointee = handles.privateKey
    }
}
public func C_WrapKey(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ w: CK_OBJECT_HANDLE, _ k: CK_OBJECT_HANDLE, _ o: BytePointer, _ ol: ULongPointer) -> CK_RV {
    Exports.inSession(#function, s) { state throws(CKError) in
        try state.wrapKey(s, mechanism: try CallerMechanism(m), wrappingKey: w, key: k, output: try CallerOutput(o, ol))
    }
}
public func C_UnwrapKey(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ u: CK_OBJECT_HANDLE, _ d: BytePointer, _ dl: CK_ULONG, _ t: AttributePointer, _ c: CK_ULONG,
                               _ k: HandlePointer) -> CK_RV {
    Exports.inSession(#function, s) { state throws(CKError) in
        guard let k else { throw CKError.argumentsBad }
        k.pointee = try state.unwrapKey(s, mechanism: try CallerMechanism(m), unwrappingKey: u, wrapped: try CallerBytes.input(d, count: dl),
                                        template: try CallerTemplate.read(t, count: c))
    }
}
public func C_DeriveKey(_ s: CK_SESSION_HANDLE, _ m: MechanismPointer, _ b: CK_OBJECT_HANDLE, _ t: AttributePointer, _ c: CK_ULONG, _ k: HandlePointer) -> CK_RV {
    Exports.inSession(#function, s) { state throws(CKError) in
        guard let k else { throw CKError.argumentsBad }
        let mechanism = try CallerMechanism(m)
        // SP 800-108's additional keys: each CK_DERIVED_KEY's phKey gets its key's handle, or
        // CK_INVALID_HANDLE when the derivation fails (no key is then left behind).
        var additional: [AdditionalDerivedKey] = []
        if case .sp800108(_, _, _, let keys) = mechanism.parameter { additional = keys }
        do throws(CKError) {
            let derived = try state.deriveKey(s, mechanism: mechanism, baseKey: b, template: try CallerTemplate.read(t, count: c))
            k.pointee = derived.key
            for (entry, handle) in zip(additional, derived.additional) {
                UnsafeMutablePointer<CK_OBJECT_HANDLE>(bitPattern: entry.handleAddress)?.pointee = handle
            }
        } catch {
            for entry in additional { UnsafeMutablePointer<CK_OBJECT_HANDLE>(bitPattern: entry.handleAddress)?.pointee = CK_OBJECT_HANDLE(CK_INVALID_HANDLE) }
            throw error
        }
    }
}
