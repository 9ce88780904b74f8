internal import CTSS2
import KeychainCrypto

extension TPMConnection {
    /// Seals up to 128 bytes in a keyed-hash object under the primary key
    /// (`TPMTemplates.sealed`): only this TPM unseals it, and only with `authValue`.
    public func seal(_ secret: SecureBytes, authValue: SecureBytes) throws(TPMError) -> TPMBlob {
        guard secret.count > 0, secret.count <= TPMTemplates.maximumSealedLength else {
            throw .invalidInput("a sealed secret has 1 to \(TPMTemplates.maximumSealedLength) bytes")
        }
        return try lock.withLock { () throws(TPMError) in
            try create(TPMTemplates.sealed(), kind: .sealedData, authValue: authValue, data: secret, timeout: timeouts.command)
        }
    }

    /// Unseals a blob `seal` made on this TPM: load, TPM2_Unseal (the answer encrypted in the
    /// session), flush.
    public func unseal(_ blob: TPMBlob, authValue: SecureBytes) throws(TPMError) -> SecureBytes {
        guard blob.kind == .sealedData else { throw .invalidInput("the blob holds a key, not sealed data") }
        return try lock.withLock { () throws(TPMError) in
            let handle = try load(blob)
            defer { try? flush(handle) }
            var output: UnsafeMutablePointer<TPM2B_SENSITIVE_DATA>?
            defer { TPMBuffer.wipeAndFree(output) }
            try executeAuthorized("Esys_Unseal", on: handle, authValue: authValue, decrypt: false, encrypt: true, start: {
                Esys_Unseal_Async($0, handle, $1, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE))
            }, finish: { Esys_Unseal_Finish($0, &output) })
            guard let output, let secret = TPMBuffer.secureBytes(output.pointee.buffer, size: output.pointee.size,
                                                                paddedTo: Int(output.pointee.size)) else {
                throw .invalidInput("Esys_Unseal returned no data")
            }
            return secret
        }
    }
}
