import Foundation
import KeychainCore
import KeychainCrypto

// Apple's LocalAuthentication framework, as far as it has a meaning here: the "device owner" is
// whoever knows the keychain's password, asked for through the configured prompt program
// (`prompt_program`, KEYCHAIN_PKCS11_PROMPT); there is no biometric device. An `LAContext` is
// also what `kSecUseAuthenticationContext` takes. `import LocalAuthentication` gives this file.

public let LAErrorDomain = "com.apple.LocalAuthentication"
/// The longest `touchIDAuthenticationAllowableReuseDuration` (Apple's value, seconds).
public let LATouchIDAuthenticationMaximumAllowableReuseDuration: TimeInterval = 300

public enum LAPolicy: Int, Sendable {
    case deviceOwnerAuthenticationWithBiometrics = 1
    case deviceOwnerAuthentication = 2
    case deviceOwnerAuthenticationWithWatch = 3
    case deviceOwnerAuthenticationWithBiometricsOrWatch = 4
    case deviceOwnerAuthenticationWithWristDetection = 5
}

public enum LABiometryType: Int, Sendable {
    case none = 0
    case touchID = 1
    case faceID = 2
    case opticID = 4
}

/// What an access control is evaluated for (`evaluateAccessControl`).
public enum LAAccessControlOperation: Int, Sendable {
    case createItem = 0
    case useItem = 1
    case createKey = 2
    case useKeySign = 3
    case useKeyDecrypt = 4
    case useKeyKeyExchange = 5
}

/// The credentials a context can carry; the application password is the one items ask for.
public enum LACredentialType: Int, Sendable {
    case applicationPassword = 0
    case smartCardPIN = -3
}

/// LocalAuthentication's error, with Apple's domain and codes (bridges to NSError).
public struct LAError: Error, CustomNSError, Hashable, Sendable {
    public enum Code: Int, Sendable {
        case authenticationFailed = -1
        case userCancel = -2
        case userFallback = -3
        case systemCancel = -4
        case passcodeNotSet = -5
        case biometryNotAvailable = -6
        case biometryNotEnrolled = -7
        case biometryLockout = -8
        case appCancel = -9
        case invalidContext = -10
        case watchNotAvailable = -11
        case biometryNotPaired = -12
        case biometryDisconnected = -13
        case invalidDimensions = -14
        case notInteractive = -1004

        /// The names from before Face ID.
        public static var touchIDNotAvailable: Code { .biometryNotAvailable }
        public static var touchIDNotEnrolled: Code { .biometryNotEnrolled }
        public static var touchIDLockout: Code { .biometryLockout }
        public static var companionNotAvailable: Code { .watchNotAvailable }
    }

    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String = "") {
        self.code = code
        self.reason = reason
    }

    public static var errorDomain: String { LAErrorDomain }
    public var errorCode: Int { code.rawValue }
    public var errorUserInfo: [String: Any] { reason.isEmpty ? [:] : [NSLocalizedDescriptionKey: reason] }

    public static func == (lhs: LAError, rhs: LAError) -> Bool { lhs.code == rhs.code }
    public func hash(into hasher: inout Hasher) { hasher.combine(code) }

    // `case LAError.userCancel` and `LAError.Code.userCancel` both work, as on Apple platforms.
    public static var authenticationFailed: Code { .authenticationFailed }
    public static var userCancel: Code { .userCancel }
    public static var userFallback: Code { .userFallback }
    public static var systemCancel: Code { .systemCancel }
    public static var passcodeNotSet: Code { .passcodeNotSet }
    public static var biometryNotAvailable: Code { .biometryNotAvailable }
    public static var biometryNotEnrolled: Code { .biometryNotEnrolled }
    public static var biometryLockout: Code { .biometryLockout }
    public static var appCancel: Code { .appCancel }
    public static var invalidContext: Code { .invalidContext }
    public static var notInteractive: Code { .notInteractive }
    public static var watchNotAvailable: Code { .watchNotAvailable }
    public static var touchIDNotAvailable: Code { .biometryNotAvailable }
    public static var touchIDNotEnrolled: Code { .biometryNotEnrolled }
    public static var touchIDLockout: Code { .biometryLockout }
}

/// An authentication context (Apple's LAContext): what the user proved, for how long it counts,
/// and the credentials an application set. Pass it as `kSecUseAuthenticationContext`.
///
/// Device owner authentication asks for the keychain's password (the default keychain's, or
/// `keychainLabel`'s) through the prompt program and checks it there, counted like any login; once
/// it succeeded the context carries the password, so items used with it need no further prompt,
/// and per-use items (user presence) accept it again without asking for
/// `touchIDAuthenticationAllowableReuseDuration` seconds. `init(password:)` (this project's) makes
/// a context that already knows the password, for programs that have it from elsewhere.
open class LAContext: NSObject, @unchecked Sendable {
    private let lock = NSLock()
    private var keychainPassword: [UInt8]?
    /// The keychain file the password was checked against (nil: given by `init(password:)`, for
    /// whichever keychain a query names).
    private var passwordKeychain: String?
    private var applicationCredential: [UInt8]?
    /// When the user last proved to be the device owner (by prompt, or by the password given).
    private var authenticatedAt: Date?
    private var invalidated = false
    private var reuseDuration: TimeInterval = 0

    /// The keychain this context authenticates for (this project's; nil: the default one).
    public var keychainLabel: String?
    public var localizedReason = ""
    public var localizedFallbackTitle: String?
    public var localizedCancelTitle: String?
    /// When set, nothing asks the user: operations needing it fail (`LAError.notInteractive`,
    /// `errSecInteractionNotAllowed`).
    public var interactionNotAllowed = false
    /// No biometric device is used here.
    public var biometryType: LABiometryType { .none }
    /// Biometric enrolment state: none here.
    public var evaluatedPolicyDomainState: Data? { nil }

    /// How long a device owner authentication also answers per-use checks (user presence) of the
    /// items and keys used with this context, at most
    /// `LATouchIDAuthenticationMaximumAllowableReuseDuration`.
    public var touchIDAuthenticationAllowableReuseDuration: TimeInterval {
        get { lock.withLock { reuseDuration } }
        set { lock.withLock { reuseDuration = min(max(newValue, 0), LATouchIDAuthenticationMaximumAllowableReuseDuration) } }
    }

    public override init() {
        super.init()
    }

    /// A context that already knows the keychain password (this project's): it unlocks without a
    /// prompt, and is checked against the keychain when used.
    public convenience init(password: String) {
        self.init()
        keychainPassword = Array(password.utf8)
    }

    deinit {
        Self.clear(&keychainPassword)
        Self.clear(&applicationCredential)
    }

    /// Drops a stored secret and wipes its bytes (the property let go first, so that the wipe
    /// writes the buffer itself rather than a copy of it).
    private static func clear(_ secret: inout [UInt8]?) {
        guard var old = secret else { return }
        secret = nil
        wipe(&old)
    }

    // MARK: policies

    /// Whether `policy` can be evaluated: device owner authentication when the keychain has a
    /// password and the prompt program can ask for it (or the context already knows it);
    /// biometric policies never (`biometryNotAvailable`; the watch ones `watchNotAvailable`).
    open func canEvaluatePolicy(_ policy: LAPolicy, error: NSErrorPointer) -> Bool {
        if let failure = availability(policy) {
            error?.pointee = failure as NSError
            return false
        }
        return true
    }

    private func availability(_ policy: LAPolicy) -> LAError? {
        if lock.withLock({ invalidated }) { return LAError(.invalidContext, "the context was invalidated") }
        switch policy {
        case .deviceOwnerAuthenticationWithBiometrics:
            return LAError(.biometryNotAvailable, "no biometric device is used by this keychain")
        case .deviceOwnerAuthenticationWithWatch, .deviceOwnerAuthenticationWithBiometricsOrWatch, .deviceOwnerAuthenticationWithWristDetection:
            return LAError(.watchNotAvailable, "no companion device is used by this keychain")
        case .deviceOwnerAuthentication:
            if lock.withLock({ keychainPassword != nil }) { return nil }
            do {
                guard try KeychainAccess.shared.hasUserPassword(label: keychainLabel) else {
                    return LAError(.passcodeNotSet, "the keychain has no password")
                }
            } catch {
                return LAError(.passcodeNotSet, "no keychain to authenticate for")
            }
            guard Configuration.current().promptProgram != nil else {
                return LAError(.notInteractive, "no prompt program is configured (prompt_program, KEYCHAIN_PKCS11_PROMPT)")
            }
            return nil
        }
    }

    /// Asks for the keychain password (device owner authentication) through the prompt program,
    /// showing `localizedReason`, and checks it. `reply` runs on another thread, as on Apple
    /// platforms. Biometric policies fail with `biometryNotAvailable`.
    open func evaluatePolicy(_ policy: LAPolicy, localizedReason: String, reply: @escaping @Sendable (Bool, Error?) -> Void) {
        DispatchQueue.global().async {
            do {
                try self.authenticateOwner(policy, reason: localizedReason)
                reply(true, nil)
            } catch {
                reply(false, error)
            }
        }
    }

    open func evaluatePolicy(_ policy: LAPolicy, localizedReason: String) async throws -> Bool {
        try await withCheckedThrowingContinuation { continuation in
            evaluatePolicy(policy, localizedReason: localizedReason) { success, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: success) }
            }
        }
    }

    /// Satisfies what `accessControl` asks for `operation`: the device owner (user presence,
    /// passcode, and the biometry and watch flags, which here are the same check) and an
    /// application password, which is asked for through the prompt program when none is set
    /// (`setCredential`). With `.or` one constraint is enough, with `.and` all are needed.
    open func evaluateAccessControl(_ accessControl: SecAccessControl, operation: LAAccessControlOperation, localizedReason: String,
                                    reply: @escaping @Sendable (Bool, Error?) -> Void) {
        DispatchQueue.global().async {
            do {
                try self.satisfy(accessControl.flags, reason: localizedReason)
                reply(true, nil)
            } catch {
                reply(false, error)
            }
        }
    }

    open func evaluateAccessControl(_ accessControl: SecAccessControl, operation: LAAccessControlOperation, localizedReason: String) async throws -> Bool {
        try await withCheckedThrowingContinuation { continuation in
            evaluateAccessControl(accessControl, operation: operation, localizedReason: localizedReason) { success, error in
                if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: success) }
            }
        }
    }

    /// Ends the context: later evaluations fail with `invalidContext`, and what it carried is wiped.
    open func invalidate() {
        lock.withLock {
            invalidated = true
            authenticatedAt = nil
            Self.clear(&keychainPassword)
            Self.clear(&applicationCredential)
        }
    }

    // MARK: credentials

    /// Sets (or, with nil, clears) a credential. Returns whether it was set.
    @discardableResult
    open func setCredential(_ credential: Data?, type: LACredentialType) -> Bool {
        guard type == .applicationPassword else { return false }
        return lock.withLock {
            guard !invalidated else { return false }
            Self.clear(&applicationCredential)
            applicationCredential = credential.map { Array($0) }
            return true
        }
    }

    /// Whether a credential of `type` is set.
    open func isCredentialSet(_ type: LACredentialType) -> Bool {
        type == .applicationPassword && lock.withLock { applicationCredential != nil }
    }

    // MARK: for the SecItem functions

    /// The keychain password this context carries, if any (whichever keychain it was checked for).
    var password: [UInt8]? { lock.withLock { invalidated ? nil : keychainPassword } }
    /// The keychain password for the keychain at `path`: one checked against another keychain is
    /// not tried here (it would only count a failure there).
    func password(for path: String) -> [UInt8]? {
        lock.withLock { invalidated || (passwordKeychain != nil && passwordKeychain != path) ? nil : keychainPassword }
    }
    var applicationPassword: [UInt8]? { lock.withLock { invalidated ? nil : applicationCredential } }
    var isInvalidated: Bool { lock.withLock { invalidated } }

    /// Whether a device owner authentication of this context for the keychain at `path` still
    /// answers a per-use check without checking the password again.
    func authenticationIsFresh(for path: String) -> Bool {
        lock.withLock {
            guard !invalidated, let authenticatedAt, reuseDuration > 0, passwordKeychain == nil || passwordKeychain == path else { return false }
            return Date().timeIntervalSince(authenticatedAt) <= reuseDuration
        }
    }

    /// The keychain password was checked against the keychain at `path` just now (by a prompt or
    /// by a use of the context).
    func recordAuthentication(password: [UInt8], keychainPath path: String) {
        lock.withLock {
            guard !invalidated else { return }
            if keychainPassword != password {
                Self.clear(&keychainPassword)
                keychainPassword = password
            }
            passwordKeychain = path
            authenticatedAt = Date()
        }
    }

    /// An application password that just opened an item: kept for the next uses.
    func keepApplicationPassword(_ password: [UInt8]) {
        lock.withLock {
            guard !invalidated, applicationCredential != password else { return }
            Self.clear(&applicationCredential)
            applicationCredential = password
        }
    }

    /// The text a prompt shows: the query's, else this context's localizedReason, else `fallback`.
    static func promptText(_ given: String?, _ context: LAContext?, fallback: String) -> String {
        given ?? context?.promptText(nil) ?? fallback
    }

    /// The text a prompt shows: the query's, else this context's localizedReason.
    func promptText(_ given: String?) -> String? {
        if let given { return given }
        let reason = localizedReason
        return reason.isEmpty ? nil : reason
    }

    /// Device owner authentication: the context's password if it has one, else the prompt.
    func authenticateOwner(_ policy: LAPolicy, reason: String) throws {
        if let failure = availability(policy) { throw failure }
        if interactionNotAllowed, password == nil { throw LAError(.notInteractive, "interaction is not allowed on this context") }
        do {
            try KeychainAccess.shared.authenticate(self, label: keychainLabel, prompt: reason.isEmpty ? localizedReason : reason)
        } catch let error as ItemError {
            throw error.asLAError
        }
    }

    /// `evaluateAccessControl`'s work.
    func satisfy(_ flags: SecAccessControlCreateFlags, reason: String) throws {
        if isInvalidated { throw LAError(.invalidContext, "the context was invalidated") }
        let needsOwner = !flags.isDisjoint(with: SecAccessControlCreateFlags.presence)
        let needsApplicationPassword = flags.contains(.applicationPassword)
        if flags.contains(.or), needsApplicationPassword, isCredentialSet(.applicationPassword) { return }
        if flags.contains(.or), needsOwner, needsApplicationPassword {
            // Either one: the owner first, the application password if that is declined.
            do { return try authenticateOwner(.deviceOwnerAuthentication, reason: reason) } catch let error as LAError where error.code == .userCancel {}
        } else if needsOwner {
            try authenticateOwner(.deviceOwnerAuthentication, reason: reason)
        }
        if needsApplicationPassword, !isCredentialSet(.applicationPassword) {
            if interactionNotAllowed { throw LAError(.notInteractive, "the item asks for its application password and interaction is not allowed") }
            guard let program = Configuration.current().promptProgram else {
                throw LAError(.notInteractive, "no prompt program is configured to ask for the application password")
            }
            do {
                // Asked for here, it is set before any item checks it (as LAContext's own prompt does).
                let answer = try PromptProgram.run(program, text: (reason.isEmpty ? localizedReason : reason) + " (application password)")
                answer.withUnsafeBytes { bytes in
                    var copy = Array(bytes)
                    keepApplicationPassword(copy)
                    wipe(&copy)
                }
            } catch {
                throw LAError(.userCancel, "no application password was given")
            }
        }
    }
}

/// This project's earlier name for the context; the same class.
public typealias SecAuthenticationContext = LAContext

extension ItemError {
    /// The LocalAuthentication error for a failed unlock.
    var asLAError: LAError {
        switch status {
        case errSecUserCanceled: return LAError(.userCancel, reason)
        case errSecAuthFailed: return LAError(.authenticationFailed, reason)
        case errSecInteractionNotAllowed: return LAError(.notInteractive, reason)
        default: return LAError(.passcodeNotSet, reason)
        }
    }
}
