/// Stored text (a label, a file name) as a terminal, a log or a prompt question may show it:
/// control characters (C0, DEL, C1) and the bidirectional overrides become \u{…} escapes, so a
/// label cannot move the cursor, change colours or hide text. keychainctl and keychaind use it.
public func printable(_ text: String) -> String {
    var out = ""
    for scalar in text.unicodeScalars {
        let value = scalar.value
        if value < 0x20 || (0x7F...0x9F).contains(value) || (0x202A...0x202E).contains(value) || (0x2066...0x2069).contains(value) {
            out += "\\u{" + String(value, radix: 16) + "}"
        } else {
            out.unicodeScalars.append(scalar)
        }
    }
    return out
}
