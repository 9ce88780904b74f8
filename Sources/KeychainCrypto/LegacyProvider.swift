internal import COpenSSL
import Glibc

/// OpenSSL's legacy provider (RC2, single DES): loaded into our library context (`OpenSSLContext`)
/// the first time something needs it, never before, beside the default provider, which stays
/// available. The host's default context is left as the host set it up.
public enum LegacyProvider {
    /// Whether the provider's module is installed, without loading it (for offering single DES).
    public static let isInstalled: Bool = {
        let directory = getenv("OPENSSL_MODULES").map { String(cString: $0) } ?? String(cString: OPENSSL_info(OPENSSL_INFO_MODULES_DIR))
        return access(directory + "/legacy.so", R_OK) == 0
    }()

    /// Loads the provider once; false if it cannot be loaded.
    public static func load() -> Bool { loaded }

    /// Never unloaded, like the context that holds it: nothing of ours runs at process exit.
    private static let loaded: Bool = {
        guard let context = try? OpenSSLContext.get(), OSSL_PROVIDER_try_load(context, "legacy", 1) != nil else {
            OpenSSLErrorQueue.discardOwn()
            return false
        }
        return true
    }()
}
