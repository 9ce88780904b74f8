internal import BusSupport
internal import CSecretService
internal import CSystemd
import Glibc

/// Everything the server registers on its connection: the objects of CSecretService's tables,
/// which reach the server through `handlers` (its userdata is the server, unretained: the server
/// owns this registration), and the match that follows clients leaving the bus. Releasing it
/// unregisters them all.
final class ObjectRegistration {
    /// Given to sd-bus as the userdata of every table: it must outlive the slots.
    private let handlers: UnsafeMutablePointer<kc_ss_handlers>
    private var slots: [BusSlot] = []

    private init(server: SecretServiceServer) {
        handlers = .allocate(capacity: 1)
        handlers.initialize(to: kc_ss_handlers(method: callMethod, get: getProperty, set: setProperty, find: findObject,
                                               userdata: Unmanaged.passUnretained(server).toOpaque()))
    }

    deinit {
        // Unregistered first: after this sd-bus calls none of the handlers.
        slots.removeAll()
        handlers.deinitialize(count: 1)
        handlers.deallocate()
    }

    /// Registers the objects of `server` on `connection`; throws sd-bus's errno when it cannot
    /// (what was registered is unregistered again).
    static func register(_ server: SecretServiceServer, on connection: BusConnection) throws(BusCallFailure) -> ObjectRegistration {
        let registration = ObjectRegistration(server: server)
        var raw = [OpaquePointer?](repeating: nil, count: Int(KC_SS_SLOT_COUNT))
        let registered = raw.withUnsafeMutableBufferPointer { kc_secret_service_register(connection.bus, registration.handlers, $0.baseAddress) }
        registration.slots = raw.compactMap { $0.map { BusSlot($0, on: connection) } }
        guard registered >= 0 else { throw BusCallFailure(registered) }
        // Sessions and prompts end with the connection that opened them.
        if let match = connection.matchSignal(sender: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", interface: "org.freedesktop.DBus",
                                              member: "NameOwnerChanged", handler: nameOwnerChanged,
                                              userdata: Unmanaged.passUnretained(server).toOpaque()) {
            registration.slots.append(match)
        }
        return registration
    }
}

// MARK: C callbacks (sd-bus calls these on the server's thread, with the server as userdata)

private func server(_ userdata: UnsafeMutableRawPointer?) -> SecretServiceServer? {
    userdata.map { Unmanaged<SecretServiceServer>.fromOpaque($0).takeUnretainedValue() }
}

/// Sets the error reply of `error` and returns the negative errno sd-bus expects with it.
private func errorCode(_ error: BusError, _ busError: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
    let r = sd_bus_error_set(busError, error.name, error.reason)
    return r < 0 ? r : -EINVAL
}

private let callMethod: kc_ss_method_fn = { userdata, message, path, interface, member, busError in
    guard let server = server(userdata), let message, let path, let interface, let member else { return -EINVAL }
    do throws(BusError) {
        return try server.call(message, path: String(cString: path), interface: String(cString: interface), member: String(cString: member)).code
    } catch {
        return errorCode(error, busError)
    }
}

private let getProperty: kc_ss_get_fn = { userdata, path, interface, property, reply, busError in
    guard let server = server(userdata), let path, let interface, let property, let reply else { return -EINVAL }
    var writer = BusWriter(message: reply)
    do throws(BusError) {
        try server.get(path: String(cString: path), interface: String(cString: interface), property: String(cString: property), writer: &writer)
    } catch {
        return errorCode(error, busError)
    }
    return writer.failed ? -EINVAL : 1
}

private let setProperty: kc_ss_set_fn = { userdata, path, interface, property, value, busError in
    guard let server = server(userdata), let path, let interface, let property, let value else { return -EINVAL }
    do throws(BusError) {
        try server.set(path: String(cString: path), interface: String(cString: interface), property: String(cString: property),
                       reader: BusReader(message: value))
    } catch {
        return errorCode(error, busError)
    }
    return 1
}

private let findObject: kc_ss_find_fn = { userdata, path, interface in
    guard let server = server(userdata), let path, let interface else { return 0 }
    return server.exists(path: String(cString: path), interface: String(cString: interface)) ? 1 : 0
}

/// org.freedesktop.DBus.NameOwnerChanged(name, old owner, new owner): a client whose name has
/// no owner any more has left.
private let nameOwnerChanged: sd_bus_message_handler_t = { message, userdata, _ in
    guard let message, let server = server(userdata) else { return 0 }
    let reader = BusReader(message: message)
    if let name = reader.string(), reader.string() != nil, let newOwner = reader.string(), newOwner.isEmpty {
        server.forget(sender: name)
    }
    return 0
}
