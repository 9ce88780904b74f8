/// Hexadecimal text of bytes, and bytes of hexadecimal text: the one place the project reads or
/// writes hex digits (unique IDs, key-file headers, PKCS#11 URIs, the CLI's --id).
public enum Hex {
    private static let alphabet = Array("0123456789abcdef".utf8)

    /// Two lower-case digits per byte, as UTF-8.
    /// The same for an array, without the generic path (each new object's CKA_UNIQUE_ID: the
    /// generic one, unspecialised across the module boundary, was half of making an ID).
    public static func digits(_ bytes: [UInt8]) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: bytes.count * 2) { out, initialized in
            for (index, byte) in bytes.enumerated() {
                out[2 * index] = lowerDigit(byte >> 4)
                out[2 * index + 1] = lowerDigit(byte & 0xF)
            }
            initialized = bytes.count * 2
        }
    }

    private static func lowerDigit(_ nibble: UInt8) -> UInt8 { nibble < 10 ? 0x30 + nibble : 0x57 + nibble }

    public static func digits(_ bytes: some Sequence<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(alphabet[Int(byte >> 4)])
            out.append(alphabet[Int(byte & 0xF)])
        }
        return out
    }

    /// Two lower-case digits per byte.
    public static func string(_ bytes: some Sequence<UInt8>) -> String {
        String(decoding: digits(bytes), as: UTF8.self)
    }

    /// The value of one digit, either case; nil for any other byte.
    public static func value(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return digit - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    /// The bytes an even number of digits spell; nil if the count is odd or a byte is not a digit.
    public static func bytes(_ digits: some Collection<UInt8>) -> [UInt8]? {
        guard digits.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(digits.count / 2)
        var index = digits.startIndex
        while index != digits.endIndex {
            let next = digits.index(after: index)
            guard let high = value(digits[index]), let low = value(digits[next]) else { return nil }
            out.append(high << 4 | low)
            index = digits.index(after: next)
        }
        return out
    }
}
