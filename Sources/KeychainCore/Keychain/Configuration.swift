import Glibc
import KeychainCrypto

/// Where keychains live and how new PINs are derived.
///
/// Sources, strongest first: environment (`KEYCHAIN_PKCS11_DIR`, `KEYCHAIN_PKCS11_KDF_LOG_N`),
/// then the file named by `KEYCHAIN_PKCS11_CONF` (lines `key = value`, `#` comments: `directory`,
/// `kdf_log_n`, …, `tcti`), then the defaults: `$XDG_DATA_HOME/keychain-pkcs11` (or
/// `~/.local/share/keychain-pkcs11`) and scrypt N = 2^15, r = 8, p = 1.
public struct Configuration: Sendable {
    public var directory: String
    public var kdf: ScryptParameters
    /// The label of the keychain the SecItem functions and keychainctl use when none is named
    /// (`KEYCHAIN_PKCS11_DEFAULT`, `default_keychain` in the configuration file, or the label
    /// `keychainctl set-default` wrote into the keychain folder).
    public var defaultKeychain: String?
    /// Whether KEYCHAIN_PKCS11_DEFAULT or the file's `default_keychain` decides the default
    /// (then the choice kept in the keychain folder does not count).
    public var defaultKeychainIsFixed = false
    /// The keychains whose user PIN is the login password (`login_keychains`, comma-separated
    /// labels; default "login"): pam_keychain unlocks these at login and changes their PIN with
    /// the login password. Only these are tried: a wrong PIN counts toward a keychain's lock.
    public var loginKeychains: [String] = ["login"]
    /// PIN lengths and tries for keychains created from now on (`pin_min_length`,
    /// `pin_max_length`, `pin_max_failures`; environment KEYCHAIN_PKCS11_PIN_MIN_LENGTH…).
    public var pinPolicy: PINPolicy = .default
    /// The protected authentication path: a program that asks for a PIN and prints it
    /// (`prompt_program`, KEYCHAIN_PKCS11_PROMPT). Off when nil.
    public var promptProgram: String?
    /// The device key file that `…ThisDeviceOnly` items are bound to (`device_key`,
    /// KEYCHAIN_PKCS11_DEVICE_KEY); by default `$XDG_STATE_HOME/keychain-pkcs11/device-key`
    /// (`~/.local/state/…`), outside the keychain folder so that copying the folder leaves it behind.
    public var deviceKeyPath: String = Configuration.defaultDeviceKeyPath()
    /// Key sizes, curves and legacy mechanisms accepted (`key_policy = compatible|modern`,
    /// KEYCHAIN_PKCS11_KEY_POLICY); compatible by default.
    public var keyPolicy: KeyPolicy = .compatible
    /// Which keys may wrap a sensitive key (`sensitive_wrapping = trusted|any`,
    /// KEYCHAIN_PKCS11_SENSITIVE_WRAPPING); trusted by default. See `SensitiveWrapping`.
    public var sensitiveWrapping: SensitiveWrapping = .trusted
    /// The size of OpenSSL's secure heap, which this process makes the first time it gives a
    /// private key to OpenSSL (`openssl_secure_heap = 1M|…|off`,
    /// KEYCHAIN_PKCS11_OPENSSL_SECURE_HEAP); 1 MiB by default. See `OpenSSLSecureHeap`.
    public var opensslSecureHeap: Int = OpenSSLSecureHeap.defaultSize
    /// The TPM's tpm2-tss TCTI configuration (`tcti = …`, KEYCHAIN_PKCS11_TCTI), e.g.
    /// `swtpm:host=127.0.0.1,port=2321`, or `none`. Nil: KeychainTPM's `TPMDevice.tcti(configured:)`
    /// uses `device:/dev/tpmrm0` when it exists.
    public var tcti: String?
    /// Whether a new device key is sealed by the TPM (`device_key_tpm = auto|yes|no`,
    /// KEYCHAIN_PKCS11_DEVICE_KEY_TPM); `auto` by default. See `DeviceKeyTPM`.
    public var deviceKeyTPM: DeviceKeyTPM = .auto
    /// The user whose keychain folders and files a process running as root also accepts
    /// (`service_user`, KEYCHAIN_PKCS11_SERVICE_USER): a server's workers run as that user and
    /// open the keychain after the root master did. See `KeychainDirectory.checkSafe`.
    public var serviceUser: String?

    public init(directory: String, kdf: ScryptParameters = .interactive, defaultKeychain: String? = nil) {
        self.directory = directory
        self.kdf = kdf
        self.defaultKeychain = defaultKeychain
    }

    /// Reads the configuration of this process.
    public static func current() -> Configuration {
        let file = environment("KEYCHAIN_PKCS11_CONF").map(readConfigurationFile) ?? [:]
        var kdf = ScryptParameters.interactive
        if let text = environment("KEYCHAIN_PKCS11_KDF_LOG_N") ?? file["kdf_log_n"], let logN = UInt8(text) {
            let candidate = ScryptParameters(logN: logN, blockSize: kdf.blockSize, parallelism: kdf.parallelism)
            if candidate.isWithinLimits { kdf = candidate }
        }
        let directory = environment("KEYCHAIN_PKCS11_DIR") ?? file["directory"].map(expandHome) ?? defaultDirectory()
        let defaultKeychain = environment("KEYCHAIN_PKCS11_DEFAULT") ?? file["default_keychain"] ?? KeychainDirectory(path: directory).defaultKeychain()
        var configuration = Configuration(directory: directory, kdf: kdf, defaultKeychain: defaultKeychain)
        configuration.defaultKeychainIsFixed = environment("KEYCHAIN_PKCS11_DEFAULT") != nil || file["default_keychain"] != nil
        func number(_ variable: String, _ key: String) -> Int? { (environment(variable) ?? file[key]).flatMap { Int($0) } }
        configuration.pinPolicy = PINPolicy(minimumLength: number("KEYCHAIN_PKCS11_PIN_MIN_LENGTH", "pin_min_length") ?? PINPolicy.minimumLength,
                                            maximumLength: number("KEYCHAIN_PKCS11_PIN_MAX_LENGTH", "pin_max_length") ?? PINPolicy.maximumLength,
                                            maximumFailures: Int64(number("KEYCHAIN_PKCS11_PIN_MAX_FAILURES", "pin_max_failures") ?? Int(PINPolicy.defaultMaximumFailures)))
        configuration.promptProgram = (environment("KEYCHAIN_PKCS11_PROMPT") ?? file["prompt_program"]).map(expandHome)
        if let text = environment("KEYCHAIN_PKCS11_LOGIN_KEYCHAINS") ?? file["login_keychains"] {
            configuration.loginKeychains = text.split(separator: ",").map { label -> String in
                let trimmed = label.drop { $0 == " " }
                return String(trimmed.reversed().drop { $0 == " " }.reversed())
            }.filter { !$0.isEmpty }
        }
        if let deviceKey = environment("KEYCHAIN_PKCS11_DEVICE_KEY") ?? file["device_key"].map(expandHome) {
            configuration.deviceKeyPath = deviceKey
        }
        if let text = environment("KEYCHAIN_PKCS11_KEY_POLICY") ?? file["key_policy"] {
            if let policy = KeyPolicy(rawValue: text) {
                configuration.keyPolicy = policy
            } else {
                // An unknown word must not weaken anything: the strict policy applies.
                configuration.keyPolicy = .modern
            }
        }
        if let text = environment("KEYCHAIN_PKCS11_SENSITIVE_WRAPPING") ?? file["sensitive_wrapping"] {
            // An unknown word must not weaken anything.
            configuration.sensitiveWrapping = SensitiveWrapping(rawValue: text) ?? .trusted
        }
        if let text = environment("KEYCHAIN_PKCS11_OPENSSL_SECURE_HEAP") ?? file["openssl_secure_heap"] {
            // An unreadable value keeps the protection of the default size.
            configuration.opensslSecureHeap = OpenSSLSecureHeap.parseSize(text) ?? OpenSSLSecureHeap.defaultSize
        }
        configuration.tcti = environment("KEYCHAIN_PKCS11_TCTI") ?? file["tcti"]
        configuration.serviceUser = environment("KEYCHAIN_PKCS11_SERVICE_USER") ?? file["service_user"]
        if let text = environment("KEYCHAIN_PKCS11_DEVICE_KEY_TPM") ?? file["device_key_tpm"] {
            // An unknown word must not weaken anything: seal whenever a TPM answers.
            configuration.deviceKeyTPM = DeviceKeyTPM(rawValue: text.lowercased()) ?? .auto
        }
        // Every door reads its configuration through here before it handles a key; the size is
        // fixed when the heap is made (the first private key given to OpenSSL).
        OpenSSLSecureHeap.configure(size: configuration.opensslSecureHeap)
        return configuration
    }

    static func environment(_ name: String) -> String? {
        guard let value = getenv(name) else { return nil }
        let text = String(cString: value)
        return text.isEmpty ? nil : text
    }

    static func homeDirectory() -> String {
        if let home = environment("HOME") { return home }
        if let entry = getpwuid(getuid()), let dir = entry.pointee.pw_dir { return String(cString: dir) }
        return "/"
    }

    static func expandHome(_ path: String) -> String {
        path.hasPrefix("~/") ? homeDirectory() + path.dropFirst(1) : path
    }

    static func defaultDirectory() -> String {
        let data = environment("XDG_DATA_HOME") ?? homeDirectory() + "/.local/share"
        return data + "/keychain-pkcs11"
    }

    static func defaultDeviceKeyPath() -> String {
        // XDG: a relative XDG_STATE_HOME is invalid and ignored.
        let state = environment("XDG_STATE_HOME").flatMap { $0.hasPrefix("/") ? $0 : nil } ?? homeDirectory() + "/.local/state"
        return state + "/keychain-pkcs11/device-key"
    }

    /// The last configuration file read, with what identified its contents then: `current()` is
    /// called for every keychain opened and every SecItem call, and reads the file again only
    /// when it changed (another inode, size or modification time).
    private struct ReadFile {
        let path: String
        let inode: UInt, size: Int, modified: timespec
        let values: [String: String]

        func isCurrent(_ path: String, _ info: stat) -> Bool {
            path == self.path && inode == UInt(info.st_ino) && size == Int(info.st_size)
                && modified.tv_sec == info.st_mtim.tv_sec && modified.tv_nsec == info.st_mtim.tv_nsec
        }
    }

    private static let readFileLock = PThreadMutex()
    nonisolated(unsafe) private static var lastRead: ReadFile?

    /// `key = value` lines; unknown keys are ignored so newer files work with older code.
    static func readConfigurationFile(_ path: String) -> [String: String] {
        guard let info = try? System.stat(path) else { return [:] }
        if let last = readFileLock.withLock({ lastRead }), last.isCurrent(path, info) { return last.values }
        let values = parseConfigurationFile(path)
        readFileLock.withLock {
            lastRead = ReadFile(path: path, inode: UInt(info.st_ino), size: Int(info.st_size), modified: info.st_mtim, values: values)
        }
        return values
    }

    private static func parseConfigurationFile(_ path: String) -> [String: String] {
        guard let file = fopen(path, "r") else { return [:] }
        defer { fclose(file) }
        var result: [String: String] = [:]
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0, let line {
            let text = String(cString: line)
            let content = text.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let parts = content.split(separator: "=", maxSplits: 1)
            guard parts.count == 2 else { continue }
            result[parts[0].trimmed] = parts[1].trimmed
        }
        return result
    }
}

/// Whether a device key made from now on is sealed by the TPM (Docs/security.md, "The device key
/// and the TPM"). Existing files are read whatever their kind; `keychainctl seal-device-key`
/// seals a clear one.
public enum DeviceKeyTPM: String, Sendable {
    /// Sealed when a TPM is configured and answers; in clear otherwise (no TPM, or it failed).
    case auto
    /// Sealed, or not made at all: without a working TPM, device-bound items cannot be stored.
    case yes
    /// In clear, as before TPM support: the file alone is the key (copying it moves the device).
    case no
}

extension Substring {
    var trimmed: String {
        String(drop { $0 == " " || $0 == "\t" }.reversed().drop { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }.reversed())
    }
}
