/// A password's Secret Service lookup attributes (CKA_KC_LOOKUP_ATTRIBUTES): string names and
/// values, at most one value per name. Encoded sorted by name, each name and value as a 4-byte
/// big-endian length and its UTF-8 bytes, so that equal sets encode equally.
public struct LookupAttributes: Equatable, Sendable {
    public private(set) var pairs: [(name: String, value: String)] = []

    public init() {}

    public init(_ dictionary: [String: String]) {
        pairs = dictionary.map { ($0.key, $0.value) }.sorted { Array($0.name.utf8).lexicographicallyPrecedes(Array($1.name.utf8)) }
    }

    public var dictionary: [String: String] { Dictionary(pairs.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first }) }

    public var isEmpty: Bool { pairs.isEmpty }

    public subscript(name: String) -> String? { pairs.first { $0.name == name }?.value }

    public static func == (lhs: LookupAttributes, rhs: LookupAttributes) -> Bool { lhs.encoded == rhs.encoded }

    /// Whether `other` holds every pair of this set.
    public func isSubset(of other: LookupAttributes) -> Bool {
        pairs.allSatisfy { pair in other[pair.name] == pair.value }
    }

    public var encoded: [UInt8] {
        var out: [UInt8] = []
        for (name, value) in pairs {
            for text in [name, value] {
                let bytes = Array(text.utf8)
                out += withUnsafeBytes(of: UInt32(truncatingIfNeeded: bytes.count).bigEndian) { Array($0) } + bytes
            }
        }
        return out
    }

    /// Parses the encoding; nil when it is malformed, a name repeats, or a string is not UTF-8.
    public init?(encoded bytes: [UInt8]) {
        var index = 0
        func next() -> String? {
            guard bytes.count - index >= 4 else { return nil }
            let length = bytes[index..<index + 4].reduce(0) { $0 << 8 | Int($1) }
            index += 4
            guard length <= bytes.count - index else { return nil }
            let slice = Array(bytes[index..<index + length])
            index += length
            return String(validating: slice, as: UTF8.self)
        }
        var found: [(String, String)] = []
        while index < bytes.count {
            guard let name = next(), let value = next() else { return nil }
            guard !found.contains(where: { $0.0 == name }) else { return nil }
            found.append((name, value))
        }
        self.init(Dictionary(found, uniquingKeysWith: { first, _ in first }))
    }

    /// The blind-index input of one pair: the pair alone, encoded as a one-pair set.
    public static func term(_ pair: (name: String, value: String)) -> [UInt8] {
        LookupAttributes([pair.name: pair.value]).encoded
    }
}
