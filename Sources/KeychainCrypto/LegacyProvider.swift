internal import COpenSSL
import Glibc

/// OpenSSL's legacy provider (RC2, single DES): loaded the first time something needs it, never
/// before, beside the default provider, which stays available.
public enum LegacyProvider {
    /// Whether the provider's module is installed, without loading it (for offering single DES).
    public static let isInstalled: Bool = {
        let directory = getenv("OPENSSL_MODULES").map { String(cString: $0) } ?? String(cString: OPENSSL_info(OPENSSL_INFO_MODULES_DIR))
        return access(directory + "/legacy.so", R_OK) == 0
    }()

    /// Loads the provider once; false if it cannot be loaded.
    public static func load() -> Bool { loaded }

    private static let loaded: Bool = {
        guard let provider = OSSL_PROVIDER_try_load(nil, "legacy", 1) else {
            OpenSSLErrorQueue.discardOwn()
            return false
        }
        handle = provider
        // Unloaded before OpenSSL's own exit handler (registered earlier, so run later) frees the
        // library context: else the provider's child context is left behind (LeakSanitizer).
        atexit {
            if let provider = LegacyProvider.handle { _ = OSSL_PROVIDER_unload(provider) }
        }
        return true
    }()
    nonisolated(unsafe) private static var handle: OpaquePointer?
}
