import Glibc
import KeychainCrypto

/// The device key: 32 random bytes in a file of their own, outside the keychain folder, that
/// `…ThisDeviceOnly` items (and the device-side copy of the `Always` key) are bound to. A keychain
/// file copied elsewhere without it keeps those items sealed; every other item still opens.
///
/// With a TPM the file holds the key sealed by it (`SealedDeviceKey`), so that the file copied
/// too opens nothing on another machine; without one (or with `device_key_tpm = no`) the 32 bytes
/// in clear, as files made before TPM support still do. Both kinds are read.
///
/// The file is created on first use (mode 0600, in a 0700 folder), and refused when it is not a
/// regular file of this user with mode 0600 and the size of one of the two kinds: a key others
/// can read binds nothing to this device.
public struct DeviceKeyFile: Sendable, Equatable {
    public let path: String
    /// Bytes of the key, and of a clear file.
    static let size = 32

    public init(path: String) { self.path = path }

    /// The file this process is configured to use (`KEYCHAIN_PKCS11_DEVICE_KEY`, `device_key`).
    public static func configured() -> DeviceKeyFile {
        DeviceKeyFile(path: Configuration.current().deviceKeyPath)
    }

    /// What identifies the file's current state (nil when it does not exist): a failure seen
    /// with one state is not trusted once the file changed (chmod, replaced, restored).
    public struct State: Equatable, Sendable {
        let inode: UInt64
        let mode: UInt32
        let changed: Int
        let changedNanoseconds: Int
    }

    func state() -> State? {
        guard let status = try? System.lstat(path) else { return nil }
        return State(inode: UInt64(status.st_ino), mode: UInt32(status.st_mode), changed: Int(status.st_ctim.tv_sec), changedNanoseconds: Int(status.st_ctim.tv_nsec))
    }

    /// Why the device key cannot be used, or nil when it can.
    public enum Problem: Equatable, Sendable {
        case missing
        case unsafe(String)
        /// The file exists but this keychain's device-bound items were sealed under another one.
        case mismatch
    }

    /// How the key is kept in its file.
    public enum Kind: Equatable, Sendable {
        /// The 32 bytes in clear: whoever copies the file moves the device.
        case clear
        /// Sealed by a TPM: only that TPM unseals it.
        case sealed
    }

    /// What the file holds, read and checked.
    enum Contents {
        case clear(SecureBytes)
        case sealed(SealedDeviceKey)

        var kind: Kind {
            if case .clear = self { return .clear }
            return .sealed
        }
    }

    /// The kind of key the file holds (nil when it does not exist), without asking the TPM.
    /// Throws `.deviceKeyUnavailable` for a file that is unsafe or damaged.
    public func kind() throws(KeychainError) -> Kind? {
        try readContents()?.kind
    }

    /// The key, or nil when the file does not exist and `create` is false. A sealed key is
    /// unsealed by this process's TPM (`EnclaveTPM`), which is let go again at once.
    func load(create: Bool) throws(KeychainError) -> SecureBytes? {
        if let contents = try readContents() { return try key(of: contents) }
        guard create else { return nil }
        return try write()
    }

    private func key(of contents: Contents) throws(KeychainError) -> SecureBytes {
        switch contents {
        case .clear(let key): return key
        case .sealed(let sealed): return try sealed.unseal(path: path)
        }
    }

    private func readContents() throws(KeychainError) -> Contents? {
        // A reader that meets the file just replaced by `seal()` (its inode unlinked, its clear
        // bytes being overwritten) reads the new file instead; the last try takes what it reads
        // (a filesystem that reports no links at all).
        for attempt in 1...3 {
            let fd: Int32
            do { fd = try System.open(path, O_RDONLY | O_NOFOLLOW) } catch {
                if error.code == ENOENT { return nil }
                throw KeychainError(.deviceKeyUnavailable, "cannot open the device key \(path): \(error.reason)")
            }
            defer { System.close(fd) }
            let contents = try readContents(of: fd)
            if attempt < 3, let status = try? System.fstat(fd), status.st_nlink == 0 { continue }
            return contents
        }
        return nil
    }

    /// The checks and the read, on an open file: a regular file of this user, mode 0600, the
    /// size of a clear key or of the sealed format.
    func readContents(of fd: Int32) throws(KeychainError) -> Contents {
        guard let status = try? System.fstat(fd), status.st_mode & S_IFMT == S_IFREG else {
            throw KeychainError(.deviceKeyUnavailable, "the device key \(path) is not a regular file")
        }
        guard status.st_uid == getuid() else {
            throw KeychainError(.deviceKeyUnavailable, "the device key \(path) belongs to another user")
        }
        guard status.st_mode & 0o077 == 0 else {
            throw KeychainError(.deviceKeyUnavailable, "the device key \(path) is readable by others (mode \(String(status.st_mode & 0o777, radix: 8))): run chmod 600 on it")
        }
        let size = Int(status.st_size)
        if size == Self.size {
            let key = SecureBytes(count: Self.size)
            let got = key.withUnsafeMutableBytes { buffer in (try? System.pread(fd, into: buffer, at: 0)) ?? -1 }
            guard got == Self.size else { throw KeychainError(.deviceKeyUnavailable, "cannot read the device key \(path)") }
            return .clear(key)
        }
        guard SealedDeviceKey.sizes.contains(size) else {
            throw KeychainError(.deviceKeyUnavailable, "the device key \(path) is damaged (\(size) bytes: a clear key has \(Self.size), a sealed one \(SealedDeviceKey.sizes.lowerBound) to \(SealedDeviceKey.sizes.upperBound))")
        }
        guard let bytes = try? System.pread(fd, count: size, at: 0), bytes.count == size else {
            throw KeychainError(.deviceKeyUnavailable, "cannot read the device key \(path)")
        }
        return .sealed(try SealedDeviceKey(bytes: bytes, path: path))
    }

    /// Makes a new key, sealed by the TPM as the configuration says (`device_key_tpm`), writes it
    /// under a temporary name and links it into place, so two processes creating it at once end
    /// up with one key (the loser reads the winner's). Returns the key the file holds.
    private func write() throws(KeychainError) -> SecureBytes {
        try ensureParentExists()
        let key: SecureBytes
        do { key = try SecureBytes.random(count: Self.size) } catch {
            throw KeychainError(.deviceKeyUnavailable, "no random bytes for the device key")
        }
        // Wiped in place: nothing else holds this array once `place` returns.
        var bytes = try sealIfConfigured(key)?.bytes ?? key.bytes
        defer { wipe(&bytes) }
        let won = try place(bytes)
        if won { return key }
        guard let theirs = try readContents() else {
            throw KeychainError(.deviceKeyUnavailable, "the device key \(path) vanished while it was created")
        }
        return try self.key(of: theirs)
    }

    /// The sealed form of a new key, or nil when it is to be kept in clear: `no`, or `auto` on a
    /// machine whose TPM is missing or does not answer. `yes` without a working TPM throws.
    private func sealIfConfigured(_ key: SecureBytes) throws(KeychainError) -> SealedDeviceKey? {
        let choice = Configuration.current().deviceKeyTPM
        guard choice != .no else { return nil }
        guard EnclaveTPM.configuredTCTI != nil else {
            guard choice == .yes else { return nil }
            throw KeychainError(.deviceKeyUnavailable, "device_key_tpm = yes, but this machine has no TPM (no /dev/tpmrm0; KEYCHAIN_PKCS11_TCTI or `tcti` names none): no device key is made")
        }
        do throws(KeychainError) {
            return try SealedDeviceKey.seal(key, path: path).sealed
        } catch where choice == .auto {
            return nil
        } catch {
            throw KeychainError(.deviceKeyUnavailable, "device_key_tpm = yes, but the TPM did not seal the device key: \(error.reason)")
        }
    }

    /// Writes `bytes` under a temporary name (0600, fsync) and links it to `path` unless a file is
    /// there already. Whether this call made the file.
    private func place(_ bytes: [UInt8]) throws(KeychainError) -> Bool {
        let temporary = try writeTemporary(bytes)
        defer { try? System.unlink(temporary) }
        do { try System.link(temporary, to: path) } catch where error.code != EEXIST {
            throw KeychainError(.deviceKeyUnavailable, "cannot create the device key \(path): \(error.reason)")
        } catch {
            return false
        }
        syncParent()
        return true
    }

    /// A new 0600 file beside the key holding `bytes`, written and synced; its name.
    func writeTemporary(_ bytes: [UInt8]) throws(KeychainError) -> String {
        let suffix = (try? Random.bytes(6))?.map { String($0, radix: 16) }.joined() ?? "0"
        let temporary = path + ".new-\(getpid())-\(suffix)"
        let fd: Int32
        do { fd = try System.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600) } catch {
            throw KeychainError(.deviceKeyUnavailable, "cannot create the device key \(path): \(error.reason)")
        }
        let written = (try? System.writeAll(fd, bytes)) != nil
        let synced = (try? System.fsync(fd)) != nil
        System.close(fd)
        guard written, synced else {
            try? System.unlink(temporary)
            throw KeychainError(.deviceKeyUnavailable, "cannot write the device key \(path)")
        }
        return temporary
    }

    func syncParent() {
        if let folder = try? System.open(parent, O_RDONLY | O_DIRECTORY) {
            try? System.fsync(folder)
            System.close(folder)
        }
    }

    private var parent: String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    private func ensureParentExists() throws(KeychainError) {
        guard path.hasPrefix("/") else { return }
        do { try KeychainDirectory(path: parent).ensureExists() } catch {
            throw KeychainError(.deviceKeyUnavailable, error.reason)
        }
    }
}

/// What one keychain derives from the device key: the key its device-bound records are sealed
/// with (bound to this keychain by its own random file key), and a check value stored in the
/// keychain that tells a wrong device key from a right one without trying records.
struct DeviceBinding {
    let base: SecureBytes

    init(deviceKey: SecureBytes, keychainSalt: [UInt8]) throws {
        base = try KeyDerivation.hkdf(key: deviceKey, salt: keychainSalt, info: Array("keychain-pkcs11 device binding".utf8))
    }

    func checkValue() throws -> [UInt8] {
        try KeyDerivation.hkdf(key: base, salt: [], info: Array("keychain-pkcs11 device check".utf8), length: 16).bytes
    }

    /// Record keys of `AlwaysThisDeviceOnly` items: the device binding alone.
    func alwaysKeys() throws -> RecordKeys {
        try RecordKeys(base: KeyDerivation.hkdf(key: base, salt: [], info: Array("keychain-pkcs11 always this device".utf8)))
    }

    /// Record keys of items that need both a PIN-protected key and this device.
    func combined(with key: SecureBytes) throws -> RecordKeys {
        let split = key.count
        let both = SecureBytes(count: split + base.count)
        both.withUnsafeMutableBytes { out in
            key.withUnsafeBytes { m in out.copyMemory(from: m) }
            base.withUnsafeBytes { d in UnsafeMutableRawBufferPointer(rebasing: out[split...]).copyMemory(from: d) }
        }
        return try RecordKeys(base: KeyDerivation.hkdf(key: both, salt: [], info: Array("keychain-pkcs11 master and device".utf8)))
    }

    /// The key that wraps the `Always` key on this device.
    func wrappingKey() throws -> SecureBytes {
        try KeyDerivation.hkdf(key: base, salt: [], info: Array("keychain-pkcs11 always key wrap".utf8))
    }
}
