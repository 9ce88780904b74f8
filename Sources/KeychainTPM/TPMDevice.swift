import Glibc

/// Which TPM a process talks to: a tpm2-tss TCTI configuration string, or none.
///
/// The setting comes from KeychainCore's `Configuration.tcti` (`KEYCHAIN_PKCS11_TCTI`, else the
/// configuration file's `tcti = …`), which this layer cannot read (it sits below KeychainCore):
/// callers pass it as `configured`. Without one, the kernel's resource manager
/// `device:/dev/tpmrm0` when it exists; `none` turns the TPM off. Examples:
/// `device:/dev/tpmrm0`, `swtpm:host=127.0.0.1,port=2321`, `tabrmd:bus_type=session`.
public enum TPMDevice {
    /// The kernel's resource-managed TPM device: it swaps transient objects and sessions, so
    /// several processes can each keep a primary key, a session and their loaded keys.
    public static let defaultDevice = "/dev/tpmrm0"
    /// The value of `tcti` (or KEYCHAIN_PKCS11_TCTI) that means "no TPM, even if one exists".
    public static let disabled = "none"

    /// The TCTI configuration to open, or nil when this machine has no TPM for us.
    public static func tcti(configured: String?, deviceExists: (String) -> Bool = fileExists) -> String? {
        if let configured, !configured.isEmpty {
            return configured == disabled ? nil : configured
        }
        return deviceExists(defaultDevice) ? "device:\(defaultDevice)" : nil
    }

    public static func fileExists(_ path: String) -> Bool { access(path, F_OK) == 0 }
}
