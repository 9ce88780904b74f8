internal import COpenSSL

/// A failure inside OpenSSL or a rejected cryptographic input.
public struct CryptoError: Error, Equatable, CustomStringConvertible {
    public enum Code: Equatable, Sendable {
        /// Authentication failed: the tag did not verify (wrong key or altered data).
        case authenticationFailed
        /// An input had the wrong size or shape.
        case invalidInput
        /// More input than the operation may take (a CTR counter's range).
        case limitExceeded
        /// OpenSSL reported an internal failure.
        case library
    }

    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    /// Captures the latest OpenSSL error and drops the ones this operation queued, so a later
    /// call does not report a stale error (the host's own queued errors stay).
    static func library(_ operation: String) -> CryptoError {
        let code = ERR_peek_last_error()
        OpenSSLErrorQueue.discardOwn()
        if code == 0 { return CryptoError(.library, operation) }
        var text = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &text, text.count)
        return CryptoError(.library, "\(operation): \(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
    }

    public static func == (lhs: CryptoError, rhs: CryptoError) -> Bool { lhs.code == rhs.code }
    public var description: String { "\(code): \(reason)" }
}

/// OpenSSL's error queue is per thread and shared with the program the module runs in: a call
/// into the module must leave it as it found it — neither adding errors the host would take for
/// its own, nor clearing the host's.
public enum OpenSSLErrorQueue {
    /// Runs `body`; the errors OpenSSL queued during it are dropped, the caller's stay.
    @inline(__always)
    public static func preserving<R>(_ body: () -> R) -> R {
        ERR_set_mark()
        defer { ERR_pop_to_mark() }
        return body()
    }

    /// Drops the errors queued since the innermost `preserving` began, keeping a mark for the
    /// rest of it (outside one: every queued error, as ERR_clear_error).
    static func discardOwn() {
        ERR_pop_to_mark()
        ERR_set_mark()
    }
}
