import KeychainCrypto

/// Who a PIN belongs to.
public enum PINOwner: String, Sendable {
    case user
    case securityOfficer = "so"
}

/// Lengths and retry limits of a keychain's PINs, stored per keychain and reported in token info.
public struct PINPolicy: Equatable, Sendable {
    /// No PIN is ever read beyond this many bytes (the bound on caller memory).
    public static let maximumLength = 256
    public static let minimumLength = 4
    /// Wrong entries in a row before the PIN locks.
    public static let defaultMaximumFailures: Int64 = 10
    public static let `default` = PINPolicy(minimumLength: minimumLength, maximumLength: maximumLength, maximumFailures: defaultMaximumFailures)

    public var minimumLength: Int
    public var maximumLength: Int
    public var maximumFailures: Int64

    /// A policy within sane bounds: 1 ≤ minimum ≤ maximum ≤ 256, 1–100 tries.
    public init(minimumLength: Int, maximumLength: Int, maximumFailures: Int64) {
        self.maximumLength = min(max(maximumLength, 1), Self.maximumLength)
        self.minimumLength = min(max(minimumLength, 1), self.maximumLength)
        self.maximumFailures = min(max(maximumFailures, 1), 100)
    }

    /// `name` says which PIN in the message ("the SO PIN must have 4 to 256 bytes").
    public func checkLength(_ pin: UnsafeRawBufferPointer, name: String = "a PIN") throws(KeychainError) {
        guard pin.count >= minimumLength, pin.count <= maximumLength else {
            throw KeychainError(.pinLengthRange, "\(name) must have \(minimumLength) to \(maximumLength) bytes")
        }
    }

    /// The default policy's check, for PINs checked before a keychain exists.
    public static func checkLength(_ pin: UnsafeRawBufferPointer) throws(KeychainError) {
        try PINPolicy.default.checkLength(pin)
    }
}

/// The failed-login state of one PIN, as PKCS#11 token flags report it.
public struct PINStatus: Equatable, Sendable {
    public let failures: Int64
    public let maximumFailures: Int64

    /// A wrong PIN has been entered since the last successful login.
    public var countLow: Bool { failures > 0 && !finalTry && !locked }
    /// One more wrong PIN locks it.
    public var finalTry: Bool { failures == maximumFailures - 1 }
    public var locked: Bool { failures >= maximumFailures }
}

/// A PIN-derived key-encryption key's salt and cost, stored beside the wrapped master key.
struct PINVerifier {
    static let saltSize = 16
    var salt: [UInt8]
    var parameters: ScryptParameters

    static func new(parameters: ScryptParameters) throws -> PINVerifier {
        PINVerifier(salt: try Random.bytes(saltSize), parameters: parameters)
    }

    /// salt (16) ‖ logN (1) ‖ r (4, big-endian) ‖ p (4, big-endian)
    var encoded: [UInt8] {
        salt + [parameters.logN] + withUnsafeBytes(of: parameters.blockSize.bigEndian) { Array($0) }
            + withUnsafeBytes(of: parameters.parallelism.bigEndian) { Array($0) }
    }

    init(salt: [UInt8], parameters: ScryptParameters) {
        self.salt = salt
        self.parameters = parameters
    }

    init(encoded: [UInt8]) throws(KeychainError) {
        guard encoded.count == Self.saltSize + 9 else { throw KeychainError(.keychainUnrecognized, "PIN parameters damaged") }
        func be32(_ at: Int) -> UInt32 { encoded[at..<at + 4].reduce(0) { $0 << 8 | UInt32($1) } }
        salt = Array(encoded[0..<Self.saltSize])
        parameters = ScryptParameters(logN: encoded[Self.saltSize], blockSize: be32(Self.saltSize + 1), parallelism: be32(Self.saltSize + 5))
        guard parameters.isWithinLimits else { throw KeychainError(.keychainUnrecognized, "PIN parameters out of bounds") }
    }

    func keyEncryptionKey(pin: UnsafeRawBufferPointer) throws -> SecureBytes {
        try KeyDerivation.scrypt(password: pin, salt: salt, parameters: parameters)
    }

    /// Associated data of a wrapped master key: binds it to its owner and KDF parameters.
    func associatedData(owner: PINOwner) -> [UInt8] {
        Array("keychain-pkcs11 master key \(owner.rawValue)".utf8) + encoded
    }
}
