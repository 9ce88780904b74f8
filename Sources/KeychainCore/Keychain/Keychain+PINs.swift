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
        try lock.held { () throws(KeychainError) -> Void in
            try translatingErrors { try store.write { try store.setMeta(Meta.slotID, integer: Int64(bitPattern: UInt64(slotID))) } }
        }
    }

    /// Charges one attempt against the failure counter `counter` before any secret is evaluated,
    /// in one write transaction (SQLite's write lock, taken up front, makes check-and-charge a
    /// single step across threads and processes). A locked counter, or any failure to charge
    /// durably, refuses the attempt: nothing is evaluated that is not already counted.
    func chargeAttempt(_ counter: String, locked: String) throws(KeychainError) {
        do {
            try store.write {
                let failures = try store.metaInteger(counter) ?? 0
                let maximum = try store.metaInteger(Meta.maximumFailures) ?? PINPolicy.defaultMaximumFailures
                guard failures < maximum else { throw KeychainError(.pinLocked, locked) }
                try store.setMeta(counter, integer: failures + 1)
            }
        } catch let error as KeychainError {
            throw error
        } catch {
            // Read-only file system, full disk, a writer holding the file: not evaluated at all.
            let underlying = KeychainError(error)
            throw KeychainError(underlying.code == .storageFull ? .storageFull : .storageFailure,
                                "this attempt could not be counted, so the PIN was not checked: \(underlying.reason)")
        }
    }

    /// A successful attempt clears its counter (the charge and earlier failures). A refund that
    /// cannot be written leaves the counter charged: that errs toward locking, never toward guesses.
    func refundAttempt(_ counter: String) {
        _ = try? store.write { try store.setMeta(counter, integer: 0) }
    }

    /// Checks `pin` and returns the master key. Every attempt is charged before the PIN is
    /// evaluated and refunded only when it was right; at the limit the PIN locks.
    public func unlock(_ owner: PINOwner, pin: UnsafeRawBufferPointer) throws(KeychainError) -> MasterKey {
        try lock.held { () throws(KeychainError) -> MasterKey in
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
            try chargeAttempt(Meta.failures(owner), locked: "the \(owner) PIN is locked")
            // The attempt is counted: scrypt runs with the lock let go.
            let master = try lock.released { () throws(KeychainError) -> SecureBytes in
                do {
                    let kek = try verifier.keyEncryptionKey(pin: pin)
                    return try AESGCM.open(wrapped, key: kek, associatedData: verifier.associatedData(owner: owner))
                } catch let error as CryptoError where error.code == .authenticationFailed {
                    throw KeychainError(.pinIncorrect, "wrong \(owner) PIN")
                } catch {
                    throw KeychainError(error)
                }
            }
            guard master.count == AESGCM.keySize else { throw KeychainError(.keychainUnrecognized, "master key damaged") }
            refundAttempt(Meta.failures(owner))
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
        try lock.held { () throws(KeychainError) -> Void in
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
        let settings = try lock.held { () throws(KeychainError) in try newPINSettings(kdf) }
        try settings.policy.checkLength(pin)
        let wrapped = try translatingErrors { try Self.wrapping(master.key, for: .user, pin: pin, kdf: settings.kdf) }
        try lock.held { () throws(KeychainError) in
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
        let settings = try lock.held { () throws(KeychainError) in try newPINSettings(kdf) }
        try settings.policy.checkLength(new)
        let master = try unlock(owner, pin: old)
        let wrapped = try translatingErrors { try Self.wrapping(master.key, for: owner, pin: new, kdf: settings.kdf) }
        try lock.held { () throws(KeychainError) in
            try translatingErrors { try store.write { try wrapped.store(in: store, for: owner) } }
        }
    }

    /// C_InitToken on an initialised keychain: checks the SO PIN, then destroys every object,
    /// replaces the master key and clears the user PIN. Slot ID and serial stay.
    public func reinitialize(soPIN: UnsafeRawBufferPointer, label: String, kdf: ScryptParameters) throws(KeychainError) {
        try lock.held { () throws(KeychainError) -> Void in
            _ = try unlock(.securityOfficer, pin: soPIN)
            let master = try translatingErrors { try SecureBytes.random(count: AESGCM.keySize) }
            try translatingErrors {
                try store.write {
                    try store.deleteAllObjects()
                    for key in [Meta.deviceCheck, Meta.alwaysByMaster, Meta.alwaysByDevice, Self.manifestMeta] { try store.setMeta(key, blob: nil) }
                    try Self.initialiseSecrets(store, label: label, master: master, soPIN: soPIN, userPIN: nil, kdf: kdf)
                }
            }
            firstUnlock = nil
            alwaysKeys = nil
            integrityCache = nil
            integrityMACCache = nil
            device = nil
            deviceAlwaysKeys = nil
            deviceFailure = nil
            availability = nil
            if let unlocked = try? MasterKey(master) { makeAlwaysKey(master: unlocked) }
        }
    }
}
