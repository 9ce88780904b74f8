import CPKCS11
import KeychainCore

/// The caller's CK_ATTRIBUTE array of C_GetAttributeValue, which is answered in place: each
/// entry gets its value under the call-twice convention (`CallTwice`), or its length, or
/// CK_UNAVAILABLE_INFORMATION. The object code says what each attribute's answer is; only this
/// type writes it.
struct CallerAttributeArray {
    private let entries: UnsafeMutableBufferPointer<CK_ATTRIBUTE>

    init(_ pointer: UnsafeMutablePointer<CK_ATTRIBUTE>?, count: CK_ULONG) throws(CKError) {
        entries = try CallerTemplate.array(pointer, count: count)
    }

    var indices: Range<Int> { entries.indices }

    func type(at index: Int) -> AttributeType { AttributeType(entries[index].type) }

    /// The attribute cannot be shown (absent, sensitive, unreadable now).
    func markUnavailable(at index: Int) {
        entries[index].ulValueLen = KC_UNAVAILABLE_INFORMATION
    }

    /// One value: its length when pValue is NULL, its bytes when they fit, else
    /// CK_UNAVAILABLE_INFORMATION and CKR_BUFFER_TOO_SMALL (returned, for the call's result).
    func write(_ value: [UInt8], at index: Int) -> CKError? {
        Self.write(value, into: &entries[index])
    }

    /// An attribute-array attribute (CKA_WRAP_TEMPLATE…): the convention one level down, the
    /// count of attributes first, then each nested value's length or bytes (C_GetAttributeValue's rules, PKCS#11 3.0).
    func writeTemplate(_ encoded: [UInt8], at index: Int) -> CKError? {
        let template = NestedTemplate.decode(encoded) ?? []
        return Self.answer(&entries[index], needed: template.count * MemoryLayout<CK_ATTRIBUTE>.stride) { destination in
            let inner = destination.bindMemory(to: CK_ATTRIBUTE.self, capacity: template.count)
            var problem: CKError?
            for (position, (type, value)) in template.enumerated() {
                inner[position].type = CK_ATTRIBUTE_TYPE(type.rawValue)
                if let failure = Self.write(value, into: &inner[position]) { problem = problem ?? failure }
            }
            return problem
        }
    }

    private static func write(_ value: [UInt8], into entry: inout CK_ATTRIBUTE) -> CKError? {
        answer(&entry, needed: value.count) { destination in
            value.withUnsafeBytes { source in
                if let base = source.baseAddress { destination.copyMemory(from: base, byteCount: source.count) }
            }
            return nil
        }
    }

    /// `CallTwice` for one entry: the length asked for, CK_UNAVAILABLE_INFORMATION with
    /// CKR_BUFFER_TOO_SMALL, or `fill` writing the `needed` bytes (its problem returned).
    private static func answer(_ entry: inout CK_ATTRIBUTE, needed: Int, fill: (UnsafeMutableRawPointer) -> CKError?) -> CKError? {
        switch CallTwice(needed: needed, hasBuffer: entry.pValue != nil, capacity: entry.ulValueLen) {
        case .lengthOnly:
            entry.ulValueLen = CK_ULONG(needed)
            return nil
        case .tooSmall:
            entry.ulValueLen = KC_UNAVAILABLE_INFORMATION
            return CKError.bufferTooSmall(required: needed)
        case .fits:
            guard let destination = entry.pValue else { return nil }
            let problem = fill(destination)
            entry.ulValueLen = CK_ULONG(needed)
            return problem
        }
    }
}
