import CPKCS11
import KeychainCore
import KeychainCrypto

/// PKCS#11 current mechanisms, "Miscellaneous simple key derivation mechanisms": a new secret key made
/// of other keys' values — CKM_CONCATENATE_BASE_AND_KEY, _BASE_AND_DATA, _DATA_AND_BASE,
/// CKM_XOR_BASE_AND_DATA and CKM_EXTRACT_KEY_FROM_KEY.
///
/// The specification's rules: a sensitive source makes a sensitive key, an unextractable source
/// an unextractable one; the length comes from CKA_VALUE_LEN or the key type (else, for the
/// concatenations, the whole result as a generic secret).
///
/// Beyond them, because these mechanisms are the classic way to read a sensitive key a few bits
/// at a time (take one byte of it into a new key, then try the 256 values against a MAC of that
/// key): from a sensitive key, XOR_BASE_AND_DATA and EXTRACT_KEY_FROM_KEY are refused
/// (CKR_KEY_FUNCTION_NOT_PERMITTED), and a concatenation must keep every byte of each sensitive
/// source (CKR_TEMPLATE_INCONSISTENT for a CKA_VALUE_LEN that would cut one). Keys that are not
/// sensitive can be read anyway, so nothing more is asked of them.
extension ModuleState {
    /// The new key's value and its template (the caller's, with the sources' sensitivity and
    /// extractability and the base key's CKA_DERIVE_TEMPLATE), and the attributes whose history
    /// flags (CKA_ALWAYS_SENSITIVE, CKA_NEVER_EXTRACTABLE) the new key inherits.
    func simpleDerivation(_ kind: SimpleDerivation, parameter: MechanismParameter, baseKey: CK_OBJECT_HANDLE, base: ObjectAttributes,
                          template: Template, session: Session, token: Token,
                          mechanism: Mechanism) throws(CKError) -> (value: SecureBytes, template: Template, history: ObjectAttributes) {
        let baseValue = try secretKey(baseKey, session: session, token: token, usage: .derive, mechanism: mechanism)
        var sources = [base]
        // The output before CKA_VALUE_LEN cuts it, as pieces: (bytes, from a sensitive key).
        var pieces: [(bytes: SecureBytes, sensitive: Bool)] = []
        switch kind {
        case .baseAndKey:
            guard case .keyHandle(let otherKey) = parameter else { throw Mechanisms.paramInvalid("CKM_CONCATENATE_BASE_AND_KEY takes the other key's handle") }
            let other = try keyAttributes(otherKey, session: session, token: token)
            let otherValue = try secretKey(otherKey, session: session, token: token, usage: .derive, mechanism: mechanism)
            sources.append(other)
            pieces = [(baseValue, base.bool(.sensitive)), (otherValue, other.bool(.sensitive))]
        case .baseAndData, .dataAndBase:
            guard case .derivationData(_, let data) = parameter else { throw Mechanisms.paramInvalid("this derivation takes CK_KEY_DERIVATION_STRING_DATA") }
            pieces = kind == .baseAndData ? [(baseValue, base.bool(.sensitive)), (data, false)] : [(data, false), (baseValue, base.bool(.sensitive))]
        case .xorBaseAndData:
            guard case .derivationData(_, let data) = parameter else { throw Mechanisms.paramInvalid("CKM_XOR_BASE_AND_DATA takes CK_KEY_DERIVATION_STRING_DATA") }
            try refuseSensitive(base, "CKM_XOR_BASE_AND_DATA")
            // As long as the shorter of the two (the mechanism's text).
            let length = min(baseValue.count, data.count)
            let mixed = SecureBytes(count: length)
            baseValue.withUnsafeBytes { key in
                data.withUnsafeBytes { bytes in
                    mixed.withUnsafeMutableBytes { out in for i in 0..<length { out[i] = key[i] ^ bytes[i] } }
                }
            }
            pieces = [(mixed, false)]
        case .extractKeyFromKey:
            guard case .bitIndex(let first) = parameter else { throw Mechanisms.paramInvalid("CKM_EXTRACT_KEY_FROM_KEY takes CK_EXTRACT_PARAMS") }
            try refuseSensitive(base, "CKM_EXTRACT_KEY_FROM_KEY")
            let bits = baseValue.count * 8
            guard bits > 0, first < CK_ULONG(bits) else { throw Mechanisms.paramInvalid("bit \(first) is past the base key's \(bits) bits") }
            guard let length = Self.templateLength(template) else {
                throw CKError(CK_RV(CKR_TEMPLATE_INCOMPLETE), "CKM_EXTRACT_KEY_FROM_KEY needs CKA_VALUE_LEN or a key type of one length")
            }
            guard length >= 1, length <= baseValue.count else {
                throw CKError(CK_RV(CKR_KEY_SIZE_RANGE), "a \(length)-byte key cannot come from a \(baseValue.count)-byte key")
            }
            // Bits b0 … b(n-1), b0 the first byte's high bit; the new key's bits run from b(first),
            // wrapping around the end (the specification's example: 0x329F84A9 from bit 21, 2 bytes: 0x9526).
            let taken = SecureBytes(count: length)
            baseValue.withUnsafeBytes { key in
                taken.withUnsafeMutableBytes { out in
                    for i in 0..<(length * 8) {
                        let bit = (Int(first) + i) % bits
                        if key[bit / 8] & (0x80 >> UInt8(bit % 8)) != 0 { out[i / 8] |= 0x80 >> UInt8(i % 8) }
                    }
                }
            }
            pieces = [(taken, false)]
        }
        let value = SecureBytes(count: pieces.reduce(0) { $0 + $1.bytes.count })
        var offset = 0
        var sensitiveEnd = 0
        for piece in pieces {
            piece.bytes.withUnsafeBytes { source in
                value.withUnsafeMutableBytes { out in UnsafeMutableRawBufferPointer(rebasing: out[offset..<(offset + source.count)]).copyMemory(from: source) }
            }
            offset += piece.bytes.count
            if piece.sensitive { sensitiveEnd = offset }
        }
        if sensitiveEnd > 0, let length = Self.templateLength(template), length < sensitiveEnd {
            throw CKError(CK_RV(CKR_TEMPLATE_INCONSISTENT), "a key made from a sensitive key keeps all of its bytes: CKA_VALUE_LEN must be at least \(sensitiveEnd)")
        }
        let full = try Self.mergedDeriveTemplate(try Self.inheritedFlags(template, from: sources), base: base)
        var history = base
        history[.alwaysSensitive] = AttributeValue.bool(sources.allSatisfy { $0.bool(.alwaysSensitive) })
        history[.neverExtractable] = AttributeValue.bool(sources.allSatisfy { $0.bool(.neverExtractable) })
        return (value, full, history)
    }

    private func refuseSensitive(_ base: ObjectAttributes, _ name: String) throws(CKError) {
        guard !base.bool(.sensitive) else {
            throw CKError(CK_RV(CKR_KEY_FUNCTION_NOT_PERMITTED), "\(name) would let a sensitive key be guessed a few bits at a time: refused for sensitive keys")
        }
    }

    /// The specification: a sensitive source makes a sensitive key (a template asking CKA_SENSITIVE FALSE is
    /// refused), an unextractable source an unextractable one.
    private static func inheritedFlags(_ template: Template, from sources: [ObjectAttributes]) throws(CKError) -> Template {
        var result = template
        if sources.contains(where: { $0.bool(.sensitive) }) {
            if template.contains(where: { $0.type == .sensitive && AttributeValue.decodeBool($0.value) == false }) {
                throw CKError(CK_RV(CKR_TEMPLATE_INCONSISTENT), "a key made from a sensitive key is sensitive")
            }
            result = result.filter { $0.type != .sensitive } + [(.sensitive, AttributeValue.bool(true))]
        }
        if sources.contains(where: { !$0.bool(.extractable) }) {
            result = result.filter { $0.type != .extractable } + [(.extractable, AttributeValue.bool(false))]
        }
        return result
    }
}
