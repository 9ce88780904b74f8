import CSystemd

/// Appending to an sd-bus message (a reply, a signal, or a property value).
public struct BusWriter {
    public let message: OpaquePointer
    public private(set) var failed = false

    public init(message: OpaquePointer) { self.message = message }

    private static func code(_ character: Character) -> CChar { CChar(bitPattern: character.asciiValue ?? 0) }

    mutating func check(_ r: Int32) { if r < 0 { failed = true } }

    public mutating func string(_ text: String, type: Character = "s") {
        let r = text.withCString { sd_bus_message_append_basic(message, Self.code(type), $0) }
        check(r)
    }

    public mutating func bool(_ value: Bool) {
        var raw: Int32 = value ? 1 : 0
        check(sd_bus_message_append_basic(message, Self.code("b"), &raw))
    }

    public mutating func uint64(_ value: UInt64) {
        var raw = value
        check(sd_bus_message_append_basic(message, Self.code("t"), &raw))
    }

    public mutating func bytes(_ bytes: [UInt8]) {
        let r = bytes.withUnsafeBytes { sd_bus_message_append_array(message, Self.code("y"), $0.baseAddress, $0.count) }
        check(r)
    }

    public mutating func open(_ type: Character, _ contents: String) { check(sd_bus_message_open_container(message, Self.code(type), contents)) }
    public mutating func close() { check(sd_bus_message_close_container(message)) }

    public mutating func objectPaths(_ paths: [String]) {
        open("a", "o")
        for path in paths { string(path, type: "o") }
        close()
    }

    public mutating func stringDictionary(_ dictionary: [String: String]) {
        open("a", "{ss}")
        for (key, value) in dictionary.sorted(by: { $0.key < $1.key }) {
            open("e", "ss")
            string(key)
            string(value)
            close()
        }
        close()
    }

    /// The Secret struct (oayays).
    public mutating func secret(session: String, parameters: [UInt8], value: [UInt8], contentType: String) {
        open("r", "oayays")
        string(session, type: "o")
        bytes(parameters)
        bytes(value)
        string(contentType)
        close()
    }
}
