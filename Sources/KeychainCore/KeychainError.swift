import KeychainCrypto
import KeychainStore

/// Why a keychain operation was refused. Each code has exactly one PKCS#11 return value
/// (mapped in the PKCS11 layer) and one OSStatus (in KeychainServices).
public struct KeychainError: Error, Equatable, CustomStringConvertible {
    public enum Code: Equatable, Sendable {
        case attributeTypeInvalid
        case attributeValueInvalid
        case attributeReadOnly
        case attributeSensitive
        case templateIncomplete
        case templateInconsistent
        case actionProhibited
        case objectNotFound
        case pinIncorrect
        case pinLocked
        case pinLengthRange
        case userPINNotInitialized
        /// A stored record failed authentication or decoding: altered or damaged on disk.
        case recordCorrupted
        /// The keychain file is unusable (not a keychain, newer schema, damaged meta data).
        case keychainUnrecognized
        case readOnly
        case storageFull
        case storageFailure
        case argumentsBad
        case keySizeRange
        case keyUnextractable
        case keyNotWrappable
        /// An ML-DSA or ML-KEM parameter set the library does not offer (ML-DSA-44, ML-KEM-512).
        case parameterSetNotSupported
        case wrappedKeyInvalid
        /// A keychain item with the same primary key exists (errSecDuplicateItem).
        case duplicateItem
        /// The device key is missing, unsafe or not this keychain's: device-bound items are sealed.
        case deviceKeyUnavailable
        /// The item's protection class needs state this keychain lacks (a user PIN, a first login).
        case protectionUnavailable
        /// The keychain folder or file belongs to another user or is writable by others.
        case unsafePermissions
        /// No TPM here (none configured, no /dev/tpmrm0, or `tcti = none`): no Secure Enclave.
        case tpmUnavailable
        /// The TPM answered an error, did not answer in time, or cannot load a key made elsewhere.
        case tpmFailure
    }

    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    public static func == (lhs: KeychainError, rhs: KeychainError) -> Bool { lhs.code == rhs.code }
    public var description: String { "\(code): \(reason)" }

    /// Translates a lower layer's failure.
    public init(_ error: any Error) {
        switch error {
        case let e as KeychainError: self = e
        case let e as StoreError:
            switch e.code {
            case .readOnly: self.init(.readOnly, e.reason)
            case .full: self.init(.storageFull, e.reason)
            case .notFound: self.init(.objectNotFound, e.reason)
            case .corrupt, .schemaTooNew: self.init(.keychainUnrecognized, e.reason)
            case .malformed: self.init(.recordCorrupted, e.reason)
            case .duplicate: self.init(.templateInconsistent, e.reason)
            case .busy, .io, .other: self.init(.storageFailure, e.reason)
            }
        case let e as CryptoError:
            self.init(e.code == .authenticationFailed ? .recordCorrupted : .storageFailure, e.reason)
        default:
            self.init(.storageFailure, "\(error)")
        }
    }
}

/// Runs `body`, rethrowing any failure as a KeychainError.
@inline(__always)
func translatingErrors<R>(_ body: () throws -> R) throws(KeychainError) -> R {
    do { return try body() } catch { throw KeychainError(error) }
}
