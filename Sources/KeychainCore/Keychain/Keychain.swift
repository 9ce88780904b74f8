import Glibc
import KeychainCrypto
import KeychainStore

/// What C_GetTokenInfo and `keychainctl list` report about a keychain.
public struct KeychainInfo: Sendable {
    public let label: String
    public let serial: String
    public let slotID: UInt?
    public let userPINInitialized: Bool
    public let userPIN: PINStatus
    public let soPIN: PINStatus
    public let publicObjects: Int
    public let privateObjects: Int
    /// Objects bound to the device key (`…ThisDeviceOnly`).
    public let deviceBoundObjects: Int
    /// Why those objects cannot be opened in this process (nil when they can, or there are none).
    public internal(set) var deviceKeyProblem: String?
    /// PIN lengths and tries of this keychain.
    public let pinPolicy: PINPolicy
    /// The scrypt cost of the user PIN (nil before it is set), and the cost new wraps move to.
    public let userKDF: ScryptParameters?
    public let targetKDF: ScryptParameters?
    /// The Secret Service's name for the keychain when one was set (the token label otherwise).
    public let displayName: String?
    /// Whether its passwords can be found by attribute while it is locked (Keychain+LockedLookup).
    public let lockedLookup: Bool
}

/// A point in a keychain's history: equal versions mean no object changed in between, in this
/// process or any other. Caches compare versions instead of re-reading records.
public struct KeychainVersion: Equatable, Sendable {
    let stamp: ChangeStamp
}

/// A search result: the object's row id and whether it is private.
public struct FoundObject: Sendable, Equatable {
    public let id: Int64
    public let isPrivate: Bool
}

/// One keychain file: its PINs, its master key and its stored objects.
///
/// Every call goes to SQLite, so writes by other processes are seen at once. An instance may be
/// shared between threads: its public methods take turns (`lock`), except for the scrypt inside
/// PIN and password checks and the read of the device key (a TPM round trip when it is sealed),
/// which run with the lock let go.
public final class Keychain: @unchecked Sendable {
    public let path: String
    let lock = PThreadMutex(.recursive)
    let store: KeychainDatabase
    /// The file key's bytes: random per keychain, they make its device binding its own.
    let keychainSalt: [UInt8]
    public let deviceKeyFile: DeviceKeyFile
    /// The master key of the first successful user login through this instance: items of the
    /// AfterFirstUnlock classes stay usable with it, after logout too, until the instance goes
    /// (for the PKCS#11 module: C_Finalize).
    var firstUnlock: AfterFirstUnlockKey?
    /// This keychain's device binding, once the device key has been read and checked.
    var device: DeviceBinding?
    var deviceAlwaysKeys: RecordKeys?
    var deviceFailure: (stamp: ChangeStamp, file: DeviceKeyFile.State?, error: KeychainError)?
    /// Moves on when the device binding is dropped (`reinitialize`): a device key read with the
    /// lock let go before then is not kept (`readDeviceKeyAhead`).
    var deviceGeneration: UInt64 = 0
    /// The record keys a search can use, valid while the file, the caller's master key and the
    /// first-unlock key are unchanged (each search would otherwise probe every class).
    /// Holds classes, not keys: no key outlives the master key it came from.
    var availability: (stamp: ChangeStamp, file: DeviceKeyFile.State?, master: ObjectIdentifier?, firstUnlock: Bool, protections: [Protection])?
    /// The Always key's record keys, once opened.
    var alwaysKeys: RecordKeys?
    /// The locked-lookup index key, for the Always key it was derived from.
    var lockedLookupCache: (base: RecordKeys, index: BlindIndex)?
    /// The manifest's HMAC, for the Always key it was derived from.
    var integrityMACCache: (base: RecordKeys, mac: KeyedMAC)?
    /// The manifest and the buckets this process has checked, while the file is unchanged.
    var integrityCache: IntegrityCache?
    /// The manifest bytes last written or verified here, with their MAC: bytes read back equal
    /// to these need no second HMAC over the manifest's kilobyte (one per write).
    var verifiedManifest: (mac: KeyedMAC, bytes: [UInt8], manifest: Manifest)?
    /// This device's record of the keychain's epoch (whole-file rollback).
    let epochCounter: EpochCounter
    /// The manifest of a write inside a transaction that has not committed yet.
    var pendingManifest: Manifest?
    /// The manifest as the writes of an open `transaction` left it, stored once before that
    /// transaction commits (not once per row): what this process reads of the manifest meanwhile
    /// comes from here.
    var deferredManifest: (mac: KeyedMAC, manifest: Manifest)?
    /// How deep `transaction` calls are nested (writes inside one defer the manifest).
    var transactionDepth = 0

    enum Meta {
        static let label = "token.label"
        static let serial = "token.serial"
        static let slotID = "token.slot_id"
        /// The inode of the file the slot ID was given to: of two files that claim one ID (a
        /// keychain and a copy of it), the one still at that inode keeps it.
        static let slotFile = "token.slot_file"
        static let publicKey = "key.public_record"
        static let maximumFailures = "pin.maximum_failures"
        static let minimumLength = "pin.minimum_length"
        static let maximumLength = "pin.maximum_length"
        static let targetKDF = "pin.kdf_target"
        static let deviceCheck = "device.check"
        static let alwaysByMaster = "key.always.by_master"
        static let alwaysByDevice = "key.always.by_device"
        static func verifier(_ owner: PINOwner) -> String { "pin.\(owner.rawValue).kdf" }
        static func wrappedMaster(_ owner: PINOwner) -> String { "pin.\(owner.rawValue).wrapped_master" }
        static func failures(_ owner: PINOwner) -> String { "pin.\(owner.rawValue).failures" }
        /// Wrong application passwords of one item, counted like PINs (keyed by its unique ID).
        static let applicationPasswordFailuresPrefix = "pin.application."
        static func applicationPasswordFailures(_ uniqueID: [UInt8]) -> String { applicationPasswordFailuresPrefix + String(decoding: Hex.digits(uniqueID), as: UTF8.self) + ".failures" }
    }

    private init(store: KeychainDatabase, deviceKey: DeviceKeyFile) throws(KeychainError) {
        self.store = store
        self.path = store.path
        self.deviceKeyFile = deviceKey
        let publicKey = try translatingErrors { try store.metaBlob(Meta.publicKey) }
        guard let publicKey, publicKey.count == AESGCM.keySize else {
            throw KeychainError(.keychainUnrecognized, "\(store.path) is not an initialised keychain")
        }
        keychainSalt = publicKey
        epochCounter = EpochCounter(deviceKeyPath: deviceKey.path, keychainSalt: publicKey, keychainPath: store.path)
    }

    /// Opens an existing keychain file; `deviceKey` is the device key its `…ThisDeviceOnly`
    /// items are bound to (by default the configured one).
    public static func open(at path: String, deviceKey: DeviceKeyFile = .configured()) throws(KeychainError) -> Keychain {
        try KeychainDirectory.checkSafe(keychainFile: path)
        let store = try translatingErrors { try KeychainDatabase(path: path, create: false) }
        return try Keychain(store: store, deviceKey: deviceKey)
    }

    /// Creates a keychain file with an SO PIN and, optionally, a user PIN.
    public static func create(at path: String, slotID: UInt, label: String, soPIN: UnsafeRawBufferPointer,
                              userPIN: UnsafeRawBufferPointer?, kdf: ScryptParameters, policy: PINPolicy = .default,
                              deviceKey: DeviceKeyFile = .configured()) throws(KeychainError) -> Keychain {
        try policy.checkLength(soPIN)
        if let userPIN { try policy.checkLength(userPIN) }
        if System.exists(path) { throw KeychainError(.argumentsBad, "\(path) already exists") }
        do {
            let store = try KeychainDatabase(path: path, create: true)
            let master = try SecureBytes.random(count: AESGCM.keySize)
            try store.write {
                try store.setMeta(Meta.publicKey, blob: try Random.bytes(AESGCM.keySize))
                try store.setMeta(Meta.serial, blob: Hex.digits(try Random.bytes(8)))
                try store.setMeta(Meta.slotID, integer: Int64(bitPattern: UInt64(slotID)))
                if let inode = Self.inode(of: path) { try store.setMeta(Meta.slotFile, integer: inode) }
                try store.setMeta(Meta.maximumFailures, integer: policy.maximumFailures)
                try store.setMeta(Meta.minimumLength, integer: Int64(policy.minimumLength))
                try store.setMeta(Meta.maximumLength, integer: Int64(policy.maximumLength))
                try initialiseSecrets(store, label: label, master: master, soPIN: soPIN, userPIN: userPIN, kdf: kdf)
            }
            let keychain = try Keychain(store: store, deviceKey: deviceKey)
            keychain.makeAlwaysKey(master: try MasterKey(master))
            return keychain
        } catch {
            try? Database.remove(at: path)
            throw KeychainError(error)
        }
    }

    static func initialiseSecrets(_ store: KeychainDatabase, label: String, master: SecureBytes, soPIN: UnsafeRawBufferPointer,
                                          userPIN: UnsafeRawBufferPointer?, kdf: ScryptParameters) throws {
        try store.setMeta(Meta.label, blob: Array(label.utf8))
        // A new keychain's locked-lookup index is complete (it has no rows yet).
        try store.setMeta(lockedLookupMeta, integer: 1)
        try wrap(master, in: store, for: .securityOfficer, pin: soPIN, kdf: kdf)
        if let userPIN {
            try wrap(master, in: store, for: .user, pin: userPIN, kdf: kdf)
        } else {
            try store.setMeta(Meta.verifier(.user), blob: nil)
            try store.setMeta(Meta.wrappedMaster(.user), blob: nil)
            try store.setMeta(Meta.failures(.user), integer: 0)
        }
    }

    static func wrap(_ master: SecureBytes, in store: KeychainDatabase, for owner: PINOwner, pin: UnsafeRawBufferPointer, kdf: ScryptParameters) throws {
        try wrapping(master, for: owner, pin: pin, kdf: kdf).store(in: store, for: owner)
    }

    /// A master key wrapped under a PIN: the slow half of `wrap` (scrypt), touching no state.
    struct WrappedMaster {
        let verifier: PINVerifier
        let wrapped: [UInt8]

        func store(in store: KeychainDatabase, for owner: PINOwner) throws {
            try store.setMeta(Meta.verifier(owner), blob: verifier.encoded)
            try store.setMeta(Meta.wrappedMaster(owner), blob: wrapped)
            try store.setMeta(Meta.failures(owner), integer: 0)
        }
    }

    static func wrapping(_ master: SecureBytes, for owner: PINOwner, pin: UnsafeRawBufferPointer, kdf: ScryptParameters) throws -> WrappedMaster {
        let verifier = try PINVerifier.new(parameters: kdf)
        let kek = try verifier.keyEncryptionKey(pin: pin)
        return WrappedMaster(verifier: verifier, wrapped: try AESGCM.seal(master, key: kek, associatedData: verifier.associatedData(owner: owner)))
    }

    // MARK: token state

    /// The keychain's state. Counting objects reads the whole objects table: callers on a hot
    /// path (C_Initialize, C_GetTokenInfo) pass `countingObjects: false` and get zero counts.
    public func info(countingObjects: Bool = true) throws(KeychainError) -> KeychainInfo {
        var info = try lock.withLock { () throws(KeychainError) -> KeychainInfo in
            try translatingErrors {
                try store.read {
                    let counts = countingObjects ? try store.objectCounts() : [:]
                    let slot = try store.metaInteger(Meta.slotID).map { UInt(UInt64(bitPattern: $0)) }
                    return KeychainInfo(
                        label: String(decoding: try store.metaBlob(Meta.label) ?? [], as: UTF8.self),
                        serial: String(decoding: try store.metaBlob(Meta.serial) ?? [], as: UTF8.self),
                        slotID: slot,
                        userPINInitialized: try store.metaBlob(Meta.wrappedMaster(.user)) != nil,
                        userPIN: try pinStatus(.user), soPIN: try pinStatus(.securityOfficer),
                        publicObjects: Protection.allCases.filter { !$0.isPrivate }.reduce(0) { $0 + (counts[$1.rawValue] ?? 0) },
                        privateObjects: Protection.allCases.filter(\.isPrivate).reduce(0) { $0 + (counts[$1.rawValue] ?? 0) },
                        deviceBoundObjects: Protection.allCases.filter(\.isDeviceBound).reduce(0) { $0 + (counts[$1.rawValue] ?? 0) },
                        deviceKeyProblem: nil,
                        pinPolicy: try policy(),
                        userKDF: try storedKDF(Meta.verifier(.user)),
                        targetKDF: try storedKDF(Meta.targetKDF),
                        displayName: try store.metaBlob(Self.displayNameMeta).map { String(decoding: $0, as: UTF8.self) },
                        lockedLookup: try keepsLockedLookup())
                }
            }
        }
        guard info.deviceBoundObjects > 0 else { return info }
        // Whether those objects open here: the device key is read (a sealed one unsealed by the
        // TPM) with the lock let go.
        readDeviceKeyAhead()
        info.deviceKeyProblem = lock.withLock { deviceProblem() }
        return info
    }

    /// Runs `body` as one write transaction: every change in it is stored, or none.
    public func transaction<R>(_ body: () throws(KeychainError) -> R) throws(KeychainError) -> R {
        // Its items may need the device key: read before the lock and the write transaction.
        readDeviceKeyAhead()
        return try lock.withLock { () throws(KeychainError) -> R in
            let outermost = !store.inTransaction
            transactionDepth += 1
            defer { transactionDepth -= 1 }
            do {
                let result = try store.write { () throws -> R in
                    let result = try body()
                    // The rows' manifest goes in with them, in the same commit.
                    if transactionDepth == 1 { try storeDeferredManifest() }
                    return result
                }
                if outermost, let manifest = pendingManifest {
                    pendingManifest = nil
                    didCommitWrite(manifest)
                }
                return result
            } catch {
                if outermost { pendingManifest = nil }
                if transactionDepth == 1 { deferredManifest = nil }
                // Keys first made inside the transaction (the Always key of a keychain's first Always
                // item) were rolled back with it: forget the cached copies so none outlives its row.
                alwaysKeys = nil
                deviceAlwaysKeys = nil
                availability = nil
                deviceFailure = nil
                integrityCache = nil
                throw KeychainError(error)
            }
        }
    }

    /// Changes when anything in the file may have changed (here or in another process).
    public func version() throws(KeychainError) -> KeychainVersion {
        try lock.withLock { () throws(KeychainError) -> KeychainVersion in
            KeychainVersion(stamp: try translatingErrors { try store.currentStamp() })
        }
    }

    /// `PRAGMA integrity_check` of the file.
    public func integrityCheck() throws(KeychainError) -> String {
        try lock.withLock { () throws(KeychainError) -> String in
            try translatingErrors { try store.integrityCheck() }
        }
    }

    static func now() -> Int64 { Int64(time(nil)) }
}

