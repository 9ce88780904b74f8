import KeychainCrypto

/// A device's identity key (Docs/sync.md, "Identities and keys"): it signs the device's manifests
/// and circle events, and receives the circle key (ECDH). In software (sealed under the keychain's
/// master key) or in the TPM.
public protocol DeviceIdentity: Sendable {
    /// The device's public key, as a SubjectPublicKeyInfo (P-256).
    var publicKeyInfo: [UInt8] { get }
    /// An ECDSA P-256 / SHA-256 signature of `data`: r‖s, 32 bytes each (as PKCS#11 and
    /// KeychainCrypto's `SignatureOperation` give it; not DER).
    func sign(_ data: [UInt8]) throws(SyncError) -> [UInt8]
    /// The ECDH shared secret with the holder of `peer` (a P-256 SubjectPublicKeyInfo).
    func sharedSecret(with peer: [UInt8]) throws(SyncError) -> SecureBytes
}

/// A device identity key held in memory (made fresh, or read back from its sealed form).
public final class SoftwareDeviceIdentity: DeviceIdentity, @unchecked Sendable {
    private let key: AsymmetricKey
    public let publicKeyInfo: [UInt8]

    public init(key: AsymmetricKey) throws(SyncError) {
        guard key.kind == .ec(.p256) else { throw SyncError(.crypto, "a device identity key is a P-256 key") }
        self.key = key
        do { publicKeyInfo = try key.subjectPublicKeyInfo() } catch { throw SyncError(.crypto, "the device key's public part: \(error)") }
    }

    public static func generate() throws(SyncError) -> SoftwareDeviceIdentity {
        let key: AsymmetricKey
        do { key = try AsymmetricKey.generate(.ec(.p256)) } catch { throw SyncError(.crypto, "a new device key: \(error)") }
        return try SoftwareDeviceIdentity(key: key)
    }

    /// The private key as PKCS#8, for sealing under the master key.
    public func privateKeyInfo() throws(SyncError) -> SecureBytes {
        do { return try key.pkcs8() } catch { throw SyncError(.crypto, "encoding the device key: \(error)") }
    }

    public static func read(privateKeyInfo: SecureBytes) throws(SyncError) -> SoftwareDeviceIdentity {
        let key: AsymmetricKey
        do { key = try AsymmetricKey.privateKey(pkcs8: privateKeyInfo) } catch { throw SyncError(.malformed, "not a device key") }
        return try SoftwareDeviceIdentity(key: key)
    }

    public func sign(_ data: [UInt8]) throws(SyncError) -> [UInt8] {
        do {
            let operation = try SignatureOperation(key: key, scheme: .ecdsa(digest: .sha256), signing: true)
            try data.withUnsafeBytes { try operation.update($0) }
            return try operation.sign()
        } catch {
            throw SyncError(.crypto, "signing: \(error)")
        }
    }

    public func sharedSecret(with peer: [UInt8]) throws(SyncError) -> SecureBytes {
        do { return try key.sharedSecret(with: AsymmetricKey.publicKey(subjectPublicKeyInfo: peer)) } catch {
            throw SyncError(.crypto, "ECDH with a device key: \(error)")
        }
    }
}

/// Checks a device's ECDSA P-256 / SHA-256 signature.
public enum DeviceSignature {
    public static func verify(_ signature: [UInt8], of data: [UInt8], publicKeyInfo: [UInt8]) -> Bool {
        guard let key = try? AsymmetricKey.publicKey(subjectPublicKeyInfo: publicKeyInfo), key.kind == .ec(.p256),
              let operation = try? SignatureOperation(key: key, scheme: .ecdsa(digest: .sha256), signing: false) else { return false }
        guard (try? data.withUnsafeBytes { try operation.update($0) }) != nil else { return false }
        return (try? operation.verify(signature)) == true
    }
}

/// A device's manifest (Docs/sync.md, "Manifest"): what the device knows of every item — file
/// name, version, SHA-256 of the file — and a counter it raises at each write.
///
///     "KCM1" ‖ device id ‖ counter (u64) ‖ generation (u32) ‖ signature length (u16) ‖
///     signature ‖ AES-256-GCM box of the entries
///
/// The signature covers everything but itself; the box's associated data is the header.
public struct SyncManifest: Sendable, Equatable {
    public struct Entry: Sendable, Equatable {
        public let name: String
        public let version: UInt64
        public let digest: [UInt8]

        public init(name: String, version: UInt64, digest: [UInt8]) {
            self.name = name
            self.version = version
            self.digest = digest
        }
    }

    static let magic: [UInt8] = Array("KCM1".utf8)
    static let entriesMagic: [UInt8] = Array("KME1".utf8)

    public let device: [UInt8]
    public let counter: UInt64
    public let generation: UInt32
    /// Sorted by name.
    public let entries: [Entry]

    public init(device: [UInt8], counter: UInt64, generation: UInt32, entries: [Entry]) {
        self.device = device
        self.counter = counter
        self.generation = generation
        self.entries = entries.sorted { $0.name < $1.name }
    }

    /// The SHA-256 of a file, as entries record it.
    public static func digest(of file: [UInt8]) throws(SyncError) -> [UInt8] {
        do { return try Digest.hash(.sha256, file) } catch { throw SyncError(.crypto, "SHA-256: \(error)") }
    }

    /// The digest of a record kept on secure pages (no copy of it leaves them).
    public static func digest(of record: SecureBytes) throws(SyncError) -> [UInt8] {
        do { return try record.withUnsafeBytes { try Digest.hash(.sha256, $0) } } catch { throw SyncError(.crypto, "SHA-256: \(error)") }
    }

    public func sealed(keys: CircleKeys, signer: DeviceIdentity) throws(SyncError) -> [UInt8] {
        guard device.count == SyncItemState.idSize, keys.generation == generation else {
            throw SyncError(.malformed, "a manifest's device id has \(SyncItemState.idSize) bytes and its generation is its keys'")
        }
        var body = ByteWriter()
        body.append(Self.entriesMagic)
        body.append(UInt32(entries.count))
        for entry in entries {
            let name = Array(entry.name.utf8)
            guard name.count <= Int(UInt16.max), entry.digest.count == 32 else { throw SyncError(.malformed, "a manifest entry for \(entry.name)") }
            body.append(UInt16(name.count))
            body.append(name)
            body.append(entry.version)
            body.append(entry.digest)
        }
        let header = headerBytes()
        let box: [UInt8]
        do { box = try body.bytes.withUnsafeBytes { try AESGCM.seal($0, key: keys.manifest, associatedData: header) } } catch {
            throw SyncError(.crypto, "sealing a manifest: \(error)")
        }
        let signature = try signer.sign(header + box)
        guard signature.count <= Int(UInt16.max) else { throw SyncError(.crypto, "a signature too long") }
        var file = ByteWriter()
        file.append(header)
        file.append(UInt16(signature.count))
        file.append(signature)
        file.append(box)
        return file.bytes
    }

    /// The device a manifest file claims to be from (before it is checked).
    public static func claimedDevice(_ file: [UInt8]) -> [UInt8]? {
        var reader = ByteReader(file)
        guard reader.take(4) == magic else { return nil }
        return reader.take(SyncItemState.idSize)
    }

    /// Opens `file`, which must be signed by the holder of `publicKeyInfo` and come from `device`.
    public static func open(_ file: [UInt8], device: [UInt8], publicKeyInfo: [UInt8], keys: (UInt32) -> CircleKeys?) throws(SyncError) -> SyncManifest {
        let label = "manifests/\(Hex.string(device))"
        var reader = ByteReader(file)
        guard reader.take(4) == magic, let claimed = reader.take(SyncItemState.idSize), let counter = reader.uint64(),
              let generation = reader.uint32() else { throw SyncError(.malformed, "\(label) is not a manifest") }
        let headerEnd = reader.offset
        guard let signatureLength = reader.uint16(), let signature = reader.take(Int(signatureLength)) else {
            throw SyncError(.malformed, "\(label) is not a manifest")
        }
        let box = Array(file[reader.offset...])
        let header = Array(file[..<headerEnd])
        guard claimed == device, DeviceSignature.verify(signature, of: header + box, publicKeyInfo: publicKeyInfo) else {
            throw SyncError(.badSignature, "\(label) is not signed by that device's key")
        }
        guard let circleKeys = keys(generation) else {
            throw SyncError(.unknownGeneration, "\(label) is sealed under generation \(generation) of the circle key, which this device does not hold")
        }
        let body: SecureBytes
        do { body = try AESGCM.open(box, key: circleKeys.manifest, associatedData: header) } catch {
            throw SyncError(.tampered, "\(label) does not open under the circle key")
        }
        var entries: [Entry] = []
        let ok = body.withUnsafeBytes { raw -> Bool in
            var reader = ByteReader(Array(raw))
            guard reader.take(4) == entriesMagic, let count = reader.uint32() else { return false }
            for _ in 0..<count {
                guard let length = reader.uint16(), let name = reader.take(Int(length)), let version = reader.uint64(),
                      let digest = reader.take(32) else { return false }
                entries.append(Entry(name: String(decoding: name, as: UTF8.self), version: version, digest: digest))
            }
            return reader.remaining == 0
        }
        guard ok else { throw SyncError(.malformed, "\(label) opens but its entries are not readable") }
        return SyncManifest(device: device, counter: counter, generation: generation, entries: entries)
    }

    private func headerBytes() -> [UInt8] {
        var writer = ByteWriter()
        writer.append(Self.magic)
        writer.append(device)
        writer.append(counter)
        writer.append(generation)
        return writer.bytes
    }
}
