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
    public let deviceKeyProblem: String?
    /// PIN lengths and tries of this keychain.
    public let pinPolicy: PINPolicy
    /// The scrypt cost of the user PIN (nil before it is set), and the cost new wraps move to.
    public let userKDF: ScryptParameters?
    public let targetKDF: ScryptParameters?
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
/// Every call goes to SQLite, so writes by other processes are seen at once. An instance is
/// not thread-safe; the PKCS11 layer serialises calls.
public final class Keychain {
    public let path: String
    let store: KeychainDatabase
    let publicKeys: RecordKeys
    /// The file key's bytes: random per keychain, they make its device binding its own.
    private let keychainSalt: [UInt8]
    public let deviceKeyFile: DeviceKeyFile
    /// The master key of the first successful user login through this instance: items of the
    /// AfterFirstUnlock classes stay usable with it, after logout too, until the instance goes
    /// (for the PKCS#11 module: C_Finalize).
    private var firstUnlock: AfterFirstUnlockKey?
    /// This keychain's device binding, once the device key has been read and checked.
    private var device: DeviceBinding?
    private var deviceAlwaysKeys: RecordKeys?
    private var deviceFailure: (stamp: ChangeStamp, file: DeviceKeyFile.State?, error: KeychainError)?
    /// The record keys a search can use, valid while the file, the caller's master key and the
    /// first-unlock key are unchanged (each search would otherwise probe every class).
    /// Holds classes, not keys: no key outlives the master key it came from.
    private var availability: (stamp: ChangeStamp, file: DeviceKeyFile.State?, master: ObjectIdentifier?, firstUnlock: Bool, protections: [Protection])?
    /// The Always key's record keys, once opened.
    private var alwaysKeys: RecordKeys?

    private enum Meta {
        static let label = "token.label"
        static let serial = "token.serial"
        static let slotID = "token.slot_id"
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
        publicKeys = try translatingErrors { try RecordKeys(base: SecureBytes(publicKey)) }
    }

    /// Opens an existing keychain file; `deviceKey` is the device key its `…ThisDeviceOnly`
    /// items are bound to (by default the configured one).
    public static func open(at path: String, deviceKey: DeviceKeyFile = .configured()) throws(KeychainError) -> Keychain {
        let store = try translatingErrors { try KeychainDatabase(path: path, create: false) }
        return try Keychain(store: store, deviceKey: deviceKey)
    }

    /// Creates a keychain file with an SO PIN and, optionally, a user PIN.
    public static func create(at path: String, slotID: UInt, label: String, soPIN: UnsafeRawBufferPointer,
                              userPIN: UnsafeRawBufferPointer?, kdf: ScryptParameters, policy: PINPolicy = .default,
                              deviceKey: DeviceKeyFile = .configured()) throws(KeychainError) -> Keychain {
        try policy.checkLength(soPIN)
        if let userPIN { try policy.checkLength(userPIN) }
        if access(path, F_OK) == 0 { throw KeychainError(.argumentsBad, "\(path) already exists") }
        do {
            let store = try KeychainDatabase(path: path, create: true)
            let master = try SecureBytes.random(count: AESGCM.keySize)
            try store.write {
                try store.setMeta(Meta.publicKey, blob: try Random.bytes(AESGCM.keySize))
                try store.setMeta(Meta.serial, blob: Hex.digits(try Random.bytes(8)))
                try store.setMeta(Meta.slotID, integer: Int64(bitPattern: UInt64(slotID)))
                try store.setMeta(Meta.maximumFailures, integer: policy.maximumFailures)
                try store.setMeta(Meta.minimumLength, integer: Int64(policy.minimumLength))
                try store.setMeta(Meta.maximumLength, integer: Int64(policy.maximumLength))
                try initialiseSecrets(store, label: label, master: master, soPIN: soPIN, userPIN: userPIN, kdf: kdf)
            }
            return try Keychain(store: store, deviceKey: deviceKey)
        } catch {
            unlink(path)
            unlink(path + "-wal")
            unlink(path + "-shm")
            throw KeychainError(error)
        }
    }

    private static func initialiseSecrets(_ store: KeychainDatabase, label: String, master: SecureBytes, soPIN: UnsafeRawBufferPointer,
                                          userPIN: UnsafeRawBufferPointer?, kdf: ScryptParameters) throws {
        try store.setMeta(Meta.label, blob: Array(label.utf8))
        try wrap(master, in: store, for: .securityOfficer, pin: soPIN, kdf: kdf)
        if let userPIN {
            try wrap(master, in: store, for: .user, pin: userPIN, kdf: kdf)
        } else {
            try store.setMeta(Meta.verifier(.user), blob: nil)
            try store.setMeta(Meta.wrappedMaster(.user), blob: nil)
            try store.setMeta(Meta.failures(.user), integer: 0)
        }
    }

    private static func wrap(_ master: SecureBytes, in store: KeychainDatabase, for owner: PINOwner, pin: UnsafeRawBufferPointer, kdf: ScryptParameters) throws {
        let verifier = try PINVerifier.new(parameters: kdf)
        let kek = try verifier.keyEncryptionKey(pin: pin)
        let wrapped = try AESGCM.seal(master, key: kek, associatedData: verifier.associatedData(owner: owner))
        try store.setMeta(Meta.verifier(owner), blob: verifier.encoded)
        try store.setMeta(Meta.wrappedMaster(owner), blob: wrapped)
        try store.setMeta(Meta.failures(owner), integer: 0)
    }

    // MARK: token state

    /// The keychain's state. Counting objects reads the whole objects table: callers on a hot
    /// path (C_Initialize, C_GetTokenInfo) pass `countingObjects: false` and get zero counts.
    public func info(countingObjects: Bool = true) throws(KeychainError) -> KeychainInfo {
        try translatingErrors {
            try store.read {
                let counts = countingObjects ? try store.objectCounts() : [:]
                let deviceBound = Protection.allCases.filter(\.isDeviceBound).reduce(0) { $0 + (counts[$1.rawValue] ?? 0) }
                let slot = try store.metaInteger(Meta.slotID).map { UInt(UInt64(bitPattern: $0)) }
                return KeychainInfo(
                    label: String(decoding: try store.metaBlob(Meta.label) ?? [], as: UTF8.self),
                    serial: String(decoding: try store.metaBlob(Meta.serial) ?? [], as: UTF8.self),
                    slotID: slot,
                    userPINInitialized: try store.metaBlob(Meta.wrappedMaster(.user)) != nil,
                    userPIN: try pinStatus(.user), soPIN: try pinStatus(.securityOfficer),
                    publicObjects: Protection.allCases.filter { !$0.isPrivate }.reduce(0) { $0 + (counts[$1.rawValue] ?? 0) },
                    privateObjects: Protection.allCases.filter(\.isPrivate).reduce(0) { $0 + (counts[$1.rawValue] ?? 0) },
                    deviceBoundObjects: deviceBound,
                    deviceKeyProblem: deviceBound == 0 ? nil : deviceProblem(),
                    pinPolicy: try policy(),
                    userKDF: try storedKDF(Meta.verifier(.user)),
                    targetKDF: try storedKDF(Meta.targetKDF))
            }
        }
    }

    /// The scrypt parameters stored under `key` (a PIN's verifier, or the raised target).
    private func storedKDF(_ key: String) throws -> ScryptParameters? {
        try store.metaBlob(key).flatMap { try? PINVerifier(encoded: $0).parameters }
    }

    /// What a new PIN is held to and wrapped with: the policy, and `requested` unless a raised
    /// target is stronger. Reads only those settings (info() would also count every object).
    private func newPINSettings(_ requested: ScryptParameters) throws(KeychainError) -> (policy: PINPolicy, kdf: ScryptParameters) {
        try translatingErrors {
            try store.read {
                let target = try storedKDF(Meta.targetKDF)
                return (try policy(), target.map { requested.isWeaker(than: $0) ? $0 : requested } ?? requested)
            }
        }
    }

    private func policy() throws -> PINPolicy {
        PINPolicy(minimumLength: Int(try store.metaInteger(Meta.minimumLength) ?? Int64(PINPolicy.minimumLength)),
                  maximumLength: Int(try store.metaInteger(Meta.maximumLength) ?? Int64(PINPolicy.maximumLength)),
                  maximumFailures: try store.metaInteger(Meta.maximumFailures) ?? PINPolicy.defaultMaximumFailures)
    }

    private func pinStatus(_ owner: PINOwner) throws -> PINStatus {
        PINStatus(failures: try store.metaInteger(Meta.failures(owner)) ?? 0,
                  maximumFailures: try store.metaInteger(Meta.maximumFailures) ?? PINPolicy.defaultMaximumFailures)
    }

    /// Records a slot ID for a file that had none, or whose ID another file already uses.
    public func assignSlotID(_ slotID: UInt) throws(KeychainError) {
        try translatingErrors { try store.write { try store.setMeta(Meta.slotID, integer: Int64(bitPattern: UInt64(slotID))) } }
    }

    /// Checks `pin` and returns the master key. Wrong PINs are counted; at the limit the PIN locks.
    public func unlock(_ owner: PINOwner, pin: UnsafeRawBufferPointer) throws(KeychainError) -> MasterKey {
        let (verifier, wrapped, status) = try translatingErrors { () throws -> (PINVerifier?, [UInt8]?, PINStatus) in
            try store.read {
                let verifier = try store.metaBlob(Meta.verifier(owner))
                return (try verifier.map { (v: [UInt8]) throws(KeychainError) in try PINVerifier(encoded: v) },
                        try store.metaBlob(Meta.wrappedMaster(owner)), try pinStatus(owner))
            }
        }
        guard let verifier, let wrapped else {
            throw KeychainError(owner == .user ? .userPINNotInitialized : .keychainUnrecognized, "the \(owner) PIN is not set")
        }
        guard !status.locked else { throw KeychainError(.pinLocked, "the \(owner) PIN is locked") }
        do {
            let kek = try verifier.keyEncryptionKey(pin: pin)
            let master = try AESGCM.open(wrapped, key: kek, associatedData: verifier.associatedData(owner: owner))
            guard master.count == AESGCM.keySize else { throw KeychainError(.keychainUnrecognized, "master key damaged") }
            if status.failures > 0 {
                try store.write { try store.setMeta(Meta.failures(owner), integer: 0) }
            }
            // A raised KDF cost takes effect at this PIN's next successful login: re-wrap now.
            if let target = try storedKDF(Meta.targetKDF), verifier.parameters.isWeaker(than: target) {
                try store.write { try Self.wrap(master, in: store, for: owner, pin: pin, kdf: target) }
            }
            let unlocked = try MasterKey(master)
            if owner == .user, firstUnlock == nil { firstUnlock = try unlocked.afterFirstUnlock() }
            return unlocked
        } catch let error as CryptoError where error.code == .authenticationFailed {
            try translatingErrors { try store.write { try store.incrementMeta(Meta.failures(owner), by: 1) } }
            throw KeychainError(.pinIncorrect, "wrong \(owner) PIN")
        } catch {
            throw KeychainError(error)
        }
    }

    /// Raises the scrypt cost of both PINs: each is re-wrapped at its next successful login
    /// (the PIN is needed to derive the new key), and PINs set from now on use it.
    public func raiseKDF(to parameters: ScryptParameters) throws(KeychainError) {
        guard parameters.isWithinLimits else { throw KeychainError(.argumentsBad, "scrypt parameters out of bounds") }
        if let existing = try translatingErrors({ try storedKDF(Meta.verifier(.user)) }), !existing.isWeaker(than: parameters) {
            throw KeychainError(.argumentsBad, "the cost can only be raised (now log2 N = \(existing.logN))")
        }
        let encoded = PINVerifier(salt: [UInt8](repeating: 0, count: PINVerifier.saltSize), parameters: parameters).encoded
        try translatingErrors { try store.write { try store.setMeta(Meta.targetKDF, blob: encoded) } }
    }

    /// Sets (or resets) the user PIN with an unlocked master key (C_InitPIN by the SO).
    public func setUserPIN(_ pin: UnsafeRawBufferPointer, master: MasterKey, kdf: ScryptParameters) throws(KeychainError) {
        let settings = try newPINSettings(kdf)
        try settings.policy.checkLength(pin)
        let kdf = settings.kdf
        try translatingErrors { try store.write { try Self.wrap(master.key, in: store, for: .user, pin: pin, kdf: kdf) } }
    }

    /// Changes a PIN after checking the old one: only the wrapping of the master key changes.
    public func changePIN(_ owner: PINOwner, old: UnsafeRawBufferPointer, new: UnsafeRawBufferPointer, kdf: ScryptParameters) throws(KeychainError) {
        let settings = try newPINSettings(kdf)
        try settings.policy.checkLength(new)
        let kdf = settings.kdf
        let master = try unlock(owner, pin: old)
        try translatingErrors { try store.write { try Self.wrap(master.key, in: store, for: owner, pin: new, kdf: kdf) } }
    }

    /// C_InitToken on an initialised keychain: checks the SO PIN, then destroys every object,
    /// replaces the master key and clears the user PIN. Slot ID and serial stay.
    public func reinitialize(soPIN: UnsafeRawBufferPointer, label: String, kdf: ScryptParameters) throws(KeychainError) {
        _ = try unlock(.securityOfficer, pin: soPIN)
        try translatingErrors {
            let master = try SecureBytes.random(count: AESGCM.keySize)
            try store.write {
                try store.deleteAllObjects()
                for key in [Meta.deviceCheck, Meta.alwaysByMaster, Meta.alwaysByDevice] { try store.setMeta(key, blob: nil) }
                try Self.initialiseSecrets(store, label: label, master: master, soPIN: soPIN, userPIN: nil, kdf: kdf)
            }
        }
        firstUnlock = nil
        alwaysKeys = nil
        device = nil
        deviceAlwaysKeys = nil
        deviceFailure = nil
        availability = nil
    }

    // MARK: objects

    /// Only rows this process can open are searched: the others have no usable index keys.
    private func availableKeys(master: MasterKey?) -> [(protection: Protection, keys: RecordKeys)] {
        let stamp = try? store.changeStamp()
        let masterID = master.map(ObjectIdentifier.init)
        let candidates: [Protection]
        let file = deviceKeyFile.state()
        if let cached = availability, let stamp, cached.stamp == stamp, cached.file == file, cached.master == masterID, cached.firstUnlock == (firstUnlock != nil) {
            candidates = cached.protections
        } else {
            candidates = Protection.allCases
        }
        let keys: [(protection: Protection, keys: RecordKeys)] = candidates.compactMap { protection in
            (try? self.keys(for: protection, master: master)).map { (protection, $0) }
        }
        // Probing may have written (binding the Always key to this device): take the stamp after.
        if candidates.count == Protection.allCases.count, let after = try? store.changeStamp() {
            availability = (after, deviceKeyFile.state(), masterID, firstUnlock != nil, keys.map(\.protection))
        }
        return keys
    }

    /// The keys that open rows of `protection` with what this process holds: `master` is the
    /// logged-in user's master key (nil while locked).
    private func keys(for protection: Protection, master: MasterKey?) throws(KeychainError) -> RecordKeys {
        switch protection {
        case .public: return publicKeys
        case .private:
            guard let master else { throw KeychainError(.objectNotFound, "private object while locked") }
            return master.keys
        case .afterFirstUnlock:
            return try afterFirstUnlockKey(master).keys
        case .always:
            return try alwaysRecordKeys(master: master, creating: false)
        case .privateThisDevice:
            guard let master else { throw KeychainError(.objectNotFound, "private object while locked") }
            if let cached = master.deviceBound { return cached }
            let keys = try translatingErrors { try deviceBinding(create: false).combined(with: master.key) }
            master.deviceBound = keys
            return keys
        case .afterFirstUnlockThisDevice:
            let afterFirstUnlock = try afterFirstUnlockKey(master)
            if let cached = afterFirstUnlock.deviceBound { return cached }
            let keys = try translatingErrors { try deviceBinding(create: false).combined(with: afterFirstUnlock.keys.recordBase) }
            afterFirstUnlock.deviceBound = keys
            return keys
        case .alwaysThisDevice:
            if let deviceAlwaysKeys { return deviceAlwaysKeys }
            let binding = try deviceBinding(create: false)
            let keys = try translatingErrors { try binding.alwaysKeys() }
            deviceAlwaysKeys = keys
            return keys
        }
    }

    private func afterFirstUnlockKey(_ master: MasterKey?) throws(KeychainError) -> AfterFirstUnlockKey {
        if let master { return try translatingErrors { try master.afterFirstUnlock() } }
        guard let firstUnlock else {
            throw KeychainError(.protectionUnavailable, "items of the AfterFirstUnlock classes need one user login in this process first")
        }
        return firstUnlock
    }

    /// Reads and checks the device key. With `create`, a missing key file is made, and a keychain
    /// that holds no device-bound item yet is (re)bound to this device's key.
    private func deviceBinding(create: Bool) throws(KeychainError) -> DeviceBinding {
        if let device { return device }
        // A failed read is remembered until the file changes, so that searches do not
        // re-read the key file for every class it makes unavailable.
        // A failed read is remembered while neither the keychain nor the key file changes (a
        // chmod or a restored file counts), so searches do not re-read the file for every class.
        let fileState = deviceKeyFile.state()
        if !create, let failure = deviceFailure, failure.stamp == (try? store.changeStamp()), failure.file == fileState { throw failure.error }
        do {
            let binding = try readDeviceBinding(create: create)
            device = binding
            deviceFailure = nil
            return binding
        } catch {
            if error.code == .deviceKeyUnavailable, let stamp = try? store.changeStamp() { deviceFailure = (stamp, deviceKeyFile.state(), error) }
            throw error
        }
    }

    private func readDeviceBinding(create: Bool) throws(KeychainError) -> DeviceBinding {
        guard let key = try deviceKeyFile.load(create: create) else {
            throw KeychainError(.deviceKeyUnavailable, "the device key \(deviceKeyFile.path) is missing: this keychain's ThisDeviceOnly items are unavailable")
        }
        let binding = try translatingErrors { try DeviceBinding(deviceKey: key, keychainSalt: keychainSalt) }
        let check = try translatingErrors { try binding.checkValue() }
        let stored = try translatingErrors { try store.metaBlob(Meta.deviceCheck) }
        let mismatch = KeychainError(.deviceKeyUnavailable, "the device key \(deviceKeyFile.path) is not the one this keychain's ThisDeviceOnly items were sealed with (the keychain was copied from another device, or the key file replaced): those items are unavailable")
        if let stored, !ConstantTime.equals(stored, check) {
            guard create else { throw mismatch }
            // Nothing bound to the old device (checked in the same transaction as the change):
            // this one takes over, and the Always key's copy for the old device goes.
            let rebound = try translatingErrors { try store.write { () throws -> Bool in
                let bound = try store.countObjects(protections: Protection.allCases.filter(\.isDeviceBound).map(\.rawValue))
                guard bound == 0, try store.metaBlob(Meta.deviceCheck) == stored else { return false }
                try store.setMeta(Meta.deviceCheck, blob: check)
                try store.setMeta(Meta.alwaysByDevice, blob: nil)
                return true
            } }
            guard rebound else { throw mismatch }
            alwaysKeys = nil
        } else if stored == nil, create {
            let kept = try translatingErrors { try store.write { () throws -> [UInt8]? in
                if let current = try store.metaBlob(Meta.deviceCheck) { return current }
                try store.setMeta(Meta.deviceCheck, blob: check)
                return nil
            } }
            if let kept, !ConstantTime.equals(kept, check) { throw mismatch }
        }
        return binding
    }

    /// Why device-bound items cannot be opened here, or nil when they can.
    private func deviceProblem() -> String? {
        do {
            _ = try deviceBinding(create: false)
            return nil
        } catch {
            return error.reason
        }
    }

    private static let alwaysByMasterData = Array("keychain-pkcs11 always key / master".utf8)
    private static let alwaysByDeviceData = Array("keychain-pkcs11 always key / device".utf8)

    private static func masterWrappingKey(_ master: MasterKey) throws -> SecureBytes {
        try KeyDerivation.hkdf(key: master.key, salt: [], info: Array("keychain-pkcs11 always key wrap".utf8))
    }

    /// The record keys of `Always` items. The Always key is random per keychain and stored twice:
    /// sealed under the master key and under this device's key. On this device it opens without
    /// a login; a copy of the file opens it only with the PIN (and then binds it to the new device).
    private func alwaysRecordKeys(master: MasterKey?, creating: Bool) throws(KeychainError) -> RecordKeys {
        if let alwaysKeys { return alwaysKeys }
        let (byDevice, byMaster) = try translatingErrors { try store.read { (try store.metaBlob(Meta.alwaysByDevice), try store.metaBlob(Meta.alwaysByMaster)) } }
        if let byDevice, let binding = try? deviceBinding(create: false),
           let key = try? AESGCM.open(byDevice, key: binding.wrappingKey(), associatedData: Self.alwaysByDeviceData) {
            let keys = try translatingErrors { try RecordKeys(base: key) }
            alwaysKeys = keys
            return keys
        }
        let unlocking = master
        let key: SecureBytes
        if let byMaster {
            guard let unlocking else {
                throw KeychainError(.protectionUnavailable, "this keychain's Always items are not bound to this device yet (device key \(deviceKeyFile.path)): log in once to bind them")
            }
            key = try translatingErrors { try AESGCM.open(byMaster, key: Self.masterWrappingKey(unlocking), associatedData: Self.alwaysByMasterData) }
        } else {
            guard creating else { throw KeychainError(.objectNotFound, "this keychain has no Always items") }
            guard let unlocking else {
                throw KeychainError(.protectionUnavailable, "the first Always item of a keychain needs the user logged in (its key is kept under the master key too)")
            }
            // Made and stored in one transaction that looks again: of two processes adding the
            // first Always item at once, the second uses the first one's key.
            let wrapping = try translatingErrors { try Self.masterWrappingKey(unlocking) }
            key = try translatingErrors { try store.write { () throws -> SecureBytes in
                if let existing = try store.metaBlob(Meta.alwaysByMaster) {
                    return try AESGCM.open(existing, key: wrapping, associatedData: Self.alwaysByMasterData)
                }
                let fresh = try SecureBytes.random(count: AESGCM.keySize)
                try store.setMeta(Meta.alwaysByMaster, blob: try AESGCM.seal(fresh, key: wrapping, associatedData: Self.alwaysByMasterData))
                return fresh
            } }
        }
        // Bind the Always key to this device, so that it opens without a login from now on.
        do {
            let binding = try deviceBinding(create: true)
            let sealed = try translatingErrors { try AESGCM.seal(key, key: binding.wrappingKey(), associatedData: Self.alwaysByDeviceData) }
            try translatingErrors { try store.write { try store.setMeta(Meta.alwaysByDevice, blob: sealed) } }
        } catch where creating {
            throw error
        } catch {
            // Reading: the items open with the master key now; binding waits for a usable device key.
        }
        let keys = try translatingErrors { try RecordKeys(base: key) }
        alwaysKeys = keys
        return keys
    }

    /// The keys for storing a new row of `protection`: like `keys(for:master:)`, but creating what
    /// the first item of a class needs (the device key, the Always key) and enforcing who may.
    private func keysForStoring(_ protection: Protection, object: ObjectAttributes, master: MasterKey?) throws(KeychainError) -> RecordKeys {
        if object[.accessible].flatMap(AttributeValue.decodeULong) == ProtectionClass.whenPasscodeSetThisDeviceOnly.rawValue {
            let hasPIN = try translatingErrors { try store.metaBlob(Meta.wrappedMaster(.user)) != nil }
            guard hasPIN else {
                throw KeychainError(.userPINNotInitialized, "WhenPasscodeSetThisDeviceOnly items need a user PIN on the keychain")
            }
        }
        switch protection {
        case .public, .private:
            return try keys(for: protection, master: master)
        case .afterFirstUnlock, .afterFirstUnlockThisDevice, .privateThisDevice:
            guard master != nil || protection != .privateThisDevice else { throw KeychainError(.objectNotFound, "private object while locked") }
            if protection.isDeviceBound { try bindToThisDevice(master: master) }
            return try keys(for: protection, master: master)
        case .always:
            return try alwaysRecordKeys(master: master, creating: true)
        case .alwaysThisDevice:
            try bindToThisDevice(master: master)
            return try keys(for: protection, master: master)
        }
    }

    /// Makes sure the device key exists and this keychain is bound to it; a keychain that was
    /// just (re)bound also gets the device copy of its Always key, when a master key can open it.
    private func bindToThisDevice(master: MasterKey?) throws(KeychainError) {
        _ = try deviceBinding(create: true)
        _ = try? alwaysRecordKeys(master: master, creating: false)
    }

    private func indexEntries(_ object: ObjectAttributes, keys: RecordKeys) throws -> [IndexEntry] {
        try object.values.compactMap { type, value in
            guard AttributeTable.rule(type)?.flags.contains(.indexed) == true else { return nil }
            return IndexEntry(attribute: UInt64(type.rawValue), digest: try keys.index.digest(attribute: UInt64(type.rawValue), value: value))
        }
    }

    /// The keyed digest of a keychain item's primary key (UNIQUE in the objects table), so that
    /// uniqueness is checked by SQLite without revealing the values.
    private func primaryKey(_ object: ObjectAttributes, keys: RecordKeys) throws -> [UInt8]? {
        guard let tuple = object.primaryKeyTuple else { return nil }
        return try keys.index.digest(attribute: UInt64.max, value: tuple)
    }

    private func seal(_ object: ObjectAttributes, uid: [UInt8], protection: Protection, keys: RecordKeys) throws -> [UInt8] {
        var plaintext = AttributeRecord.encode(object.recordAttributes)
        defer { wipe(&plaintext) }
        let secure = SecureBytes(plaintext)
        return try SealedRecord.seal(secure, base: keys.recordBase, uid: uid, objectClass: UInt64(object.objectClass?.rawValue ?? 0), protection: protection.rawValue)
    }

    /// Stores a new token object; private objects need the master key. Returns its row id.
    public func add(_ object: ObjectAttributes, uid: [UInt8], master: MasterKey?) throws(KeychainError) -> Int64 {
        var object = object
        if let password = object[.applicationPassword] {
            // Write-only: it seals the secret and is never stored.
            object[.applicationPassword] = nil
            if object.objectClass == .privateKey, !object.bool(.alwaysAuthenticate) {
                throw KeychainError(.templateInconsistent, "a key with an application password needs CKA_ALWAYS_AUTHENTICATE = TRUE (the password is its context-specific PIN)")
            }
            if !object.accessControlFlags.isDisjoint(with: .presence) {
                // One per-use secret per item: the password seals it, so the PIN cannot stand beside it.
                throw KeychainError(.templateInconsistent, "an application password cannot be combined with user presence on one item")
            }
            let kdf = try translatingErrors { try storedKDF(Meta.verifier(.user)) } ?? .interactive
            try ApplicationPasswordSeal.seal(&object, password: password, kdf: kdf)
        }
        let protection = try Protection(for: object)
        let keys = try keysForStoring(protection, object: object, master: master)
        do {
            let record = try seal(object, uid: uid, protection: protection, keys: keys)
            return try store.insertObject(uid: uid, objectClass: UInt64(object.objectClass?.rawValue ?? 0), protection: protection.rawValue,
                                          record: record, primaryKey: try primaryKey(object, keys: keys),
                                          index: try indexEntries(object, keys: keys), now: Self.now())
        } catch let error as StoreError where error.code == .duplicate {
            throw KeychainError(.duplicateItem, "an item with the same primary key exists")
        } catch {
            throw KeychainError(error)
        }
    }

    /// Reads a token object. Altered or damaged records fail with `.recordCorrupted`;
    /// private objects without the master key fail with `.objectNotFound`.
    public func object(id: Int64, master: MasterKey?) throws(KeychainError) -> ObjectAttributes {
        let row = try translatingErrors { try store.fetchObject(id: id) }
        return try open(row, master: master)
    }

    private func open(_ row: ObjectRow, master: MasterKey?) throws(KeychainError) -> ObjectAttributes {
        guard let protection = Protection(rawValue: row.protection) else {
            throw KeychainError(.recordCorrupted, "object \(row.id) has an unknown protection class")
        }
        let keys = try keys(for: protection, master: master)
        var object = try translatingErrors {
            let plaintext = try SealedRecord.open(row.record, base: keys.recordBase, uid: row.uid, objectClass: row.objectClass,
                                                  protection: row.protection, version: row.recordVersion)
            return ObjectAttributes(recordAttributes: try plaintext.withUnsafeBytes { try AttributeRecord.decode($0) })
        }
        guard object.objectClass?.rawValue == UInt(truncatingIfNeeded: row.objectClass), object.isPrivate == protection.isPrivate else {
            throw KeychainError(.recordCorrupted, "object \(row.id) does not match its row")
        }
        object[.creationTime] = AttributeValue.ulong(UInt(truncatingIfNeeded: row.created))
        object[.modificationTime] = AttributeValue.ulong(UInt(truncatingIfNeeded: row.modified))
        return object
    }

    /// Replaces a token object's attributes (C_SetAttributeValue, SecItemUpdate). A new protection
    /// class re-seals the record under its keys; CKA_PRIVATE changes only with a new protection
    /// class (SecItemUpdate of kSecAttrAccessible).
    public func replace(id: Int64, with object: ObjectAttributes, master: MasterKey?, allowingPrivateChange: Bool = false) throws(KeychainError) {
        let row = try translatingErrors { try store.fetchObject(id: id) }
        guard let current = Protection(rawValue: row.protection), current.isPrivate == object.isPrivate || allowingPrivateChange else {
            throw KeychainError(.attributeReadOnly, "CKA_PRIVATE cannot change in place")
        }
        if object.hasSealedSecrets, object.values.keys.contains(where: { AttributeTable.rule($0)?.flags.contains(.sensitive) == true }) {
            throw KeychainError(.attributeReadOnly, "the secret of an item with an application password changes only by deleting and adding it again")
        }
        let protection = try Protection(for: object)
        let keys = protection == current ? try keys(for: protection, master: master) : try keysForStoring(protection, object: object, master: master)
        do {
            let record = try seal(object, uid: row.uid, protection: protection, keys: keys)
            try store.updateObject(id: id, protection: protection.rawValue, record: record, primaryKey: try primaryKey(object, keys: keys),
                                   index: try indexEntries(object, keys: keys), now: Self.now())
        } catch let error as StoreError where error.code == .duplicate {
            throw KeychainError(.duplicateItem, "an item with the same primary key exists")
        } catch {
            throw KeychainError(error)
        }
    }

    public func remove(id: Int64) throws(KeychainError) {
        try translatingErrors { try store.deleteObject(id: id) }
    }

    /// Size of an object's stored record.
    public func storedSize(id: Int64) throws(KeychainError) -> Int {
        try translatingErrors { try store.fetchObject(id: id).record.count }
    }

    /// Token objects matching `template`, by indexed SQL where possible, decrypting only the
    /// candidates that an index cannot decide. Private objects are searched only with `master`.
    public func find(_ template: Template, master: MasterKey?) throws(KeychainError) -> [FoundObject] {
        let available = availableKeys(master: master)
        var protections = available.map(\.protection)
        var objectClass: UInt64?
        var terms: [IndexTerm] = []
        var needsRecord = false
        for (type, value) in template {
            switch type {
            case .token:
                if AttributeValue.decodeBool(value) != true { return [] }
            case .isPrivate:
                guard let wanted = AttributeValue.decodeBool(value) else { return [] }
                protections = protections.filter { $0.isPrivate == wanted }
            case .objectClass:
                guard let raw = AttributeValue.decodeULong(value) else { return [] }
                if let objectClass, objectClass != UInt64(raw) { return [] }
                objectClass = UInt64(raw)
            default:
                guard let rule = AttributeTable.rule(type) else { return [] }
                if rule.flags.contains(.indexed) {
                    let raw = UInt64(type.rawValue)
                    var digests: [[UInt8]] = []
                    var seen: [ObjectIdentifier] = []
                    for keys in available.map(\.keys) where !seen.contains(ObjectIdentifier(keys)) {
                        seen.append(ObjectIdentifier(keys))
                        digests.append(try translatingErrors { try keys.index.digest(attribute: raw, value: value) })
                    }
                    terms.append(IndexTerm(attribute: raw, digests: digests))
                } else {
                    needsRecord = true
                }
            }
        }
        let rows = try translatingErrors {
            try store.findObjects(protections: protections.map(\.rawValue), objectClass: objectClass, terms: terms, withRecords: needsRecord)
        }
        let matching = needsRecord ? rows.filter { row in (try? open(row, master: master))?.matches(template) == true } : rows
        return matching.map { FoundObject(id: $0.id, isPrivate: Protection(rawValue: $0.protection)?.isPrivate ?? true) }
    }

    /// Runs `body` as one write transaction: every change in it is stored, or none.
    public func transaction<R>(_ body: () throws(KeychainError) -> R) throws(KeychainError) -> R {
        do {
            return try store.write { () throws -> R in try body() }
        } catch {
            // Keys first made inside the transaction (the Always key of a keychain's first Always
            // item) were rolled back with it: forget the cached copies so none outlives its row.
            alwaysKeys = nil
            deviceAlwaysKeys = nil
            availability = nil
            deviceFailure = nil
            throw KeychainError(error)
        }
    }

    /// Changes when anything in the file may have changed (here or in another process).
    public func version() throws(KeychainError) -> KeychainVersion {
        KeychainVersion(stamp: try translatingErrors { try store.changeStamp() })
    }

    /// `PRAGMA integrity_check` of the file.
    public func integrityCheck() throws(KeychainError) -> String {
        try translatingErrors { try store.integrityCheck() }
    }

    static func now() -> Int64 { Int64(time(nil)) }
}

