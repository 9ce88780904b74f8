/// keychaind's own D-Bus interface, beside the Secret Service's on its root object (the table is
/// CSecretService's, secret_service_bus.c): the names keychaind and keychainctl share. The
/// project has no domain to name it after, and org.freedesktop belongs to the specification.
public enum KeychaindInterface {
    public static let name = "keychain_pkcs11.Daemon"
    public static let path = "/org/freedesktop/secrets"
    /// Stop(): keychaind replies, then stops as on SIGTERM (keys wiped, socket removed, the bus
    /// name released last). Only a caller of its own uid is obeyed.
    public static let stop = "Stop"
}
