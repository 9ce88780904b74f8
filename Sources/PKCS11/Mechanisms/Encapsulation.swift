import CPKCS11
import KeychainCore
import KeychainCrypto

/// PKCS#11 3.2 §5.18 key encapsulation: C_EncapsulateKey and C_DecapsulateKey (CKM_ML_KEM).
extension ModuleState {
    /// C_EncapsulateKey: a ciphertext for `publicKey` into `ciphertext` (call-twice convention:
    /// a length query makes no key and returns nil) and a new secret key from `template`.
    func encapsulateKey(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism, publicKey: CK_OBJECT_HANDLE, template: Template,
                        ciphertext: CallerOutput<CK_BYTE>) throws(CKError) -> CK_OBJECT_HANDLE? {
        throw CKError(CK_RV(CKR_FUNCTION_NOT_SUPPORTED), "not yet")
    }

    /// C_DecapsulateKey: the secret key `ciphertext` carries, made from `template`.
    func decapsulateKey(_ handle: CK_SESSION_HANDLE, mechanism: CallerMechanism, privateKey: CK_OBJECT_HANDLE, template: Template,
                        ciphertext: UnsafeRawBufferPointer) throws(CKError) -> CK_OBJECT_HANDLE {
        throw CKError(CK_RV(CKR_FUNCTION_NOT_SUPPORTED), "not yet")
    }
}
