internal import BusSupport
internal import CSystemd
import Glibc
import KeychainCrypto

// The sd-bus objects the server makes, each with one owner that frees it: the connection, the
// slots of what is registered on it, and the messages it sends.

/// A negative errno from an sd-bus call.
struct BusCallFailure: Error {
    let code: Int32

    init(_ code: Int32) { self.code = code }

    var reason: String { String(cString: strerror(-code)) }
}

/// The server's connection to the session bus: opened in `init`, flushed, closed and freed in
/// `deinit`. sd-bus objects are not thread-safe: once the server runs, only its thread uses this.
final class BusConnection {
    let bus: OpaquePointer

    /// The user's session bus (DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus).
    init() throws(BusCallFailure) {
        var connection: OpaquePointer?
        let opened = sd_bus_open_user(&connection)
        guard opened >= 0, let connection else { throw BusCallFailure(opened) }
        bus = connection
    }

    deinit { sd_bus_flush_close_unref(bus) }

    // MARK: the name

    /// Asks for `name` with no queueing and no replacement: another owner (gnome-keyring,
    /// KeePassXC, another keychaind) keeps it, and this answers -EEXIST.
    func requestName(_ name: String) -> Int32 { sd_bus_request_name(bus, name, 0) }

    func releaseName(_ name: String) { _ = sd_bus_release_name(bus, name) }

    /// " (PID n, program)" of the owner of `name`, or "" when the bus does not say.
    func ownerDescription(_ name: String) -> String {
        guard let owner = busNameOwner(bus, name) else { return "" }
        return " (" + (owner.pid.map { "PID \($0)" } ?? "") + (owner.exe.map { ", \($0)" } ?? "") + ")"
    }

    // MARK: the loop

    /// Handles one waiting message: > 0 when it did, 0 when nothing waits, < 0 when the
    /// connection has ended.
    func process() -> Int32 { sd_bus_process(bus, nil) }

    /// Waits until the bus has work, `fd` is readable, or `milliseconds` pass (less when sd-bus
    /// has a deadline of its own). Returns whether `fd` is readable.
    func wait(orReadable fd: Int32, atMost milliseconds: Int32) -> Bool {
        var fds = [pollfd(fd: sd_bus_get_fd(bus), events: Int16(truncatingIfNeeded: sd_bus_get_events(bus)), revents: 0),
                   pollfd(fd: fd, events: Int16(POLLIN), revents: 0)]
        var deadline: UInt64 = 0
        var wait = milliseconds
        if sd_bus_get_timeout(bus, &deadline) >= 0, deadline != UInt64.max {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let nowMicros = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
            wait = deadline <= nowMicros ? 0 : Int32(min(UInt64(wait), (deadline - nowMicros + 999) / 1000))
        }
        _ = try? System.poll(&fds, timeout: wait)
        return fds[1].revents != 0
    }

    // MARK: signals

    /// Sends the signal `member` of `interface` from `path` with what `fill` appends (nothing is
    /// sent when appending failed).
    func signal(_ path: String, _ interface: String, _ member: String, _ fill: (inout BusWriter) -> Void) {
        guard var signal = OutgoingMessage(signalOn: bus, path: path, interface: interface, member: member) else { return }
        fill(&signal.writer)
        if !signal.writer.failed { _ = signal.send() }
    }

    /// org.freedesktop.DBus.Properties.PropertiesChanged for `names` (sd-bus reads their values).
    func propertiesChanged(_ path: String, _ interface: String, _ names: [String]) {
        var pointers: [UnsafeMutablePointer<CChar>?] = names.map { strdup($0) }
        defer { pointers.forEach { free($0) } }
        pointers.append(nil)
        _ = pointers.withUnsafeMutableBufferPointer { sd_bus_emit_properties_changed_strv(bus, path, interface, $0.baseAddress) }
    }

    /// Calls `handler` with `userdata` for each signal `member` of `interface` from `sender`'s
    /// `path`, until the slot returned is released; nil when sd-bus refuses the match.
    func matchSignal(sender: String, path: String, interface: String, member: String,
                     handler: sd_bus_message_handler_t, userdata: UnsafeMutableRawPointer) -> BusSlot? {
        var slot: OpaquePointer?
        guard sd_bus_match_signal(bus, &slot, sender, path, interface, member, handler, userdata) >= 0, let slot else { return nil }
        return BusSlot(slot, on: self)
    }
}

/// A registration on the connection (an object table, a fallback, a match): sd-bus calls its
/// handler until this is released, and `deinit` unregisters it.
final class BusSlot {
    private let slot: OpaquePointer
    /// sd-bus's slot holds a reference on its bus; this keeps the bus's Swift owner as long.
    private let connection: BusConnection

    init(_ slot: OpaquePointer, on connection: BusConnection) {
        self.slot = slot
        self.connection = connection
    }

    deinit { sd_bus_slot_unref(slot) }
}

/// A message made here (a method return or a signal), unreferenced when it goes out of scope.
struct OutgoingMessage: ~Copyable {
    var writer: BusWriter

    /// The method return of `call`; nil when sd-bus has no memory for it.
    init?(replyTo call: OpaquePointer) {
        var message: OpaquePointer?
        guard sd_bus_message_new_method_return(call, &message) >= 0, let message else { return nil }
        writer = BusWriter(message: message)
    }

    init?(signalOn bus: OpaquePointer, path: String, interface: String, member: String) {
        var message: OpaquePointer?
        guard sd_bus_message_new_signal(bus, &message, path, interface, member) >= 0, let message else { return nil }
        writer = BusWriter(message: message)
    }

    deinit { sd_bus_message_unref(writer.message) }

    /// Sends it on its connection: sd-bus's result (>= 0, or a negative errno).
    func send() -> Int32 { sd_bus_send(nil, writer.message, nil) }
}
