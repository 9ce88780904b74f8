internal import CTSS2

/// The key types this layer makes in a TPM. The Apple API uses P-256 only; PKCS#11 may offer the
/// others where `TPMConnection.supportedKeyTypes()` lists them.
public enum TPMKeyType: String, CaseIterable, Sendable, Hashable {
    case ecP256, ecP384, rsa2048

    var isEC: Bool { self != .rsa2048 }
    /// Bytes of one EC coordinate (and of r and s).
    var coordinateLength: Int { self == .ecP384 ? 48 : 32 }
}

/// A public key as the TPM reports it.
public enum TPMPublicKey: Sendable, Equatable {
    /// X9.62 uncompressed point: 04 ‖ x ‖ y.
    case ec(TPMKeyType, point: [UInt8])
    /// Modulus and public exponent, unsigned big-endian.
    case rsa(modulus: [UInt8], exponent: [UInt8])

    /// The X9.62 point of an EC key; nil for RSA.
    public var ecPoint: [UInt8]? {
        if case .ec(_, let point) = self { return point }
        return nil
    }
}

/// An object made by one TPM, wrapped so that only that TPM can load it: what a keychain item
/// keeps for a TPM key or a sealed secret.
///
/// Format, version 1: `01` ‖ kind (`01` key, `02` sealed data) ‖ TPM2B_PUBLIC ‖ TPM2B_PRIVATE, both
/// marshalled by tpm2-tss (big-endian size, then the structure: TPM 2.0 Part 2 §12.2.5, §12.3.7),
/// nothing after. The private part is encrypted and integrity-protected under the primary key
/// (`TPMTemplates.primary`), so it means nothing without that TPM, and loading also needs the
/// object's authValue to use it.
public struct TPMBlob: Sendable, Equatable {
    public enum Kind: UInt8, Sendable {
        case key = 1
        case sealedData = 2
    }

    public static let version: UInt8 = 1

    public let bytes: [UInt8]
    public let kind: Kind
    /// The key's type; nil for sealed data.
    public let keyType: TPMKeyType?
    /// The key's public half; nil for sealed data.
    public let publicKey: TPMPublicKey?

    /// Reads a blob; refuses anything but a whole, well-formed one of a known version and kind.
    public init(bytes: [UInt8]) throws(TPMError) {
        let parts = try TPMBlob.split(bytes)
        self.bytes = bytes
        kind = parts.kind
        switch parts.kind {
        case .key:
            let described = try TPMBlob.describe(parts.public.publicArea)
            keyType = described.type
            publicKey = described.publicKey
        case .sealedData:
            guard parts.public.publicArea.type == kc_TPM2_ALG_KEYEDHASH else { throw .invalidInput("a sealed-data blob holds no keyed-hash object") }
            keyType = nil
            publicKey = nil
        }
    }

    static func make(kind: Kind, public: TPM2B_PUBLIC, private: TPM2B_PRIVATE) throws(TPMError) -> TPMBlob {
        var output = [UInt8](repeating: 0, count: 2 + MemoryLayout<TPM2B_PUBLIC>.size + MemoryLayout<TPM2B_PRIVATE>.size)
        output[0] = version
        output[1] = kind.rawValue
        var offset = 2
        var publicPart = `public`, privatePart = `private`
        let rc = output.withUnsafeMutableBufferPointer { buffer -> TSS2_RC in
            let first = Tss2_MU_TPM2B_PUBLIC_Marshal(&publicPart, buffer.baseAddress, buffer.count, &offset)
            guard first == 0 else { return first }
            return Tss2_MU_TPM2B_PRIVATE_Marshal(&privatePart, buffer.baseAddress, buffer.count, &offset)
        }
        guard rc == 0 else { throw TPMError(returned: rc, from: "marshalling a blob") }
        return try TPMBlob(bytes: Array(output.prefix(offset)))
    }

    /// The two marshalled parts, for TPM2_Load.
    func parts() throws(TPMError) -> (kind: Kind, public: TPM2B_PUBLIC, private: TPM2B_PRIVATE) {
        try TPMBlob.split(bytes)
    }

    private static func split(_ bytes: [UInt8]) throws(TPMError) -> (kind: Kind, public: TPM2B_PUBLIC, private: TPM2B_PRIVATE) {
        guard bytes.count > 2 else { throw .invalidInput("a TPM blob is too short") }
        guard bytes[0] == version else { throw .invalidInput("TPM blob version \(bytes[0]) is not \(version)") }
        guard let kind = Kind(rawValue: bytes[1]) else { throw .invalidInput("unknown TPM blob kind \(bytes[1])") }
        var publicPart = TPM2B_PUBLIC(), privatePart = TPM2B_PRIVATE()
        var offset = 2
        let rc = bytes.withUnsafeBufferPointer { buffer -> TSS2_RC in
            let first = Tss2_MU_TPM2B_PUBLIC_Unmarshal(buffer.baseAddress, buffer.count, &offset, &publicPart)
            guard first == 0 else { return first }
            return Tss2_MU_TPM2B_PRIVATE_Unmarshal(buffer.baseAddress, buffer.count, &offset, &privatePart)
        }
        guard rc == 0 else { throw TPMError(.invalidInput, "a TPM blob does not unmarshal: \(TPMError(returned: rc, from: "Tss2_MU").reason)") }
        guard offset == bytes.count else { throw .invalidInput("a TPM blob has \(bytes.count - offset) bytes after its parts") }
        return (kind, publicPart, privatePart)
    }

    /// The key type and public key of a key's public area; refuses any other kind of object.
    static func describe(_ area: TPMT_PUBLIC) throws(TPMError) -> (type: TPMKeyType, publicKey: TPMPublicKey) {
        switch area.type {
        case kc_TPM2_ALG_ECC:
            let type: TPMKeyType
            switch area.parameters.eccDetail.curveID {
            case kc_TPM2_ECC_NIST_P256: type = .ecP256
            case kc_TPM2_ECC_NIST_P384: type = .ecP384
            default: throw .invalidInput("the key's curve \(area.parameters.eccDetail.curveID) is not P-256 or P-384")
            }
            let width = type.coordinateLength
            let point = area.unique.ecc
            guard let x = TPMBuffer.bytes(point.x.buffer, size: point.x.size, paddedTo: width),
                  let y = TPMBuffer.bytes(point.y.buffer, size: point.y.size, paddedTo: width) else {
                throw .invalidInput("the key's point does not fit its curve")
            }
            return (type, .ec(type, point: [0x04] + x + y))
        case kc_TPM2_ALG_RSA:
            guard area.parameters.rsaDetail.keyBits == 2048 else { throw .invalidInput("only RSA-2048 keys are made here") }
            let modulus = TPMBuffer.bytes(area.unique.rsa.buffer, size: area.unique.rsa.size)
            let exponent = area.parameters.rsaDetail.exponent
            let exponentBytes: [UInt8] = exponent == 0 ? [0x01, 0x00, 0x01] : withUnsafeBytes(of: exponent.bigEndian) { Array($0.drop { $0 == 0 }) }
            return (.rsa2048, .rsa(modulus: modulus, exponent: exponentBytes))
        default:
            throw .invalidInput("the object is not an EC or RSA key")
        }
    }
}
