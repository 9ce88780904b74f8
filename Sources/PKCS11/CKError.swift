import CPKCS11
import KeychainCore

/// A PKCS#11 failure: exactly one CK_RV, plus a reason for logs and tests.
public struct CKError: Error, Equatable, CustomStringConvertible {
    public let rv: CK_RV
    public let reason: String
    /// Set when an operation cannot start before the key's application password is presented:
    /// the key's handle (the operation then waits for C_Login(CKU_CONTEXT_SPECIFIC)).
    var awaitingCredentialFor: CK_OBJECT_HANDLE?

    public init(_ rv: CK_RV, _ reason: String = "") {
        self.rv = rv
        self.reason = reason
    }

    public static func == (lhs: CKError, rhs: CKError) -> Bool { lhs.rv == rhs.rv }
    public var description: String { "CKR 0x\(String(rv, radix: 16)): \(reason)" }

    static let argumentsBad = CKError(CK_RV(CKR_ARGUMENTS_BAD), "bad arguments")
    static let notInitialized = CKError(CK_RV(CKR_CRYPTOKI_NOT_INITIALIZED), "C_Initialize has not been called in this process")
    static let sessionHandleInvalid = CKError(CK_RV(CKR_SESSION_HANDLE_INVALID), "no such session")
    static let objectHandleInvalid = CKError(CK_RV(CKR_OBJECT_HANDLE_INVALID), "no such object")
    static let slotIDInvalid = CKError(CK_RV(CKR_SLOT_ID_INVALID), "no such slot")
    static let userNotLoggedIn = CKError(CK_RV(CKR_USER_NOT_LOGGED_IN), "login required")
    static let sessionReadOnly = CKError(CK_RV(CKR_SESSION_READ_ONLY), "the session is read-only")
    static let functionNotSupported = CKError(CK_RV(CKR_FUNCTION_NOT_SUPPORTED), "not supported")

    static func bufferTooSmall(required: Int) -> CKError {
        CKError(CK_RV(CKR_BUFFER_TOO_SMALL), "buffer too small: \(required) needed")
    }

    /// The one CK_RV for each keychain error.
    init(_ error: KeychainError) {
        let rv: UInt
        switch error.code {
        case .attributeTypeInvalid: rv = CKR_ATTRIBUTE_TYPE_INVALID
        case .attributeValueInvalid: rv = CKR_ATTRIBUTE_VALUE_INVALID
        case .attributeReadOnly: rv = CKR_ATTRIBUTE_READ_ONLY
        case .attributeSensitive: rv = CKR_ATTRIBUTE_SENSITIVE
        case .templateIncomplete: rv = CKR_TEMPLATE_INCOMPLETE
        case .templateInconsistent: rv = CKR_TEMPLATE_INCONSISTENT
        case .actionProhibited: rv = CKR_ACTION_PROHIBITED
        case .objectNotFound: rv = CKR_OBJECT_HANDLE_INVALID
        case .pinIncorrect: rv = CKR_PIN_INCORRECT
        case .pinLocked: rv = CKR_PIN_LOCKED
        case .pinLengthRange: rv = CKR_PIN_LEN_RANGE
        case .userPINNotInitialized: rv = CKR_USER_PIN_NOT_INITIALIZED
        case .recordCorrupted: rv = CKR_DEVICE_ERROR
        case .keychainUnrecognized: rv = CKR_TOKEN_NOT_RECOGNIZED
        case .readOnly: rv = CKR_TOKEN_WRITE_PROTECTED
        case .storageFull: rv = CKR_DEVICE_MEMORY
        case .storageFailure: rv = CKR_DEVICE_ERROR
        case .argumentsBad: rv = CKR_ARGUMENTS_BAD
        case .keySizeRange: rv = CKR_KEY_SIZE_RANGE
        case .keyUnextractable: rv = CKR_KEY_UNEXTRACTABLE
        case .keyNotWrappable: rv = CKR_KEY_NOT_WRAPPABLE
        case .parameterSetNotSupported: rv = CKR_PARAMETER_SET_NOT_SUPPORTED
        case .wrappedKeyInvalid: rv = CKR_WRAPPED_KEY_INVALID
        case .duplicateItem: rv = CKR_TEMPLATE_INCONSISTENT
        case .deviceKeyUnavailable: rv = CKR_DEVICE_ERROR
        case .protectionUnavailable: rv = CKR_USER_NOT_LOGGED_IN
        case .unsafePermissions: rv = CKR_DEVICE_ERROR
        // A TPM key used where there is no TPM (C_GenerateKeyPair asking for one answers
        // CKR_ATTRIBUTE_VALUE_INVALID before this).
        case .tpmUnavailable: rv = CKR_DEVICE_REMOVED
        case .tpmFailure: rv = CKR_DEVICE_ERROR
        }
        self.init(CK_RV(rv), error.reason)
    }
}

/// Runs `body`, turning keychain errors into their CK_RV.
@inline(__always)
func translating<R>(_ body: () throws(KeychainError) -> R) throws(CKError) -> R {
    do { return try body() } catch { throw CKError(error) }
}
