import CSystemd
import Glibc

/// The connection that owns `name` on the bus: its unique name (":1.42", which names that one
/// connection and no later owner), its PID and executable (from /proc when the bus does not
/// say), nil when nobody owns it.
public func busNameOwner(_ bus: OpaquePointer, _ name: String) -> (uniqueName: String?, pid: pid_t?, exe: String?)? {
    var credentials: OpaquePointer?
    let mask = UInt64(SD_BUS_CREDS_AUGMENT) | UInt64(SD_BUS_CREDS_UNIQUE_NAME | SD_BUS_CREDS_PID | SD_BUS_CREDS_EXE)
    guard sd_bus_get_name_creds(bus, name, mask, &credentials) >= 0, let credentials else { return nil }
    defer { sd_bus_creds_unref(credentials) }
    var unique: UnsafePointer<CChar>?
    var pid: pid_t = 0
    var exe: UnsafePointer<CChar>?
    return (sd_bus_creds_get_unique_name(credentials, &unique) >= 0 ? unique.map { String(cString: $0) } : nil,
            sd_bus_creds_get_pid(credentials, &pid) >= 0 ? pid : nil,
            sd_bus_creds_get_exe(credentials, &exe) >= 0 ? exe.map { String(cString: $0) } : nil)
}
