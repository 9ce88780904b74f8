import CPKCS11
import KeychainCore

/// Reads a caller's CK_ATTRIBUTE array: the one place that dereferences input templates.
enum CallerTemplate {
    /// More attributes than any object class has several times over: a larger count is a bug
    /// (or an attack) in the caller, refused before anything is read.
    static let maximumCount: CK_ULONG = 1024
    /// The most value bytes one template (nested templates included) may carry in all.
    static let maximumTotalLength = 64 << 20

    /// The attributes with their values, in the caller's order. The value of an attribute-array
    /// attribute (CKA_WRAP_TEMPLATE…) is read one level deep and kept encoded.
    static func read(_ pointer: UnsafeMutablePointer<CK_ATTRIBUTE>?, count: CK_ULONG) throws(CKError) -> Template {
        var total = 0
        return try read(pointer, count: count, nested: false, total: &total)
    }

    private static func read(_ pointer: UnsafeMutablePointer<CK_ATTRIBUTE>?, count: CK_ULONG, nested: Bool, total: inout Int) throws(CKError) -> Template {
        let entries = try array(pointer, count: count)
        var template: Template = []
        template.reserveCapacity(entries.count)
        for entry in entries {
            let type = AttributeType(entry.type)
            if type.isTemplate {
                guard !nested else { throw CKError(CK_RV(CKR_ATTRIBUTE_VALUE_INVALID), "templates do not nest") }
                let size = CK_ULONG(MemoryLayout<CK_ATTRIBUTE>.stride)
                guard entry.ulValueLen % size == 0 else {
                    throw CKError(CK_RV(CKR_ATTRIBUTE_VALUE_INVALID), "attribute \(type) must hold whole CK_ATTRIBUTEs")
                }
                let inner = try read(entry.pValue?.assumingMemoryBound(to: CK_ATTRIBUTE.self), count: entry.ulValueLen / size, nested: true, total: &total)
                template.append((type, NestedTemplate.encode(inner)))
                continue
            }
            guard entry.ulValueLen <= CK_ULONG(AttributeTable.maximumValueLength) else {
                throw CKError(CK_RV(CKR_ATTRIBUTE_VALUE_INVALID), "attribute \(type) is larger than \(AttributeTable.maximumValueLength) bytes")
            }
            let length = Int(entry.ulValueLen)
            total += length
            guard total <= maximumTotalLength else {
                throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "the template carries more than \(maximumTotalLength) bytes")
            }
            if length == 0 {
                template.append((type, []))
                continue
            }
            guard let value = entry.pValue else {
                throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "attribute \(type) has a length but no value pointer")
            }
            template.append((type, Array(UnsafeRawBufferPointer(start: value, count: length))))
        }
        return withoutRepeats(template)
    }

    /// The caller's CK_ATTRIBUTE array as a checked buffer (count bounded, NULL only when empty).
    static func array(_ pointer: UnsafeMutablePointer<CK_ATTRIBUTE>?, count: CK_ULONG) throws(CKError) -> UnsafeMutableBufferPointer<CK_ATTRIBUTE> {
        guard count <= maximumCount else { throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "template count \(count) is too large") }
        guard count > 0 else { return UnsafeMutableBufferPointer(start: nil, count: 0) }
        guard let pointer else { throw CKError(CK_RV(CKR_ARGUMENTS_BAD), "template pointer is NULL") }
        return UnsafeMutableBufferPointer(start: pointer, count: Int(count))
    }

    /// An attribute named again with the same value counts once (PKCS#11 §4.1 encourages it, and
    /// PyKCS11's and SoftHSM's callers rely on it); named again with another value it stays, and
    /// the object rules refuse it (CKR_TEMPLATE_INCONSISTENT).
    private static func withoutRepeats(_ template: Template) -> Template {
        // The usual short template names each attribute once: checked pairwise, kept as it is.
        if template.count <= 32, !template.indices.contains(where: { index in template[..<index].contains { $0.type == template[index].type } }) {
            return template
        }
        var firstValue: [AttributeType: [UInt8]] = [:]
        return template.filter { type, value in
            guard let earlier = firstValue[type] else {
                firstValue[type] = value
                return true
            }
            return earlier != value
        }
    }
}

/// Fills the fixed-size, blank-padded (never NUL-padded) strings of CK_INFO and friends.
enum PaddedString {
    static func fill<T>(_ field: inout T, with text: String) {
        withUnsafeMutableBytes(of: &field) { raw in
            raw.initializeMemory(as: UInt8.self, repeating: 0x20)
            var written = 0
            // Cut at a character boundary so the field never ends in half a UTF-8 sequence.
            for character in text {
                let utf8 = Array(String(character).utf8)
                guard written + utf8.count <= raw.count else { break }
                for byte in utf8 { raw[written] = byte; written += 1 }
            }
        }
    }

    /// The text of a padded field without its trailing blanks.
    static func read(_ pointer: UnsafePointer<CK_UTF8CHAR>, count: Int) -> String {
        var bytes = Array(UnsafeBufferPointer(start: pointer, count: count))
        while let last = bytes.last, last == 0x20 || last == 0 { bytes.removeLast() }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension CK_VERSION {
    init(_ major: UInt8, _ minor: UInt8) {
        self.init()
        self.major = major
        self.minor = minor
    }
}
