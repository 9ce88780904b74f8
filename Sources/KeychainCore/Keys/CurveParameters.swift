import KeychainCrypto

/// CKA_EC_PARAMS values: DER OBJECT IDENTIFIER of a named curve, or for Edwards and Montgomery
/// curves also the PrintableString names of PKCS#11 3.0 §6.3.5.
enum CurveParameters {
    static let oids: [(kind: AsymmetricKind, der: [UInt8], name: String?)] = Curve.allCases.map { (.ec($0), $0.oid, nil) } + [
        (.ed25519, [0x06, 0x03, 0x2B, 0x65, 0x70], "edwards25519"),
        (.ed448, [0x06, 0x03, 0x2B, 0x65, 0x71], "edwards448"),
        (.x25519, [0x06, 0x03, 0x2B, 0x65, 0x6E], "curve25519"),
        (.x448, [0x06, 0x03, 0x2B, 0x65, 0x6F], "curve448"),
    ]

    /// The key kind named by `params`, if it belongs to `keyType`.
    static func kind(_ params: [UInt8], keyType: KeyType) throws(KeychainError) -> AsymmetricKind {
        let printable = DER.content(of: params, tag: 0x13).map { String(decoding: $0, as: UTF8.self) }
        if keyType == .ec, let curve = Curve.matching(explicitParameters: params) { return .ec(curve) }
        guard let entry = oids.first(where: { $0.der == params || ($0.name != nil && $0.name == printable) }) else {
            throw KeychainError(.attributeValueInvalid, "CKA_EC_PARAMS names no supported curve")
        }
        let matchesType: Bool
        switch entry.kind {
        case .ec: matchesType = keyType == .ec
        case .ed25519, .ed448: matchesType = keyType == .ecEdwards
        case .x25519, .x448: matchesType = keyType == .ecMontgomery
        case .rsa, .dsa, .dh: matchesType = false
        }
        guard matchesType else { throw KeychainError(.templateInconsistent, "CKA_EC_PARAMS does not fit CKA_KEY_TYPE") }
        return entry.kind
    }

    static func der(for kind: AsymmetricKind) -> [UInt8] {
        oids.first { $0.kind == kind }?.der ?? []
    }
}
