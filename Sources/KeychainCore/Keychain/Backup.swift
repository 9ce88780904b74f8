import KeychainCrypto
import KeychainStore

/// What `Keychain.backup` put in the file.
public struct BackupSummary: Sendable {
    /// Objects in the file.
    public let written: Int
    /// Objects left out because they are bound to this device (`…ThisDeviceOnly`).
    public let skippedDeviceBound: Int
    /// The label of the keychain the backup came from.
    public let label: String
}

/// What `Keychain.restore` added.
public struct RestoreSummary: Sendable {
    public let restored: Int
    /// Objects skipped because their unique ID or keychain primary key already exists here.
    public let duplicates: Int
}

extension Keychain {
    /// Every token object of this keychain except those bound to this device (`…ThisDeviceOnly`,
    /// which never leave it), sealed into one `BackupFile` under `passphrase`. The master key
    /// opens the private and Always objects; nothing unencrypted is written anywhere.
    ///
    /// Errors: `.argumentsBad` for scrypt parameters out of bounds, `.pinLengthRange` for a
    /// passphrase of 0 or more than 1024 bytes, and what reading an object can fail with.
    public func backup(master: MasterKey, passphrase: UnsafeRawBufferPointer, kdf: ScryptParameters) throws(KeychainError) -> (file: [UInt8], summary: BackupSummary) {
        try lock.withLock { () throws(KeychainError) -> (file: [UInt8], summary: BackupSummary) in
            guard kdf.isWithinLimits else { throw KeychainError(.argumentsBad, "scrypt parameters out of bounds") }
            guard passphrase.count >= 1, passphrase.count <= BackupFile.maximumPassphraseLength else {
                throw KeychainError(.pinLengthRange, "a backup passphrase has 1 to \(BackupFile.maximumPassphraseLength) bytes")
            }
            let label = try info(countingObjects: false).label
            var entries: [BackupFile.Entry] = []
            defer { for index in entries.indices { wipe(&entries[index].record) } }
            let portable = Protection.allCases.filter { !$0.isDeviceBound }.map(\.rawValue)
            let deviceBound = Protection.allCases.filter(\.isDeviceBound).map(\.rawValue)
            // One snapshot: objects added or removed meanwhile are in the file entirely or not at all.
            let skipped = try translatingErrors {
                try store.read { () throws -> Int in
                    for row in try store.findObjects(protections: portable, objectClass: nil, terms: [], withRecords: false) {
                        let object = try object(id: row.id, master: master)
                        entries.append(BackupFile.Entry(uid: row.uid, record: AttributeRecord.encode(object.recordAttributes)))
                    }
                    return try store.countObjects(protections: deviceBound)
                }
            }
            let file = try BackupFile.seal(entries, label: label, passphrase: passphrase, kdf: kdf)
            return (file, BackupSummary(written: entries.count, skippedDeviceBound: skipped, label: label))
        }
    }

    /// Adds the objects of a backup file to this keychain in one transaction (all or nothing),
    /// each with its unique ID (an application password's seal is bound to it). An object whose
    /// unique ID or keychain primary key exists here is skipped and counted with
    /// `skipDuplicates`; otherwise the restore fails with `.duplicateItem` and nothing changes.
    ///
    /// Errors: `.keychainUnrecognized` — not a backup file, or a newer format; `.pinIncorrect` —
    /// wrong passphrase (or a damaged salt, KDF or check field: the two cannot be told apart);
    /// `.recordCorrupted` — anything else altered, truncated or out of bounds.
    ///
    /// Restored objects get new creation and modification times; Always items need a usable
    /// device key, as when they are added. The restore writes through a connection of its own,
    /// so it must not run inside this keychain's `transaction`.
    public func restore(_ file: [UInt8], passphrase: UnsafeRawBufferPointer, master: MasterKey, skipDuplicates: Bool) throws(KeychainError) -> RestoreSummary {
        try lock.withLock { () throws(KeychainError) -> RestoreSummary in
            let header = try BackupFile.Header(parsing: file)
            let objects = try BackupFile.objects(in: try BackupFile.open(file, header: header, passphrase: passphrase), count: header.objectCount)
            for (index, object) in objects.map(\.object).enumerated() {
                let protection: Protection
                do throws(KeychainError) { protection = try Protection(for: object) } catch {
                    throw KeychainError(.recordCorrupted, "backup object \(index): \(error.reason)")
                }
                guard object.isToken, object.objectClass != nil, !protection.isDeviceBound else {
                    throw KeychainError(.recordCorrupted, "backup object \(index) is not a portable token object")
                }
            }
            // A keychain instance of its own: adding the first Always item creates and caches the
            // Always key, and a rolled-back transaction must not leave that cache in this instance.
            let target = try Keychain.open(at: path, deviceKey: deviceKeyFile)
            return try target.transaction { () throws(KeychainError) -> RestoreSummary in
                var restored = 0
                var duplicates = 0
                for entry in objects {
                    do throws(KeychainError) {
                        _ = try target.add(entry.object, uid: entry.uid, master: master)
                        restored += 1
                    } catch where error.code == .duplicateItem && skipDuplicates {
                        duplicates += 1
                    }
                }
                return RestoreSummary(restored: restored, duplicates: duplicates)
            }
        }
    }

    /// The label of the keychain a backup file came from (clear text in its authenticated
    /// header: read without the passphrase, checked only by `restore`).
    public static func backupLabel(_ file: [UInt8]) throws(KeychainError) -> String {
        try BackupFile.Header(parsing: file).label
    }

    /// Checks `passphrase` against a backup file, and the file's integrity, without a keychain:
    /// `restore --create` asks this before it makes anything. A wrong passphrase or a damaged
    /// file is `.pinIncorrect` / `.recordCorrupted`, as `restore` reports them.
    public static func checkBackup(_ file: [UInt8], passphrase: UnsafeRawBufferPointer) throws(KeychainError) {
        let header = try BackupFile.Header(parsing: file)
        _ = try BackupFile.objects(in: try BackupFile.open(file, header: header, passphrase: passphrase), count: header.objectCount)
    }
}

/// A whole-keychain backup file (`keychainctl backup`, `Keychain.backup`).
///
/// Layout, integers big-endian:
///
///     magic "KCBACKUP" (8) ‖ format version u16 (1)
///     scrypt log2 N u8 ‖ r u32 ‖ p u32 ‖ salt (16)
///     passphrase check (16)
///     object count u32 ‖ payload length u64 ‖ label length u16 ‖ label (UTF-8, ≤ 1024 bytes)
///     ── end of header: all of it is the associated data ──
///     nonce (12) ‖ AES-256-GCM ciphertext (payload length) ‖ tag (16)
///
///     S     = scrypt(passphrase, salt, N, r, p)               32 bytes
///     key   = HKDF-SHA256(S, "keychain-pkcs11 backup key")
///     check = HKDF-SHA256(S, "keychain-pkcs11 backup check")[0..16]
///
/// The payload is, per object: uid length u8 ‖ uid ‖ record length u32 ‖ record (the
/// `AttributeRecord` encoding of its stored attributes). The check tells a wrong passphrase from
/// a damaged file; it helps a guesser no more than the tag does.
enum BackupFile {
    static let magic = Array("KCBACKUP".utf8)
    static let version: UInt16 = 1
    static let saltSize = 16
    static let checkSize = 16
    static let maximumPassphraseLength = 1024
    static let maximumLabelLength = 1024
    static let maximumObjects = 1 << 20
    static let maximumPayload = 1 << 30
    static let maximumUIDLength = 64
    /// uid length, a 1-byte uid, record length, an empty record (magic and count).
    static let minimumEntrySize = 1 + 1 + 4 + 8
    private static let keyInfo = Array("keychain-pkcs11 backup key".utf8)
    private static let checkInfo = Array("keychain-pkcs11 backup check".utf8)

    struct Entry {
        var uid: [UInt8]
        var record: [UInt8]
    }

    struct Header {
        var kdf: ScryptParameters
        var salt: [UInt8]
        var check: [UInt8]
        var objectCount: Int
        var payloadLength: Int
        var label: String
        /// The header as stored: the associated data of the payload.
        var encoded: [UInt8]

        init(kdf: ScryptParameters, salt: [UInt8], check: [UInt8], objectCount: Int, payloadLength: Int, label: String) {
            self.kdf = kdf
            self.salt = salt
            self.check = check
            self.objectCount = objectCount
            self.payloadLength = payloadLength
            self.label = label
            var out = BackupFile.magic
            out.appendBigEndian(UInt64(BackupFile.version), bytes: 2)
            out.append(kdf.logN)
            out.appendBigEndian(UInt64(kdf.blockSize), bytes: 4)
            out.appendBigEndian(UInt64(kdf.parallelism), bytes: 4)
            out += salt + check
            out.appendBigEndian(UInt64(objectCount), bytes: 4)
            out.appendBigEndian(UInt64(payloadLength), bytes: 8)
            let labelBytes = Array(label.utf8)
            out.appendBigEndian(UInt64(labelBytes.count), bytes: 2)
            encoded = out + labelBytes
        }

        /// Reads and bounds-checks the header of `file`, and checks that the file has exactly
        /// the nonce, payload and tag it announces.
        init(parsing file: [UInt8]) throws(KeychainError) {
            // Array.withUnsafeBytes rethrows untyped: translatingErrors passes the KeychainError on.
            self = try translatingErrors { try file.withUnsafeBytes { (buffer) throws(KeychainError) -> Header in
                var reader = ByteReader(buffer)
                guard buffer.count >= BackupFile.magic.count, try reader.bytes(BackupFile.magic.count).elementsEqual(BackupFile.magic) else {
                    throw KeychainError(.keychainUnrecognized, "not a keychain backup file")
                }
                let version = try reader.integer(2)
                guard version == UInt64(BackupFile.version) else {
                    throw KeychainError(.keychainUnrecognized, "backup format version \(version) is not supported (this software reads \(BackupFile.version))")
                }
                let kdf = ScryptParameters(logN: UInt8(truncatingIfNeeded: try reader.integer(1)), blockSize: UInt32(truncatingIfNeeded: try reader.integer(4)),
                                           parallelism: UInt32(truncatingIfNeeded: try reader.integer(4)))
                guard kdf.isWithinLimits else { throw KeychainError(.recordCorrupted, "backup scrypt parameters out of bounds") }
                let salt = Array(try reader.bytes(BackupFile.saltSize))
                let check = Array(try reader.bytes(BackupFile.checkSize))
                let count = try reader.integer(4)
                let length = try reader.integer(8)
                guard length <= UInt64(BackupFile.maximumPayload), count <= UInt64(BackupFile.maximumObjects),
                      count <= length / UInt64(BackupFile.minimumEntrySize) else {
                    throw KeychainError(.recordCorrupted, "backup object count or size out of bounds")
                }
                let labelLength = try reader.integer(2)
                guard labelLength <= UInt64(BackupFile.maximumLabelLength) else { throw KeychainError(.recordCorrupted, "backup label too long") }
                let labelBytes = try reader.bytes(Int(labelLength))
                let label = String(decoding: labelBytes, as: UTF8.self)
                guard label.utf8.elementsEqual(labelBytes) else { throw KeychainError(.recordCorrupted, "backup label is not UTF-8") }
                guard buffer.count - reader.offset == AESGCM.overhead + Int(length) else {
                    throw KeychainError(.recordCorrupted, "backup file is \(buffer.count) bytes, its header announces \(reader.offset + AESGCM.overhead + Int(length))")
                }
                return Header(kdf: kdf, salt: salt, check: check, objectCount: Int(count), payloadLength: Int(length), label: label)
            } }
        }
    }

    /// The keys a passphrase gives with `salt` and `kdf`.
    private static func keys(_ passphrase: UnsafeRawBufferPointer, salt: [UInt8], kdf: ScryptParameters) throws(KeychainError) -> (key: SecureBytes, check: [UInt8]) {
        try translatingErrors {
            let derived = try KeyDerivation.scrypt(password: passphrase, salt: salt, parameters: kdf)
            return (try KeyDerivation.hkdf(key: derived, salt: [], info: keyInfo),
                    try KeyDerivation.hkdf(key: derived, salt: [], info: checkInfo, length: checkSize).bytes)
        }
    }

    static func seal(_ entries: [Entry], label: String, passphrase: UnsafeRawBufferPointer, kdf: ScryptParameters) throws(KeychainError) -> [UInt8] {
        let size = entries.reduce(0) { $0 + 1 + $1.uid.count + 4 + $1.record.count }
        guard entries.count <= maximumObjects, size <= maximumPayload else {
            throw KeychainError(.argumentsBad, "the keychain is too large for one backup file (\(entries.count) objects, \(size) bytes)")
        }
        let payload = SecureBytes(count: size)
        try payload.withUnsafeMutableBytes { (out) throws(KeychainError) in
            var offset = 0
            func put(_ bytes: [UInt8]) {
                for byte in bytes {
                    out[offset] = byte
                    offset += 1
                }
            }
            for entry in entries {
                guard !entry.uid.isEmpty, entry.uid.count <= maximumUIDLength else {
                    throw KeychainError(.recordCorrupted, "an object has a unique ID of \(entry.uid.count) bytes")
                }
                put([UInt8(entry.uid.count)])
                put(entry.uid)
                var length: [UInt8] = []
                length.appendBigEndian(UInt64(entry.record.count), bytes: 4)
                put(length)
                put(entry.record)
            }
        }
        let salt = try translatingErrors { try Random.bytes(saltSize) }
        let keys = try keys(passphrase, salt: salt, kdf: kdf)
        let header = Header(kdf: kdf, salt: salt, check: keys.check, objectCount: entries.count, payloadLength: size, label: truncated(label))
        return header.encoded + (try translatingErrors { try AESGCM.seal(payload, key: keys.key, associatedData: header.encoded) })
    }

    /// The payload of `file`, whose header is `header`.
    static func open(_ file: [UInt8], header: Header, passphrase: UnsafeRawBufferPointer) throws(KeychainError) -> SecureBytes {
        guard passphrase.count <= maximumPassphraseLength else { throw KeychainError(.pinIncorrect, "wrong backup passphrase") }
        let keys = try keys(passphrase, salt: header.salt, kdf: header.kdf)
        guard ConstantTime.equals(keys.check, header.check) else { throw KeychainError(.pinIncorrect, "wrong backup passphrase") }
        do {
            return try AESGCM.open(Array(file[header.encoded.count...]), key: keys.key, associatedData: header.encoded)
        } catch {
            throw KeychainError(.recordCorrupted, "the backup file was altered or damaged")
        }
    }

    /// The objects of a decrypted payload, which must hold exactly `count`.
    static func objects(in payload: SecureBytes, count: Int) throws(KeychainError) -> [(uid: [UInt8], object: ObjectAttributes)] {
        try payload.withUnsafeBytes { (buffer) throws(KeychainError) in
            var reader = ByteReader(buffer)
            var objects: [(uid: [UInt8], object: ObjectAttributes)] = []
            objects.reserveCapacity(min(count, buffer.count / minimumEntrySize))
            for index in 0..<count {
                let uidLength = Int(try reader.integer(1))
                guard uidLength >= 1, uidLength <= maximumUIDLength else { throw KeychainError(.recordCorrupted, "backup object \(index): unique ID length") }
                let uid = Array(try reader.bytes(uidLength))
                let record = try reader.bytes(Int(try reader.integer(4)))
                do {
                    objects.append((uid, ObjectAttributes(recordAttributes: try AttributeRecord.decode(record))))
                } catch {
                    throw KeychainError(.recordCorrupted, "backup object \(index): \(KeychainError(error).reason)")
                }
            }
            guard reader.offset == buffer.count else { throw KeychainError(.recordCorrupted, "trailing bytes in the backup payload") }
            return objects
        }
    }

    /// `label` cut at a character boundary to the longest a header holds.
    private static func truncated(_ label: String) -> String {
        var result = ""
        var length = 0
        for scalar in label.unicodeScalars {
            length += String(scalar).utf8.count
            if length > maximumLabelLength { break }
            result.unicodeScalars.append(scalar)
        }
        return result
    }

    /// Reads a buffer front to back; every read is checked against what is left.
    struct ByteReader {
        let data: UnsafeRawBufferPointer
        private(set) var offset = 0

        init(_ data: UnsafeRawBufferPointer) { self.data = data }

        mutating func bytes(_ count: Int) throws(KeychainError) -> UnsafeRawBufferPointer {
            guard count >= 0, count <= data.count - offset else { throw KeychainError(.recordCorrupted, "backup file truncated") }
            defer { offset += count }
            return UnsafeRawBufferPointer(rebasing: data[offset..<(offset + count)])
        }

        /// A big-endian unsigned integer of `size` (≤ 8) bytes.
        mutating func integer(_ size: Int) throws(KeychainError) -> UInt64 {
            try bytes(size).reduce(0) { $0 << 8 | UInt64($1) }
        }
    }
}

fileprivate extension [UInt8] {
    mutating func appendBigEndian(_ value: UInt64, bytes: Int) {
        for index in (0..<bytes).reversed() { append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(index)))) }
    }
}
