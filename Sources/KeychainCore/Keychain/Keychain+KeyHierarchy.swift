import Glibc
import KeychainCrypto
import KeychainStore

/// The key hierarchy: record keys per protection class from the master key, the first-unlock
/// key, the device binding and the Always keys.
extension Keychain {
    /// Only rows this process can open are searched: the others have no usable index keys.
    func availableKeys(master: MasterKey?) -> [(protection: Protection, keys: RecordKeys)] {
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
    func keys(for protection: Protection, master: MasterKey?) throws(KeychainError) -> RecordKeys {
        switch protection {
        case .public:
            // Public records are not secret, but only this device (or the master key) can seal
            // one: the Always key, not the key kept in the file, authenticates them.
            return try alwaysRecordKeys(master: master, creating: false)
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

    func afterFirstUnlockKey(_ master: MasterKey?) throws(KeychainError) -> AfterFirstUnlockKey {
        if let master { return try translatingErrors { try master.afterFirstUnlock() } }
        guard let firstUnlock else {
            throw KeychainError(.protectionUnavailable, "items of the AfterFirstUnlock classes need one user login in this process first")
        }
        return firstUnlock
    }

    private static let alwaysByMasterData = Array("keychain-pkcs11 always key / master".utf8)
    private static let alwaysByDeviceData = Array("keychain-pkcs11 always key / device".utf8)

    static func masterWrappingKey(_ master: MasterKey) throws -> SecureBytes {
        try KeyDerivation.hkdf(key: master.key, salt: [], info: Array("keychain-pkcs11 always key wrap".utf8))
    }

    /// The record keys of `Always` items. The Always key is random per keychain and stored twice:
    /// sealed under the master key and under this device's key. On this device it opens without
    /// a login; a copy of the file opens it only with the PIN (and then binds it to the new device).
    func alwaysRecordKeys(master: MasterKey?, creating: Bool) throws(KeychainError) -> RecordKeys {
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
    func keysForStoring(_ protection: Protection, object: ObjectAttributes, master: MasterKey?) throws(KeychainError) -> RecordKeys {
        if object[.accessible].flatMap(AttributeValue.decodeULong) == ProtectionClass.whenPasscodeSetThisDeviceOnly.rawValue {
            let hasPIN = try translatingErrors { try store.metaBlob(Meta.wrappedMaster(.user)) != nil }
            guard hasPIN else {
                throw KeychainError(.userPINNotInitialized, "WhenPasscodeSetThisDeviceOnly items need a user PIN on the keychain")
            }
        }
        switch protection {
        case .private:
            return try keys(for: protection, master: master)
        case .public:
            return try alwaysRecordKeys(master: master, creating: true)
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

    /// A new keychain gets its Always key at once (under the master key and this device's key),
    /// so that public objects, which it authenticates, can be stored without a login. Without a
    /// usable device key the first public or Always item waits for a login instead.
    func makeAlwaysKey(master: MasterKey) {
        _ = try? alwaysRecordKeys(master: master, creating: true)
    }

    /// Makes sure the device key exists and this keychain is bound to it; a keychain that was
    /// just (re)bound also gets the device copy of its Always key, when a master key can open it.
    func bindToThisDevice(master: MasterKey?) throws(KeychainError) {
        _ = try deviceBinding(create: true)
        _ = try? alwaysRecordKeys(master: master, creating: false)
    }
}
