import BusSupport
import CSystemd
import Glibc

/// An error reply a call received: its D-Bus error name and message.
struct CallFailure: Error, CustomStringConvertible {
    let name: String
    let message: String
    var description: String { "\(name): \(message)" }
}

/// A reply, read in order; unreferenced in `deinit`. Read through its own methods (each keeps
/// the reply alive while it reads: a BusReader taken out of it would outlive the message).
final class Reply {
    private let message: OpaquePointer
    private let reader: BusReader

    init(_ message: OpaquePointer) {
        self.message = message
        reader = BusReader(message: message)
    }

    deinit { sd_bus_message_unref(message) }

    func string(_ type: Character = "s") -> String? { reader.string(type) }
    func bool() -> Bool? { reader.bool() }
    func enter(_ type: Character, _ contents: String) -> Bool? { reader.enter(type, contents) }
    func exit() -> Bool { reader.exit() }
    func objectPaths() -> [String]? { reader.objectPaths() }
    func stringDictionary() -> [String: String]? { reader.stringDictionary() }
    func secret() -> (session: String, parameters: [UInt8], value: [UInt8], contentType: String)? { reader.secret() }
}

/// A client of the Secret Service on the session bus (DBUS_SESSION_BUS_ADDRESS), calling it as
/// libsecret does.
final class BusClient {
    static let service = "org.freedesktop.secrets"
    private let bus: OpaquePointer

    init() throws {
        var connection: OpaquePointer?
        let opened = sd_bus_open_user(&connection)
        guard opened >= 0, let connection else { throw CallFailure(name: "sd_bus_open_user", message: String(cString: strerror(-opened))) }
        bus = connection
    }

    deinit { sd_bus_flush_close_unref(bus) }

    /// Calls `member` of `interface` on the object at `path` with the arguments `fill` appends;
    /// throws the error reply.
    @discardableResult
    func call(_ path: String, _ interface: String, _ member: String, _ fill: (inout BusWriter) -> Void = { _ in }) throws(CallFailure) -> Reply {
        var call: OpaquePointer?
        guard sd_bus_message_new_method_call(bus, &call, Self.service, path, interface, member) >= 0, let call else {
            throw CallFailure(name: "sd_bus_message_new_method_call", message: path)
        }
        defer { sd_bus_message_unref(call) }
        var writer = BusWriter(message: call)
        fill(&writer)
        guard !writer.failed else { throw CallFailure(name: "BusWriter", message: "cannot append the arguments") }
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let called = sd_bus_call(bus, call, 10_000_000, &error, &reply)
        guard called >= 0, let reply else {
            throw CallFailure(name: error.name.map { String(cString: $0) } ?? "errno \(-called)",
                              message: error.message.map { String(cString: $0) } ?? String(cString: strerror(-called)))
        }
        return Reply(reply)
    }

    /// The error name a call answers; nil when it succeeds.
    func errorName(_ path: String, _ interface: String, _ member: String, _ fill: (inout BusWriter) -> Void = { _ in }) -> String? {
        do {
            try call(path, interface, member, fill)
            return nil
        } catch {
            return error.name
        }
    }

    // MARK: properties

    /// org.freedesktop.DBus.Properties.Get: the reply, its reader inside the variant.
    func property(_ path: String, _ interface: String, _ name: String, signature: String) throws(CallFailure) -> Reply {
        let reply = try call(path, "org.freedesktop.DBus.Properties", "Get") {
            $0.string(interface)
            $0.string(name)
        }
        guard reply.enter("v", signature) == true else { throw CallFailure(name: "Get", message: "\(name) is not a \(signature)") }
        return reply
    }

    func setProperty(_ path: String, _ interface: String, _ name: String, signature: String, _ fill: @escaping (inout BusWriter) -> Void) throws(CallFailure) {
        try call(path, "org.freedesktop.DBus.Properties", "Set") {
            $0.string(interface)
            $0.string(name)
            $0.open("v", signature)
            fill(&$0)
            $0.close()
        }
    }

    // MARK: introspection

    func introspect(_ path: String) throws(CallFailure) -> String {
        let reply = try call(path, "org.freedesktop.DBus.Introspectable", "Introspect")
        guard let xml = reply.string() else { throw CallFailure(name: "Introspect", message: "no XML") }
        return xml
    }
}
