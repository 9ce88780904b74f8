import Glibc
import KeychainCrypto
import KeychainTPM

/// A device key sealed by the TPM: what the device key file holds instead of the 32 clear bytes
/// when this machine has a TPM (Docs/architecture.md, "The sealed device key").
///
/// Format, version 1: `"KCDK"` ‖ `01` (version) ‖ `01` (kind: tpm-sealed) ‖ the TPM blob
/// (`TPMBlob` of sealed data, holding the 32 key bytes), nothing after. The blob only unseals in
/// the TPM that sealed it (fixedTPM, fixedParent, under that TPM's storage primary key), so the
/// file copied to another machine — or restored after the TPM was cleared — opens nothing.
///
/// The sealed object's authValue is empty. The file is already 0600 and the user's own; an
/// authValue kept beside the blob, or fixed in this code, would be readable by whoever reads the
/// blob and add nothing, and one derived from the PIN would stop `Always…ThisDeviceOnly` items
/// opening without a login. Who can read the file *and* use this TPM (the user, root) unseals it,
/// as whoever could read the clear file read the key before.
struct SealedDeviceKey: Equatable {
    static let magic: [UInt8] = Array("KCDK".utf8)
    static let version: UInt8 = 1
    /// The only kind so far; a later one (a policy-bound seal, say) gets its own number.
    static let tpmSealedKind: UInt8 = 1
    static let headerLength = magic.count + 2
    /// File sizes this format may have: a sealed 32-byte secret is about 200 bytes; anything
    /// outside these bounds is damaged. A clear key is exactly `DeviceKeyFile.size` bytes, below.
    static let sizes = 48...4096

    let blob: TPMBlob

    init(blob: TPMBlob) { self.blob = blob }

    var bytes: [UInt8] { Self.magic + [Self.version, Self.tpmSealedKind] + blob.bytes }

    /// Reads the file's contents; `path` names it in the reasons. Refuses anything but a whole
    /// file of this version and kind.
    init(bytes: [UInt8], path: String) throws(KeychainError) {
        guard Self.sizes.contains(bytes.count), bytes.starts(with: Self.magic) else {
            throw KeychainError(.deviceKeyUnavailable, "the device key \(path) is damaged (\(bytes.count) bytes, neither a clear key of \(DeviceKeyFile.size) nor a sealed one)")
        }
        guard bytes[Self.magic.count] == Self.version else {
            throw KeychainError(.deviceKeyUnavailable, "the device key \(path) has format version \(bytes[Self.magic.count]), which this build does not read (it reads \(Self.version))")
        }
        guard bytes[Self.magic.count + 1] == Self.tpmSealedKind else {
            throw KeychainError(.deviceKeyUnavailable, "the device key \(path) is of an unknown kind (\(bytes[Self.magic.count + 1]))")
        }
        do throws(TPMError) {
            blob = try TPMBlob(bytes: Array(bytes[Self.headerLength...]))
        } catch {
            throw KeychainError(.deviceKeyUnavailable, "the device key \(path) is damaged: \(error.reason)")
        }
        guard blob.kind == .sealedData else {
            throw KeychainError(.deviceKeyUnavailable, "the device key \(path) is damaged: its TPM blob holds a key, not sealed data")
        }
    }

    /// Seals `key` with this process's TPM; the connection is let go when done (a TPM without a
    /// resource manager serves the next process).
    static func seal(_ key: SecureBytes, path: String) throws(KeychainError) -> (sealed: SealedDeviceKey, tcti: String) {
        let connection = try EnclaveTPM.connection()
        do throws(TPMError) {
            let blob = try EnclaveTPM.withRoom { () throws(TPMError) in try connection.seal(key, authValue: SecureBytes(count: 0)) }
            return (SealedDeviceKey(blob: blob), connection.tcti)
        } catch {
            throw KeychainError(tpm: error, "cannot seal the device key \(path) with the TPM (\(connection.tcti))")
        }
    }

    /// The 32 key bytes, unsealed by this process's TPM. Every failure is `.deviceKeyUnavailable`
    /// with what it means: no TPM here, another TPM (or a damaged blob), or a TPM that failed.
    func unseal(path: String) throws(KeychainError) -> SecureBytes {
        guard EnclaveTPM.configuredTCTI != nil else {
            throw KeychainError(.deviceKeyUnavailable, "the device key \(path) is sealed by a TPM, and this machine has none (no /dev/tpmrm0; KEYCHAIN_PKCS11_TCTI or `tcti` names none): this keychain's ThisDeviceOnly items are unavailable here")
        }
        let connection: TPMConnection
        do throws(KeychainError) { connection = try EnclaveTPM.connection() } catch {
            throw KeychainError(.deviceKeyUnavailable, "the device key \(path) is sealed by a TPM, which cannot be reached: \(error.reason)")
        }
        let key: SecureBytes
        // The sealed object needs a slot beside this process's loaded TPM keys (withRoom).
        do throws(TPMError) { key = try EnclaveTPM.withRoom { () throws(TPMError) in try connection.unseal(blob, authValue: SecureBytes(count: 0)) } } catch {
            if error.code.response == .badAuthorization || error.code.response == .authorizationFailed {
                // The sealed object's authValue is empty: only the owner hierarchy's (for the
                // primary key) can be refused.
                throw KeychainError(.deviceKeyUnavailable, "the TPM (\(connection.tcti)) refused its owner authorisation, which this keychain needs empty (it was set, e.g. by tpm2_changeauth -c owner): the device key \(path) cannot be unsealed until it is cleared (\(error))")
            }
            if error.code.response == .integrity {
                throw KeychainError(.deviceKeyUnavailable, "the device key \(path) was sealed by another TPM than this machine's (\(connection.tcti)), or is damaged: this keychain's ThisDeviceOnly items are unavailable here (\(error))")
            }
            throw KeychainError(.deviceKeyUnavailable, "the TPM (\(connection.tcti)) did not unseal the device key \(path): \(error)")
        }
        guard key.count == DeviceKeyFile.size else {
            throw KeychainError(.deviceKeyUnavailable, "the device key \(path) unsealed to \(key.count) bytes, not \(DeviceKeyFile.size)")
        }
        return key
    }
}

extension DeviceKeyFile {
    /// What `seal()` did.
    public enum SealOutcome: Equatable, Sendable {
        /// The key is sealed now by the TPM `tcti` names; `wiped` says whether the old file's
        /// clear bytes were overwritten.
        case sealed(tcti: String, wiped: Bool)
        /// It was sealed already: nothing changed.
        case alreadySealed
    }

    /// Seals a clear device key in place (`keychainctl seal-device-key`): the same 32 bytes, so
    /// every keychain bound to it opens as before, but only with this TPM from now on.
    ///
    /// Order, so that no crash loses the key: seal, check the sealed form unseals to the same
    /// bytes, write it under a temporary name (fsync), rename it over the clear file (fsync the
    /// folder), and only then overwrite the old file — still open here, no longer linked — with
    /// zeros and fsync it. Copies elsewhere (backups, snapshots, a copy-on-write filesystem or
    /// flash translation layer keeping the old blocks) are out of reach: Docs/security.md.
    /// `.objectNotFound` when there is no key yet, `.tpmUnavailable` when there is no TPM.
    public func seal() throws(KeychainError) -> SealOutcome {
        let fd: Int32
        do { fd = try System.open(path, O_RDWR | O_NOFOLLOW) } catch {
            if error.code == ENOENT {
                throw KeychainError(.objectNotFound, "there is no device key at \(path) yet: nothing to seal (a new one is sealed when it is made, where a TPM answers)")
            }
            throw KeychainError(.deviceKeyUnavailable, "cannot open the device key \(path) to seal it: \(error.reason)")
        }
        defer { System.close(fd) }
        guard case .clear(let key) = try readContents(of: fd) else { return .alreadySealed }
        guard EnclaveTPM.configuredTCTI != nil else {
            throw KeychainError(.tpmUnavailable, "this machine has no TPM (no /dev/tpmrm0; KEYCHAIN_PKCS11_TCTI or `tcti` names none): the device key \(path) stays in clear")
        }
        let (sealed, tcti) = try SealedDeviceKey.seal(key, path: path)
        let back = try sealed.unseal(path: path)
        guard back.constantTimeEquals(key) else {
            throw KeychainError(.tpmFailure, "the TPM (\(tcti)) unsealed another key than it sealed: the device key \(path) is left in clear")
        }
        let temporary = try writeTemporary(sealed.bytes)
        // Another process may have replaced the file since it was opened here: keep its version.
        guard let now = try? System.lstat(path), let opened = try? System.fstat(fd), now.st_ino == opened.st_ino, now.st_dev == opened.st_dev else {
            try? System.unlink(temporary)
            throw KeychainError(.deviceKeyUnavailable, "the device key \(path) changed while it was being sealed: nothing was replaced; run the command again")
        }
        do { try System.rename(temporary, to: path) } catch {
            try? System.unlink(temporary)
            throw KeychainError(.deviceKeyUnavailable, "cannot replace the device key \(path): \(error.reason)")
        }
        syncParent()
        let zeros = [UInt8](repeating: 0, count: Self.size)
        let wiped = (try? System.pwriteAll(fd, zeros, at: 0)) != nil && (try? System.fsync(fd)) != nil
        return .sealed(tcti: tcti, wiped: wiped)
    }
}
