/// Big-endian fields for the sync formats, and their checked reading.
struct ByteWriter {
    private(set) var bytes: [UInt8] = []

    mutating func append(_ data: [UInt8]) { bytes += data }
    mutating func append(_ value: UInt8) { bytes.append(value) }
    mutating func append(_ value: UInt16) { bytes += withUnsafeBytes(of: value.bigEndian) { Array($0) } }
    mutating func append(_ value: UInt32) { bytes += withUnsafeBytes(of: value.bigEndian) { Array($0) } }
    mutating func append(_ value: UInt64) { bytes += withUnsafeBytes(of: value.bigEndian) { Array($0) } }
}

/// Reads what `ByteWriter` wrote; every read checks the length first (nil past the end).
struct ByteReader {
    private let bytes: [UInt8]
    private(set) var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var remaining: Int { bytes.count - offset }

    mutating func take(_ count: Int) -> [UInt8]? {
        guard count >= 0, count <= remaining else { return nil }
        defer { offset += count }
        return Array(bytes[offset..<(offset + count)])
    }

    mutating func uint8() -> UInt8? { take(1)?.first }
    mutating func uint16() -> UInt16? { take(2).map { $0.reduce(0) { $0 << 8 | UInt16($1) } } }
    mutating func uint32() -> UInt32? { take(4).map { $0.reduce(0) { $0 << 8 | UInt32($1) } } }
    mutating func uint64() -> UInt64? { take(8).map { $0.reduce(0) { $0 << 8 | UInt64($1) } } }
}
