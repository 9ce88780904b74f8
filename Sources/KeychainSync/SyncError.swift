/// Why a sync refused what it found, naming the file or device (Docs/sync.md).
public struct SyncError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        /// A file does not open under its name: edited, or moved from another item's name.
        case tampered
        /// A file holds an older version of its item than a manifest lists.
        case replayed
        /// A device's manifest has a lower counter than one this device saw before.
        case rolledBack
        /// A manifest lists a file the remote does not have.
        case withheld
        /// A signature does not verify, or a manifest is not its device's.
        case badSignature
        /// A file sealed under a generation of the circle key this device does not hold.
        case unknownGeneration
        /// Bytes that are not a file of this format.
        case malformed
        /// No device asks to join with that code, or none has that name.
        case notFound
        /// The random generator or OpenSSL failed.
        case crypto
        /// This device's identity key is in a TPM that is not there (or is not the one that made
        /// it), or a TPM was asked for and there is none.
        case identityUnavailable
    }

    public let kind: Kind
    public let reason: String

    public init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }

    public var description: String { reason }
}
