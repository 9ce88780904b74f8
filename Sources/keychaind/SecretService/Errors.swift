extension SecretService {
    /// A D-Bus error reply: its name and message.
    enum Failure: Error {
        case error(String, String)
        static let noSuchObject = Failure.error("org.freedesktop.Secret.Error.NoSuchObject", "No such object")
        static func isLocked(_ what: String) -> Failure { .error("org.freedesktop.Secret.Error.IsLocked", "\(what) is locked: unlock it first (keychainctl unlock, or the Unlock method)") }
        static let noSession = Failure.error("org.freedesktop.Secret.Error.NoSession", "The session does not exist")
        static func invalid(_ why: String) -> Failure { .error("org.freedesktop.DBus.Error.InvalidArgs", why) }
        static func notSupported(_ why: String) -> Failure { .error("org.freedesktop.DBus.Error.NotSupported", why) }
        static func failed(_ why: String) -> Failure { .error("org.freedesktop.DBus.Error.Failed", why) }
        static func unknownMethod(_ interface: String, _ member: String) -> Failure {
            .error("org.freedesktop.DBus.Error.UnknownMethod", "Unknown method \(interface).\(member)")
        }
        static func accessDenied(_ why: String) -> Failure { .error("org.freedesktop.DBus.Error.AccessDenied", why) }
        static func readOnly(_ property: String) -> Failure { .error("org.freedesktop.DBus.Error.PropertyReadOnly", "\(property) cannot be set") }
    }
}
