import KeychainCrypto

/// The keys of one generation of a circle's key (Docs/sync.md, "Identities and keys"): item files
/// and manifests are sealed under keys derived from it, never under it directly.
public struct CircleKeys: Sendable {
    public static let keySize = 32

    public let generation: UInt32
    let item: SecureBytes
    let manifest: SecureBytes

    public init(generation: UInt32, key: SecureBytes) throws(SyncError) {
        guard key.count == Self.keySize else { throw SyncError(.crypto, "a circle key has \(Self.keySize) bytes, not \(key.count)") }
        self.generation = generation
        item = try Self.derive(key, "keychain-pkcs11 sync item")
        manifest = try Self.derive(key, "keychain-pkcs11 sync manifest")
    }

    static func derive(_ key: SecureBytes, _ info: String) throws(SyncError) -> SecureBytes {
        do { return try KeyDerivation.hkdf(key: key, salt: [], info: Array(info.utf8)) } catch {
            throw SyncError(.crypto, "HKDF failed: \(error)")
        }
    }
}

/// File names of items: HMAC-SHA-256 of the item's id under a key derived from the circle's first
/// generation (names stay put when the key rotates), 32 hex digits. They say nothing of the item.
public struct ItemNames: Sendable {
    let key: SecureBytes

    public init(firstGenerationKey: SecureBytes) throws(SyncError) {
        key = try CircleKeys.derive(firstGenerationKey, "keychain-pkcs11 sync names")
    }

    public func name(for uid: [UInt8]) throws(SyncError) -> String {
        do { return Hex.string(try Digest.hmac(.sha256, key: key, data: uid).prefix(16)) } catch {
            throw SyncError(.crypto, "HMAC failed: \(error)")
        }
    }
}

/// The names devices give themselves (`--device-name`), sealed for the circle's members:
/// `circle/names/<device>` = AES-256-GCM box under a key derived from the names key, bound to the
/// device id.
public enum DeviceNames {
    public static func seal(_ name: String, device: [UInt8], names: ItemNames) throws(SyncError) -> [UInt8] {
        do { return try Array(name.utf8).withUnsafeBytes { try AESGCM.seal($0, key: names.deviceNameKey(), associatedData: Array("keychain-pkcs11 device name".utf8) + device) } } catch {
            throw SyncError(.crypto, "sealing a device name: \(error)")
        }
    }

    public static func open(_ file: [UInt8], device: [UInt8], names: ItemNames) throws(SyncError) -> String {
        do { return String(decoding: try AESGCM.open(file, key: names.deviceNameKey(), associatedData: Array("keychain-pkcs11 device name".utf8) + device).bytes, as: UTF8.self) } catch {
            throw SyncError(.tampered, "circle/names/\(Hex.string(device)) does not open under the circle's key")
        }
    }
}

extension ItemNames {
    func deviceNameKey() throws(SyncError) -> SecureBytes { try CircleKeys.derive(key, "keychain-pkcs11 sync device names") }
}
