import Glibc
import KeychainCrypto
import KeychainStore

/// A keychain's PINs: policy, verification with counted failures, changes and resets.
extension Keychain {
    /// The scrypt parameters stored under `key` (a PIN's verifier, or the raised target).
    func storedKDF(_ key: String) throws -> ScryptParameters? {
        try store.metaBlob(key).flatMap { try? PINVerifier(encoded: $0).parameters }
    }

    /// What a new PIN is held to and wrapped with: the policy, and `requested` unless a raised
    /// target is stronger. Reads only those settings (info() would also count every object).
    func newPINSettings(_ requested: ScryptParameters) throws(KeychainError) -> (policy: PINPolicy, kdf: ScryptParameters) {
        try translatingErrors {
            try store.read {
                let target = try storedKDF(Meta.targetKDF)
                return (try policy(), target.map { requested.isWeaker(than: $0) ? $0 : requested } ?? requested)
            }
        }
    }

    func policy() throws -> PINPolicy {
        PINPolicy(minimumLength: Int(try store.metaInteger(Meta.minimumLength) ?? Int64(PINPolicy.minimumLength)),
                  maximumLength: Int(try store.metaInteger(Meta.maximumLength) ?? Int64(PINPolicy.maximumLength)),
                  maximumFailures: try store.metaInteger(Meta.maximumFailures) ?? PINPolicy.defaultMaximumFailures)
    }

    func pinStatus(_ owner: PINOwner) throws -> PINStatus {
        PINStatus(failures: try store.metaInteger(Meta.failures(owner)) ?? 0,
                  maximumFailures: try store.metaInteger(Meta.maximumFailures) ?? PINPolicy.defaultMaximumFailures)
    }

    /// Records a slot ID for a file that had none, or whose ID another file already uses.
    public func assignSlotID(_ slotID: UInt) throws(KeychainError) {
        try lock.withLock { () throws(KeychainError) -> Void in
            try translatingErrors {
                try store.write {
                    try store.setMeta(Meta.slotID, integer: Int64(bitPattern: UInt64(slotID)))
                    if let inode = Self.inode(of: path) { try store.setMeta(Meta.slotFile, integer: inode) }
                }
            }
        }
    }

    /// Whether this file is the one its slot ID was given to (not a copy of it): its inode is the
    /// one recorded with the ID. False for files of earlier builds, which recorded none.
    public func holdsSlotID() -> Bool {
        lock.withLock {
            guard let recorded = try? store.metaInteger(Meta.slotFile), let inode = Self.inode(of: path) else { return false }
            return recorded == inode
        }
    }

    static func inode(of path: String) -> Int64? {
        guard let info = try? System.stat(path) else { return nil }
        return Int64(bitPattern: UInt64(info.st_ino))
    }

    /// Checks `pin` and returns the master key. Every attempt is counted before the PIN is
    /// evaluated (`beginAttempt`); at the limit the PIN locks.
    public func unlock(_ owner: PINOwner, pin: UnsafeRawBufferPointer) throws(KeychainError) -> MasterKey {
        try lock.withLock { () throws(KeychainError) -> MasterKey in
            let (verifier, wrapped) = try translatingErrors { () throws -> (PINVerifier?, [UInt8]?) in
                try store.read {
                    let verifier = try store.metaBlob(Meta.verifier(owner))
                    return (try verifier.map { (v: [UInt8]) throws(KeychainError) in try PINVerifier(encoded: v) },
                            try store.metaBlob(Meta.wrappedMaster(owner)))
                }
            }
            guard let verifier, let wrapped else {
                throw KeychainError(owner == .user ? .userPINNotInitialized : .keychainUnrecognized, "the \(owner) PIN is not set")
            }
            let attempt = try beginAttempt(Meta.failures(owner), locked: "the \(owner) PIN is locked")
            // The attempt is counted: scrypt runs with the lock let go.
            let opened = lock.released { () -> Result<SecureBytes, KeychainError> in
                do {
                    let kek = try verifier.keyEncryptionKey(pin: pin)
                    return .success(try AESGCM.open(wrapped, key: kek, associatedData: verifier.associatedData(owner: owner)))
                } catch let error as CryptoError where error.code == .authenticationFailed {
                    return .failure(KeychainError(.pinIncorrect, "wrong \(owner) PIN"))
                } catch {
                    return .failure(KeychainError(error))
                }
            }
            let master: SecureBytes
            switch opened {
            case .success(let key) where key.count == AESGCM.keySize:
                master = key
                finishAttempt(attempt, right: true)
            case .success:
                finishAttempt(attempt, right: false)
                throw KeychainError(.keychainUnrecognized, "master key damaged")
            case .failure(let error):
                finishAttempt(attempt, right: false)
                throw error
            }
            do {
                // A raised KDF cost takes effect at this PIN's next successful login: re-wrap now
                // (scrypt again, unlocked; stored only if the wrapping did not change meanwhile).
                if let target = try storedKDF(Meta.targetKDF), verifier.parameters.isWeaker(than: target) {
                    let rewrapped = try lock.released { try Self.wrapping(master, for: owner, pin: pin, kdf: target) }
                    try store.write {
                        if try store.metaBlob(Meta.wrappedMaster(owner)) == wrapped { try rewrapped.store(in: store, for: owner) }
                    }
                }
                let unlocked = try MasterKey(master)
                if owner == .user, firstUnlock == nil { firstUnlock = try unlocked.afterFirstUnlock() }
                recordMasterCheck(unlocked)
                return unlocked
            } catch {
                throw KeychainError(error)
            }
        }
    }

    /// Raises the scrypt cost of both PINs: each is re-wrapped at its next successful login
    /// (the PIN is needed to derive the new key), and PINs set from now on use it.
    public func raiseKDF(to parameters: ScryptParameters) throws(KeychainError) {
        try lock.withLock { () throws(KeychainError) -> Void in
            guard parameters.isWithinLimits else { throw KeychainError(.argumentsBad, "scrypt parameters out of bounds") }
            if let existing = try translatingErrors({ try storedKDF(Meta.verifier(.user)) }), !existing.isWeaker(than: parameters) {
                throw KeychainError(.argumentsBad, "the cost can only be raised (now log2 N = \(existing.logN))")
            }
            let encoded = PINVerifier(salt: [UInt8](repeating: 0, count: PINVerifier.saltSize), parameters: parameters).encoded
            try translatingErrors { try store.write { try store.setMeta(Meta.targetKDF, blob: encoded) } }
        }
    }

    /// Sets (or resets) the user PIN with an unlocked master key (C_InitPIN by the SO).
    public func setUserPIN(_ pin: UnsafeRawBufferPointer, master: MasterKey, kdf: ScryptParameters) throws(KeychainError) {
        let settings = try lock.withLock { () throws(KeychainError) in try newPINSettings(kdf) }
        try settings.policy.checkLength(pin)
        let wrapped = try translatingErrors { try Self.wrapping(master.key, for: .user, pin: pin, kdf: settings.kdf) }
        try lock.withLock { () throws(KeychainError) in
            try translatingErrors {
                try store.write {
                    try wrapped.store(in: store, for: .user)
                    try store.deleteMeta(prefix: Meta.applicationPasswordFailuresPrefix)
                }
            }
        }
    }

    /// Changes a PIN after checking the old one: only the wrapping of the master key changes.
    public func changePIN(_ owner: PINOwner, old: UnsafeRawBufferPointer, new: UnsafeRawBufferPointer, kdf: ScryptParameters) throws(KeychainError) {
        let settings = try lock.withLock { () throws(KeychainError) in try newPINSettings(kdf) }
        try settings.policy.checkLength(new)
        let master = try unlock(owner, pin: old)
        let wrapped = try translatingErrors { try Self.wrapping(master.key, for: owner, pin: new, kdf: settings.kdf) }
        try lock.withLock { () throws(KeychainError) in
            try translatingErrors { try store.write { try wrapped.store(in: store, for: owner) } }
        }
    }

    /// C_InitToken on an initialised keychain: checks the SO PIN, then destroys every object,
    /// replaces the master key and clears the user PIN. Slot ID and serial stay.
    public func reinitialize(soPIN: UnsafeRawBufferPointer, label: String, kdf: ScryptParameters) throws(KeychainError) {
        try lock.withLock { () throws(KeychainError) -> Void in
            _ = try unlock(.securityOfficer, pin: soPIN)
            let master = try translatingErrors { try SecureBytes.random(count: AESGCM.keySize) }
            try translatingErrors {
                try store.write {
                    try store.deleteAllObjects()
                    for key in [Meta.deviceCheck, Meta.alwaysByMaster, Meta.alwaysByDevice, Self.manifestMeta] { try store.setMeta(key, blob: nil) }
                    // The circle's keys were sealed under the old master key: a new keychain starts outside any circle.
                    try store.deleteMeta(prefix: Self.syncMetaPrefix)
                    try Self.initialiseSecrets(store, label: label, master: master, soPIN: soPIN, userPIN: nil, kdf: kdf)
                }
            }
            firstUnlock = nil
            alwaysKeys = nil
            integrityCache = nil
            deferredManifest = nil
            integrityMACCache = nil
            device = nil
            deviceGeneration &+= 1
            deviceAlwaysKeys = nil
            deviceFailure = nil
            availability = nil
            if let unlocked = try? MasterKey(master) { makeAlwaysKey(master: unlocked) }
        }
    }
}
