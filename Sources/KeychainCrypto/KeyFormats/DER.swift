/// The few DER shapes PKCS#11 attributes need (X.690): OCTET STRING wrapping of EC points and
/// OBJECT IDENTIFIER / PrintableString curve names in CKA_EC_PARAMS.
public enum DER {
    /// Bits of an unsigned big-endian integer (leading zero bytes ignored; 0 for zero).
    public static func bitLength(ofUnsigned bytes: some Collection<UInt8>) -> Int {
        let significant = bytes.drop { $0 == 0 }
        guard let first = significant.first else { return 0 }
        return significant.count * 8 - first.leadingZeroBitCount
    }

    public static func lengthBytes(_ length: Int) -> [UInt8] {
        if length < 0x80 { return [UInt8(length)] }
        var bytes: [UInt8] = []
        var remaining = length
        while remaining > 0 {
            bytes.insert(UInt8(remaining & 0xFF), at: 0)
            remaining >>= 8
        }
        return [0x80 | UInt8(bytes.count)] + bytes
    }

    public static func octetString(_ content: [UInt8]) -> [UInt8] {
        [0x04] + lengthBytes(content.count) + content
    }

    /// The content of a DER value with tag `tag` that spans all of `bytes`, or nil.
    public static func content(of bytes: [UInt8], tag: UInt8) -> [UInt8]? {
        guard bytes.count >= 2, bytes[0] == tag else { return nil }
        var offset = 2
        var length = Int(bytes[1])
        if bytes[1] & 0x80 != 0 {
            let count = Int(bytes[1] & 0x7F)
            guard count >= 1, count <= 3, bytes.count >= 2 + count else { return nil }
            length = bytes[2..<(2 + count)].reduce(0) { $0 << 8 | Int($1) }
            offset = 2 + count
            guard length >= 0x80 else { return nil }  // not the shortest form
        }
        guard bytes.count - offset == length else { return nil }
        return Array(bytes[offset...])
    }

    /// The first DER element of `bytes` (a one-byte tag, a definite length of at most four
    /// bytes): its tag, its content and what follows it; nil if it runs past the end.
    static func element(_ bytes: ArraySlice<UInt8>) -> (tag: UInt8, content: ArraySlice<UInt8>, rest: ArraySlice<UInt8>)? {
        var index = bytes.startIndex
        guard bytes.count >= 2 else { return nil }
        let tag = bytes[index]
        index += 1
        var length = Int(bytes[index])
        index += 1
        if length & 0x80 != 0 {
            let count = length & 0x7F
            guard (1...4).contains(count), bytes.endIndex - index >= count else { return nil }
            length = bytes[index..<(index + count)].reduce(0) { $0 << 8 | Int($1) }
            index += count
        }
        guard bytes.endIndex - index >= length else { return nil }
        return (tag, bytes[index..<(index + length)], bytes[(index + length)...])
    }
}

extension AsymmetricKey {
    /// The public key as Apple's keychain exports it (SecKeyCopyExternalRepresentation): PKCS#1
    /// RSAPublicKey for RSA, 04‖X‖Y for EC, the raw key for Edwards and Montgomery curves.
    /// Its SHA-1 is the application label, used as CKA_ID.
    public func publicKeyBytes() throws -> [UInt8] {
        switch kind {
        case .rsa:
            let parts = try rsaPublicComponents()
            return Self.derSequence(Self.derInteger(parts.modulus) + Self.derInteger(parts.publicExponent))
        case .ec:
            return try ecPoint()
        case .dsa, .dh:
            // y, as PKCS#11's CKA_VALUE of the public key holds it.
            guard let y = try finiteFieldComponents().publicValue else { throw CryptoError(.invalidInput, "no public value") }
            return y
        default:
            return try rawPublicKey()
        }
    }

    static func derInteger(_ unsigned: [UInt8]) -> [UInt8] {
        var value = Array(unsigned.drop { $0 == 0 })
        if value.isEmpty { value = [0] }
        if value[0] & 0x80 != 0 { value.insert(0, at: 0) }
        return [0x02] + DER.lengthBytes(value.count) + value
    }

    static func derSequence(_ content: [UInt8]) -> [UInt8] {
        [0x30] + DER.lengthBytes(content.count) + content
    }

    /// A SEQUENCE of unsigned INTEGERs written into one buffer of its final size: no intermediate
    /// copy of a private key part is left behind in freed memory (the caller wipes the result).
    static func derIntegerSequence(_ integers: [[UInt8]]) -> [UInt8] {
        let shapes = integers.map { value -> (start: Int, pad: Bool, length: Int) in
            var start = 0
            while start < value.count - 1, value[start] == 0 { start += 1 }
            guard !value.isEmpty else { return (0, false, 1) }
            let pad = value[start] & 0x80 != 0
            return (start, pad, value.count - start + (pad ? 1 : 0))
        }
        let content = shapes.reduce(0) { $0 + 1 + DER.lengthBytes($1.length).count + $1.length }
        var out: [UInt8] = []
        out.reserveCapacity(1 + DER.lengthBytes(content).count + content)
        out.append(0x30)
        out.append(contentsOf: DER.lengthBytes(content))
        for (value, shape) in zip(integers, shapes) {
            out.append(0x02)
            out.append(contentsOf: DER.lengthBytes(shape.length))
            if value.isEmpty { out.append(0); continue }
            if shape.pad { out.append(0) }
            out.append(contentsOf: value[shape.start...])
        }
        return out
    }
}
