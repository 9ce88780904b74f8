/// The plaintext inside a sealed record: an object's whole attribute set.
///
/// Layout (little-endian): magic "KCAR", count (u32), then per attribute:
/// type (u64), length (u32), value bytes. Decoding checks every length against the input.
public enum AttributeRecord {
    static let magic: [UInt8] = Array("KCAR".utf8)
    /// No attribute value in a record may be larger than this.
    public static let maximumValueLength = 16 << 20

    /// The type of the padding entry: zero bytes that bring a record to its size class. Never an
    /// attribute; decoding drops it.
    static let paddingType = UInt64.max

    /// The size a padded record's plaintext is brought to: a power of two from 1 KiB up to
    /// 16 KiB, then a multiple of 16 KiB. A stored record's length then says only its class, not
    /// the length of the secret in it: every password or data value up to about 500 bytes seals
    /// to the same size (a password item's other attributes take about 500 bytes).
    public static func sizeClass(_ length: Int) -> Int {
        let large = 16 << 10
        if length > large { return (length + large - 1) / large * large }
        var size = 1024
        while size < length { size <<= 1 }
        return size
    }

    /// With `padded`, a padding entry brings the record to `sizeClass` of its length. The record
    /// is built in one buffer of its final size: a buffer outgrown on the way would go back to
    /// the heap with the secrets in it.
    public static func encode(_ attributes: [(type: UInt64, value: [UInt8])], padded: Bool) -> [UInt8] {
        let kept = attributes.filter { $0.type != paddingType }
        let entry = 12
        let plain = 8 + kept.reduce(0) { $0 + entry + $1.value.count }
        let target = padded ? sizeClass(plain + entry) : plain
        var out = magic
        out.reserveCapacity(target)
        append(UInt64(kept.count + (padded ? 1 : 0)), bytes: 4, to: &out)
        for (type, value) in kept {
            append(type, bytes: 8, to: &out)
            append(UInt64(value.count), bytes: 4, to: &out)
            out += value
        }
        guard padded else { return out }
        append(paddingType, bytes: 8, to: &out)
        append(UInt64(target - plain - entry), bytes: 4, to: &out)
        out += repeatElement(0, count: target - plain - entry)
        return out
    }

    public static func encode(_ attributes: [(type: UInt64, value: [UInt8])]) -> [UInt8] {
        encode(attributes, padded: false)
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
            if type == paddingType {
                try reader.skip(Int(length))
                continue
            }
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

        mutating func skip(_ count: Int) throws {
            guard count >= 0, count <= data.count - offset else { throw StoreError(.malformed, "record truncated") }
            offset += count
        }

        mutating func integer(_ size: Int) throws -> UInt64 {
            let raw = try bytes(size)
            return raw.enumerated().reduce(0) { $0 | UInt64($1.element) << (8 * UInt64($1.offset)) }
        }
    }
}
