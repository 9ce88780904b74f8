import KeychainTPM

extension Keychain {
    /// Makes the key of a key-pair request that asks for the TPM (CKA_KC_TPM TRUE: C_GenerateKeyPair,
    /// `keychainctl generate-key --tpm`). Both doors answer alike, as the rule has it:
    /// `.attributeValueInvalid` when this machine has no TPM, the TPM cannot be opened, or it does
    /// not make keys of this type (the vendor attribute cannot be honoured); `.tpmFailure` when
    /// the TPM fails while making the key.
    public func createEnclaveKey(for request: KeyGeneration.Request, master: MasterKey) throws(KeychainError) -> EnclaveKey {
        let type = try KeyGeneration.enclaveKeyType(request)
        guard EnclaveTPM.configuredTCTI != nil else {
            throw KeychainError(.attributeValueInvalid, "CKA_KC_TPM: " + EnclaveTPM.noTPM)
        }
        // Held across the creation, so that the key is made on the connection just opened.
        let connection: TPMConnection
        do { connection = try EnclaveTPM.connection() } catch {
            throw KeychainError(.attributeValueInvalid, "CKA_KC_TPM: the TPM cannot be opened: \(error.reason)")
        }
        defer { withExtendedLifetime(connection) {} }
        do {
            return try createEnclaveKey(type, master: master)
        } catch where error.code == .tpmFailure {
            // A TPM without this key type refuses its parameters: the request, not the TPM, is at fault.
            if let supported = try? connection.supportedKeyTypes(), !supported.contains(type) {
                throw KeychainError(.attributeValueInvalid, "CKA_KC_TPM: this TPM does not make \(type.rawValue) keys")
            }
            throw error
        }
    }
}
