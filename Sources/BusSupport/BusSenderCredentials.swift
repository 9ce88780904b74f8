import CSystemd
import Glibc

/// Who sent `message`: its effective uid and PID, as the bus daemon vouches for them (sd-bus asks
/// it with GetConnectionCredentials), nil when the bus does not say.
public func busSenderCredentials(_ message: OpaquePointer) -> (uid: uid_t, pid: pid_t?)? {
    var credentials: OpaquePointer?
    let mask = UInt64(SD_BUS_CREDS_AUGMENT) | UInt64(SD_BUS_CREDS_EUID | SD_BUS_CREDS_PID)
    guard sd_bus_query_sender_creds(message, mask, &credentials) >= 0, let credentials else { return nil }
    defer { sd_bus_creds_unref(credentials) }
    var uid: uid_t = 0
    guard sd_bus_creds_get_euid(credentials, &uid) >= 0 else { return nil }
    var pid: pid_t = 0
    return (uid, sd_bus_creds_get_pid(credentials, &pid) >= 0 ? pid : nil)
}
