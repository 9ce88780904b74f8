import Foundation

/// The string behind each of Apple's constants here (`kSecClass`, `kSecAttrAccount`,
/// `kCFErrorLocalizedDescriptionKey`, …): an NSString that hashes, as `AnyHashable`, like the Swift
/// `String` it holds. On Apple platforms a CFString bridges to String, so
/// `attributes[kSecAttrAccount]` finds `"acct"` in an `[AnyHashable: Any]` returned by
/// SecItemCopyMatching and `NSDictionary.isEqual(to:)` compares such constants as strings; Linux's
/// NSString is its own `AnyHashable`, unequal to the String, and both would fail.
final class ConstantString: NSString {
    private let value: String
    private let units: [unichar]

    init(_ value: String) {
        self.value = value
        let units = Array(value.utf16)
        self.units = units
        // NSString's designated initialiser that Linux Foundation exports for subclasses.
        super.init(characters: units, length: units.count)
    }

    required convenience init(string aString: String) { self.init(aString) }
    required convenience init(stringLiteral value: StaticString) { self.init("\(value)") }
    required convenience init(unicodeScalarLiteral value: StaticString) { self.init("\(value)") }
    required convenience init(extendedGraphemeClusterLiteral value: StaticString) { self.init("\(value)") }
    required init?(coder: NSCoder) { return nil }

    override var length: Int { units.count }
    override func character(at index: Int) -> unichar { units[index] }
}

extension ConstantString: _HasCustomAnyHashableRepresentation {
    func _toCustomAnyHashable() -> AnyHashable? { AnyHashable(value) }
}
