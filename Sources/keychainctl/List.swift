import ArgumentParser
import KeychainCore

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List the keychains with their slot, serial, flags and object counts.",
        discussion: """
        Examples:
          keychainctl list
          KEYCHAIN_PKCS11_DIR=/srv/keys keychainctl list
          keychainctl list --json
        """
    )

    @Flag(help: "Print JSON: {\"directory\", \"keychains\": [the object of 'info --json' for each], \"unreadable\": [{\"file\", \"reason\"}]}.")
    var json = false

    func run() throws {
        let configuration = Configuration.current()
        let directory = KeychainDirectory(path: configuration.directory)
        let files = directory.keychainFiles()
        if json {
            var keychains: [(slot: UInt, text: String)] = []
            var unreadable: [String] = []
            for path in files {
                do {
                    let info = try Keychain.open(at: path).info()
                    keychains.append((info.slotID ?? UInt.max, KeychainJSON.object(info, file: path, isDefault: (configuration.defaultKeychain ?? "login") == info.label)))
                } catch {
                    unreadable.append("{\"file\":\(JSON.string(path)),\"reason\":\(JSON.string(error.reason))}")
                }
            }
            print("{\"directory\":\(JSON.string(directory.path)),\"keychains\":[" + keychains.sorted { $0.slot < $1.slot }.map(\.text).joined(separator: ",")
                  + "],\"unreadable\":[" + unreadable.joined(separator: ",") + "]}")
            return
        }
        print("Keychain directory: \(directory.path)")
        guard !files.isEmpty else {
            print("No keychains yet. Create one with: keychainctl create --label login")
            return
        }
        let header = ["SLOT", "SERIAL", "LABEL", "PUBLIC", "PRIVATE", "PIN", "KDF", "FLAGS", "FILE"]
        var keychains: [(slot: UInt, row: [String])] = []
        var problems: [String] = []
        var deviceNotes: [String] = []
        for path in files {
            do {
                let info = try Keychain.open(at: path).info()
                if let problem = info.deviceKeyProblem {
                    deviceNotes.append("\(info.label): \(info.deviceBoundObjects) ThisDeviceOnly item(s) unavailable: \(problem)")
                }
                keychains.append((info.slotID ?? UInt.max,[info.slotID.map(String.init) ?? "-", info.serial, info.label, String(info.publicObjects), String(info.privateObjects),
                             "\(info.pinPolicy.minimumLength)-\(info.pinPolicy.maximumLength)", kdf(info),
                             flags(info).joined(separator: ","), String(path.split(separator: "/").last ?? "")]))
            } catch {
                problems.append("\(path): \(error.reason)")
            }
        }
        let rows = [header] + keychains.sorted { $0.slot < $1.slot }.map(\.row)
        let widths = header.indices.map { column in rows.map { $0[column].count }.max() ?? 0 }
        for row in rows.map({ $0.map(printable) }) {
            print(row.enumerated().map { $0.element.padding(toLength: widths[$0.offset] + 2, withPad: " ", startingAt: 0) }.joined())
        }
        for problem in problems { print("unreadable: \(problem)") }
        for note in deviceNotes { print("device key: \(note)") }
    }

    /// "2^15", or "2^15→2^17" while a raised cost waits for the PIN's next login.
    private func kdf(_ info: KeychainInfo) -> String {
        guard let current = info.userKDF else { return "-" }
        let now = "2^\(current.logN)"
        guard let target = info.targetKDF, current.isWeaker(than: target) else { return now }
        return now + "→2^\(target.logN)"
    }

    private func flags(_ info: KeychainInfo) -> [String] {
        var flags = ["token-initialized"]
        if info.userPINInitialized { flags.append("user-pin-initialized") }
        if info.userPIN.countLow { flags.append("user-pin-count-low") }
        if info.userPIN.finalTry { flags.append("user-pin-final-try") }
        if info.userPIN.locked { flags.append("user-pin-locked") }
        if info.soPIN.countLow { flags.append("so-pin-count-low") }
        if info.soPIN.finalTry { flags.append("so-pin-final-try") }
        if info.soPIN.locked { flags.append("so-pin-locked") }
        return flags
    }
}

extension String {
    func padding(toLength length: Int, withPad pad: String, startingAt: Int) -> String {
        count >= length ? self : self + String(repeating: pad, count: length - count)
    }
}
