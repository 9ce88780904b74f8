internal import COpenSSL

/// NIST SP 800-108r1 key derivation in its three modes, with the PRF input laid out as PKCS#11's
/// data parameters describe it: byte strings, the counter, the derived length and (feedback and
/// double pipeline) the chained value, each where the caller put it.
public enum SP800108 {
    public enum Mode: Sendable { case counter, feedback, doublePipeline }

    /// How an integer (the counter, the derived length) is written: width in bits and byte order.
    public struct IntegerFormat: Sendable, Equatable {
        public let bits: Int
        public let littleEndian: Bool
        public init(bits: Int, littleEndian: Bool) {
            self.bits = bits
            self.littleEndian = littleEndian
        }

        func encode(_ value: UInt64) -> [UInt8] {
            let count = bits / 8
            var bytes = (0..<count).map { UInt8(truncatingIfNeeded: value >> (8 * UInt64(count - 1 - $0))) }
            if littleEndian { bytes.reverse() }
            return bytes
        }

        var maximum: UInt64 { bits >= 64 ? .max : (1 << UInt64(bits)) - 1 }
    }

    public enum LengthMethod: Sendable { case sumOfKeys, sumOfSegments }

    public enum Field: Sendable, Equatable {
        /// Counter mode: the counter i in this format. Feedback: K(i−1). Double pipeline: A(i).
        case iteration(IntegerFormat?)
        /// The counter i (feedback and double pipeline, optional there).
        case counter(IntegerFormat)
        /// [L]: the derived length in bits.
        case length(LengthMethod, IntegerFormat)
        case bytes([UInt8])
    }

    public enum PRF: Sendable {
        case hmac(Digest.Algorithm)
        case cmac(SymmetricCipher.Algorithm)

        var outputSize: Int {
            switch self {
            case .hmac(let digest): return digest.outputSize
            case .cmac(let cipher): return cipher.blockSize
            }
        }
    }

    /// One key of each length in `keyLengths` (bytes). Each key starts a new PRF output block
    /// (PKCS#11 3.0 §2.44: no key is made from part of a segment another key uses), so [L]
    /// counts the keys' bits (SUM_OF_KEYS) or every block's (SUM_OF_SEGMENTS).
    public static func derive(_ mode: Mode, prf: PRF, key: SecureBytes, fields: [Field], iv: [UInt8] = [], keyLengths: [Int]) throws -> [SecureBytes] {
        let h = prf.outputSize
        guard !keyLengths.isEmpty, keyLengths.allSatisfy({ $0 > 0 }), keyLengths.reduce(0, +) <= 1 << 20 else {
            throw CryptoError(.invalidInput, "SP 800-108 output length")
        }
        let segments = keyLengths.map { ($0 + h - 1) / h }
        let blocks = segments.reduce(0, +)
        let length = blocks * h
        for field in fields {
            if case .iteration(let format?) = field, UInt64(blocks) > format.maximum {
                throw CryptoError(.limitExceeded, "a \(format.bits)-bit counter cannot count \(blocks) blocks")
            }
            if case .counter(let format) = field, UInt64(blocks) > format.maximum {
                throw CryptoError(.limitExceeded, "a \(format.bits)-bit counter cannot count \(blocks) blocks")
            }
        }
        func lengthValue(_ method: LengthMethod) -> UInt64 {
            method == .sumOfKeys ? UInt64(keyLengths.reduce(0, +)) * 8 : UInt64(length) * 8
        }
        // The PRF input's size, reserved at once so that no growing copy of K(i−1) or A(i) is freed unwiped.
        let inputCapacity = fields.reduce(h) { total, field in
            if case .bytes(let bytes) = field { return total + bytes.count }
            return total + 8
        } + iv.count
        func serialize(counter: Int, chained: [UInt8]?, includeChained: Bool) -> [UInt8] {
            var input: [UInt8] = []
            input.reserveCapacity(inputCapacity)
            for field in fields {
                switch field {
                case .iteration(let format):
                    if let format { input += format.encode(UInt64(counter)) } else if includeChained, let chained { input += chained }
                case .counter(let format):
                    if includeChained { input += format.encode(UInt64(counter)) }
                case .length(let method, let format):
                    input += format.encode(lengthValue(method))  // fits: checked before the first block
                case .bytes(let bytes): input += bytes
                }
            }
            return input
        }
        for field in fields {
            if case .length(let method, let format) = field, lengthValue(method) > format.maximum {
                throw CryptoError(.limitExceeded, "a \(format.bits)-bit length field cannot hold \(lengthValue(method)) bits")
            }
        }
        func run(_ data: [UInt8]) throws -> [UInt8] {
            switch prf {
            case .hmac(let digest):
                return try key.withUnsafeBytes { k in try data.withUnsafeBytes { d in try Digest.hmac(digest, key: k, data: d) } }
            case .cmac(let cipher):
                let mac = try StreamingMAC(cipher == .aes ? .aesCMAC : .tripleDESCMAC, key: key)
                try data.withUnsafeBytes { try mac.update($0) }
                return try mac.finish()
            }
        }
        let output = SecureBytes(count: length)
        var written = 0
        var chained = iv  // feedback: K(0) = IV
        defer { wipe(&chained) }
        var pipeline: [UInt8] = []  // double pipeline: A(i)
        defer { wipe(&pipeline) }
        if mode == .doublePipeline { pipeline = serialize(counter: 0, chained: nil, includeChained: false) }  // A(0): the fixed input
        for i in 1...blocks {
            var input: [UInt8]
            switch mode {
            case .counter:
                input = serialize(counter: i, chained: nil, includeChained: true)
            case .feedback:
                input = serialize(counter: i, chained: chained, includeChained: true)
            case .doublePipeline:
                let next = try run(pipeline)
                wipe(&pipeline)
                pipeline = next
                input = serialize(counter: i, chained: pipeline, includeChained: true)
            }
            defer { wipe(&input) }
            var block = try run(input)
            defer { wipe(&block) }
            let take = min(h, length - written)
            let source = block
            output.withUnsafeMutableBytes { out in for j in 0..<take { out[written + j] = source[j] } }
            written += take
            if mode == .feedback {
                wipe(&chained)
                chained = block
            }
        }
        var start = 0
        return zip(keyLengths, segments).map { keyLength, count in
            let part = SecureBytes(count: keyLength)
            output.withUnsafeBytes { source in
                part.withUnsafeMutableBytes { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[start..<(start + keyLength)])) }
            }
            start += count * h
            return part
        }
    }
}
