internal import CTSS2
import KeychainCrypto

/// TPM2B structures are a size and a fixed C array, imported as a tuple: these copy bytes in and
/// out with the size checked against the array, and wipe them.
enum TPMBuffer {
    /// Copies `bytes` into `buffer` (a TPM2B's array) and sets `size`; refuses what does not fit.
    static func fill<Buffer>(_ buffer: inout Buffer, size: inout UInt16, with bytes: UnsafeRawBufferPointer,
                             limit: Int? = nil, what: String) throws(TPMError) {
        let capacity = min(MemoryLayout<Buffer>.size, limit ?? Int.max)
        guard bytes.count <= capacity else {
            throw .invalidInput("\(what) has \(bytes.count) bytes, at most \(capacity) fit")
        }
        withUnsafeMutableBytes(of: &buffer) { destination in
            if let source = bytes.baseAddress, bytes.count > 0, let target = destination.baseAddress {
                target.copyMemory(from: source, byteCount: bytes.count)
            }
        }
        size = UInt16(bytes.count)
    }

    static func fill<Buffer>(_ buffer: inout Buffer, size: inout UInt16, with bytes: [UInt8],
                             limit: Int? = nil, what: String) throws(TPMError) {
        // Array.withUnsafeBytes rethrows untyped: check first, then copy without throwing.
        let capacity = min(MemoryLayout<Buffer>.size, limit ?? Int.max)
        guard bytes.count <= capacity else {
            throw .invalidInput("\(what) has \(bytes.count) bytes, at most \(capacity) fit")
        }
        bytes.withUnsafeBytes { raw in try? fill(&buffer, size: &size, with: raw, limit: limit, what: what) }
    }

    /// The first `size` bytes of `buffer` (never more than the array holds).
    static func bytes<Buffer>(_ buffer: Buffer, size: UInt16) -> [UInt8] {
        withUnsafeBytes(of: buffer) { Array($0.prefix(Int(size))) }
    }

    /// The first `size` bytes of `buffer`, left-padded with zeros to `width` (TPM2B_ECC_PARAMETER
    /// values may drop leading zero bytes); nil when longer than `width`.
    static func bytes<Buffer>(_ buffer: Buffer, size: UInt16, paddedTo width: Int) -> [UInt8]? {
        let value = bytes(buffer, size: size)
        guard value.count <= width else { return nil }
        return [UInt8](repeating: 0, count: width - value.count) + value
    }

    /// Copies the first `size` bytes of `buffer` into zeroising memory, left-padded to `width`.
    static func secureBytes<Buffer>(_ buffer: Buffer, size: UInt16, paddedTo width: Int) -> SecureBytes? {
        let count = Int(size)
        guard count <= width, count <= MemoryLayout<Buffer>.size else { return nil }
        let secret = SecureBytes(count: width)
        withUnsafeBytes(of: buffer) { source in
            secret.withUnsafeMutableBytes { target in
                UnsafeMutableRawBufferPointer(rebasing: target[(width - count)...]).copyMemory(from: UnsafeRawBufferPointer(rebasing: source.prefix(count)))
            }
        }
        return secret
    }

    /// Overwrites a structure that held a secret (an authValue, sealed data, a shared secret).
    static func wipe<Value>(_ value: inout Value) {
        withUnsafeMutableBytes(of: &value) { KeychainCrypto.wipe($0) }
    }

    /// Wipes and frees a structure tpm2-tss allocated for a response.
    static func wipeAndFree<Value>(_ pointer: UnsafeMutablePointer<Value>?) {
        guard let pointer else { return }
        KeychainCrypto.wipe(UnsafeMutableRawBufferPointer(start: pointer, count: MemoryLayout<Value>.size))
        Esys_Free(pointer)
    }
}

extension SecureBytes {
    /// The bytes as a TPM2B_AUTH; the caller wipes it after use.
    func authorization(what: String) throws(TPMError) -> TPM2B_AUTH {
        var auth = TPM2B_AUTH()
        try withUnsafeBytes { (raw) throws(TPMError) in
            try TPMBuffer.fill(&auth.buffer, size: &auth.size, with: raw, limit: TPMTemplates.maximumAuthorizationLength, what: what)
        }
        return auth
    }
}
