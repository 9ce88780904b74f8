import KeychainCrypto

/// One event of a circle's membership log (Docs/sync.md, "Membership"), stored as
/// `circle/log/<index>`:
///
///     "KCE1" ‖ kind (u8) ‖ index (u32) ‖ previous event's SHA-256 ‖ circle id ‖ generation (u32) ‖
///     subject device ‖ subject key length (u16) ‖ subject key ‖ signer device ‖
///     signature length (u16) ‖ signature
///
/// The genesis (index 0) names the founder as subject and signer; an `add` admits its subject; a
/// `remove` drops its subject and starts a new generation of the circle key. Each is signed by a
/// device that is a member when it is appended.
public struct CircleEvent: Sendable, Equatable {
    public enum Kind: UInt8, Sendable { case genesis = 1, add = 2, remove = 3 }

    static let magic: [UInt8] = Array("KCE1".utf8)

    public let kind: Kind
    public let index: UInt32
    public let previous: [UInt8]
    public let circle: [UInt8]
    /// The circle key's generation from this event on.
    public let generation: UInt32
    public let subject: [UInt8]
    public let subjectKey: [UInt8]
    public let signer: [UInt8]

    public init(kind: Kind, index: UInt32, previous: [UInt8], circle: [UInt8], generation: UInt32, subject: [UInt8], subjectKey: [UInt8], signer: [UInt8]) {
        self.kind = kind
        self.index = index
        self.previous = previous
        self.circle = circle
        self.generation = generation
        self.subject = subject
        self.subjectKey = subjectKey
        self.signer = signer
    }

    func body() -> [UInt8] {
        var writer = ByteWriter()
        writer.append(Self.magic)
        writer.append(kind.rawValue)
        writer.append(index)
        writer.append(previous)
        writer.append(circle)
        writer.append(generation)
        writer.append(subject)
        writer.append(UInt16(subjectKey.count))
        writer.append(subjectKey)
        writer.append(signer)
        return writer.bytes
    }

    /// The event's file, signed by `identity` (the signer's).
    public func signed(by identity: DeviceIdentity) throws(SyncError) -> [UInt8] {
        guard previous.count == 32, circle.count == SyncItemState.idSize, subject.count == SyncItemState.idSize, signer.count == SyncItemState.idSize,
              subjectKey.count <= Int(UInt16.max) else { throw SyncError(.malformed, "a circle event's fields") }
        let body = body()
        let signature = try identity.sign(body)
        var writer = ByteWriter()
        writer.append(body)
        writer.append(UInt16(signature.count))
        writer.append(signature)
        return writer.bytes
    }

    /// The event a file holds and its signature (not yet checked).
    static func parse(_ file: [UInt8]) -> (event: CircleEvent, body: [UInt8], signature: [UInt8])? {
        var reader = ByteReader(file)
        guard reader.take(4) == magic, let rawKind = reader.uint8(), let kind = Kind(rawValue: rawKind), let index = reader.uint32(),
              let previous = reader.take(32), let circle = reader.take(SyncItemState.idSize), let generation = reader.uint32(),
              let subject = reader.take(SyncItemState.idSize), let keyLength = reader.uint16(), let subjectKey = reader.take(Int(keyLength)),
              let signer = reader.take(SyncItemState.idSize) else { return nil }
        let bodyEnd = reader.offset
        guard let signatureLength = reader.uint16(), let signature = reader.take(Int(signatureLength)), reader.remaining == 0 else { return nil }
        return (CircleEvent(kind: kind, index: index, previous: previous, circle: circle, generation: generation, subject: subject,
                            subjectKey: subjectKey, signer: signer), Array(file[..<bodyEnd]), signature)
    }
}

/// Who is in a circle, as its log says after checking every event.
public struct CircleMembers: Sendable {
    public let circle: [UInt8]
    /// Device id (hex) → public key (SubjectPublicKeyInfo).
    public let members: [String: [UInt8]]
    public let generation: UInt32
    /// SHA-256 of the last event: the next event's `previous`.
    public let head: [UInt8]
    public let count: UInt32
    /// Devices the log removed (hex ids).
    public let removed: Set<String>
    /// For each generation of the circle key, the device whose event started it (the founder for
    /// the first, the remover for later ones) and its key: it wraps that generation to the members
    /// first, and may have left since (`sync leave` removes the leaving device itself).
    public let generationStarters: [UInt32: (device: String, key: [UInt8])]

    /// The devices whose signature a key wrapped for generation `generation` may carry: the
    /// current members, and the device that started that generation.
    public func wrappers(of generation: UInt32) -> [String: [UInt8]] {
        var accepted = members
        if let starter = generationStarters[generation] { accepted[starter.device] = starter.key }
        return accepted
    }
}

public enum CircleLog {
    /// SHA-256 of an event's file: the genesis's is what every device pins.
    public static func hash(_ file: [UInt8]) throws(SyncError) -> [UInt8] { try SyncManifest.digest(of: file) }

    /// Checks the log (files in index order) from the pinned genesis: each event names the one
    /// before by hash, carries its index, is signed by a device that is a member at that point,
    /// and changes membership as its kind says.
    public static func verify(_ files: [[UInt8]], genesis pinned: [UInt8]) throws(SyncError) -> CircleMembers {
        guard let first = files.first else { throw SyncError(.withheld, "circle/log/0 is missing: the remote has no circle") }
        guard try hash(first) == pinned else {
            throw SyncError(.tampered, "circle/log/0 is not the circle this device joined (its genesis differs from the one pinned here)")
        }
        var members: [String: [UInt8]] = [:]
        var circle: [UInt8] = []
        var generation: UInt32 = 0
        var head: [UInt8] = []
        var removed = Set<String>()
        var starters: [UInt32: (device: String, key: [UInt8])] = [:]
        for (position, file) in files.enumerated() {
            let label = "circle/log/\(position)"
            guard let (event, body, signature) = CircleEvent.parse(file), event.index == UInt32(position) else {
                throw SyncError(.malformed, "\(label) is not a circle event")
            }
            if position == 0 {
                guard event.kind == .genesis, event.subject == event.signer, event.previous == [UInt8](repeating: 0, count: 32) else {
                    throw SyncError(.malformed, "\(label) is not a genesis")
                }
                guard DeviceSignature.verify(signature, of: body, publicKeyInfo: event.subjectKey) else {
                    throw SyncError(.badSignature, "\(label) is not signed by its founder")
                }
                circle = event.circle
                generation = event.generation
                members[Hex.string(event.subject)] = event.subjectKey
                starters[event.generation] = (Hex.string(event.subject), event.subjectKey)
            } else {
                guard event.previous == head, event.circle == circle else {
                    throw SyncError(.tampered, "\(label) does not follow circle/log/\(position - 1)")
                }
                guard let signerKey = members[Hex.string(event.signer)] else {
                    throw SyncError(.badSignature, "\(label) is signed by a device that is not a member")
                }
                guard DeviceSignature.verify(signature, of: body, publicKeyInfo: signerKey) else {
                    throw SyncError(.badSignature, "\(label) is not signed by the member it names")
                }
                switch event.kind {
                case .genesis:
                    throw SyncError(.malformed, "\(label) is a second genesis")
                case .add:
                    guard members[Hex.string(event.subject)] == nil, event.generation == generation else {
                        throw SyncError(.malformed, "\(label) adds a member twice or changes the generation")
                    }
                    members[Hex.string(event.subject)] = event.subjectKey
                case .remove:
                    guard members[Hex.string(event.subject)] != nil, event.generation == generation + 1 else {
                        throw SyncError(.malformed, "\(label) removes a device that is not a member, or without a new generation")
                    }
                    members[Hex.string(event.subject)] = nil
                    removed.insert(Hex.string(event.subject))
                    generation = event.generation
                    starters[event.generation] = (Hex.string(event.signer), signerKey)
                }
            }
            head = try hash(file)
        }
        return CircleMembers(circle: circle, members: members, generation: generation, head: head, count: UInt32(files.count), removed: removed,
                             generationStarters: starters)
    }

    /// The short code a joining device shows and a member recomputes from the request: the first
    /// 60 bits of SHA-256(genesis hash ‖ device id ‖ public key), in 12 characters of RFC 4648
    /// base 32. 60 bits, so that whoever holds the remote cannot make a request of their own with
    /// the same code while a join waits (2^60 hashes; 40 bits took minutes on one GPU).
    public static let pairingCodeLength = 12

    public static func pairingCode(genesis: [UInt8], device: [UInt8], publicKeyInfo: [UInt8]) throws(SyncError) -> String {
        let digest = try SyncManifest.digest(of: Array("keychain-pkcs11 pairing".utf8) + genesis + device + publicKeyInfo)
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        let bits = digest.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } >> 4
        return String((0..<pairingCodeLength).map { alphabet[Int((bits >> UInt64(55 - 5 * $0)) & 31)] })
    }
}

/// A circle key wrapped to one member (Docs/sync.md: `circle/keys/<generation>/<device>`):
/// ECDH between a fresh P-256 key and the member's, HKDF-SHA-256, AES-256-GCM; the associated
/// data binds the circle, the generation and the member; signed by the member that wrapped it,
/// so that whoever holds the remote cannot put a key of their own in its place (the wrapping
/// needs only the recipient's public key, which the log shows).
///
///     "KCW2" ‖ ephemeral key length (u16) ‖ ephemeral SubjectPublicKeyInfo ‖ box length (u32) ‖ box ‖
///     wrapping member's id ‖ signature length (u16) ‖ signature
public enum CircleKeyWrap {
    static let magic: [UInt8] = Array("KCW2".utf8)

    public static func wrap(_ key: SecureBytes, generation: UInt32, circle: [UInt8], to device: [UInt8], publicKeyInfo: [UInt8],
                            by wrapper: [UInt8], signer: DeviceIdentity) throws(SyncError) -> [UInt8] {
        let ephemeral = try SoftwareDeviceIdentity.generate()
        let shared = try ephemeral.sharedSecret(with: publicKeyInfo)
        let wrapping = try derive(shared, ephemeral: ephemeral.publicKeyInfo, recipient: publicKeyInfo)
        let box: [UInt8]
        do { box = try AESGCM.seal(key, key: wrapping, associatedData: associatedData(circle: circle, generation: generation, device: device)) } catch {
            throw SyncError(.crypto, "wrapping the circle key: \(error)")
        }
        var writer = ByteWriter()
        writer.append(magic)
        writer.append(UInt16(ephemeral.publicKeyInfo.count))
        writer.append(ephemeral.publicKeyInfo)
        writer.append(UInt32(box.count))
        writer.append(box)
        writer.append(wrapper)
        let signed = writer.bytes + associatedData(circle: circle, generation: generation, device: device)
        let signature = try signer.sign(signed)
        writer.append(UInt16(signature.count))
        writer.append(signature)
        return writer.bytes
    }

    /// Opens the key wrapped for `device`; `wrappers` are the devices whose signature is accepted
    /// (the circle's current members, by hex id, with their public keys).
    public static func unwrap(_ file: [UInt8], generation: UInt32, circle: [UInt8], device: [UInt8], identity: DeviceIdentity,
                              wrappers: [String: [UInt8]]) throws(SyncError) -> SecureBytes {
        let label = "circle/keys/\(generation)/\(Hex.string(device))"
        var reader = ByteReader(file)
        guard reader.take(4) == magic, let length = reader.uint16(), let ephemeral = reader.take(Int(length)), let boxLength = reader.uint32(),
              let box = reader.take(Int(boxLength)), let wrapper = reader.take(SyncItemState.idSize) else {
            throw SyncError(.malformed, "\(label) is not a wrapped key")
        }
        let signedEnd = reader.offset
        guard let signatureLength = reader.uint16(), let signature = reader.take(Int(signatureLength)), reader.remaining == 0 else {
            throw SyncError(.malformed, "\(label) is not a wrapped key")
        }
        guard let wrapperKey = wrappers[Hex.string(wrapper)],
              DeviceSignature.verify(signature, of: Array(file[..<signedEnd]) + associatedData(circle: circle, generation: generation, device: device),
                                     publicKeyInfo: wrapperKey) else {
            throw SyncError(.badSignature, "\(label) is not signed by a member of the circle")
        }
        let shared = try identity.sharedSecret(with: ephemeral)
        let wrapping = try derive(shared, ephemeral: ephemeral, recipient: identity.publicKeyInfo)
        do {
            return try AESGCM.open(box, key: wrapping, associatedData: associatedData(circle: circle, generation: generation, device: device))
        } catch {
            throw SyncError(.tampered, "\(label) does not open with this device's key")
        }
    }

    private static func derive(_ shared: SecureBytes, ephemeral: [UInt8], recipient: [UInt8]) throws(SyncError) -> SecureBytes {
        do { return try KeyDerivation.hkdf(key: shared, salt: ephemeral + recipient, info: Array("keychain-pkcs11 sync key wrap".utf8)) } catch {
            throw SyncError(.crypto, "HKDF failed: \(error)")
        }
    }

    private static func associatedData(circle: [UInt8], generation: UInt32, device: [UInt8]) -> [UInt8] {
        var writer = ByteWriter()
        writer.append(Array("keychain-pkcs11 sync circle key".utf8))
        writer.append(circle)
        writer.append(generation)
        writer.append(device)
        return writer.bytes
    }
}
