import BusSupport
import CSecretService
import CSystemd
import Glibc

// The C side (CSecretService's sd-bus object tables) reaches the service through these four
// callbacks and the one service this process runs.
extension SecretService {
    /// The service the callbacks serve (one per process), set when its objects are registered.
    nonisolated(unsafe) static var current: SecretService?

    /// Registers the objects with the callbacks below, and follows clients leaving the bus.
    /// Returns sd-bus's result: >= 0, or a negative errno.
    func registerObjects(on connection: OpaquePointer) -> Int32 {
        Self.current = self
        let registered = kc_secret_service_register(connection, secretServiceMethod, secretServiceGet, secretServiceSet, secretServiceFind)
        guard registered >= 0 else { return registered }
        // Sessions and prompts end with the connection that opened them.
        _ = sd_bus_match_signal(connection, nil, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "NameOwnerChanged",
                                { message, _, _ in
                                    guard let message else { return 0 }
                                    let reader = BusReader(message: message)
                                    if let name = reader.string(), reader.string() != nil, let newOwner = reader.string(), newOwner.isEmpty {
                                        SecretService.current?.forget(sender: name)
                                    }
                                    return 0
                                }, nil)
        return registered
    }
}

// MARK: C callbacks (sd-bus calls these on the service's thread)

private func failureCode(_ failure: SecretService.Failure, _ busError: UnsafeMutablePointer<sd_bus_error>?) -> Int32 {
    switch failure {
    case .error(let name, let message):
        let r = sd_bus_error_set(busError, name, message)
        return r < 0 ? r : -EINVAL
    }
}

private let secretServiceMethod: kc_ss_method_fn = { message, path, interface, member, busError in
    guard let service = SecretService.current, let message, let path, let interface, let member else { return -EINVAL }
    do {
        return try service.call(message, path: String(cString: path), interface: String(cString: interface), member: String(cString: member))
    } catch let failure as SecretService.Failure {
        return failureCode(failure, busError)
    } catch {
        return -EIO
    }
}

private let secretServiceGet: kc_ss_get_fn = { path, interface, property, reply, busError in
    guard let service = SecretService.current, let path, let interface, let property, let reply else { return -EINVAL }
    var writer = BusWriter(message: reply)
    do {
        try service.get(path: String(cString: path), interface: String(cString: interface), property: String(cString: property), writer: &writer)
    } catch let failure as SecretService.Failure {
        return failureCode(failure, busError)
    } catch {
        return -EIO
    }
    return writer.failed ? -EINVAL : 1
}

private let secretServiceSet: kc_ss_set_fn = { path, interface, property, value, busError in
    guard let service = SecretService.current, let path, let interface, let property, let value else { return -EINVAL }
    do {
        try service.set(path: String(cString: path), interface: String(cString: interface), property: String(cString: property),
                        reader: BusReader(message: value))
    } catch let failure as SecretService.Failure {
        return failureCode(failure, busError)
    } catch {
        return -EIO
    }
    return 1
}

private let secretServiceFind: kc_ss_find_fn = { path, interface in
    guard let service = SecretService.current, let path, let interface else { return 0 }
    return service.exists(path: String(cString: path), interface: String(cString: interface)) ? 1 : 0
}
