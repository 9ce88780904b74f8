import Foundation
import KeychainCore
import KeychainCrypto

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
        // No Secure Enclave: what Apple answers on a device without one.
        case .tpmUnavailable: self.init(errSecUnimplemented, error.reason)
        case .tpmFailure: self.init(errSecInternalComponent, error.reason)
        default: self.init(errSecParam, error.reason)
        }
    }
}

/// Whether an operation may ask the user (kSecUseAuthenticationUI, kSecUseOperationPrompt).
struct Interaction {
    var allowed: Bool
    var prompt: String?
}

/// The keychains this process uses through the SecItem functions, and whether each is unlocked.
final class KeychainAccess: @unchecked Sendable {
    static let shared = KeychainAccess()

    private let lock = NSLock()
    private var open: [String: (keychain: Keychain, master: MasterKey?)] = [:]

    /// Runs `body` with the chosen keychain (by label, else the default), after unlocking it
    /// with `context`'s keychain password if it carries one. The lock guards only the table of
    /// open keychains: the body runs without it (a keychain has its own lock), so a prompt or a
    /// password check in one thread does not hold up the others.
    func with<R>(label: String?, context: LAContext?, _ body: (Keychain, MasterKey?) throws -> R) throws -> R {
        try with(path: { try resolve(label) }, context: context, body)
    }

    /// The same, for the keychain with this serial number (a Secure Enclave key's
    /// `dataRepresentation` names it): the default keychain when it is that one, else the user's
    /// keychain that has it; none is errSecItemNotFound.
    func with<R>(serial: String, context: LAContext?, _ body: (Keychain, MasterKey?) throws -> R) throws -> R {
        try with(path: { () throws -> String in
            let preferred = try? resolve(nil)
            let files = KeychainDirectory(path: Configuration.current().directory).keychainFiles()
            for path in [preferred].compactMap({ $0 }) + files.filter({ $0 != preferred }) {
                if let keychain = try? opened(path), (try? keychain.serialNumber()) == serial { return path }
            }
            throw ItemError(errSecItemNotFound, "no keychain of this user has serial \(serial)")
        }, context: context, body)
    }

    private func with<R>(path resolvePath: () throws -> String, context: LAContext?, _ body: (Keychain, MasterKey?) throws -> R) throws -> R {
        let (keychain, cached) = try lock.withLock { () throws -> (Keychain, MasterKey?) in
            let path = try resolvePath()
            return (try opened(path), open[path]?.master)
        }
        var master = cached
        // Unlocked in the login session (keychaind): no call and no prompt needed, as on a Mac.
        if master == nil, context?.password(for: keychain.path) == nil {
            if let session = UnlockSession.masterKey(for: keychain) {
                master = session
                lock.withLock { open[keychain.path] = (keychain, session) }
            } else {
                // Locked, but unlocked once since the session began: AfterFirstUnlock items open.
                UnlockSession.applyFirstUnlock(to: keychain)
            }
        }
        if let checked = try checkContextPassword(keychain, context) {
            master = checked
            lock.withLock { open[keychain.path] = (keychain, checked) }
        }
        return try body(keychain, master)
    }

    /// The master key when `context` carries the password of `keychain`: checked there (counted
    /// like any login) and recorded on the context as an authentication; nil without one.
    private func checkContextPassword(_ keychain: Keychain, _ context: LAContext?) throws -> MasterKey? {
        guard let context, let password = context.password(for: keychain.path) else { return nil }
        let master = try Self.unlock(keychain, password: password)
        context.recordAuthentication(password: password, keychainPath: keychain.path)
        return master
    }

    /// The prompt program, when a call may ask the user: interaction allowed by the query and by
    /// the context, and a program configured.
    private func promptProgram(_ context: LAContext?, _ interaction: Interaction) -> String? {
        guard interaction.allowed, !(context?.interactionNotAllowed ?? false) else { return nil }
        return Configuration.current().promptProgram
    }

    /// The keychain at `path`, opened once per process. Called with the lock held.
    private func opened(_ path: String) throws -> Keychain {
        if let entry = open[path] { return entry.keychain }
        do {
            let keychain = try Keychain.open(at: path)
            open[path] = (keychain, nil)
            return keychain
        } catch {
            throw ItemError(error)
        }
    }

    /// When an operation finds the keychain locked and needs it unlocked (an item to add that
    /// needs the login, a search whose locked pass found nothing readable): if the query brings
    /// no password and allows interaction (`kSecUseAuthenticationUI` not Fail or Skip, the
    /// context's `interactionNotAllowed` unset), the prompt program asks for the keychain
    /// password showing `kSecUseOperationPrompt`'s text, and a right answer unlocks the keychain
    /// for this process, as unlocking a locked login keychain does on a Mac. nil: no prompt
    /// could be shown (the operation answers as a locked keychain does). Cancelled:
    /// errSecUserCanceled; wrong: errSecAuthFailed (counted like any login).
    func promptUnlock(_ keychain: Keychain, _ query: ItemQuery) throws -> MasterKey? {
        try promptUnlock(keychain, context: query.context, interaction: query.interaction)
    }

    func promptUnlock(_ keychain: Keychain, context: LAContext?, interaction: Interaction) throws -> MasterKey? {
        guard context?.password(for: keychain.path) == nil, let program = promptProgram(context, interaction) else { return nil }
        // One prompt at a time: threads that found the keychain locked together ask once.
        promptLock.lock()
        defer { promptLock.unlock() }
        if let master = lock.withLock({ open[keychain.path]?.master }) { return master }
        let text = LAContext.promptText(interaction.prompt, context,
                                        fallback: "Unlock the keychain \"\((try? keychain.info(countingObjects: false).label) ?? "login")\" to use its items")
        return try unlockByPrompt(keychain, program: program, text: text, context: context)
    }

    /// Held while a prompt program runs for an unlock (not for per-use checks).
    private let promptLock = NSLock()

    /// Device owner authentication for an `LAContext`: its password if it carries one, else the
    /// prompt program's answer, checked against the keychain; the keychain is then unlocked for
    /// this process and the context remembers the password.
    func authenticate(_ context: LAContext, label: String?, prompt: String) throws {
        let keychain = try lock.withLock { () throws -> Keychain in try opened(try resolve(label)) }
        if let master = try checkContextPassword(keychain, context) {
            lock.withLock { open[keychain.path] = (keychain, master) }
            return
        }
        guard let program = Configuration.current().promptProgram else {
            throw ItemError(errSecInteractionNotAllowed, "no prompt program is configured (prompt_program, KEYCHAIN_PKCS11_PROMPT)")
        }
        try unlockByPrompt(keychain, program: program, text: prompt.isEmpty ? "Authenticate to use the keychain" : prompt, context: context)
    }

    /// A per-use check (user presence) of an item or key: the context's password checked again,
    /// unless its device owner authentication is recent enough
    /// (`touchIDAuthenticationAllowableReuseDuration`); without a password, the prompt when the
    /// query allows interaction (the context then carries the answer).
    func confirmPresence(keychainPath path: String, context: LAContext?, interaction: Interaction, what: String) throws {
        let keychain = try lock.withLock { () throws -> Keychain in try opened(path) }
        try confirmPresence(keychain: keychain, context: context, interaction: interaction, what: what)
    }

    /// The same, for a keychain in hand.
    func confirmPresence(keychain: Keychain, context: LAContext?, interaction: Interaction, what: String) throws {
        if let context, context.authenticationIsFresh(for: keychain.path) { return }
        // Checked again for this use; the process's unlock state is not changed by it.
        if try checkContextPassword(keychain, context) != nil { return }
        guard let program = promptProgram(context, interaction) else {
            throw ItemError(errSecInteractionNotAllowed, "this \(what) asks for the keychain password at each use: allow a prompt (prompt_program) or pass kSecUseAuthenticationContext")
        }
        _ = try unlockByPrompt(keychain, program: program, text: LAContext.promptText(interaction.prompt, context, fallback: "Authenticate to use this \(what)"), context: context,
                               storeMaster: false)
    }

    /// An item's application password when none is set on the context: the prompt program's
    /// answer when the query allows interaction (kept on the context, if there is one).
    func askApplicationPassword(context: LAContext?, interaction: Interaction) throws -> [UInt8] {
        guard let program = promptProgram(context, interaction) else {
            throw ItemError(errSecInteractionNotAllowed, "this item asks for its application password: set it on the kSecUseAuthenticationContext (setCredential(_:type: .applicationPassword)) or allow a prompt")
        }
        let answer: SecureBytes
        do {
            answer = try PromptProgram.run(program, text: LAContext.promptText(interaction.prompt, context, fallback: "Authenticate to use this item") + " (application password)")
        } catch {
            throw ItemError(errSecUserCanceled, "the prompt gave no application password")
        }
        // Kept on the context only once it opened the item (the caller's `keepApplicationPassword`).
        return answer.withUnsafeBytes { Array($0) }
    }

    /// Asks the prompt program for the keychain password and checks it; the lock is not held
    /// while the user answers nor while the password is checked.
    @discardableResult
    private func unlockByPrompt(_ keychain: Keychain, program: String, text: String, context: LAContext?, storeMaster: Bool = true) throws -> MasterKey {
        let answer: SecureBytes
        do {
            answer = try PromptProgram.run(program, text: text)
        } catch {
            throw ItemError(errSecUserCanceled, "the prompt gave no password")
        }
        let master = try answer.withUnsafeBytes { bytes throws -> MasterKey in
            do { return try keychain.unlock(.user, pin: bytes) } catch let error as KeychainError { throw ItemError(error) }
        }
        if storeMaster { lock.withLock { open[keychain.path] = (keychain, master) } }
        if let context {
            // The context remembers the answer (that is what an evaluated context is).
            var password = answer.withUnsafeBytes { Array($0) }
            context.recordAuthentication(password: password, keychainPath: keychain.path)
            wipe(&password)
        }
        return master
    }

    /// Whether the keychain for `label` has a user password (what device owner authentication asks for).
    func hasUserPassword(label: String?) throws -> Bool {
        let keychain = try lock.withLock { () throws -> Keychain in try opened(try resolve(label)) }
        do { return try keychain.info(countingObjects: false).userPINInitialized } catch { throw ItemError(error) }
    }

    /// Checks the application password that stands in for user presence on an item (`.or`).
    func checkAlternative(path: String, _ object: ObjectAttributes, applicationPassword password: UnsafeRawBufferPointer) throws(KeychainError) {
        let keychain: Keychain
        do { keychain = try lock.withLock { () throws -> Keychain in try opened(path) } } catch {
            throw KeychainError(.storageFailure, "cannot open \(path)")
        }
        try keychain.checkAlternative(object, applicationPassword: password)
    }

    /// Checks an item's application password against the keychain at `path` (counted there like
    /// a PIN) and returns the item with its secret.
    func reveal(path: String, _ object: ObjectAttributes, applicationPassword password: UnsafeRawBufferPointer) throws(KeychainError) -> ObjectAttributes {
        let keychain: Keychain
        do { keychain = try lock.withLock { () throws -> Keychain in try opened(path) } } catch {
            throw KeychainError(.storageFailure, "cannot open \(path)")
        }
        // The password's scrypt runs without this lock.
        return try keychain.reveal(object, applicationPassword: password)
    }

    /// The keychain password checked against `keychain` (counted like every login).
    static func unlock(_ keychain: Keychain, password: [UInt8]) throws -> MasterKey {
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
    func resolve(_ label: String?) throws -> String {
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
            try KeychainAccess.shared.with(label: label, context: LAContext(password: password)) { _, _ in }
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
