internal import COpenSSL

/// A failure inside OpenSSL or a rejected cryptographic input.
public struct CryptoError: Error, Equatable, CustomStringConvertible {
    public enum Code: Equatable, Sendable {
        /// Authentication failed: the tag did not verify (wrong key or altered data).
        case authenticationFailed
        /// An input had the wrong size or shape.
        case invalidInput
        /// OpenSSL reported an internal failure.
        case library
    }

    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    /// Captures and clears OpenSSL's error queue so a later call does not report a stale error.
    static func library(_ operation: String) -> CryptoError {
        let code = ERR_get_error()
        ERR_clear_error()
        if code == 0 { return CryptoError(.library, operation) }
        var text = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &text, text.count)
        return CryptoError(.library, "\(operation): \(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
    }

    public static func == (lhs: CryptoError, rhs: CryptoError) -> Bool { lhs.code == rhs.code }
    public var description: String { "\(code): \(reason)" }
}
