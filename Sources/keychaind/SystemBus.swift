import CSystemd
import Glibc
import SecretService

/// Follows logind on the system bus: before the machine sleeps (`PrepareForSleep(true)` of
/// org.freedesktop.login1.Manager) and when this login session is locked (`Lock` of its
/// org.freedesktop.login1.Session object; any session's when XDG_SESSION_ID is unknown), it calls
/// `lockNow`, which locks the keychains whose policy says so. Without a system bus (containers,
/// some servers) it says so once and nothing follows these events: idle timeouts and
/// `keychainctl lock` still work.
final class SystemBusWatcher: @unchecked Sendable {
    private let lockNow: @Sendable (String) -> Void
    private var bus: OpaquePointer?

    init(lockNow: @escaping @Sendable (String) -> Void) {
        self.lockNow = lockNow
    }

    /// Connects and subscribes; false (with the reason printed) when there is no system bus.
    func start() -> Bool {
        var connection: OpaquePointer?
        let opened = sd_bus_open_system(&connection)
        guard opened >= 0, let connection else {
            complain("keychaind: no system bus (\(String(cString: strerror(-opened)))): keychains are not locked on sleep or session lock")
            return false
        }
        bus = connection
        let context = Unmanaged.passUnretained(self).toOpaque()
        let sleep = sd_bus_match_signal(connection, nil, nil, "/org/freedesktop/login1", "org.freedesktop.login1.Manager", "PrepareForSleep",
                                        { message, context, _ in
                                            guard let context else { return 0 }
                                            var going: Int32 = 0
                                            // "b": a boolean, read as an int.
                                            if sd_bus_message_read_basic(message, CChar(UInt8(ascii: "b")), &going) >= 0, going != 0 {
                                                Unmanaged<SystemBusWatcher>.fromOpaque(context).takeUnretainedValue().lockNow("sleep")
                                            }
                                            return 0
                                        }, context)
        let sessionPath = getenv("XDG_SESSION_ID").map { "/org/freedesktop/login1/session/" + Self.escape(String(cString: $0)) }
        let lock = sd_bus_match_signal(connection, nil, nil, sessionPath, "org.freedesktop.login1.Session", "Lock",
                                       { _, context, _ in
                                           guard let context else { return 0 }
                                           Unmanaged<SystemBusWatcher>.fromOpaque(context).takeUnretainedValue().lockNow("session lock")
                                           return 0
                                       }, context)
        guard sleep >= 0, lock >= 0 else {
            complain("keychaind: cannot subscribe to logind's signals: keychains are not locked on sleep or session lock")
            return false
        }
        let watcher = self
        DetachedThread { watcher.run() }.start()
        return true
    }

    private func run() {
        guard let bus else { return }
        while stopRequested == 0 {
            let processed = sd_bus_process(bus, nil)
            if processed > 0 { continue }
            if processed < 0 { break }
            _ = sd_bus_wait(bus, 500_000)
        }
    }

    /// sd-bus's object-path escaping of a session id ("1" → "_31").
    static func escape(_ text: String) -> String {
        var escaped = ""
        for byte in text.utf8 {
            let c = Character(UnicodeScalar(byte))
            if (byte >= 0x30 && byte <= 0x39 && !escaped.isEmpty) || (byte >= 0x41 && byte <= 0x5a) || (byte >= 0x61 && byte <= 0x7a) {
                escaped.append(c)
            } else {
                escaped += "_" + String(byte, radix: 16, uppercase: false).leftPadded(2)
            }
        }
        return escaped
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
