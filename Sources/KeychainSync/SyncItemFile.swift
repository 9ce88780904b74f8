import KeychainCrypto

/// What the circle knows of one item: enough to settle two versions of it (`SyncMerge`).
public struct SyncItemState: Sendable, Equatable, Hashable {
    public static let idSize = 16

    /// The item's uid (its CKA_UNIQUE_ID), the same on every device.
    public let uid: [UInt8]
    /// +1 at each write of the item by any device.
    public let version: UInt64
    /// Milliseconds since 1970 (UTC) of the write, by the writer's clock.
    public let modified: UInt64
    /// The write's time in seconds since 1970, as a keychain row keeps it.
    public var modifiedSeconds: Int64 { Int64(modified / 1000) }
    /// The device that wrote it.
    public let writer: [UInt8]
    /// A delete: the item is gone, this version remembers it.
    public let deleted: Bool

    public init(uid: [UInt8], version: UInt64, modified: UInt64, writer: [UInt8], deleted: Bool) {
        self.uid = uid
        self.version = version
        self.modified = modified
        self.writer = writer
        self.deleted = deleted
    }
}

/// One item as the remote holds it: its state and its attribute record (none for a tombstone).
public struct SyncItem: Sendable {
    public let state: SyncItemState
    public let record: SecureBytes

    public init(state: SyncItemState, record: SecureBytes) {
        self.state = state
        self.record = record
    }
}

/// The sealed file of an item (Docs/sync.md, "Item file"):
///
///     "KCS1" ‖ generation (u32) ‖ version (u64) ‖ AES-256-GCM box
///
/// The associated data binds the file's name, the generation and the version: a file put under
/// another item's name, any changed byte, or a header claiming another version does not open. The
/// plaintext — "KSI1" ‖ uid ‖ version ‖ modified ‖ writer ‖ flags ‖ record length (u32) ‖ record —
/// is padded with zeros to a size bucket.
public enum SyncItemFile {
    static let magic: [UInt8] = Array("KCS1".utf8)
    static let plaintextMagic: [UInt8] = Array("KSI1".utf8)
    static let headerSize = 4 + 4 + 8
    static let fixedSize = 4 + SyncItemState.idSize + 8 + 8 + SyncItemState.idSize + 1 + 4
    /// The largest record a file carries (the keychain's own records are smaller).
    public static let largestRecord = 1 << 20

    /// The padded size of a plaintext of `count` bytes: 1, 2, 4, 8, 16 KiB, then multiples of 16 KiB.
    public static func bucket(_ count: Int) -> Int {
        var size = 1024
        while size < count, size < 16 * 1024 { size *= 2 }
        if count <= size { return size }
        return (count + 16 * 1024 - 1) / (16 * 1024) * (16 * 1024)
    }

    public static func seal(_ item: SyncItem, name: String, keys: CircleKeys) throws(SyncError) -> [UInt8] {
        let state = item.state
        guard state.uid.count == SyncItemState.idSize, state.writer.count == SyncItemState.idSize else {
            throw SyncError(.malformed, "an item id and a device id have \(SyncItemState.idSize) bytes")
        }
        guard item.record.count <= largestRecord else { throw SyncError(.malformed, "a record of \(item.record.count) bytes is too large to sync") }
        let plaintext = SecureBytes(count: bucket(fixedSize + item.record.count))
        plaintext.withUnsafeMutableBytes { out in
            var writer = ByteWriter()
            writer.append(plaintextMagic)
            writer.append(state.uid)
            writer.append(state.version)
            writer.append(state.modified)
            writer.append(state.writer)
            writer.append(state.deleted ? UInt8(1) : 0)
            writer.append(UInt32(item.record.count))
            out.copyBytes(from: writer.bytes)
            item.record.withUnsafeBytes { record in
                UnsafeMutableRawBufferPointer(rebasing: out[fixedSize..<(fixedSize + record.count)]).copyMemory(from: record)
            }
        }
        var header = ByteWriter()
        header.append(magic)
        header.append(keys.generation)
        header.append(state.version)
        do {
            let box = try AESGCM.seal(plaintext, key: keys.item, associatedData: associatedData(name: name, generation: keys.generation, version: state.version))
            return header.bytes + box
        } catch {
            throw SyncError(.crypto, "sealing \(name): \(error)")
        }
    }

    /// The generation and version a file's header claims (before opening it).
    public static func header(_ file: [UInt8], name: String) throws(SyncError) -> (generation: UInt32, version: UInt64) {
        var reader = ByteReader(file)
        guard reader.take(4) == magic, let generation = reader.uint32(), let version = reader.uint64() else {
            throw SyncError(.malformed, "items/\(name) is not an item file")
        }
        return (generation, version)
    }

    /// Opens the file stored as `name`. `listedVersion`: the version the newest manifest lists
    /// for it, when one does (an older file is a replay). `keys`: the circle key of a generation.
    public static func open(_ file: [UInt8], name: String, listedVersion: UInt64?, names: ItemNames,
                            keys: (UInt32) -> CircleKeys?) throws(SyncError) -> SyncItem {
        let (generation, version) = try header(file, name: name)
        if let listedVersion, version < listedVersion {
            throw SyncError(.replayed, "items/\(name) holds version \(version) of its item, a manifest lists version \(listedVersion) (an old file put back)")
        }
        guard let circleKeys = keys(generation) else {
            throw SyncError(.unknownGeneration, "items/\(name) is sealed under generation \(generation) of the circle key, which this device does not hold")
        }
        let plaintext: SecureBytes
        do {
            plaintext = try AESGCM.open(Array(file[headerSize...]), key: circleKeys.item,
                                        associatedData: associatedData(name: name, generation: generation, version: version))
        } catch {
            throw SyncError(.tampered, "items/\(name) does not open under its name: edited, or moved from another item's name")
        }
        let parsed: (state: SyncItemState, recordLength: Int)? = plaintext.withUnsafeBytes { raw in
            var reader = ByteReader(Array(raw.prefix(fixedSize)))
            guard reader.take(4) == plaintextMagic, let uid = reader.take(SyncItemState.idSize), let itemVersion = reader.uint64(),
                  let modified = reader.uint64(), let writer = reader.take(SyncItemState.idSize), let flags = reader.uint8(),
                  let length = reader.uint32(), Int(length) <= raw.count - fixedSize else { return nil }
            return (SyncItemState(uid: uid, version: itemVersion, modified: modified, writer: writer, deleted: flags & 1 != 0), Int(length))
        }
        guard let parsed else { throw SyncError(.malformed, "items/\(name) opens but its contents are not an item") }
        guard parsed.state.version == version, try names.name(for: parsed.state.uid) == name else {
            throw SyncError(.tampered, "items/\(name) holds another item or version than its name and header say")
        }
        let record = plaintext.withUnsafeBytes { SecureBytes($0[fixedSize..<(fixedSize + parsed.recordLength)]) }
        return SyncItem(state: parsed.state, record: record)
    }

    static func associatedData(name: String, generation: UInt32, version: UInt64) -> [UInt8] {
        var writer = ByteWriter()
        writer.append(Array("keychain-pkcs11 sync item".utf8))
        writer.append(Array(name.utf8))
        writer.append(generation)
        writer.append(version)
        return writer.bytes
    }
}
