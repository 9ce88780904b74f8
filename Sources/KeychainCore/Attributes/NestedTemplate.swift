import KeychainStore

/// The value of an attribute-array attribute (CKA_WRAP_TEMPLATE, CKA_UNWRAP_TEMPLATE,
/// CKA_DERIVE_TEMPLATE): a template, stored in the record encoding, sorted by type so that equal
/// templates have equal bytes. Nested templates may not nest further.
public enum NestedTemplate {
    public static func encode(_ template: Template) -> [UInt8] {
        AttributeRecord.encode(template.sorted { $0.type < $1.type }.map { (UInt64($0.type.rawValue), $0.value) })
    }

    /// The template, or nil when `bytes` is not one (or holds a nested template).
    public static func decode(_ bytes: [UInt8]) -> Template? {
        guard let entries = try? bytes.withUnsafeBytes({ try AttributeRecord.decode($0) }) else { return nil }
        let template: Template = entries.map { (AttributeType(UInt(truncatingIfNeeded: $0.type)), $0.value) }
        guard !template.contains(where: { $0.type.isTemplate }) else { return nil }
        return template
    }

    /// Whether `object` has every attribute of the template stored under `type`, with equal
    /// values (an empty template matches everything).
    public static func object(_ object: ObjectAttributes, matches type: AttributeType, of holder: ObjectAttributes) -> Bool {
        guard let bytes = holder[type], let template = decode(bytes) else { return true }
        return object.matches(template)
    }

    /// Merges a key's template into a caller's: attributes only the key's template names are
    /// added; an attribute both name with different values is CKR_TEMPLATE_INCONSISTENT.
    public static func merge(_ caller: Template, with type: AttributeType, of holder: ObjectAttributes) throws(KeychainError) -> Template {
        guard let bytes = holder[type], let required = decode(bytes) else { return caller }
        var merged = caller
        for (attribute, value) in required {
            if let given = caller.first(where: { $0.type == attribute }) {
                guard given.value == value else { throw KeychainError(.templateInconsistent, "the template conflicts with the key's \(type)") }
            } else {
                merged.append((attribute, value))
            }
        }
        return merged
    }
}
