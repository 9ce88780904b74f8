import KeychainCrypto
import KeychainStore

/// This keychain's device binding: the device key file read (a sealed key unsealed by the TPM,
/// up to its command timeout when the TPM is slow or silent) with the keychain's lock let go,
/// then checked against the keychain and kept with the lock held (Docs/architecture.md, "The
/// sealed device key").
extension Keychain {
    /// Reads the device key ahead, with the lock let go, when this instance has not read it yet
    /// and has no failure recorded for the keychain and the file as they are (with
    /// `evenAfterFailure`, also then), and `needed` says the call may need it (evaluated with the
    /// lock held: an item whose keys are open already needs no TPM). Entry points that may need the key call this before they
    /// take the lock, so that `deviceBinding` then finds it kept and other threads (other
    /// sessions, C_GetTokenInfo, a login) do not wait behind a TPM round trip.
    ///
    /// Nested in a call that holds the lock, the read happens with it held, as it did before.
    /// Returns how the read went (the key read, or why not: file or TPM), or nil when nothing was
    /// read (nothing to do, or the keychain or the file changed under three reads in a row:
    /// `deviceBinding` then reads it with the lock held).
    @discardableResult
    func readDeviceKeyAhead(evenAfterFailure: Bool = false, needed: () -> Bool = { true }) -> Result<Void, KeychainError>? {
        for _ in 0..<3 {
            let before = lock.withLock { () -> (generation: UInt64, file: DeviceKeyFile.State?)? in
                guard device == nil else { return nil } // kept already: the common case, no file look-up
                let file = deviceKeyFile.state()
                guard evenAfterFailure || recordedDeviceFailure(file: file) == nil, needed() else { return nil }
                return (deviceGeneration, file)
            }
            guard let before else { return nil }
            // The slow part, with no lock: the file, and the TPM for a sealed key.
            let loaded: Result<SecureBytes?, KeychainError>
            do { loaded = .success(try deviceKeyFile.load(create: false)) } catch { loaded = .failure(error) }
            let kept = lock.withLock { () -> Bool in
                // Reinitialised, or the file replaced, while it was read: what was read is not
                // kept, and the read starts over.
                guard deviceGeneration == before.generation, deviceKeyFile.state() == before.file else { return false }
                _ = try? keep(loaded, file: before.file, create: false)
                return true
            }
            if case .success(let key?) = loaded { key.withUnsafeMutableBytes { wipe($0) } }
            if kept { return loaded.flatMap { $0 == nil ? .failure(missingDeviceKey) : .success(()) } }
        }
        return nil
    }

    /// Reads and checks the device key, with the lock held. With `create`, a missing key file is
    /// made, and a keychain that holds no device-bound item yet is (re)bound to this device's key.
    /// The entry points read it ahead (`readDeviceKeyAhead`): it is read here only when that did
    /// not (called inside a caller's transaction, a file changed since, a key to make).
    func deviceBinding(create: Bool) throws(KeychainError) -> DeviceBinding {
        if let device { return device }
        // A failed read is remembered while neither the keychain nor the key file changes (a
        // chmod or a restored file counts), so searches do not re-read the file for every class.
        let file = deviceKeyFile.state()
        if !create, let failure = recordedDeviceFailure(file: file) { throw failure }
        let loaded: Result<SecureBytes?, KeychainError>
        do { loaded = .success(try deviceKeyFile.load(create: create)) } catch { loaded = .failure(error) }
        defer { if case .success(let key?) = loaded { key.withUnsafeMutableBytes { wipe($0) } } }
        return try keep(loaded, file: file, create: create)
    }

    private var missingDeviceKey: KeychainError {
        KeychainError(.deviceKeyUnavailable, "the device key \(deviceKeyFile.path) is missing: this keychain's ThisDeviceOnly items are unavailable")
    }

    /// The failure recorded for the keychain as it is and the key file in `file`'s state, if any.
    private func recordedDeviceFailure(file: DeviceKeyFile.State?) -> KeychainError? {
        guard let failure = deviceFailure, failure.file == file, failure.stamp == (try? store.changeStamp()) else { return nil }
        return failure.error
    }

    /// With the lock held: keeps the binding a read of the device key gives (checked against this
    /// keychain as it is now), or records its failure for the keychain and for the file as it was
    /// before the read (`file`), so that a file replaced meanwhile is read again. When another
    /// thread kept a binding first, that one is used; the caller wipes its own copy of the key.
    private func keep(_ loaded: Result<SecureBytes?, KeychainError>, file: DeviceKeyFile.State?, create: Bool) throws(KeychainError) -> DeviceBinding {
        if let device { return device }
        do throws(KeychainError) {
            let key: SecureBytes
            switch loaded {
            case .success(let read?): key = read
            case .success(nil): throw missingDeviceKey
            case .failure(let error): throw error
            }
            let binding = try checkedBinding(key, create: create)
            device = binding
            deviceFailure = nil
            return binding
        } catch {
            if error.code == .deviceKeyUnavailable, let stamp = try? store.changeStamp() { deviceFailure = (stamp, file, error) }
            throw error
        }
    }

    /// The binding `key` gives this keychain, checked against the value stored with its
    /// device-bound items; with `create`, stored (or rebound) when the keychain has none yet.
    private func checkedBinding(_ key: SecureBytes, create: Bool) throws(KeychainError) -> DeviceBinding {
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
    func deviceProblem() -> String? {
        do {
            _ = try deviceBinding(create: false)
            return nil
        } catch {
            return error.reason
        }
    }

    /// How the device key this keychain is bound to is kept (`keychainctl info`). A sealed key
    /// is unsealed (with the lock let go) to tell this machine's TPM from another; a key that
    /// unseals is kept for this keychain when it is its key, as any use would.
    public func deviceBindingKind() -> DeviceBindingKind {
        let kind: DeviceKeyFile.Kind?
        do throws(KeychainError) { kind = try deviceKeyFile.kind() } catch { return .unavailable(error.reason) }
        switch kind {
        case nil:
            return .none
        case .clear:
            return .file
        case .sealed:
            let sealed = DeviceBindingKind.sealed(tcti: EnclaveTPM.configuredTCTI ?? "?")
            switch readDeviceKeyAhead(evenAfterFailure: true) {
            case .failure(let error)?:
                return .unavailable(error.reason)
            case .success?:
                return sealed
            case nil:
                if lock.withLock({ device != nil }) { return sealed }
                // The file kept changing: read once more, only to report (the file needs no lock).
                do throws(KeychainError) { _ = try deviceKeyFile.load(create: false) } catch { return .unavailable(error.reason) }
                return sealed
            }
        }
    }
}

/// How a keychain's device binding is kept: what `keychainctl info` says.
public enum DeviceBindingKind: Equatable, Sendable {
    /// No device key has been made yet (the first device-bound item makes it).
    case none
    /// The device key file holds the key in clear: a copy of it moves the device.
    case file
    /// The key is sealed by the TPM `tcti` names, and that TPM unseals it.
    case sealed(tcti: String)
    /// The key cannot be used here, for this reason (another TPM, no TPM, an unsafe file…).
    case unavailable(String)
}
