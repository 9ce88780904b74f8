import CPKCS11
import KeychainCore
import KeychainCrypto

/// The protected authentication path: the configured prompt program (KeychainCore's
/// `PromptProgram`) asks for the PIN. The token then reports CKF_PROTECTED_AUTHENTICATION_PATH
/// and C_Login with a NULL PIN runs it.
enum PINPrompt {
    /// The PIN the program printed. A program that fails, prints nothing, or cannot be started
    /// is CKR_FUNCTION_CANCELED (the user declined); an answer longer than any PIN is
    /// CKR_PIN_INCORRECT. Call without the module lock.
    static func run(_ program: String, text: String) throws(CKError) -> SecureBytes {
        do {
            return try PromptProgram.run(program, text: text)
        } catch {
            switch error {
            case .canceled(let reason): throw CKError(CK_RV(CKR_FUNCTION_CANCELED), reason)
            case .tooLong: throw CKError(CK_RV(CKR_PIN_INCORRECT), "PIN longer than any valid PIN")
            }
        }
    }
}
