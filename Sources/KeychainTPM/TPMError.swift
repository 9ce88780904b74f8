internal import CTSS2

/// A failure of the TPM, of tpm2-tss, or of this layer: a `TSS2_RC` and a readable reason.
///
/// Errors compare by code only. Codes the TPM returns name the handle, session or parameter they
/// concern (TPM 2.0 Part 2 §6.6.3, bits 8–11): `code.response` drops that number, so
/// `error.code.response == .badAuthorization` holds whichever session failed.
/// This layer's own codes (`.noTPM`, `.timeout`, …) live in a TSS2 layer tpm2-tss does not use.
public struct TPMError: Error, Equatable, CustomStringConvertible, Sendable {
    public let code: Code
    public let reason: String

    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    /// The error tpm2-tss returned from `operation`, with Tss2_RC_Decode's text.
    init(returned rc: TSS2_RC, from operation: String) {
        code = Code(rawValue: rc)
        let decoded = Tss2_RC_Decode(rc).map { String(cString: $0) } ?? "0x\(String(rc, radix: 16))"
        reason = "\(operation): \(decoded)"
    }

    public static func == (lhs: TPMError, rhs: TPMError) -> Bool { lhs.code == rhs.code }
    public var description: String { "TPM error 0x\(String(code.rawValue, radix: 16)): \(reason)" }

    /// A `TSS2_RC`: the layer in bits 16–23 (0 is the TPM itself), the layer's code below.
    public struct Code: RawRepresentable, Hashable, Sendable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }

        /// This layer's codes: layer 0x4B ("K"), unused by tpm2-tss (TSS2_RC_LAYER values 0–16).
        private static func own(_ value: UInt32) -> Code { Code(rawValue: 0x004B_0000 | value) }
        /// No TPM is configured and `/dev/tpmrm0` does not exist, or `tcti = none` says so.
        public static let noTPM = own(1)
        /// The TPM did not answer within the command's time limit; the connection is closed.
        public static let timeout = own(2)
        /// An earlier failure of the transport (a TPM that went away, a timeout) closed this
        /// connection: open a new one.
        public static let connectionClosed = own(3)
        /// An argument or blob this layer refused before the TPM saw it.
        public static let invalidInput = own(4)
        /// The TPM does not offer the key type or algorithm asked for.
        public static let unsupported = own(5)

        /// TPM2_RC_AUTH_FAIL: an authorisation HMAC failed and the dictionary-attack counter moved.
        public static let authorizationFailed = Code(rawValue: 0x08E)
        /// TPM2_RC_BAD_AUTH: an authorisation failed on an object without dictionary-attack
        /// protection (our keys and sealed objects: `noDA`).
        public static let badAuthorization = Code(rawValue: 0x0A2)
        /// TPM2_RC_INTEGRITY: a blob's integrity check failed (another TPM's, or altered).
        public static let integrity = Code(rawValue: 0x09F)
        /// TPM2_RC_VALUE, TPM2_RC_SIZE: a parameter the TPM refused.
        public static let value = Code(rawValue: 0x084)
        public static let size = Code(rawValue: 0x095)
        /// TPM2_RC_CURVE, TPM2_RC_KEY_SIZE, TPM2_RC_ASYMMETRIC: an algorithm the TPM lacks.
        public static let curve = Code(rawValue: 0x0A6)
        public static let keySize = Code(rawValue: 0x087)

        /// TPM2_RC_OBJECT_MEMORY: no slot for one more loaded object (a TPM without a resource
        /// manager, such as swtpm, holds a few).
        public static let objectMemory = Code(rawValue: 0x902)

        /// The layer: 0 for the TPM, 6 for ESAPI, 10 for the TCTI, 0x4B for this layer.
        public var layer: UInt32 { (rawValue >> 16) & 0xFF }

        /// A TPM response code without its handle, session or parameter number (format 1 only).
        public var response: Code {
            guard layer == 0, rawValue & 0x080 != 0 else { return self }
            return Code(rawValue: rawValue & ~0xF40)
        }

        /// Whether the transport failed (TCTI layer, or tpm2-tss's own I/O and connection codes):
        /// the connection cannot be trusted afterwards.
        public var isTransportFailure: Bool { layer == 10 || self == .timeout }
    }
}

extension TPMError {
    static func invalidInput(_ reason: String) -> TPMError { TPMError(.invalidInput, reason) }
}
