import KeychainCore

/// One keychain as `list --json` and `info --json` print it (Docs/cli-reference.md "JSON output").
enum KeychainJSON {
    static func object(_ info: KeychainInfo, file: String, isDefault: Bool) -> String {
        func pin(_ status: PINStatus, initialized: Bool) -> String {
            "{\"initialized\":\(initialized),\"failures\":\(status.failures),\"maximumFailures\":\(status.maximumFailures),"
                + "\"countLow\":\(status.countLow),\"finalTry\":\(status.finalTry),\"locked\":\(status.locked)}"
        }
        var fields: [(String, String)] = [
            ("label", JSON.string(info.label)),
            ("slot", info.slotID.map(String.init) ?? "null"),
            ("serial", JSON.string(info.serial)),
            ("file", JSON.string(file)),
            ("default", isDefault ? "true" : "false"),
            ("publicItems", String(info.publicObjects)),
            ("privateItems", String(info.privateObjects)),
            ("deviceBoundItems", String(info.deviceBoundObjects)),
            ("userPIN", pin(info.userPIN, initialized: info.userPINInitialized)),
            ("soPIN", pin(info.soPIN, initialized: true)),
            ("pinLength", "{\"minimum\":\(info.pinPolicy.minimumLength),\"maximum\":\(info.pinPolicy.maximumLength)}"),
            ("displayName", info.displayName.map(JSON.string) ?? "null"),
            ("lockedSearch", info.lockedLookup ? "true" : "false"),
        ]
        if let kdf = info.userKDF {
            var text = "{\"algorithm\":\"scrypt\",\"logN\":\(kdf.logN),\"r\":\(kdf.blockSize),\"p\":\(kdf.parallelism)"
            if let target = info.targetKDF, kdf.isWeaker(than: target) { text += ",\"pendingLogN\":\(target.logN)" }
            fields.append(("kdf", text + "}"))
        } else {
            fields.append(("kdf", "null"))
        }
        fields.append(("deviceKeyProblem", info.deviceKeyProblem.map(JSON.string) ?? "null"))
        fields.append(("uri", JSON.string(PKCS11URI.token(label: info.label, serial: info.serial).text)))
        return "{" + fields.map { JSON.string($0.0) + ":" + $0.1 }.joined(separator: ",") + "}"
    }
}
