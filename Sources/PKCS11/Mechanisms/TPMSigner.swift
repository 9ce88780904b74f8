import CPKCS11
import KeychainCore
import KeychainCrypto

/// A signature made in the TPM with a CKA_KC_TPM key (C_SignInit, then C_Sign or
/// C_SignUpdate/C_SignFinal).
///
/// The TPM signs a digest of 20, 32, 48 or 64 bytes (its length names its hash); the rest is done
/// here, so that the signature is the one the mechanism makes in software:
/// - ECDSA: the input (CKM_ECDSA) or its hash (CKM_ECDSA_SHA*) is fitted to the curve order's
///   length as ECDSA itself reads it (FIPS 186-5 §6.4.1: the leftmost bits of a longer value; a
///   shorter one is the same integer, left-padded with zeros): 32 bytes on P-256, 48 on P-384.
/// - RSASSA-PKCS1-v1_5: CKM_RSA_PKCS's input must be a DigestInfo of SHA-1, -256, -384 or -512 (what
///   OpenSSH and TLS give); the TPM signs its digest with that hash, which pads the same DigestInfo.
///   CKM_SHA1/256/384/512_RSA_PKCS hash here first.
/// Other schemes (raw RSA, PSS, RSA with SHA-224 or SHA-3) are not the TPM's: CKR_MECHANISM_INVALID.
final class TPMSigner {
    private enum Shape {
        /// ECDSA over the value, fitted to the order's length (`EnclaveKey.signECDSA`).
        case ecdsa
        /// RSASSA over the digest of a DigestInfo the caller gave.
        case rsaDigestInfo
        /// RSASSA over the hash computed here.
        case rsa
    }

    private let key: EnclaveKey
    private let shape: Shape
    /// The hash of the _SHA* mechanisms; nil: the input is collected as it is.
    private let digest: StreamingDigest?
    private var collected: [UInt8] = []
    /// The exact length of every signature (C_Sign's length query).
    let signatureLength: Int

    /// The hashes the TPM's RSASSA takes (a DigestInfo of another hash cannot be signed there).
    private static let rsaHashes: [Digest.Algorithm] = [.sha1, .sha256, .sha384, .sha512]

    init(key: EnclaveKey, scheme: SignatureScheme) throws(CKError) {
        self.key = key
        let hash: Digest.Algorithm?
        switch (scheme, key.publicKey.kind) {
        case (.ecdsa(let mechanismHash), .ec(let curve)):
            shape = .ecdsa
            hash = mechanismHash
            signatureLength = 2 * curve.coordinateLength
        case (.rsaPKCS1(nil), .rsa):
            shape = .rsaDigestInfo
            hash = nil
            signatureLength = (key.publicKey.bits + 7) / 8
        case (.rsaPKCS1(let mechanismHash?), .rsa) where Self.rsaHashes.contains(mechanismHash):
            shape = .rsa
            hash = mechanismHash
            signatureLength = (key.publicKey.bits + 7) / 8
        default:
            throw CKError(CK_RV(CKR_MECHANISM_INVALID),
                          "a key in the TPM signs with CKM_ECDSA, CKM_ECDSA_SHA*, CKM_RSA_PKCS (over a DigestInfo) and CKM_SHA1/256/384/512_RSA_PKCS only")
        }
        if let hash {
            do { digest = try StreamingDigest(hash) } catch { throw CKError(CK_RV(CKR_DEVICE_ERROR), "\(error)") }
        } else {
            digest = nil
        }
    }

    deinit { wipe(&collected) }

    func update(_ data: UnsafeRawBufferPointer) throws(CKError) {
        if let digest {
            do { try digest.update(data) } catch { throw CKError(CK_RV(CKR_DEVICE_ERROR), "\(error)") }
            return
        }
        guard collected.count + data.count <= SignatureOperation.maximumCollectedInput else {
            throw CKError(CK_RV(CKR_DATA_LEN_RANGE), "input too large")
        }
        collected += data
    }

    /// The signature, made in the TPM (CKR_DEVICE_ERROR when the TPM fails or has gone).
    func sign() throws(CKError) -> [UInt8] {
        var value: [UInt8]
        if let digest {
            do { value = try digest.finish() } catch { throw CKError(CK_RV(CKR_DEVICE_ERROR), "\(error)") }
        } else {
            value = collected
        }
        defer { wipe(&value) }
        switch shape {
        case .ecdsa: return try translating { () throws(KeychainError) in try key.signECDSA(value) }
        case .rsa: return try translating { () throws(KeychainError) in try key.sign(digest: value) }
        case .rsaDigestInfo:
            let digest = try Self.digest(inDigestInfo: value)
            return try translating { () throws(KeychainError) in try key.sign(digest: digest) }
        }
    }

    /// The DER prefixes of DigestInfo (RFC 8017 §9.2 note 1) for the hashes the TPM signs with;
    /// each is followed by the digest.
    private static let digestInfoPrefixes: [(prefix: [UInt8], length: Int)] = [
        ([0x30, 0x21, 0x30, 0x09, 0x06, 0x05, 0x2B, 0x0E, 0x03, 0x02, 0x1A, 0x05, 0x00, 0x04, 0x14], 20),
        ([0x30, 0x31, 0x30, 0x0D, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x01, 0x05, 0x00, 0x04, 0x20], 32),
        ([0x30, 0x41, 0x30, 0x0D, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x02, 0x05, 0x00, 0x04, 0x30], 48),
        ([0x30, 0x51, 0x30, 0x0D, 0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x02, 0x03, 0x05, 0x00, 0x04, 0x40], 64),
    ]

    /// The digest inside a DigestInfo of SHA-1, -256, -384 or -512 (the exact DER PKCS #1 pads, with
    /// NULL parameters); anything else is CKR_DATA_INVALID — the TPM pads only such DigestInfos.
    static func digest(inDigestInfo input: [UInt8]) throws(CKError) -> [UInt8] {
        for (prefix, length) in digestInfoPrefixes where input.count == prefix.count + length && input.starts(with: prefix) {
            return Array(input.suffix(length))
        }
        throw CKError(CK_RV(CKR_DATA_INVALID), "with a key in the TPM, CKM_RSA_PKCS signs a DigestInfo of SHA-1, SHA-256, SHA-384 or SHA-512 only")
    }
}
