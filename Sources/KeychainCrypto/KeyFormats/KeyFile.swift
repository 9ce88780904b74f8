internal import COpenSSL

/// The kinds of key and certificate files `keychainctl import` reads and `export` writes.
public enum KeyFileFormat: String, Sendable {
    case certificatePEM, certificateDER, pkcs8, encryptedPKCS8, pkcs1, sec1, openSSH, pkcs12,
         publicKeyPEM, publicKeyDER, openSSHPublicKey
}

/// What one key or certificate file holds.
public struct KeyFileContents {
    public var format: KeyFileFormat
    /// The private key, when the file holds one.
    public var privateKey: AsymmetricKey?
    /// The key of a public-key-only file (SPKI PEM/DER, an OpenSSH public key line).
    public var publicKey: AsymmetricKey?
    /// DER certificates; for PKCS#12 the one matching the key first, then the chain.
    public var certificates: [[UInt8]]
    /// The PKCS#12 friendlyName of the key's certificate, or the OpenSSH comment.
    public var name: String?

    public init(format: KeyFileFormat, privateKey: AsymmetricKey? = nil, publicKey: AsymmetricKey? = nil, certificates: [[UInt8]] = [],
                name: String? = nil) {
        self.format = format
        self.privateKey = privateKey
        self.publicKey = publicKey
        self.certificates = certificates
        self.name = name
    }
}

/// Reads and writes the files keys and certificates travel in: PEM, DER, PKCS#12 and OpenSSH.
public enum KeyFile {
    /// Why a decode failed, for the CLI's messages and exit codes.
    public enum Failure: Error, Equatable {
        case passphraseRequired, passphraseIncorrect, unsupported(String), malformed(String)
    }

    /// Larger inputs are not key files; the bound also keeps every length below Int32.
    static let maximumFileSize = 16 << 20

    /// Detects the format (PEM by its BEGIN line, an OpenSSH public key line, otherwise DER:
    /// X.509 certificate, PKCS#12, PKCS#8, encrypted PKCS#8, PKCS#1, SEC1 or SPKI) and decodes it.
    /// `passphrase` is called only when the file is encrypted; PKCS#12 tries the empty password first.
    public static func decode(_ data: [UInt8], passphrase: (() throws -> SecureBytes)?) throws(Failure) -> KeyFileContents {
        guard data.count <= maximumFileSize else { throw .malformed("larger than \(maximumFileSize >> 20) MiB: not a key file") }
        let source = PassphraseSource(passphrase)
        // Trial decodes queue errors on failure: none of them outlives the call.
        let result = OpenSSLErrorQueue.preserving {
            Result { () throws(Failure) -> KeyFileContents in try decodeDetectingFormat(data, source) }
        }
        return try result.get()
    }

    static func decodeDetectingFormat(_ data: [UInt8], _ passphrase: PassphraseSource) throws(Failure) -> KeyFileContents {
        if var blocks = try PEMBlock.blocks(in: data) {
            // Key blocks are secret. (A certificate handed back shares its bytes: wiping makes a copy.)
            defer { for index in blocks.indices where blocks[index].label.hasSuffix("PRIVATE KEY") { wipe(&blocks[index].body) } }
            return try decodePEM(blocks, passphrase)
        }
        if data.starts(with: OpenSSHKey.magic) {
            let (key, comment) = try OpenSSHKey.privateKey(data, passphrase)
            return KeyFileContents(format: .openSSH, privateKey: key, name: comment)
        }
        if let line = OpenSSHKey.publicKeyLine(in: data) {
            let (key, comment) = try OpenSSHKey.publicKey(line: line)
            return KeyFileContents(format: .openSSHPublicKey, publicKey: key, name: comment)
        }
        return try decodeDER(data, passphrase)
    }

    /// PEM text of DER bytes: BEGIN line, base64 in 64-column lines, END line, trailing newline.
    public static func pem(_ label: String, _ der: [UInt8]) -> String {
        var text = Array("-----BEGIN \(label)-----\n".utf8)
        let encoded = Base64.encode(der)
        var start = 0
        while start < encoded.count {
            let end = min(start + 64, encoded.count)
            text += encoded[start..<end]
            text.append(0x0A)
            start = end
        }
        text += Array("-----END \(label)-----\n".utf8)
        return String(decoding: text, as: UTF8.self)
    }
}

/// Asks for the passphrase at most once, and only when a file turns out to be encrypted.
final class PassphraseSource {
    private let ask: (() throws -> SecureBytes)?
    private var answer: SecureBytes?

    init(_ ask: (() throws -> SecureBytes)?) { self.ask = ask }

    /// The passphrase, NUL-terminated (OpenSSL's PKCS#12 functions take C strings); `count` excludes the NUL.
    func obtain() throws(KeyFile.Failure) -> (text: SecureBytes, count: Int) {
        if let answer { return (answer, answer.count - 1) }
        guard let ask else { throw .passphraseRequired }
        let given: SecureBytes
        do {
            given = try ask()
        } catch let failure as KeyFile.Failure {
            throw failure
        } catch {
            throw .passphraseRequired
        }
        let terminated = SecureBytes(count: given.count + 1)
        terminated.withUnsafeMutableBytes { out in given.withUnsafeBytes { out.copyMemory(from: $0) } }
        answer = terminated
        return (terminated, given.count)
    }
}

/// One "-----BEGIN label-----" … "-----END label-----" block (RFC 7468, with RFC 1421 headers).
struct PEMBlock {
    var label: String
    var headers: [String: String]
    /// The decoded base64: secret for key blocks, wiped by the reader.
    var body: [UInt8]

    private static let begin = Array("-----BEGIN ".utf8), end = Array("-----END ".utf8), dashes = Array("-----".utf8)

    /// Every block of a PEM file, or nil if `data` has no BEGIN line. Text around the blocks is ignored.
    static func blocks(in data: [UInt8]) throws(KeyFile.Failure) -> [PEMBlock]? {
        var blocks: [PEMBlock] = []
        // The open block. Its base64 lines stay slices of `data` until decoded: no copy of a key's text to wipe.
        var openLabel: String?
        var headers: [String: String] = [:]
        var lines: [ArraySlice<UInt8>] = []
        var lineStart = 0
        while lineStart < data.count {
            let lineEnd = data[lineStart...].firstIndex(of: 0x0A) ?? data.count
            let line = trimmed(data[lineStart..<lineEnd])
            lineStart = lineEnd + 1
            if let current = openLabel {
                if line.starts(with: end) {
                    guard label(line, after: end) == current else { throw .malformed("PEM block \(current) has a different END line") }
                    guard let body = Base64.decode(lines.joined()) else { throw .malformed("bad base64 in PEM block \(current)") }
                    blocks.append(PEMBlock(label: current, headers: headers, body: body))
                    openLabel = nil
                } else if lines.isEmpty, let colon = line.firstIndex(of: 0x3A) {
                    let name = String(decoding: line[line.startIndex..<colon], as: UTF8.self)
                    headers[name] = String(decoding: trimmed(line[(colon + 1)...]), as: UTF8.self)
                } else {
                    lines.append(line)
                }
            } else if line.starts(with: begin) {
                guard let name = label(line, after: begin) else { throw .malformed("bad PEM BEGIN line") }
                openLabel = name
                headers = [:]
                lines = []
            }
        }
        if let current = openLabel { throw .malformed("PEM block \(current) has no END line") }
        return blocks.isEmpty ? nil : blocks
    }

    private static func label(_ line: ArraySlice<UInt8>, after prefix: [UInt8]) -> String? {
        let rest = line.dropFirst(prefix.count)
        guard rest.count >= dashes.count, rest.suffix(dashes.count).elementsEqual(dashes) else { return nil }
        return String(decoding: rest.dropLast(dashes.count), as: UTF8.self)
    }

    static func trimmed(_ line: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        let isSpace = { (byte: UInt8) in byte == 0x20 || byte == 0x09 || byte == 0x0D }
        guard let first = line.firstIndex(where: { !isSpace($0) }), let last = line.lastIndex(where: { !isSpace($0) }) else { return [] }
        return line[first...last]
    }
}

/// Base64 (RFC 4648) with "=" padding; decoding skips whitespace.
enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let count = min(3, bytes.count - index)
            var group = 0
            for offset in 0..<3 { group = group << 8 | (offset < count ? Int(bytes[index + offset]) : 0) }
            for position in 0..<4 {
                out.append(position <= count ? alphabet[(group >> (18 - 6 * position)) & 0x3F] : 0x3D)
            }
            index += 3
        }
        return out
    }

    static func encodeString(_ bytes: [UInt8]) -> String { String(decoding: encode(bytes), as: UTF8.self) }

    /// The decoded bytes, or nil for a character outside the alphabet, bad padding or a partial group.
    static func decode<C: Collection>(_ text: C) -> [UInt8]? where C.Element == UInt8 {
        var out: [UInt8] = []
        out.reserveCapacity(text.count / 4 * 3 + 3)  // never grown: no unwiped copy of a decoded key is left behind
        var group = 0, count = 0, padding = 0
        for byte in text {
            let value: Int
            switch byte {
            case 0x41...0x5A: value = Int(byte) - 0x41
            case 0x61...0x7A: value = Int(byte) - 0x61 + 26
            case 0x30...0x39: value = Int(byte) - 0x30 + 52
            case 0x2B: value = 62
            case 0x2F: value = 63
            case 0x3D:
                padding += 1
                continue
            case 0x20, 0x09, 0x0D, 0x0A: continue
            default: return nil
            }
            guard padding == 0 else { return nil }  // data after "="
            group = group << 6 | value
            count += 1
            if count == 4 {
                out.append(UInt8(group >> 16))
                out.append(UInt8(group >> 8 & 0xFF))
                out.append(UInt8(group & 0xFF))
                group = 0
                count = 0
            }
        }
        switch (count, padding) {
        case (0, 0): break
        case (2, 0), (2, 2):
            out.append(UInt8(group >> 4 & 0xFF))
        case (3, 0), (3, 1):
            out.append(UInt8(group >> 10 & 0xFF))
            out.append(UInt8(group >> 2 & 0xFF))
        default: return nil
        }
        return out
    }
}

extension Array where Element == UInt8 {
    /// withUnsafeBytes for a body that throws KeyFile.Failure (Array's own only rethrows `any Error`).
    func withFailingBytes<R>(_ body: (UnsafeRawBufferPointer) throws(KeyFile.Failure) -> R) throws(KeyFile.Failure) -> R {
        try withUnsafeBytes { bytes in Result { () throws(KeyFile.Failure) -> R in try body(bytes) } }.get()
    }
}
