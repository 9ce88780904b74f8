import KeychainCore
import KeychainCrypto

/// This device's identity key in its circle: made at setup or join, kept sealed under the
/// keychain's master key in the sync state (`sync.identity`).
extension SyncEngine {
    /// A new identity key for this device.
    func makeIdentity() throws(SyncError) -> any DeviceIdentity {
        try SoftwareDeviceIdentity.generate()
    }

    /// Keeps `identity` in the keychain's sync state.
    func keepIdentity(_ identity: any DeviceIdentity) throws(SyncError) {
        guard let software = identity as? SoftwareDeviceIdentity else { throw SyncError(.malformed, "an identity key of an unknown kind") }
        try setSecret("identity", try software.privateKeyInfo())
    }

    /// The identity key this device keeps.
    func identity() throws(SyncError) -> any DeviceIdentity {
        guard let stored = try secret("identity") else { throw SyncError(.malformed, "this keychain is in no circle") }
        return try SoftwareDeviceIdentity.read(privateKeyInfo: stored)
    }
}
