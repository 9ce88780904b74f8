internal import CTSS2
import KeychainCrypto

extension TPMConnection {
    /// Makes a key inside the TPM under the primary key (`TPMTemplates.key`): it never leaves
    /// the TPM, and using it needs `authValue` (at most 32 bytes; the keychain derives it from
    /// its unlocked master key, so blob plus TPM is not enough without the PIN).
    public func createKey(_ type: TPMKeyType, authValue: SecureBytes) throws(TPMError) -> TPMBlob {
        try lock.withLock { () throws(TPMError) in
            try create(TPMTemplates.key(type), kind: .key, authValue: authValue, data: nil, timeout: timeouts.keyGeneration)
        }
    }

    /// Loads a key blob made by this TPM; the key stays loaded until the `TPMKey` goes away.
    public func loadKey(_ blob: TPMBlob, authValue: SecureBytes) throws(TPMError) -> TPMKey {
        guard blob.kind == .key, let type = blob.keyType, let publicKey = blob.publicKey else {
            throw .invalidInput("the blob holds sealed data, not a key")
        }
        guard authValue.count <= TPMTemplates.maximumAuthorizationLength else {
            throw .invalidInput("an authValue has at most \(TPMTemplates.maximumAuthorizationLength) bytes")
        }
        let handle = try lock.withLock { () throws(TPMError) in try load(blob) }
        return TPMKey(connection: self, handle: handle, type: type, publicKey: publicKey, authValue: authValue)
    }

    /// The key types this TPM can make, asked with TPM2_TestParms.
    public func supportedKeyTypes() throws(TPMError) -> Set<TPMKeyType> {
        try lock.withLock { () throws(TPMError) in
            var supported: Set<TPMKeyType> = []
            for type in TPMKeyType.allCases {
                var parameters = TPMT_PUBLIC_PARMS()
                parameters.type = type.isEC ? kc_TPM2_ALG_ECC : kc_TPM2_ALG_RSA
                parameters.parameters = TPMTemplates.parameters(type)
                do throws(TPMError) {
                    try execute("Esys_TestParms", timeout: timeouts.command, start: {
                        Esys_TestParms_Async($0, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &parameters)
                    }, finish: { Esys_TestParms_Finish($0) })
                    supported.insert(type)
                } catch where error.code.layer == 0 {
                    continue // the TPM refused these parameters: not supported
                }
            }
            return supported
        }
    }
}

/// A key loaded in the TPM: signs and agrees keys there. Flushed from the TPM when it goes away.
///
/// Holds its connection (whose lock every operation takes) and its authValue, which ESAPI gets
/// only for the length of each command.
public final class TPMKey: @unchecked Sendable {
    public let type: TPMKeyType
    public let publicKey: TPMPublicKey
    private let connection: TPMConnection
    private let handle: ESYS_TR
    private let authValue: SecureBytes

    init(connection: TPMConnection, handle: ESYS_TR, type: TPMKeyType, publicKey: TPMPublicKey, authValue: SecureBytes) {
        self.connection = connection
        self.handle = handle
        self.type = type
        self.publicKey = publicKey
        self.authValue = authValue
    }

    deinit {
        let handle = handle
        connection.lock.withLock { try? connection.flush(handle) }
    }

    /// Signs a digest the caller computed: ECDSA r‖s (each as long as the curve's coordinates)
    /// for EC keys, RSASSA-PKCS1-v1_5 for RSA. The digest's length names its hash, which the TPM
    /// checks for an unrestricted key: 20 (SHA-1), 32 (SHA-256), 48 (SHA-384) or 64 (SHA-512) bytes.
    public func sign(digest: [UInt8]) throws(TPMError) -> [UInt8] {
        let hash: TPM2_ALG_ID
        switch digest.count {
        case 20: hash = kc_TPM2_ALG_SHA1
        case 32: hash = kc_TPM2_ALG_SHA256
        case 48: hash = kc_TPM2_ALG_SHA384
        case 64: hash = kc_TPM2_ALG_SHA512
        default: throw .invalidInput("a digest of \(digest.count) bytes is not SHA-1, SHA-256, SHA-384 or SHA-512")
        }
        var input = TPM2B_DIGEST()
        try TPMBuffer.fill(&input.buffer, size: &input.size, with: digest, what: "the digest")
        var scheme = TPMT_SIG_SCHEME()
        scheme.scheme = type.isEC ? kc_TPM2_ALG_ECDSA : kc_TPM2_ALG_RSASSA
        scheme.details.any.hashAlg = hash
        // No ticket: the key is unrestricted, so the TPM needs no proof that it hashed the data.
        var validation = TPMT_TK_HASHCHECK()
        validation.tag = kc_TPM2_ST_HASHCHECK
        validation.hierarchy = kc_TPM2_RH_NULL
        var signature: UnsafeMutablePointer<TPMT_SIGNATURE>?
        defer { Esys_Free(signature) }
        let handle = handle
        // HMAC only, no parameter encryption: the digest is what the caller wants signed, not a
        // secret — the signature the TPM sends back (never encryptable: TPMT_SIGNATURE is not a
        // TPM2B) is as public as it — while the HMAC still keeps the authValue off the bus and
        // makes an altered digest or answer fail. Encrypting it cost ~10 % of the signatures
        // per second (Docs/performance.md, "The TPM").
        try connection.lock.withLock { () throws(TPMError) in
            try connection.executeAuthorized("Esys_Sign", on: handle, authValue: authValue, decrypt: false, encrypt: false, start: {
                Esys_Sign_Async($0, handle, $1, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &input, &scheme, &validation)
            }, finish: { Esys_Sign_Finish($0, &signature) })
        }
        guard let signature else { throw .invalidInput("Esys_Sign returned no signature") }
        if type.isEC {
            let ecdsa = signature.pointee.signature.ecdsa
            let width = type.coordinateLength
            guard signature.pointee.sigAlg == kc_TPM2_ALG_ECDSA,
                  let r = TPMBuffer.bytes(ecdsa.signatureR.buffer, size: ecdsa.signatureR.size, paddedTo: width),
                  let s = TPMBuffer.bytes(ecdsa.signatureS.buffer, size: ecdsa.signatureS.size, paddedTo: width) else {
                throw .invalidInput("the TPM's ECDSA signature does not fit the curve")
            }
            return r + s
        }
        let rsa = signature.pointee.signature.rsassa
        return TPMBuffer.bytes(rsa.sig.buffer, size: rsa.sig.size)
    }

    /// An ECDSA signature as DER (ECDSA-Sig-Value, X9.62), as Apple's SecKeyCreateSignature and
    /// X.509 want it.
    public func signDER(digest: [UInt8]) throws(TPMError) -> [UInt8] {
        guard type.isEC else { throw .invalidInput("DER signatures are ECDSA's") }
        let raw = try sign(digest: digest)
        guard let der = SignatureOperation.ecdsaDER(fromRaw: raw, coordinateLength: type.coordinateLength) else {
            throw .invalidInput("the signature does not encode as DER")
        }
        return der
    }

    /// ECDH (TPM2_ECDH_ZGen): the x-coordinate of this key's scalar times the peer's point
    /// (X9.62 uncompressed, on this key's curve), as long as a coordinate.
    public func sharedSecret(peerPoint: [UInt8]) throws(TPMError) -> SecureBytes {
        guard type.isEC else { throw .invalidInput("key agreement needs an EC key") }
        let width = type.coordinateLength
        guard peerPoint.count == 1 + 2 * width, peerPoint.first == 0x04 else {
            throw .invalidInput("the peer's point is not an uncompressed point on the key's curve")
        }
        var input = TPM2B_ECC_POINT()
        try TPMBuffer.fill(&input.point.x.buffer, size: &input.point.x.size, with: Array(peerPoint[1...width]), what: "x")
        try TPMBuffer.fill(&input.point.y.buffer, size: &input.point.y.size, with: Array(peerPoint[(1 + width)...]), what: "y")
        input.size = UInt16(4 + 2 * width)
        var output: UnsafeMutablePointer<TPM2B_ECC_POINT>?
        defer { TPMBuffer.wipeAndFree(output) }
        let handle = handle
        // The answer (the shared point) is secret and goes encrypted; the peer's point is public.
        try connection.lock.withLock { () throws(TPMError) in
            try connection.executeAuthorized("Esys_ECDH_ZGen", on: handle, authValue: authValue, decrypt: false, encrypt: true, start: {
                Esys_ECDH_ZGen_Async($0, handle, $1, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &input)
            }, finish: { Esys_ECDH_ZGen_Finish($0, &output) })
        }
        guard let output, let secret = TPMBuffer.secureBytes(output.pointee.point.x.buffer, size: output.pointee.point.x.size, paddedTo: width) else {
            throw .invalidInput("the TPM's shared point does not fit the curve")
        }
        return secret
    }
}
