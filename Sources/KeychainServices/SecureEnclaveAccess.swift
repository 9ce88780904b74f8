import Foundation
import KeychainCore
import KeychainCrypto

/// What CryptoKit's `SecureEnclave.P256` keys need of the keychain (`@_spi(CryptoKit)`, not
/// Apple API): a key made in the TPM whose authorisation is the unlocked keychain's, with the same
/// unlock rules as the SecItem calls (the login session, the context's password, the prompt).
/// Errors are `KeychainServicesError` with the OSStatus a SecItem call would answer.
@_spi(CryptoKit) public enum SecureEnclaveAccess {
    /// Whether a TPM is configured and answers (`SecureEnclave.isAvailable`).
    public static var isAvailable: Bool { EnclaveTPM.isAvailable }

    /// A new P-256 key in the TPM for the default keychain, under `accessControl`: its flags go
    /// into the key's `dataRepresentation`, bound into the TPM authorisation, so a presence flag
    /// asks for the keychain password at each use of this key and of every key loaded from it.
    public static func create(accessControl: SecAccessControl?, context: LAContext?) throws(KeychainServicesError) -> SecureEnclaveKeyHandle {
        try translated {
            if let accessControl {
                guard !accessControl.flags.contains(.applicationPassword) else {
                    throw ItemError(errSecParam, "an application password does not protect a Secure Enclave (TPM) key here")
                }
                _ = try accessControl.attributes(for: .privateKey, context: context)
            }
            try requireTPM()
            return try KeychainAccess.shared.with(label: nil, context: context) { keychain, master in
                let master = try unlocked(keychain, master, context)
                let flags = accessControl?.flags.core ?? []
                let enclave = try translateKeychain { () throws(KeychainError) in try keychain.createEnclaveKey(.ecP256, master: master, accessFlags: flags) }
                return SecureEnclaveKeyHandle(enclave, keychainPath: keychain.path, context: context)
            }
        }
    }

    /// The key a `dataRepresentation` (KCSE blob) holds, loaded with the master key of the keychain
    /// it names by serial number, asking what its access control asks. An edited blob is
    /// errSecDecode.
    public static func load(_ bytes: [UInt8], context: LAContext?) throws(KeychainServicesError) -> SecureEnclaveKeyHandle {
        try translated {
            let blob = try translateKeychain { () throws(KeychainError) in try EnclaveKeyBlob(bytes: bytes) }
            try requireTPM()
            return try KeychainAccess.shared.with(serial: blob.keychainSerial, context: context) { keychain, master in
                let master = try unlocked(keychain, master, context)
                let enclave = try translateKeychain { () throws(KeychainError) in try keychain.loadEnclaveKey(blob, master: master) }
                return SecureEnclaveKeyHandle(enclave, keychainPath: keychain.path, context: context)
            }
        }
    }

    /// Apple's answer on a device without a Secure Enclave (errSecUnimplemented) when no TPM is
    /// configured, before anything asks to unlock.
    static func requireTPM() throws {
        guard EnclaveTPM.configuredTCTI != nil else { throw ItemError(errSecUnimplemented, EnclaveTPM.noTPM) }
    }

    private static func unlocked(_ keychain: Keychain, _ master: MasterKey?, _ context: LAContext?) throws -> MasterKey {
        let interaction = Interaction(allowed: !(context?.interactionNotAllowed ?? false), prompt: nil)
        if let master { return master }
        guard let master = try KeychainAccess.shared.promptUnlock(keychain, context: context, interaction: interaction) else {
            throw ItemError(errSecInteractionNotAllowed, "the keychain is locked: a Secure Enclave key's authorisation comes from it")
        }
        return master
    }
}

/// A P-256 key in the TPM, as CryptoKit's Secure Enclave keys hold it.
@_spi(CryptoKit) public final class SecureEnclaveKeyHandle: @unchecked Sendable {
    private let enclave: EnclaveKey
    private let keychainPath: String
    private let context: LAContext?
    /// A presence flag in the key's access control (carried by its blob): each use asks.
    private let asksPresence: Bool

    init(_ enclave: EnclaveKey, keychainPath: String, context: LAContext?) {
        self.enclave = enclave
        self.keychainPath = keychainPath
        self.context = context
        asksPresence = !enclave.blob.accessFlags.isDisjoint(with: .presence)
    }

    /// The KCSE blob (`EnclaveKeyBlob`): CryptoKit's `dataRepresentation`.
    public var dataRepresentation: [UInt8] { enclave.blob.bytes }

    /// The public key as an X9.62 uncompressed point.
    public func publicPoint() throws(KeychainServicesError) -> [UInt8] {
        do { return try enclave.publicKey.ecPoint() } catch { throw KeychainServicesError(errSecInternalComponent) }
    }

    /// ECDSA r‖s over a digest (fitted to 32 bytes as ECDSA does), made in the TPM.
    public func sign(digest: [UInt8]) throws(KeychainServicesError) -> [UInt8] {
        try translated {
            try confirmPresence()
            return try translateKeychain { () throws(KeychainError) in try enclave.signECDSA(digest) }
        }
    }

    /// The ECDH shared secret (x-coordinate) with a peer's X9.62 point, computed in the TPM.
    public func sharedSecret(peerPoint: [UInt8]) throws(KeychainServicesError) -> [UInt8] {
        try translated {
            try confirmPresence()
            return try translateKeychain { () throws(KeychainError) in try enclave.sharedSecret(peerPoint: peerPoint).bytes }
        }
    }

    private func confirmPresence() throws {
        guard asksPresence else { return }
        try KeychainAccess.shared.confirmPresence(keychainPath: keychainPath, context: context,
                                                  interaction: Interaction(allowed: !(context?.interactionNotAllowed ?? false), prompt: nil), what: "key")
    }
}

/// Runs `body`, its failures as the OSStatus a SecItem call would answer.
private func translated<R>(_ body: () throws -> R) throws(KeychainServicesError) -> R {
    do { return try body() } catch let error as ItemError { throw KeychainServicesError(error.status) } catch {
        throw KeychainServicesError(errSecInternalComponent)
    }
}
