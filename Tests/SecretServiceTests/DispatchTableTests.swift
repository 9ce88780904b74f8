import XCTest
@testable import SecretService

/// The members of one interface as an object's introspection XML declares them (sd-bus writes
/// it from CSecretService's C tables).
struct IntrospectedInterface: Equatable {
    var methods: [String: String] = [:]
    var properties: [String: String] = [:]
    var signals: [String: String] = [:]

    /// Methods as "in -> out", properties as "signature read|readwrite", signals by signature.
    init(xml: String, interface wanted: String) {
        var inside = false
        var member: (kind: String, name: String)?
        var ins = "", outs = ""
        for chunk in xml.split(separator: "<").dropFirst() {
            guard let end = chunk.firstIndex(of: ">") else { continue }
            let tag = chunk[..<end]
            let element = tag.prefix { $0 != " " && $0 != "/" && $0 != ">" }
            let attributes = Self.attributes(of: tag)
            if tag.hasPrefix("/") {
                switch tag.dropFirst() {
                case "interface": inside = false
                case "method", "signal":
                    if inside, let (kind, name) = member {
                        if kind == "method" { methods[name] = ins + " -> " + outs } else { signals[name] = ins }
                    }
                    member = nil
                default: break
                }
                continue
            }
            switch element {
            case "interface": inside = attributes["name"] == wanted
            case "method", "signal":
                member = (String(element), attributes["name"] ?? "")
                ins = ""
                outs = ""
                if tag.hasSuffix("/"), inside, let (kind, name) = member {
                    if kind == "method" { methods[name] = " -> " } else { signals[name] = "" }
                    member = nil
                }
            case "arg":
                if attributes["direction"] == "out" { outs += attributes["type"] ?? "?" } else { ins += attributes["type"] ?? "?" }
            case "property":
                if inside, let name = attributes["name"] { properties[name] = (attributes["type"] ?? "?") + " " + (attributes["access"] ?? "?") }
            default: break
            }
        }
    }

    /// The table's declarations in the same form.
    init(_ interface: Interface) {
        for method in interface.methods { methods[method.name] = method.takes + " -> " + method.returns }
        for property in interface.properties { properties[property.name] = property.signature + (property.set == nil ? " read" : " readwrite") }
        for signal in interface.signals { signals[signal.name] = signal.carries }
    }

    /// name="value" pairs of a tag.
    private static func attributes(of tag: Substring) -> [String: String] {
        var found: [String: String] = [:]
        var rest = tag[...]
        while let equals = rest.firstIndex(of: "=") {
            let name = rest[..<equals].split(separator: " ").last.map(String.init) ?? ""
            let afterEquals = rest[rest.index(after: equals)...]
            guard afterEquals.first == "\"" else { break }
            let valueStart = afterEquals.index(after: afterEquals.startIndex)
            guard let valueEnd = afterEquals[valueStart...].firstIndex(of: "\"") else { break }
            found[name] = String(afterEquals[valueStart..<valueEnd])
            rest = afterEquals[afterEquals.index(after: valueEnd)...]
        }
        return found
    }
}

/// The Swift dispatch table and the C tables sd-bus serves declare the same methods, properties
/// and signals with the same signatures: each interface is introspected on a live object.
final class DispatchTableTests: SecretServiceTestCase {
    func test_the_swift_table_and_the_c_tables_declare_the_same_members() throws {
        let login = "/org/freedesktop/secrets/collection/login"
        let session = try client.call("/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "OpenSession") {
            $0.string("plain")
            $0.open("v", "s")
            $0.string("")
            $0.close()
        }
        XCTAssertEqual(session.enter("v", "s"), true)
        _ = session.string()
        XCTAssertTrue(session.exit())
        guard let sessionPath = session.string("o") else { throw TestFailure("no session") }
        let created = try client.call(login, "org.freedesktop.Secret.Collection", "CreateItem") {
            $0.open("a", "{sv}")
            $0.close()
            $0.secret(session: sessionPath, parameters: [], value: Array("x".utf8), contentType: "text/plain")
            $0.bool(false)
        }
        guard let itemPath = created.string("o") else { throw TestFailure("no item") }
        // Deleting a collection answers with a prompt (nothing happens until it is run).
        guard let promptPath = try client.call(login, "org.freedesktop.Secret.Collection", "Delete").string("o") else {
            throw TestFailure("no prompt")
        }
        let objects = ["org.freedesktop.Secret.Service": "/org/freedesktop/secrets", "org.freedesktop.Secret.Collection": login,
                       "org.freedesktop.Secret.Item": itemPath, "org.freedesktop.Secret.Session": sessionPath,
                       "org.freedesktop.Secret.Prompt": promptPath, "keychain_pkcs11.Daemon": "/org/freedesktop/secrets"]

        let interfaces = DispatchTable.secretService.interfaces
        XCTAssertEqual(Set(interfaces.map(\.name)), Set(objects.keys))
        for interface in interfaces {
            guard let path = objects[interface.name] else { continue }
            let served = IntrospectedInterface(xml: try client.introspect(path), interface: interface.name)
            let declared = IntrospectedInterface(interface)
            XCTAssertFalse(served.methods.isEmpty, "\(interface.name) is not served at \(path)")
            XCTAssertEqual(served.methods, declared.methods, "methods of \(interface.name)")
            XCTAssertEqual(served.properties, declared.properties, "properties of \(interface.name)")
            XCTAssertEqual(served.signals, declared.signals, "signals of \(interface.name)")
        }
    }

    func test_the_introspection_reader_reads_methods_properties_and_signals() {
        let xml = """
            <node><interface name="a.B">
             <method name="M"><arg type="a{sv}" direction="in"/><arg type="s" direction="in"/><arg type="o" direction="out"/></method>
             <method name="N"/>
             <signal name="S"><arg type="o"/></signal>
             <property name="P" type="b" access="read"><annotation name="x" value="y"/></property>
             <property name="W" type="a{ss}" access="readwrite"/>
            </interface><interface name="other"><method name="Q"/></interface></node>
            """
        let read = IntrospectedInterface(xml: xml, interface: "a.B")
        XCTAssertEqual(read.methods, ["M": "a{sv}s -> o", "N": " -> "])
        XCTAssertEqual(read.signals, ["S": "o"])
        XCTAssertEqual(read.properties, ["P": "b read", "W": "a{ss} readwrite"])
    }
}
