import CSystemd
import Glibc

/// Reading sd-bus messages with its non-variadic calls (Swift cannot call the variadic ones;
/// BusWriter appends the same way). Every reader returns nil on a malformed message; sd-bus has already checked
/// the signature against the vtable, so nil means damage, answered as InvalidArgs.
public struct BusReader {
    public let message: OpaquePointer

    public init(message: OpaquePointer) { self.message = message }

    private static func code(_ character: Character) -> CChar { CChar(bitPattern: character.asciiValue ?? 0) }

    public func string(_ type: Character = "s") -> String? {
        var pointer: UnsafePointer<CChar>?
        guard sd_bus_message_read_basic(message, Self.code(type), &pointer) > 0, let pointer else { return nil }
        return String(cString: pointer)
    }

    public func bool() -> Bool? {
        var value: Int32 = 0
        guard sd_bus_message_read_basic(message, Self.code("b"), &value) > 0 else { return nil }
        return value != 0
    }

    public func bytes() -> [UInt8]? {
        var pointer: UnsafeRawPointer?
        var size = 0
        guard sd_bus_message_read_array(message, Self.code("y"), &pointer, &size) >= 0 else { return nil }
        guard let pointer, size > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: size))
    }

    public func enter(_ type: Character, _ contents: String) -> Bool? {
        let r = sd_bus_message_enter_container(message, Self.code(type), contents)
        return r < 0 ? nil : r > 0
    }

    public func exit() -> Bool { sd_bus_message_exit_container(message) >= 0 }

    /// ao
    public func objectPaths() -> [String]? {
        guard enter("a", "o") == true else { return nil }
        var paths: [String] = []
        while true {
            var pointer: UnsafePointer<CChar>?
            let r = sd_bus_message_read_basic(message, Self.code("o"), &pointer)
            if r < 0 { return nil }
            if r == 0 { break }
            if let pointer { paths.append(String(cString: pointer)) }
        }
        return exit() ? paths : nil
    }

    /// a{ss}
    public func stringDictionary() -> [String: String]? {
        guard enter("a", "{ss}") == true else { return nil }
        var dictionary: [String: String] = [:]
        while true {
            guard let entered = enter("e", "ss") else { return nil }
            if !entered { break }
            guard let key = string(), let value = string(), exit() else { return nil }
            dictionary[key] = value
        }
        return exit() ? dictionary : nil
    }

    /// A property dictionary (a{sv}) of which the Secret Service reads strings and a{ss}
    /// values; other values are skipped.
    public enum Value { case string(String), dictionary([String: String]) }

    public func properties() -> [String: Value]? {
        guard enter("a", "{sv}") == true else { return nil }
        var properties: [String: Value] = [:]
        while true {
            guard let entered = enter("e", "sv") else { return nil }
            if !entered { break }
            guard let key = string() else { return nil }
            var type: CChar = 0
            var contents: UnsafePointer<CChar>?
            guard sd_bus_message_peek_type(message, &type, &contents) >= 0, let contents else { return nil }
            let signature = String(cString: contents)
            if signature == "s" || signature == "a{ss}" {
                guard enter("v", signature) == true else { return nil }
                if signature == "s" {
                    guard let value = string() else { return nil }
                    properties[key] = .string(value)
                } else {
                    guard let value = stringDictionary() else { return nil }
                    properties[key] = .dictionary(value)
                }
                guard exit() else { return nil }
            } else if sd_bus_message_skip(message, "v") < 0 {
                return nil
            }
            guard exit() else { return nil }
        }
        return exit() ? properties : nil
    }

    /// The Secret struct (oayays): session, parameters, value, content type.
    public func secret() -> (session: String, parameters: [UInt8], value: [UInt8], contentType: String)? {
        guard enter("r", "oayays") == true, let session = string("o"), let parameters = bytes(), let value = bytes(),
              let contentType = string(), exit() else { return nil }
        return (session, parameters, value, contentType)
    }

    /// The signature inside a variant about to be read.
    public func variantSignature() -> String? {
        var type: CChar = 0
        var contents: UnsafePointer<CChar>?
        guard sd_bus_message_peek_type(message, &type, &contents) >= 0, type == Self.code("v"), let contents else { return nil }
        return String(cString: contents)
    }
}
