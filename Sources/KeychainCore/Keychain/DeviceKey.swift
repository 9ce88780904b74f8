import Glibc
import KeychainCrypto

/// The device key: 32 random bytes in a file of their own, outside the keychain folder, that
/// `…ThisDeviceOnly` items (and the device-side copy of the `Always` key) are bound to. A keychain
/// file copied elsewhere without it keeps those items sealed; every other item still opens.
///
/// The file is created on first use (mode 0600, in a 0700 folder), and refused when it is not a
/// regular file of this user with mode 0600 and exactly 32 bytes: a key others can read binds
/// nothing to this device.
public struct DeviceKeyFile: Sendable, Equatable {
    public let path: String
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

    /// The key, or nil when the file does not exist and `create` is false.
    func load(create: Bool) throws(KeychainError) -> SecureBytes? {
        if let key = try read() { return key }
        guard create else { return nil }
        try write()
        return try read()
    }

    private func read() throws(KeychainError) -> SecureBytes? {
        let fd: Int32
        do { fd = try System.open(path, O_RDONLY | O_NOFOLLOW) } catch {
            if error.code == ENOENT { return nil }
            throw KeychainError(.deviceKeyUnavailable, "cannot open the device key \(path): \(error.reason)")
        }
        defer { System.close(fd) }
        guard let status = try? System.fstat(fd), status.st_mode & S_IFMT == S_IFREG else {
            throw KeychainError(.deviceKeyUnavailable, "the device key \(path) is not a regular file")
        }
        guard status.st_uid == getuid() else {
            throw KeychainError(.deviceKeyUnavailable, "the device key \(path) belongs to another user")
        }
        guard status.st_mode & 0o077 == 0 else {
            throw KeychainError(.deviceKeyUnavailable, "the device key \(path) is readable by others (mode \(String(status.st_mode & 0o777, radix: 8))): run chmod 600 on it")
        }
        guard status.st_size == off_t(Self.size) else {
            throw KeychainError(.deviceKeyUnavailable, "the device key \(path) is damaged (\(status.st_size) bytes, not \(Self.size))")
        }
        let key = SecureBytes(count: Self.size)
        let got = key.withUnsafeMutableBytes { buffer in (try? System.read(fd, into: buffer)) ?? -1 }
        guard got == Self.size else { throw KeychainError(.deviceKeyUnavailable, "cannot read the device key \(path)") }
        return key
    }

    /// Writes a new key under a temporary name and links it into place, so two processes
    /// creating it at once end up with one key (the loser reads the winner's).
    private func write() throws(KeychainError) {
        try ensureParentExists()
        let suffix = (try? Random.bytes(6))?.map { String($0, radix: 16) }.joined() ?? "0"
        let temporary = path + ".new-\(getpid())-\(suffix)"
        let fd: Int32
        do { fd = try System.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode: 0o600) } catch {
            throw KeychainError(.deviceKeyUnavailable, "cannot create the device key \(path): \(error.reason)")
        }
        defer { try? System.unlink(temporary) }
        let key: SecureBytes
        do { key = try SecureBytes.random(count: Self.size) } catch {
            System.close(fd)
            throw KeychainError(.deviceKeyUnavailable, "no random bytes for the device key")
        }
        let written = key.withUnsafeBytes { buffer in (try? System.writeAll(fd, buffer)) != nil }
        let synced = (try? System.fsync(fd)) != nil
        System.close(fd)
        guard written, synced else {
            throw KeychainError(.deviceKeyUnavailable, "cannot write the device key \(path)")
        }
        do { try System.link(temporary, to: path) } catch where error.code != EEXIST {
            throw KeychainError(.deviceKeyUnavailable, "cannot create the device key \(path): \(error.reason)")
        } catch {}
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
