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
    private let key: SecureBytes

    public init(firstGenerationKey: SecureBytes) throws(SyncError) {
        key = try CircleKeys.derive(firstGenerationKey, "keychain-pkcs11 sync names")
    }

    public func name(for uid: [UInt8]) throws(SyncError) -> String {
        do { return Hex.string(try Digest.hmac(.sha256, key: key, data: uid).prefix(16)) } catch {
            throw SyncError(.crypto, "HMAC failed: \(error)")
        }
    }
}
