import ArgumentParser
import KeychainCore

/// `keychainctl seal-device-key`: binds an existing clear device key to this machine's TPM
/// (`DeviceKeyFile.seal()`); Docs/security.md section 2b says what that does and does not give.
struct SealDeviceKey: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "seal-device-key",
        abstract: "Seal the device key with this machine's TPM, so that ThisDeviceOnly items open only here.",
        discussion: """
        The device key (KEYCHAIN_PKCS11_DEVICE_KEY, 'device_key', default \
        ~/.local/state/keychain-pkcs11/device-key) binds every keychain's ThisDeviceOnly items to \
        this device. Kept in clear, a copy of it moves them to another machine; sealed by the TPM, \
        only this machine's TPM opens it. This command seals a clear key in place: the same key, \
        so every item stays readable. The sealed file replaces the clear one atomically and the \
        old file's bytes are overwritten with zeros; copies made before (backups, snapshots) and \
        blocks a filesystem or SSD keeps elsewhere are beyond its reach. New device keys are \
        sealed from the start where a TPM answers (device_key_tpm = auto).

        Exit status: 0 sealed (or already sealed), 1 no TPM here, 6 no device key yet, 5 the \
        key or the TPM failed.

        Examples:
          keychainctl seal-device-key
          keychainctl info   # Device key: sealed by the TPM (device:/dev/tpmrm0)
        """
    )

    func run() throws {
        let file = DeviceKeyFile.configured()
        do throws(KeychainError) {
            switch try file.seal() {
            case .alreadySealed:
                print("The device key \(printable(file.path)) is already sealed by a TPM.")
            case .sealed(let tcti, let wiped):
                print("The device key \(printable(file.path)) is sealed by the TPM (\(printable(tcti))).")
                if !wiped {
                    var standardError = StandardError()
                    print("keychainctl: the old clear file could not be overwritten; it is no longer linked and goes when its last reader closes it.", to: &standardError)
                }
            }
        } catch where error.code == .tpmUnavailable {
            throw fail("\(error.reason).", status: ExitStatus.failure)
        } catch {
            throw failure(for: error)
        }
    }
}

/// The "Device key" line of `keychainctl info`: how the device binding is kept, or why it fails.
func deviceKeyDescription(_ kind: DeviceBindingKind, path: String) -> String {
    switch kind {
    case .none:
        return "none yet (\(path): made with the first ThisDeviceOnly item)"
    case .file:
        return "file (not sealed): \(path)"
    case .sealed(let tcti):
        return "sealed by the TPM (\(tcti)): \(path)"
    case .unavailable(let reason):
        return reason
    }
}
