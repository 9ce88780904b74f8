import CPKCS11
import KeychainCrypto

/// The parameter of a mechanism whose contexts are kept (`KeptCipher`), read where the caller
/// has it for C_EncryptInit/C_DecryptInit's fast path (`SymmetricFastPath`): views of the IV and
/// additional data, not copies. Only a parameter the full path would accept as it is gets a
/// value; anything else is nil, and `CallerMechanism` then decodes it with every error code.
struct CallerKeptParameters {
    let mechanism: CK_MECHANISM_TYPE
    let iv: UnsafeRawBufferPointer
    let associatedData: UnsafeRawBufferPointer
    /// GCM's tag length (0 for the others).
    let tagBits: CK_ULONG

    init?(_ pointer: UnsafeMutablePointer<CK_MECHANISM>?) {
        guard let mechanism = pointer?.pointee, KeptCipher.keeps(mechanism.mechanism) else { return nil }
        let length = Int(bitPattern: UInt(mechanism.ulParameterLen))
        let none = UnsafeRawBufferPointer(start: nil, count: 0)
        self.mechanism = mechanism.mechanism
        switch mechanism.mechanism {
        case CK_MECHANISM_TYPE(CKM_AES_GCM):
            guard let raw = mechanism.pParameter, length == MemoryLayout<CK_GCM_PARAMS>.size else { return nil }
            let params = raw.loadUnaligned(as: CK_GCM_PARAMS.self)
            guard let iv = params.pIv, params.ulIvLen >= 1, params.ulIvLen <= 256,
                  params.ulAADLen <= CallerMechanism.maximumParameterLength, params.ulAADLen == 0 || params.pAAD != nil else { return nil }
            self.iv = UnsafeRawBufferPointer(start: iv, count: Int(params.ulIvLen))
            associatedData = UnsafeRawBufferPointer(start: params.ulAADLen == 0 ? nil : params.pAAD, count: Int(params.ulAADLen))
            tagBits = params.ulTagBits
        case CK_MECHANISM_TYPE(CKM_CHACHA20_POLY1305):
            // A 12-byte nonce as it is (the 8-byte form, and a length in bits, take the full path).
            guard let raw = mechanism.pParameter, length == MemoryLayout<CK_SALSA20_CHACHA20_POLY1305_PARAMS>.size else { return nil }
            let params = raw.loadUnaligned(as: CK_SALSA20_CHACHA20_POLY1305_PARAMS.self)
            guard let nonce = params.pNonce, params.ulNonceLen == 12,
                  params.ulAADLen <= CallerMechanism.maximumParameterLength, params.ulAADLen == 0 || params.pAAD != nil else { return nil }
            iv = UnsafeRawBufferPointer(start: nonce, count: 12)
            associatedData = UnsafeRawBufferPointer(start: params.ulAADLen == 0 ? nil : params.pAAD, count: Int(params.ulAADLen))
            tagBits = 0
        case CK_MECHANISM_TYPE(CKM_AES_CBC), CK_MECHANISM_TYPE(CKM_AES_CBC_PAD):
            guard let raw = mechanism.pParameter, length == SymmetricCipher.blockSize else { return nil }
            iv = UnsafeRawBufferPointer(start: raw, count: length)
            associatedData = none
            tagBits = 0
        case CK_MECHANISM_TYPE(CKM_AES_ECB):
            guard length == 0 else { return nil }
            iv = none
            associatedData = none
            tagBits = 0
        default:
            return nil
        }
    }
}
