import KeychainCrypto
@testable import KeychainCore

/// Data objects of each protection class, stored and found again: what the protection-class
/// tests (software device key) and the device-key TPM tests (sealed device key) both check.
enum ProtectionClassItems {
    /// A password-like data object labelled `label` of class `protection` (none: the default
    /// class), optionally with CKA_PRIVATE given.
    static func item(_ label: String, _ protection: ProtectionClass?, isPrivate: Bool? = nil) throws -> ObjectAttributes {
        var template: Template = [(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue)), (.token, [1]),
                                  (.label, Array(label.utf8)), (.value, Array("secret of \(label)".utf8))]
        if let protection { template.append((.accessible, AttributeValue.ulong(protection.rawValue))) }
        if let isPrivate { template.append((.isPrivate, [isPrivate ? 1 : 0])) }
        return try ObjectTemplate.create(template, uniqueID: Array(UUIDText.random().utf8), policy: .compatible)
    }

    /// One item of every class, each labelled with its class's name; their row ids.
    static func storeOneOfEach(_ keychain: Keychain, master: MasterKey) throws -> [ProtectionClass: Int64] {
        var ids: [ProtectionClass: Int64] = [:]
        for protection in ProtectionClass.allCases {
            ids[protection] = try keychain.add(try item("\(protection)", protection), uid: try Random.bytes(16), master: master)
        }
        return ids
    }

    /// Labels of the items a search for every data object returns (and each opens).
    static func labels(_ keychain: Keychain, master: MasterKey?) throws -> Set<String> {
        let found = try keychain.find([(.objectClass, AttributeValue.ulong(ObjectClass.data.rawValue))], master: master)
        return Set(try found.map { String(decoding: try keychain.object(id: $0.id, master: master)[.label] ?? [], as: UTF8.self) })
    }
}
