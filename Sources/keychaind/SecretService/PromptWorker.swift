import Glibc
import KeychainCore
import KeychainCrypto

// A prompt's worker: a thread of its own asks the prompt program (a person may take minutes) and
// posts the outcome, which the bus thread announces when `wake` rouses it.
extension SecretService {
    /// What a prompt's worker found, for the bus thread to announce.
    enum PromptOutcome {
        case dismissed
        case unlocked(files: [String], objects: [String])
        case created(file: String, label: String)
        case deleted(KeychainCollection)
    }

    func post(path: String, action: PromptAction, outcome: PromptOutcome) {
        outcomeLock.withLock { outcomes.append((path, action, outcome)) }
        let byte: UInt8 = 1
        _ = withUnsafeBytes(of: byte) { try? System.writeAll(wake[1], $0) }
    }

    /// The slow part of a prompt, off the bus thread: only the prompt program, the unlock
    /// session and the keychain files are touched here.
    static func ask(program: String, action: PromptAction, existingLabels: [String], keys: KeySource) -> PromptOutcome {
        func ask(_ text: String) -> SecureBytes? { try? PromptProgram.run(program, text: text) }
        switch action {
        case .unlock(let keychains, let objects):
            var files: [String] = []
            for collection in keychains {
                guard let answer = ask("Unlock the keychain '\(printable(collection.label))' for an application (Secret Service)") else { break }
                if case .success = answer.withUnsafeBytes({ keys.unlock(path: collection.file, pin: $0) }) {
                    files.append(collection.file)
                } else {
                    complain("keychaind: the Secret Service prompt for '\(printable(collection.label))' got a wrong PIN")
                }
            }
            return files.isEmpty ? .dismissed : .unlocked(files: files, objects: objects)
        case .create(let label, let alias):
            let shown = printable(label)
            guard let so = ask("New keychain '\(shown)': its SO PIN (administers the keychain; keep it offline)"),
                  let soAgain = ask("New keychain '\(shown)': the SO PIN again"), so.constantTimeEquals(soAgain),
                  let user = ask("New keychain '\(shown)': its user PIN (the keychain password)"),
                  let userAgain = ask("New keychain '\(shown)': the user PIN again"), user.constantTimeEquals(userAgain) else {
                return .dismissed
            }
            let configuration = Configuration.current()
            let directory = KeychainDirectory(path: configuration.directory)
            // Checked again now (`create` checks the folder under its lock): another prompt or
            // keychainctl may have made the label meanwhile.
            guard !existingLabels.contains(label) else {
                complain("keychaind: a keychain labelled '\(shown)' exists already; nothing created")
                return .dismissed
            }
            do {
                let keychain = try so.withUnsafeBytes { soBytes throws(KeychainError) in
                    try user.withUnsafeBytes { userBytes throws(KeychainError) in
                        try directory.create(label: label, soPIN: soBytes, userPIN: userBytes, kdf: configuration.kdf, policy: configuration.pinPolicy)
                    }
                }
                // Unlocked in this session, as a collection just made is for gnome-keyring.
                _ = user.withUnsafeBytes { keys.unlock(path: keychain.path, pin: $0) }
                if alias == "default", !configuration.defaultKeychainIsFixed { try? directory.setDefaultKeychain(label) }
                return .created(file: keychain.path, label: label)
            } catch where error.code == .duplicateItem {
                complain("keychaind: a keychain labelled '\(shown)' exists already; nothing created")
                return .dismissed
            } catch {
                complain("keychaind: the keychain '\(shown)' was not created: \(error.reason)")
                return .dismissed
            }
        case .delete(let collection):
            guard let so = ask("Delete the keychain '\(printable(collection.label))' and every item in it: its SO PIN") else { return .dismissed }
            do {
                let keychain = try Keychain.open(at: collection.file)
                _ = try so.withUnsafeBytes { bytes throws(KeychainError) in try keychain.unlock(.securityOfficer, pin: bytes) }
            } catch {
                complain("keychaind: the keychain '\(printable(collection.label))' was not deleted: \(error.reason)")
                return .dismissed
            }
            keys.lock(path: collection.file)
            do {
                try KeychainDirectory(path: Configuration.current().directory).delete(at: collection.file, label: collection.label)
            } catch {
                complain("keychaind: the keychain '\(printable(collection.label))' was not deleted: \(error.reason)")
                return .dismissed
            }
            return .deleted(collection)
        }
    }

    /// On the bus thread: announces the outcomes the prompt workers posted.
    func announceOutcomes() {
        var byte: UInt8 = 0
        while withUnsafeMutableBytes(of: &byte, { try? System.read(wake[0], into: $0) }) == 1 {}
        let ready = outcomeLock.withLock { () -> [(path: String, action: PromptAction, outcome: PromptOutcome)] in
            defer { outcomes.removeAll() }
            return outcomes
        }
        for (path, action, outcome) in ready {
            switch outcome {
            case .dismissed:
                dismiss(path, action)
            case .unlocked(let files, let objects):
                for collection in collections() where files.contains(collection.file) {
                    propertiesChanged(collection.path, Self.collectionInterface, ["Locked"])
                    emit(Self.root, Self.serviceInterface, "CollectionChanged", objectPath: collection.path)
                }
                let unlocked = objects.filter { object in resolve(object).map { !isLocked($0.collection) } ?? false }
                completed(path, dismissed: false, result: .objects(unlocked))
            case .created(let file, let label):
                let collection = KeychainCollection(file: file, label: label)
                emit(Self.root, Self.serviceInterface, "CollectionCreated", objectPath: collection.path)
                propertiesChanged(Self.root, Self.serviceInterface, ["Collections"])
                completed(path, dismissed: false, result: .object(collection.path))
            case .deleted(let collection):
                emit(Self.root, Self.serviceInterface, "CollectionDeleted", objectPath: collection.path)
                propertiesChanged(Self.root, Self.serviceInterface, ["Collections"])
                completed(path, dismissed: false, result: .objects([]))
            }
        }
    }
}
