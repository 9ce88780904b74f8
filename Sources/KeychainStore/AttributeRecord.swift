/// The plaintext inside a sealed record: an object's whole attribute set.
///
/// Layout (little-endian): magic "KCAR", count (u32), then per attribute:
/// type (u64), length (u32), value bytes. Decoding checks every length against the input.
public enum AttributeRecord {
    static let magic: [UInt8] = Array("KCAR".utf8)
    /// No attribute value in a record may be larger than this.
    public static let maximumValueLength = 16 << 20

    public static func encode(_ attributes: [(type: UInt64, value: [UInt8])]) -> [UInt8] {
        var out = magic
        out.reserveCapacity(8 + attributes.reduce(0) { $0 + 12 + $1.value.count })
        append(UInt64(attributes.count), bytes: 4, to: &out)
        for (type, value) in attributes {
            append(type, bytes: 8, to: &out)
            append(UInt64(value.count), bytes: 4, to: &out)
            out += value
        }
        return out
    }

    public static func decode(_ data: UnsafeRawBufferPointer) throws -> [(type: UInt64, value: [UInt8])] {
        var reader = Reader(data: data)
        guard try reader.bytes(4) == magic else { throw StoreError(.malformed, "record magic") }
        let count = try reader.integer(4)
        guard count <= UInt64(data.count / 12) else { throw StoreError(.malformed, "record count") }
        var result: [(type: UInt64, value: [UInt8])] = []
        result.reserveCapacity(Int(count))
        for _ in 0..<count {
            let type = try reader.integer(8)
            let length = try reader.integer(4)
            guard length <= UInt64(maximumValueLength) else { throw StoreError(.malformed, "record value length") }
            result.append((type, try reader.bytes(Int(length))))
        }
        guard reader.isAtEnd else { throw StoreError(.malformed, "trailing bytes in record") }
        return result
    }

    private static func append(_ value: UInt64, bytes: Int, to out: inout [UInt8]) {
        for i in 0..<bytes { out.append(UInt8(truncatingIfNeeded: value >> (8 * UInt64(i)))) }
    }

    private struct Reader {
        let data: UnsafeRawBufferPointer
        var offset = 0

        var isAtEnd: Bool { offset == data.count }

        mutating func bytes(_ count: Int) throws -> [UInt8] {
            guard count >= 0, count <= data.count - offset else { throw StoreError(.malformed, "record truncated") }
            defer { offset += count }
            return Array(data[offset..<(offset + count)])
        }

        mutating func integer(_ size: Int) throws -> UInt64 {
            let raw = try bytes(size)
            return raw.enumerated().reduce(0) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
        }
    }
}
