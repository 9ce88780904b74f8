import KeychainCore
import KeychainCrypto

/// Where a device's identity key lives (Docs/sync.md, "Identities and keys"), as `sync status`
/// shows it and the sync state records it (`sync.identity.kind`).
public enum IdentityKeyKind: String, Sendable, Equatable {
    /// Made in this machine's TPM: the sync state keeps its TPM blob, which only that TPM loads,
    /// and only with the keychain's master key (its authorisation).
    case tpm
    /// Made in memory: the sync state keeps its PKCS#8 form, sealed under the master key.
    case software
}

/// What setup or join is asked for: `keychainctl sync setup|join --identity-key`.
public enum IdentityKeyChoice: String, Sendable, Equatable, CaseIterable {
    /// The TPM when one is configured and answers, else software.
    case auto
    /// The TPM, or nothing: setup or join fails before anything is written.
    case tpm
    /// Software even where there is a TPM.
    case software
}

/// A device identity key made in the TPM (an `EnclaveKey` of the keychain, P-256): it signs and
/// agrees keys there; its private half never leaves the TPM.
public final class TPMDeviceIdentity: DeviceIdentity, @unchecked Sendable {
    let key: EnclaveKey
    public let publicKeyInfo: [UInt8]

    init(key: EnclaveKey) throws(SyncError) {
        guard key.publicKey.kind == .ec(.p256) else { throw SyncError(.malformed, "a device identity key is a P-256 key, and this TPM key is not") }
        self.key = key
        do { publicKeyInfo = try key.publicKey.subjectPublicKeyInfo() } catch { throw SyncError(.crypto, "the device key's public part: \(error)") }
    }

    /// The key's TPM blob (`EnclaveKeyBlob`), what the sync state keeps.
    public var blob: [UInt8] { key.blob.bytes }

    /// SHA-256 here, ECDSA in the TPM: r‖s, 32 bytes each, the form the software key gives
    /// (KeychainCrypto's ECDSA is PKCS#11's) and `DeviceSignature.verify` checks.
    public func sign(_ data: [UInt8]) throws(SyncError) -> [UInt8] {
        let digest: [UInt8]
        do { digest = try Digest.hash(.sha256, data) } catch { throw SyncError(.crypto, "hashing what to sign: \(error)") }
        do { return try key.signECDSA(digest) } catch { throw TPMDeviceIdentity.failure(error, "signing with the device key") }
    }

    /// ECDH in the TPM with the peer's P-256 point: the x-coordinate, as the software key gives it.
    public func sharedSecret(with peer: [UInt8]) throws(SyncError) -> SecureBytes {
        let point: [UInt8]
        do {
            let peerKey = try AsymmetricKey.publicKey(subjectPublicKeyInfo: peer)
            guard peerKey.kind == .ec(.p256) else { throw SyncError(.crypto, "ECDH with a device key: the peer's key is not P-256") }
            point = try peerKey.ecPoint()
        } catch let error as SyncError {
            throw error
        } catch {
            throw SyncError(.crypto, "ECDH with a device key: the peer's key: \(error)")
        }
        do { return try key.sharedSecret(peerPoint: point) } catch { throw TPMDeviceIdentity.failure(error, "ECDH with the device key") }
    }

    /// What a keychain-side failure of the TPM means for the circle: a TPM that is not there (or
    /// not the one that made the key) leaves the identity unusable; anything else is the TPM's error.
    static func failure(_ error: KeychainError, _ doing: String) -> SyncError {
        switch error.code {
        case .tpmUnavailable, .tpmFailure: return SyncError(.identityUnavailable, unavailable(error.reason))
        case .recordCorrupted, .objectNotFound: return SyncError(.tampered, "\(doing): \(error.reason)")
        default: return SyncError(.crypto, "\(doing): \(error.reason)")
        }
    }

    static func unavailable(_ reason: String) -> String {
        "this device's identity key is in this machine's TPM and cannot be used (\(reason)); the circle is out of reach from this keychain "
            + "here: 'keychainctl sync leave --local' forgets it, then 'keychainctl sync join' asks to join again"
    }
}

/// This device's identity key in its circle: made at setup or join, kept in the keychain's sync
/// state — its kind in `sync.identity.kind`, and in `sync.identity` (sealed under the master key)
/// the TPM blob or the PKCS#8 private key. A keychain made before there was a kind holds software.
extension SyncEngine {
    /// A new identity key for this device, where `choice` says: `.auto` takes the TPM when one is
    /// configured and answers (and software if it cannot make the key), `.tpm` fails without one.
    func makeIdentity(_ choice: IdentityKeyChoice = .auto) throws(SyncError) -> any DeviceIdentity {
        switch choice {
        case .software:
            return try SoftwareDeviceIdentity.generate()
        case .tpm:
            guard EnclaveTPM.configuredTCTI != nil else { throw SyncError(.identityUnavailable, "the identity key was asked for in the TPM, but " + EnclaveTPM.noTPM) }
            return try makeTPMIdentity()
        case .auto:
            guard EnclaveTPM.isAvailable, let identity = try? makeTPMIdentity() else { return try SoftwareDeviceIdentity.generate() }
            return identity
        }
    }

    private func makeTPMIdentity() throws(SyncError) -> TPMDeviceIdentity {
        let key: EnclaveKey
        let master = try unlocked()
        do { key = try keychain.createEnclaveKey(.ecP256, master: master) } catch {
            throw SyncError(.identityUnavailable, "cannot make the device's identity key in the TPM: \(error.reason)")
        }
        return try TPMDeviceIdentity(key: key)
    }

    /// Keeps `identity` in the keychain's sync state, with its kind.
    func keepIdentity(_ identity: any DeviceIdentity) throws(SyncError) {
        let kind: IdentityKeyKind
        let stored: SecureBytes
        if let software = identity as? SoftwareDeviceIdentity {
            kind = .software
            stored = try software.privateKeyInfo()
        } else if let inTPM = identity as? TPMDeviceIdentity {
            kind = .tpm
            stored = SecureBytes(inTPM.blob)
        } else {
            throw SyncError(.malformed, "an identity key of an unknown kind")
        }
        try setSecret("identity", stored)
        try setValue("identity.kind", Array(kind.rawValue.utf8))
    }

    /// Where this device's identity key lives; nil when the keychain is in no circle.
    public func identityKind() throws(SyncError) -> IdentityKeyKind? {
        guard let raw = try value("identity.kind") else { return try value("device") == nil ? nil : .software }
        guard let kind = IdentityKeyKind(rawValue: String(decoding: raw, as: UTF8.self)) else {
            throw SyncError(.malformed, "the sync state names an identity key of an unknown kind")
        }
        return kind
    }

    /// The identity key this device keeps (a TPM key is loaded into the TPM).
    func identity() throws(SyncError) -> any DeviceIdentity {
        guard let stored = try secret("identity") else { throw SyncError(.malformed, "this keychain is in no circle") }
        switch try identityKind() ?? .software {
        case .software:
            return try SoftwareDeviceIdentity.read(privateKeyInfo: stored)
        case .tpm:
            let blob: EnclaveKeyBlob
            do { blob = try EnclaveKeyBlob(bytes: stored.bytes) } catch { throw SyncError(.malformed, "the device's TPM identity key: \(error.reason)") }
            guard EnclaveTPM.configuredTCTI != nil else { throw SyncError(.identityUnavailable, TPMDeviceIdentity.unavailable(EnclaveTPM.noTPM)) }
            let master = try unlocked()
            let key: EnclaveKey
            do { key = try keychain.loadEnclaveKey(blob, master: master) } catch {
                throw TPMDeviceIdentity.failure(error, "loading the device's identity key")
            }
            return try TPMDeviceIdentity(key: key)
        }
    }
}
