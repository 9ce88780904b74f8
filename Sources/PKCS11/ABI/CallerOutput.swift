import CPKCS11

/// The call-twice convention (PKCS#11 §5.2) as one decision: with no buffer the caller asks
/// for the length; a buffer shorter than the result is refused; otherwise the result fits.
/// `CallerOutput` and `CallerAttributeArray` both follow it; nothing else decides it.
enum CallTwice {
    case lengthOnly, tooSmall, fits

    init(needed: Int, hasBuffer: Bool, capacity: CK_ULONG) {
        if !hasBuffer {
            self = .lengthOnly
        } else if capacity < CK_ULONG(needed) {
            self = .tooSmall
        } else {
            self = .fits
        }
    }
}

/// A caller's output array and its length or count (pOut, pulOutLen) for one call: bytes for
/// C_Encrypt and friends, slot IDs or mechanism types for the list calls. A NULL array asks for
/// the length; one too short gets CKR_BUFFER_TOO_SMALL with the length needed written;
/// otherwise the elements and their count.
struct CallerOutput<Element> {
    private let buffer: UnsafeMutablePointer<Element>?
    private let length: UnsafeMutablePointer<CK_ULONG>

    init(_ buffer: UnsafeMutablePointer<Element>?, _ length: UnsafeMutablePointer<CK_ULONG>?) throws(CKError) {
        guard let length else { throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "NULL output length") }
        self.buffer = buffer
        self.length = length
    }

    /// The caller asked only for the length.
    var isLengthQuery: Bool { buffer == nil }

    /// Before producing output of `needed` elements: answers a length query (false), refuses a
    /// short buffer (CKR_BUFFER_TOO_SMALL), or says there is room (true). Nothing is produced in vain.
    func reserve(_ needed: Int) throws(CKError) -> Bool {
        switch CallTwice(needed: needed, hasBuffer: buffer != nil, capacity: length.pointee) {
        case .lengthOnly:
            length.pointee = CK_ULONG(needed)
            return false
        case .tooSmall:
            length.pointee = CK_ULONG(needed)
            throw CKError.bufferTooSmall(required: needed)
        case .fits:
            return true
        }
    }

    /// Hands `elements` to the caller by the convention; true when they were written.
    @discardableResult
    func deliver(_ elements: [Element]) throws(CKError) -> Bool {
        guard try reserve(elements.count), let buffer else { return false }
        elements.withUnsafeBufferPointer { source in if let base = source.baseAddress { buffer.update(from: base, count: source.count) } }
        length.pointee = CK_ULONG(elements.count)
        return true
    }

    /// An update that produced nothing (its input is held for later).
    func deliverNothing() {
        length.pointee = 0
    }

    /// Whether the caller's buffer holds at least `bound` elements.
    func hasRoom(for bound: Int) -> Bool {
        buffer != nil && length.pointee >= CK_ULONG(bound)
    }
}

extension CallerOutput where Element == CK_BYTE {
    /// The zero-copy path for large outputs: when the caller's buffer holds `bound` bytes, `body`
    /// writes into exactly those `bound` bytes (never past them, whatever length the caller
    /// claims) and returns how many it wrote; returns false without calling `body` otherwise.
    func writeDirectly<E: Error>(bound: Int, _ body: (UnsafeMutableRawBufferPointer) throws(E) -> Int) throws(E) -> Bool {
        guard let buffer, hasRoom(for: bound) else { return false }
        let written = try body(UnsafeMutableRawBufferPointer(start: buffer, count: bound))
        length.pointee = CK_ULONG(written)
        return true
    }
}
