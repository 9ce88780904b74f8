/// A D-Bus error reply: its name (the Secret Service's or D-Bus's own) and a reason for people.
/// Compared by name only, so tests and callers match on what a client sees.
struct BusError: Error, Equatable {
    let name: String
    let reason: String

    init(_ name: String, _ reason: String) {
        self.name = name
        self.reason = reason
    }

    static func == (lhs: BusError, rhs: BusError) -> Bool { lhs.name == rhs.name }

    static let noSuchObject = BusError("org.freedesktop.Secret.Error.NoSuchObject", "No such object")
    static let noSession = BusError("org.freedesktop.Secret.Error.NoSession", "The session does not exist")
    static func isLocked(_ what: String) -> BusError {
        BusError("org.freedesktop.Secret.Error.IsLocked", "\(what) is locked: unlock it first (keychainctl unlock, or the Unlock method)")
    }
    static func invalid(_ why: String) -> BusError { BusError("org.freedesktop.DBus.Error.InvalidArgs", why) }
    static func notSupported(_ why: String) -> BusError { BusError("org.freedesktop.DBus.Error.NotSupported", why) }
    static func failed(_ why: String) -> BusError { BusError("org.freedesktop.DBus.Error.Failed", why) }
    static func unknownMethod(_ interface: String, _ member: String) -> BusError {
        BusError("org.freedesktop.DBus.Error.UnknownMethod", "Unknown method \(interface).\(member)")
    }
    static func accessDenied(_ why: String) -> BusError { BusError("org.freedesktop.DBus.Error.AccessDenied", why) }
    static func readOnly(_ property: String) -> BusError { BusError("org.freedesktop.DBus.Error.PropertyReadOnly", "\(property) cannot be set") }
}
