import CPKCS11

/// A caller's output buffer and its length (pOut, pulOutLen) for one call: the only owner of the
/// call-twice convention (PKCS#11 §5.2). A NULL buffer asks for the length; a buffer too short
/// gets CKR_BUFFER_TOO_SMALL with the length needed written; otherwise the bytes and their count.
struct CallerOutput {
    private let buffer: UnsafeMutablePointer<CK_BYTE>?
    private let length: UnsafeMutablePointer<CK_ULONG>

    init(_ buffer: UnsafeMutablePointer<CK_BYTE>?, _ length: UnsafeMutablePointer<CK_ULONG>?) throws(CKError) {
        guard let length else { throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "NULL output length") }
        self.buffer = buffer
        self.length = length
    }

    /// The caller asked only for the length.
    var isLengthQuery: Bool { buffer == nil }

    /// Before producing output of `needed` bytes: answers a length query (false), refuses a short
    /// buffer (CKR_BUFFER_TOO_SMALL), or says there is room (true). Nothing is produced in vain.
    func reserve(_ needed: Int) throws(CKError) -> Bool {
        guard buffer != nil else {
            length.pointee = CK_ULONG(needed)
            return false
        }
        guard length.pointee >= CK_ULONG(needed) else {
            length.pointee = CK_ULONG(needed)
            throw CKError.bufferTooSmall(required: needed)
        }
        return true
    }

    /// Hands `bytes` to the caller by the convention; true when they were written.
    @discardableResult
    func deliver(_ bytes: [UInt8]) throws(CKError) -> Bool {
        guard try reserve(bytes.count), let buffer else { return false }
        bytes.withUnsafeBufferPointer { source in if let base = source.baseAddress { buffer.update(from: base, count: source.count) } }
        length.pointee = CK_ULONG(bytes.count)
        return true
    }

    /// An update that produced nothing (its input is held for later).
    func deliverNothing() {
        length.pointee = 0
    }

    /// The zero-copy path for large outputs: when the caller's buffer holds `bound` bytes, `body`
    /// writes into exactly those `bound` bytes (never past them, whatever length the caller
    /// claims) and returns how many it wrote; returns false without calling `body` otherwise.
    func writeDirectly(bound: Int, _ body: (UnsafeMutableRawBufferPointer) throws(CKError) -> Int) throws(CKError) -> Bool {
        guard let buffer, length.pointee >= CK_ULONG(bound) else { return false }
        let written = try body(UnsafeMutableRawBufferPointer(start: buffer, count: bound))
        length.pointee = CK_ULONG(written)
        return true
    }
}
