import Foundation
@_spi(CryptoKit) import KeychainServices

/// CryptoKit's Secure Enclave on Linux: P-256 keys made inside the TPM (Docs/keychain-api.md,
/// "Secure Enclave keys"). A key's TPM authorisation comes from the unlocked keychain — the
/// default one when making a key, the one its `dataRepresentation` names when loading it — so
/// the keychain is unlocked as the SecItem calls unlock it (login session, the context's
/// password, the prompt program). Failures are `CryptoKitError.underlyingCoreCryptoError` with
/// the OSStatus a SecItem call would answer (errSecUnimplemented: no TPM). Apple's enclave ML-KEM
/// and ML-DSA keys (`SecureEnclave.MLKEM768` …) are not offered: the TPM has no lattice algorithm.
public enum SecureEnclave {
    /// Whether a TPM is configured and answers.
    public static var isAvailable: Bool { SecureEnclaveAccess.isAvailable }

    /// NIST P-256 signatures and key agreement inside the TPM.
    public enum P256 {
        /// ECDSA with keys in the TPM.
        public enum Signing {
            /// A P-256 signing key in the TPM.
            public struct PrivateKey: @unchecked Sendable {
                let handle: SecureEnclaveKeyHandle
                public let publicKey: Crypto.P256.Signing.PublicKey

                /// A new key. `compactRepresentable` is accepted and not needed (the key signs
                /// either way). `accessControl` nil is Apple's default (private-key usage, when
                /// unlocked, this device only); a presence flag in it asks for the keychain
                /// password at each use of this key and of any key loaded from its
                /// `dataRepresentation`, which carries the flags bound into the TPM authorisation.
                public init(compactRepresentable: Bool = true, accessControl: SecAccessControl? = nil,
                            authenticationContext: LAContext? = nil) throws {
                    let made = try SecureEnclaveKeyHandle.created(accessControl: accessControl, context: authenticationContext)
                    handle = made.handle
                    publicKey = try .init(x963Representation: made.publicPoint)
                }

                /// The key a `dataRepresentation` holds (only this machine's TPM loads it), asking
                /// what its access control asks; edited data throws errSecDecode.
                public init(dataRepresentation: Data, authenticationContext: LAContext? = nil) throws {
                    let made = try SecureEnclaveKeyHandle.loaded(dataRepresentation, context: authenticationContext)
                    handle = made.handle
                    publicKey = try .init(x963Representation: made.publicPoint)
                }

                /// The TPM's wrapped key and the keychain it belongs to (the KCSE blob); not the key itself.
                public var dataRepresentation: Data { Data(handle.dataRepresentation) }

                /// ECDSA over SHA-256 of `data`, signed in the TPM.
                public func signature<D: DataProtocol>(for data: D) throws -> Crypto.P256.Signing.ECDSASignature {
                    try signature(for: SHA256.hash(data: data))
                }

                /// ECDSA over a digest, signed in the TPM.
                public func signature<D: Digest>(for digest: D) throws -> Crypto.P256.Signing.ECDSASignature {
                    let raw = try enclaveCall { () throws(KeychainServicesError) in try handle.sign(digest: Array(digest)) }
                    return try Crypto.P256.Signing.ECDSASignature(rawRepresentation: raw)
                }
            }
        }

        /// ECDH with keys in the TPM.
        public enum KeyAgreement {
            /// A P-256 key-agreement key in the TPM.
            public struct PrivateKey: @unchecked Sendable {
                let handle: SecureEnclaveKeyHandle
                public let publicKey: Crypto.P256.KeyAgreement.PublicKey

                /// A new key (see `Signing.PrivateKey.init(compactRepresentable:accessControl:authenticationContext:)`).
                public init(compactRepresentable: Bool = true, accessControl: SecAccessControl? = nil,
                            authenticationContext: LAContext? = nil) throws {
                    let made = try SecureEnclaveKeyHandle.created(accessControl: accessControl, context: authenticationContext)
                    handle = made.handle
                    publicKey = try .init(x963Representation: made.publicPoint)
                }

                /// The key a `dataRepresentation` holds (only this machine's TPM loads it).
                public init(dataRepresentation: Data, authenticationContext: LAContext? = nil) throws {
                    let made = try SecureEnclaveKeyHandle.loaded(dataRepresentation, context: authenticationContext)
                    handle = made.handle
                    publicKey = try .init(x963Representation: made.publicPoint)
                }

                public var dataRepresentation: Data { Data(handle.dataRepresentation) }

                /// ECDH in the TPM. swift-crypto's `SharedSecret` has no public initialiser, so the
                /// TPM's result Z (an x-coordinate) becomes one through swift-crypto's own ECDH: the
                /// private scalar 1 times the curve point whose x is Z yields exactly Z.
                public func sharedSecretFromKeyAgreement(with publicKeyShare: Crypto.P256.KeyAgreement.PublicKey) throws -> SharedSecret {
                    var z: [UInt8] = try enclaveCall { () throws(KeychainServicesError) in
                        try handle.sharedSecret(peerPoint: Array(publicKeyShare.x963Representation))
                    }
                    defer { for index in z.indices { z[index] = 0 } }
                    let point = try Crypto.P256.KeyAgreement.PublicKey(compressedRepresentation: [0x02] + z)
                    return try Self.scalarOne.sharedSecretFromKeyAgreement(with: point)
                }

                /// The private key 1 (its public key is the generator), for `sharedSecretFromKeyAgreement`.
                private static var scalarOne: Crypto.P256.KeyAgreement.PrivateKey {
                    get throws { try Crypto.P256.KeyAgreement.PrivateKey(rawRepresentation: [UInt8](repeating: 0, count: 31) + [1]) }
                }
            }
        }
    }
}

/// Runs an enclave call, its failure as CryptoKit's error carrying the OSStatus.
private func enclaveCall<R>(_ body: () throws(KeychainServicesError) -> R) throws -> R {
    do { return try body() } catch { throw CryptoKitError.underlyingCoreCryptoError(error: Int32(error.status)) }
}

/// What both private-key types start from: the TPM key (new, or the one a `dataRepresentation`
/// holds) and its public point (X9.63), each failure as CryptoKit reports it.
extension SecureEnclaveKeyHandle {
    static func created(accessControl: SecAccessControl?, context: LAContext?) throws -> (handle: SecureEnclaveKeyHandle, publicPoint: [UInt8]) {
        let handle = try enclaveCall { () throws(KeychainServicesError) in try SecureEnclaveAccess.create(accessControl: accessControl, context: context) }
        return (handle, try enclaveCall { () throws(KeychainServicesError) in try handle.publicPoint() })
    }

    static func loaded(_ data: Data, context: LAContext?) throws -> (handle: SecureEnclaveKeyHandle, publicPoint: [UInt8]) {
        let handle = try enclaveCall { () throws(KeychainServicesError) in try SecureEnclaveAccess.load(Array(data), context: context) }
        return (handle, try enclaveCall { () throws(KeychainServicesError) in try handle.publicPoint() })
    }
}
