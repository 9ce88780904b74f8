import Glibc
import KeychainCrypto
import KeychainStore

/// The folder of keychain files and the persistent assignment of slot IDs.
///
/// Each keychain keeps its slot ID inside its own file, so the ID follows the keychain in every
/// process and whatever else is added or removed. The next unused ID is kept in `slot-ids`
/// (under an exclusive lock); it is also the ID of the empty slot offered for C_InitToken.
public struct KeychainDirectory: Sendable {
    public let path: String
    public static let fileExtension = ".keychain-db"
    /// Slot IDs stay far below CK_ULONG's limits, so no ID arithmetic can overflow.
    public static let maximumSlotID: UInt = 1 << 32

    public init(path: String) { self.path = path }

    /// Creates the folder (mode 0700) if needed; an existing one must be safe (`checkSafe`).
    public func ensureExists() throws(KeychainError) {
        var components: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            components.append(part)
            let prefix = "/" + components.joined(separator: "/")
            do { try System.mkdir(prefix, mode: 0o700) } catch where error.code != EEXIST {
                throw KeychainError(.storageFailure, "cannot create \(prefix): \(error.reason)")
            } catch {}
        }
        try Self.checkSafe(path, what: "keychain folder")
    }

    /// Refuses a keychain folder or file that another user could replace or edit, as OpenSSH's
    /// StrictModes refuses such a `~/.ssh`: it must belong to this user (or root) and must not be
    /// writable by group or others. Whoever can write there can swap, roll back or delete
    /// records; the keychain's own checks detect much of that, but not all (Docs/security.md).
    public static func checkSafe(_ path: String, what: String) throws(KeychainError) {
        guard let status = try? System.stat(path) else { return }
        let owner = status.st_uid
        guard owner == geteuid() || owner == 0 || (geteuid() == 0 && owner == serviceUser) else {
            let name = getpwuid(owner).flatMap { $0.pointee.pw_name.map { String(cString: $0) } } ?? "uid \(owner)"
            throw KeychainError(.unsafePermissions, "refusing the \(what) \(path): it belongs to another user (\(name)); keychains must be your own"
                                + (geteuid() == 0 ? " (a root service whose workers run as \(name) names it with KEYCHAIN_PKCS11_SERVICE_USER)" : ""))
        }
        let mode = status.st_mode & 0o777
        guard mode & 0o022 == 0 else {
            throw KeychainError(.unsafePermissions,
                                "refusing the \(what) \(path): other users can write to it (mode \(String(mode, radix: 8))); run chmod go-w '\(path)'")
        }
    }

    /// The one other owner a process running as root accepts (`service_user`,
    /// KEYCHAIN_PKCS11_SERVICE_USER): a server's master process starts as root and loads the key,
    /// then its workers, running as this user, open the same keychain again after fork — so the
    /// keychain belongs to that user, and root, which could read it anyway, opens it too. Nil when
    /// unset or unknown. Read once per process.
    static let serviceUser: uid_t? = {
        guard let name = Configuration.current().serviceUser, !name.isEmpty else { return nil }
        if let uid = UInt32(name) { return uid }
        var entry = passwd()
        var result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        guard getpwnam_r(name, &entry, &buffer, buffer.count, &result) == 0, result != nil else { return nil }
        return entry.pw_uid
    }()

    /// `checkSafe` for a keychain file and the folder it is in.
    static func checkSafe(keychainFile path: String) throws(KeychainError) {
        let folder = path.lastIndex(of: "/").map { String(path[..<$0]) }.map { $0.isEmpty ? "/" : $0 } ?? "."
        try checkSafe(folder, what: "keychain folder")
        try checkSafe(path, what: "keychain file")
    }

    /// Paths of the keychain files, sorted by name.
    public func keychainFiles() -> [String] {
        let names = ((try? System.directoryEntries(path)) ?? []).filter { $0.hasSuffix(Self.fileExtension) && !$0.hasPrefix(".") }
        return names.sorted().map { path + "/" + $0 }
    }

    /// The label `keychainctl set-default` chose, kept in the folder's `default-keychain` file.
    public func defaultKeychain() -> String? {
        guard let file = fopen(path + "/default-keychain", "r") else { return nil }
        defer { fclose(file) }
        var buffer = [CChar](repeating: 0, count: 256)
        guard fgets(&buffer, Int32(buffer.count), file) != nil else { return nil }
        let text = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let label = Substring(text).trimmed
        return label.isEmpty ? nil : label
    }

    /// Records `label` (or, with nil, no keychain) as the default; written whole, then renamed.
    public func setDefaultKeychain(_ label: String?) throws(KeychainError) {
        let target = path + "/default-keychain"
        guard let label else {
            do { try System.removeIfPresent(target) } catch { throw KeychainError(.storageFailure, "cannot remove \(target): \(error.reason)") }
            return
        }
        try ensureExists()
        let temporary = target + ".new"
        do throws(SystemError) {
            let fd = try System.open(temporary, O_WRONLY | O_CREAT | O_TRUNC, mode: 0o600)
            defer { System.close(fd) }
            try System.writeAll(fd, Array((label + "\n").utf8))
            try System.fsync(fd)
            try System.rename(temporary, to: target)
        } catch {
            try? System.unlink(temporary)
            throw KeychainError(.storageFailure, "cannot write \(target): \(error.description)")
        }
    }

    /// The file name for a new keychain labelled `label`: letters, digits, '-', '_' of the
    /// label, or `keychain-<slot>` when nothing usable is left or the name is taken.
    public func newKeychainPath(label: String, slotID: UInt) -> String {
        var stem = String(label.lowercased().map { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" ? $0 : "-" })
        while stem.hasSuffix("-") { stem.removeLast() }
        while stem.hasPrefix("-") { stem.removeFirst() }
        var candidate = path + "/" + (stem.isEmpty ? "keychain-\(slotID)" : String(stem.prefix(64))) + Self.fileExtension
        if System.exists(candidate) { candidate = path + "/keychain-\(slotID)" + Self.fileExtension }
        return candidate
    }

    /// Runs `body` with the next unused slot ID under an exclusive lock; `body` returns the
    /// value the counter should hold afterwards, if it changes.
    public func withNextSlotID<R>(_ body: (UInt) throws(KeychainError) -> (result: R, next: UInt?)) throws(KeychainError) -> R {
        try ensureExists()
        let counterPath = path + "/slot-ids"
        let fd: Int32
        do { fd = try System.open(counterPath, O_RDWR | O_CREAT, mode: 0o600) } catch {
            throw KeychainError(.storageFailure, "cannot open \(counterPath): \(error.reason)")
        }
        defer { System.close(fd) }
        do { try System.flock(fd, LOCK_EX) } catch { throw KeychainError(.storageFailure, "cannot lock \(counterPath): \(error.reason)") }
        defer { try? System.flock(fd, LOCK_UN) }
        let buffer = (try? System.pread(fd, count: 32, at: 0)) ?? []
        let length = buffer.count
        let text = length > 0 ? String(decoding: buffer.prefix(length).prefix { $0 != 0x0A }, as: UTF8.self) : ""
        // A damaged counter starts again above every ID in use (the caller passes that floor).
        let current = UInt(text).flatMap { $0 < Self.maximumSlotID ? $0 : nil } ?? 1
        let (result, next) = try body(current)
        if let next, next != current {
            let updated = Array("\(next)\n".utf8)
            do throws(SystemError) {
                try System.ftruncate(fd, to: 0)
                try System.pwriteAll(fd, updated, at: 0)
            } catch {
                throw KeychainError(.storageFailure, "cannot update \(counterPath): \(error.reason)")
            }
            try? System.fsync(fd)
        }
        return result
    }

    /// The ID of the empty slot: the next unused slot ID, moved past `floor` (one more than the
    /// highest ID any keychain file carries, which matters for files brought from elsewhere).
    ///
    /// Without a keychain folder nothing is created: any program that loads the module (p11-kit
    /// loads it into every process that lists its modules, as any user) only looks, and the
    /// folder and its counter appear with the first keychain.
    public func emptySlotID(above floor: UInt) throws(KeychainError) -> UInt {
        guard System.exists(path) else { return max(1, min(floor, Self.maximumSlotID)) }
        return try withNextSlotID { current in
            let next = max(current, min(floor, Self.maximumSlotID))
            return (next, next)
        }
    }

    /// Creates a keychain in the empty slot `slotID` (which must still be the next unused ID).
    public func createKeychain(slotID expected: UInt?, label: String, soPIN: UnsafeRawBufferPointer, userPIN: UnsafeRawBufferPointer?,
                               kdf: ScryptParameters, policy: PINPolicy = .default) throws(KeychainError) -> Keychain {
        try withNextSlotID { next throws(KeychainError) in
            if let expected, expected != next {
                throw KeychainError(.argumentsBad, "slot \(expected) is no longer empty")
            }
            let keychain = try Keychain.create(at: newKeychainPath(label: label, slotID: next), slotID: next, label: label,
                                               soPIN: soPIN, userPIN: userPIN, kdf: kdf, policy: policy)
            return (keychain, next + 1)
        }
    }

    /// Whether `label` can name a keychain: 1 to 32 bytes (CK_TOKEN_INFO's label field).
    public static func isValidLabel(_ label: String) -> Bool { !label.isEmpty && label.utf8.count <= 32 }

    /// The file of the keychain labelled `label`, if there is one.
    public func keychainFile(labelled label: String) -> String? {
        keychainFiles().first { (try? Keychain.open(at: $0).info(countingObjects: false).label) == label }
    }

    /// Creates a keychain labelled `label` with both PINs, for every door that makes one by name
    /// (keychainctl create and restore, the Secret Service's CreateCollection): the label has 1
    /// to 32 bytes and is not taken (`.duplicateItem`), both PINs fit `policy`, and the file gets
    /// the next unused slot ID. C_InitToken, which fills one given empty slot, calls
    /// `createKeychain(slotID:…)`.
    public func create(label: String, soPIN: UnsafeRawBufferPointer, userPIN: UnsafeRawBufferPointer,
                       kdf: ScryptParameters, policy: PINPolicy) throws(KeychainError) -> Keychain {
        guard Self.isValidLabel(label) else { throw KeychainError(.argumentsBad, "the label must have 1 to 32 bytes") }
        try policy.checkLength(soPIN, name: "the SO PIN")
        try policy.checkLength(userPIN, name: "the user PIN")
        // Checked under the slot-ID lock, which every creator takes: two cannot both find it free.
        return try withNextSlotID { next throws(KeychainError) in
            if keychainFile(labelled: label) != nil {
                throw KeychainError(.duplicateItem, "a keychain labelled '\(label)' already exists")
            }
            let keychain = try Keychain.create(at: newKeychainPath(label: label, slotID: next), slotID: next, label: label,
                                               soPIN: soPIN, userPIN: userPIN, kdf: kdf, policy: policy)
            return (keychain, next + 1)
        }
    }

    /// Deletes the keychain file at `path` with SQLite's side files, and forgets it as the
    /// default when the default names `label`. Checking the SO PIN first is the caller's choice.
    public func delete(at path: String, label: String) throws(KeychainError) {
        do { try Database.remove(at: path) } catch { throw KeychainError(.storageFailure, error.reason) }
        if defaultKeychain() == label { try? setDefaultKeychain(nil) }
    }
}
