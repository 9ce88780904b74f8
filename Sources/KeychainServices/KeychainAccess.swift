import Foundation
import KeychainCore
import KeychainCrypto

/// The analogue of an LAContext passed with kSecUseAuthenticationContext: it carries the
/// keychain password, so a program can unlock without a prompt, and, like LAContext's
/// `setCredential(_:type:)`, the application password of items protected by one.
public final class SecAuthenticationContext: NSObject, @unchecked Sendable {
    let password: [UInt8]?
    private let lock = NSLock()
    private var applicationCredential: [UInt8]?

    public init(password: String) {
        self.password = Array(password.utf8)
    }

    /// A context without the keychain password (for example only an application password).
    public override init() {
        self.password = nil
    }

    /// Sets (or, with nil, clears) a credential, as LAContext does. Returns whether it was set.
    @discardableResult
    public func setCredential(_ credential: Data?, type: LACredentialType) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if var old = applicationCredential {
            applicationCredential = nil
            wipe(&old)
        }
        applicationCredential = credential.map { Array($0) }
        return true
    }

    deinit {
        if var old = applicationCredential {
            applicationCredential = nil
            wipe(&old)
        }
    }

    /// Whether a credential of `type` is set.
    public func isCredentialSet(_ type: LACredentialType) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return applicationCredential != nil
    }

    var applicationPassword: [UInt8]? {
        lock.lock()
        defer { lock.unlock() }
        return applicationCredential
    }
}

/// LAContext's credential types; the application password is the one items can ask for.
public enum LACredentialType: Int, Sendable {
    case applicationPassword = 0
}

/// A SecItem failure: its OSStatus and why.
struct ItemError: Error {
    let status: OSStatus
    let reason: String

    init(_ status: OSStatus, _ reason: String) {
        self.status = status
        self.reason = reason
    }

    /// The OSStatus for a keychain failure.
    init(_ error: KeychainError) {
        switch error.code {
        case .duplicateItem: self.init(errSecDuplicateItem, error.reason)
        case .objectNotFound: self.init(errSecItemNotFound, error.reason)
        case .pinIncorrect, .pinLocked, .pinLengthRange, .userPINNotInitialized: self.init(errSecAuthFailed, error.reason)
        case .readOnly: self.init(errSecReadOnly, error.reason)
        case .recordCorrupted: self.init(errSecDecode, error.reason)
        case .keychainUnrecognized: self.init(errSecNoSuchKeychain, error.reason)
        case .storageFull, .storageFailure, .unsafePermissions: self.init(errSecIO, error.reason)
        case .deviceKeyUnavailable: self.init(errSecNotAvailable, error.reason)
        case .protectionUnavailable: self.init(errSecInteractionNotAllowed, error.reason)
        default: self.init(errSecParam, error.reason)
        }
    }
}

/// The keychains this process uses through the SecItem functions, and whether each is unlocked.
final class KeychainAccess: @unchecked Sendable {
    static let shared = KeychainAccess()

    private let lock = NSLock()
    private var open: [String: (keychain: Keychain, master: MasterKey?)] = [:]

    /// Runs `body` with the chosen keychain (by label, else the default) under the lock, after
    /// unlocking it with `context` if one is given.
    func with<R>(label: String?, context: SecAuthenticationContext?, _ body: (Keychain, MasterKey?) throws -> R) throws -> R {
        lock.lock()
        defer { lock.unlock() }
        let path = try resolve(label)
        if open[path] == nil {
            do { open[path] = (try Keychain.open(at: path), nil) } catch { throw ItemError(error) }
        }
        guard let entry = open[path] else { throw ItemError(errSecNoSuchKeychain, "cannot open \(path)") }
        var master = entry.master
        if let context, context.password != nil {
            master = try Self.unlock(entry.keychain, context)
            open[path] = (entry.keychain, master)
        }
        return try body(entry.keychain, master)
    }

    /// Checks an item's application password against the keychain at `path` (counted there like
    /// a PIN) and returns the item with its secret.
    func reveal(path: String, _ object: ObjectAttributes, applicationPassword password: UnsafeRawBufferPointer) throws(KeychainError) -> ObjectAttributes {
        lock.lock()
        defer { lock.unlock() }
        let keychain: Keychain
        if let entry = open[path] { keychain = entry.keychain } else {
            keychain = try Keychain.open(at: path)
            open[path] = (keychain, nil)
        }
        return try keychain.reveal(object, applicationPassword: password)
    }

    /// Checks the user PIN of an authentication context against a keychain again (per-use
    /// authentication); a wrong PIN counts toward the lock.
    func verify(path: String, context: SecAuthenticationContext) throws {
        lock.lock()
        defer { lock.unlock() }
        let keychain: Keychain
        if let entry = open[path] { keychain = entry.keychain } else {
            do { keychain = try Keychain.open(at: path) } catch { throw ItemError(error) }
        }
        _ = try Self.unlock(keychain, context)
    }

    /// The user PIN of `context` checked against `keychain` (counted like every login).
    static func unlock(_ keychain: Keychain, _ context: SecAuthenticationContext) throws -> MasterKey {
        guard let password = context.password else {
            throw ItemError(errSecInteractionNotAllowed, "the authentication context carries no keychain password")
        }
        do {
            return try password.withUnsafeBytes { try keychain.unlock(.user, pin: $0) }
        } catch let error as KeychainError {
            throw ItemError(error)
        }
    }

    func lockAll() {
        lock.lock()
        defer { lock.unlock() }
        for (path, entry) in open { open[path] = (entry.keychain, nil) }
    }

    /// The keychain file for `label`; without one, the configured default: the keychain
    /// labelled by `default_keychain` in the configuration file, else "login", else the only one.
    private func resolve(_ label: String?) throws -> String {
        let configuration = Configuration.current()
        let directory = KeychainDirectory(path: configuration.directory)
        let files = directory.keychainFiles()
        let labelled = files.compactMap { path in (try? Keychain.open(at: path).info(countingObjects: false).label).map { (path, $0) } }
        if let wanted = label ?? configuration.defaultKeychain {
            guard let match = labelled.first(where: { $0.1 == wanted }) else { throw ItemError(errSecNoSuchKeychain, "no keychain labelled \(wanted)") }
            return match.0
        }
        if let login = labelled.first(where: { $0.1 == "login" }) { return login.0 }
        if labelled.count == 1 { return labelled[0].0 }
        throw ItemError(errSecNoSuchKeychain, labelled.isEmpty ? "no keychain exists" : "several keychains and no default_keychain configured")
    }
}

/// Unlocking and locking keychains for the SecItem functions (the `security unlock-keychain`
/// analogue). Items that need the keychain unlocked fail with errSecInteractionNotAllowed
/// until then.
public enum KeychainServices {
    /// Unlocks the keychain labelled `keychain` (default: the configured one) with its password.
    @discardableResult
    public static func unlock(password: String, keychain label: String? = nil) -> OSStatus {
        do {
            try KeychainAccess.shared.with(label: label, context: SecAuthenticationContext(password: password)) { _, _ in }
            return errSecSuccess
        } catch let error as ItemError {
            return error.status
        } catch {
            return errSecIO
        }
    }

    /// Forgets every unlocked keychain's master key in this process.
    public static func lockAll() {
        KeychainAccess.shared.lockAll()
    }
}
