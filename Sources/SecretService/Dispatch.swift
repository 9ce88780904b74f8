internal import BusSupport
internal import CSystemd
import Glibc

// The dispatch table: every method and property of the five interfaces, keyed by (interface,
// member), each with its D-Bus signature next to its handler. The interface files
// (ServiceInterface.swift …) declare the rows; CSecretService's C tables declare the same
// signatures for sd-bus, and SecretServiceTests checks over the bus that the two agree.

/// A method: its name, its in and out signatures, and its handler.
struct Method: Sendable {
    typealias Handler = @Sendable (SecretServiceServer, MethodCall) throws(BusError) -> Replied

    let name: String
    let takes: String
    let returns: String
    let handler: Handler

    init(_ name: String, takes: String, returns: String, _ handler: @escaping Handler) {
        self.name = name
        self.takes = takes
        self.returns = returns
        self.handler = handler
    }
}

/// A property: its name, its signature, its getter, and its setter when it is writable.
struct Property: Sendable {
    /// Appends the bare value of the property of the object at the path.
    typealias Getter = @Sendable (SecretServiceServer, _ path: String, inout BusWriter) throws(BusError) -> Void
    /// Reads the bare new value and applies it to the object at the path.
    typealias Setter = @Sendable (SecretServiceServer, _ path: String, BusReader) throws(BusError) -> Void

    let name: String
    let signature: String
    let get: Getter
    let set: Setter?

    init(_ name: String, _ signature: String, get: @escaping Getter, set: Setter? = nil) {
        self.name = name
        self.signature = signature
        self.get = get
        self.set = set
    }
}

/// A signal an interface emits (sent with `SecretServiceServer.emit`), declared for the check
/// against the C tables.
struct Signal: Sendable {
    let name: String
    let carries: String

    init(_ name: String, carries: String) {
        self.name = name
        self.carries = carries
    }
}

/// One D-Bus interface: its members, and whether an object with it lives at a path (sd-bus asks
/// before every call below a prefix; nil for the service object, which is always there).
struct Interface: Sendable {
    typealias Finder = @Sendable (SecretServiceServer, _ path: String) -> Bool

    let name: String
    let methods: [Method]
    let properties: [Property]
    let signals: [Signal]
    let finds: Finder?
}

struct DispatchTable: Sendable {
    struct Key: Hashable {
        let interface: String
        let member: String
    }

    let interfaces: [Interface]
    private let methods: [Key: Method]
    private let properties: [Key: Property]
    private let finders: [String: Interface.Finder]

    init(_ interfaces: [Interface]) {
        self.interfaces = interfaces
        var methods: [Key: Method] = [:]
        var properties: [Key: Property] = [:]
        var finders: [String: Interface.Finder] = [:]
        for interface in interfaces {
            for method in interface.methods { methods[Key(interface: interface.name, member: method.name)] = method }
            for property in interface.properties { properties[Key(interface: interface.name, member: property.name)] = property }
            finders[interface.name] = interface.finds
        }
        self.methods = methods
        self.properties = properties
        self.finders = finders
    }

    /// The Secret Service's five interfaces, and keychaind's own beside them.
    static let secretService = DispatchTable([ServiceInterface.table, CollectionInterface.table, ItemInterface.table,
                                              SessionInterface.table, PromptInterface.table, DaemonInterface.table])

    func method(_ interface: String, _ member: String) -> Method? { methods[Key(interface: interface, member: member)] }
    func property(_ interface: String, _ name: String) -> Property? { properties[Key(interface: interface, member: name)] }
    func finder(_ interface: String) -> Interface.Finder? { finders[interface] }
}

/// A method call being answered.
struct MethodCall {
    let message: OpaquePointer
    /// The object called.
    let path: String
    /// The caller's unique bus name: sessions and prompts belong to it.
    let sender: String
    /// The arguments, read in their order.
    let arguments: BusReader

    /// Sends the method return with what `fill` appends; a `fill` that throws sends nothing and
    /// its error is the reply.
    func reply<E: Error>(_ fill: (inout BusWriter) throws(E) -> Void) throws(E) -> Replied {
        guard var reply = OutgoingMessage(replyTo: message) else { return Replied(-ENOMEM) }
        try fill(&reply.writer)
        guard !reply.writer.failed else { return Replied(-EINVAL) }
        let sent = reply.send()
        return Replied(sent < 0 ? sent : 1)
    }

    /// An empty method return.
    func reply() -> Replied { reply { _ in } }
}

/// What a method handler returns: its reply went out (sd-bus's result, > 0), or a negative errno.
/// Only `MethodCall.reply` makes one, so every handler replies or throws.
struct Replied {
    let code: Int32

    fileprivate init(_ code: Int32) { self.code = code }
}

// MARK: the C tables' four entry points (BusCallbacks.swift), through the table

extension SecretServiceServer {
    var table: DispatchTable { DispatchTable.secretService }

    func call(_ message: OpaquePointer, path: String, interface: String, member: String) throws(BusError) -> Replied {
        guard let method = table.method(interface, member) else { throw .unknownMethod(interface, member) }
        let sender = sd_bus_message_get_sender(message).map { String(cString: $0) } ?? ""
        return try method.handler(self, MethodCall(message: message, path: path, sender: sender, arguments: BusReader(message: message)))
    }

    func get(path: String, interface: String, property: String, writer: inout BusWriter) throws(BusError) {
        guard let property = table.property(interface, property) else { throw .noSuchObject }
        try property.get(self, path, &writer)
    }

    func set(path: String, interface: String, property name: String, reader: BusReader) throws(BusError) {
        guard let setter = table.property(interface, name)?.set else { throw .readOnly(name) }
        try setter(self, path, reader)
    }

    func exists(path: String, interface: String) -> Bool {
        table.finder(interface)?(self, path) ?? false
    }
}
