import CPKCS11
import KeychainCore

/// Checked views of caller-supplied (pointer, length) pairs.
enum CallerBytes {
    /// The caller's bytes; NULL with a non-zero length is CKR_ARGUMENTS_BAD, and a length above
    /// `limit` is `tooLong` (nothing past the limit is ever read).
    static func read(_ pointer: UnsafeRawPointer?, count: CK_ULONG, limit: Int, tooLong: CKError) throws(CKError) -> UnsafeRawBufferPointer {
        guard count > 0 else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        guard let pointer else { throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "NULL pointer with length \(count)") }
        guard count <= CK_ULONG(limit) else { throw tooLong }
        return UnsafeRawBufferPointer(start: pointer, count: Int(count))
    }

    /// A PIN argument. A NULL PIN would ask for a protected authentication path, which this
    /// token does not have.
    static func pin(_ pointer: UnsafeMutablePointer<CK_UTF8CHAR>?, count: CK_ULONG, tooLong: CKError) throws(CKError) -> UnsafeRawBufferPointer {
        guard pointer != nil else { throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "NULL PIN: no protected authentication path") }
        return try read(pointer, count: count, limit: PINPolicy.maximumLength, tooLong: tooLong)
    }

    static let pinLengthRange = CKError(CK_RV(CKR_PIN_LEN_RANGE), "PIN longer than \(PINPolicy.maximumLength) bytes")
    static let pinIncorrect = CKError(CK_RV(CKR_PIN_INCORRECT), "PIN longer than any valid PIN")

    /// Input data of a cryptographic operation (any length the caller's memory holds).
    static func input(_ pointer: UnsafeMutablePointer<CK_BYTE>?, count: CK_ULONG) throws(CKError) -> UnsafeRawBufferPointer {
        try read(pointer, count: count, limit: Int.max, tooLong: CKError.argumentsBad)
    }

    /// A writable caller buffer of `count` bytes (for output the module produces itself).
    static func output(_ pointer: UnsafeMutableRawPointer?, count: CK_ULONG) throws(CKError) -> UnsafeMutableRawBufferPointer {
        guard count > 0 else { return UnsafeMutableRawBufferPointer(start: nil, count: 0) }
        guard let pointer, count <= CK_ULONG(Int.max) else { throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "bad output buffer") }
        return UnsafeMutableRawBufferPointer(start: pointer, count: Int(count))
    }
}
