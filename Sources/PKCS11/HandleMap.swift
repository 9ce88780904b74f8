import CPKCS11

/// A table keyed by the module's own numbers (session and object handles, slot IDs) without
/// Swift's seeded SipHash, which each Dictionary lookup runs: 13 lookups of that kind were about
/// a fifth of the module's own work in a 1 KiB C_EncryptInit + C_Encrypt.
///
/// Open addressing over a power-of-two array with Fibonacci hashing. The keys are numbers the
/// module hands out in sequence, which spread evenly; a made-up handle from a caller probes until
/// the first empty bucket, and the table is kept at most half full (tombstones counted).
struct HandleMap<Value>: Sequence {
    private static var empty: UInt8 { 0 }
    private static var full: UInt8 { 1 }
    private static var removed: UInt8 { 2 }

    /// Parallel arrays, so that probing reads plain integers and retains nothing.
    private var states: [UInt8]
    private var bucketKeys: [UInt]
    private var slots: [Value?]
    /// 64 − log2(capacity): the top bits of the product pick the bucket.
    private var shift: UInt64
    private(set) var count = 0
    /// Full and removed buckets: what makes probes long.
    private var used = 0

    init() { self.init(capacity: 16) }

    private init(capacity: Int) {
        states = Array(repeating: Self.empty, count: capacity)
        bucketKeys = Array(repeating: 0, count: capacity)
        slots = Array(repeating: nil, count: capacity)
        shift = 64 - UInt64(capacity.trailingZeroBitCount)
    }

    var isEmpty: Bool { count == 0 }

    private func home(_ key: UInt) -> Int {
        Int(truncatingIfNeeded: (UInt64(key) &* 0x9E37_79B9_7F4A_7C15) >> shift)
    }

    /// The bucket holding `key`, or nil.
    private func index(of key: UInt) -> Int? {
        let mask = states.count - 1
        var index = home(key)
        while true {
            let state = states[index]
            if state == Self.empty { return nil }
            if state == Self.full, bucketKeys[index] == key { return index }
            index = (index + 1) & mask
        }
    }

    subscript(key: UInt) -> Value? {
        get {
            guard let index = index(of: key) else { return nil }
            return slots[index]
        }
        set {
            if let newValue { insert(newValue, for: key) } else { removeValue(forKey: key) }
        }
    }

    private mutating func insert(_ value: Value, for key: UInt) {
        if let index = index(of: key) {
            slots[index] = value
            return
        }
        if (used + 1) * 2 > states.count { rehash() }
        let mask = states.count - 1
        var index = home(key)
        while states[index] == Self.full { index = (index + 1) & mask }
        if states[index] == Self.empty { used += 1 }
        states[index] = Self.full
        bucketKeys[index] = key
        slots[index] = value
        count += 1
    }

    @discardableResult
    mutating func removeValue(forKey key: UInt) -> Value? {
        guard let index = index(of: key) else { return nil }
        let value = slots[index]
        states[index] = Self.removed
        slots[index] = nil
        count -= 1
        return value
    }

    mutating func removeAll() { self = HandleMap() }

    /// Grows when more than a quarter of the buckets hold values, else only drops tombstones.
    private mutating func rehash() {
        let old = self
        self = HandleMap(capacity: (count + 1) * 4 > states.count ? states.count * 2 : states.count)
        for (key, value) in old { insert(value, for: key) }
    }

    var values: [Value] { map(\.value) }
    var keys: [UInt] { map(\.key) }

    func makeIterator() -> AnyIterator<(key: UInt, value: Value)> {
        var index = 0
        return AnyIterator { [states, bucketKeys, slots] in
            while index < states.count {
                defer { index += 1 }
                if states[index] == Self.full, let value = slots[index] { return (bucketKeys[index], value) }
            }
            return nil
        }
    }
}
extension HandleMap: Sendable where Value: Sendable {}
