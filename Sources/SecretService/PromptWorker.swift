import Glibc
import KeychainCore
import KeychainCrypto

/// What a prompt's worker found, for the bus thread to announce.
enum PromptOutcome {
    case dismissed
    case unlocked(collections: [SecretCollection], objects: [String])
    case created(file: String, label: String)
    case deleted(SecretCollection)
}

/// An outcome a worker posted, with its prompt.
struct PostedOutcome {
    let path: String
    let action: PromptAction
    let outcome: PromptOutcome
}

// A prompt's worker: a thread of its own asks the prompt program (a person may take minutes) and
// posts the outcome, which the bus thread announces when `wake` rouses it.
extension SecretServiceServer {
    func post(path: String, action: PromptAction, outcome: PromptOutcome) {
        lock.withLock { outcomes.append(PostedOutcome(path: path, action: action, outcome: outcome)) }
        wake?.ring()
    }

    /// The slow part of a prompt, off the bus thread: only the prompt program, the key source
    /// and the keychain files are touched here.
    static func ask(program: String, action: PromptAction, existingLabels: [String], keys: KeySource,
                    report: @Sendable (String) -> Void) -> PromptOutcome {
        func ask(_ text: String) -> SecureBytes? { try? PromptProgram.run(program, text: text) }
        switch action {
        case .unlock(let collections, let objects):
            var unlocked: [SecretCollection] = []
            // A prompt cancelled asks no further keychain.
            asking: for collection in collections {
                switch collection {
                case .keychain(let keychain):
                    guard let answer = ask("Unlock the keychain '\(printable(keychain.label))' for an application (Secret Service)") else { break asking }
                    if case .success = answer.withUnsafeBytes({ keys.unlock(path: keychain.file, pin: $0) }) {
                        unlocked.append(collection)
                    } else {
                        report("keychaind: the Secret Service prompt for '\(printable(keychain.label))' got a wrong PIN")
                    }
                case .session:
                    continue
                }
            }
            return unlocked.isEmpty ? .dismissed : .unlocked(collections: unlocked, objects: objects)
        case .create(let label, let alias):
            return createKeychain(label: label, alias: alias, ask: ask, existingLabels: existingLabels, keys: keys, report: report)
        case .delete(let collection):
            switch collection {
            case .keychain(let keychain):
                return deleteKeychain(keychain, ask: ask, keys: keys, report: report) ? .deleted(collection) : .dismissed
            case .session:
                // Its Delete needs no prompt (CollectionInterface).
                return .dismissed
            }
        }
    }

    private static func createKeychain(label: String, alias: String, ask: (String) -> SecureBytes?, existingLabels: [String], keys: KeySource,
                                       report: @Sendable (String) -> Void) -> PromptOutcome {
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
            report("keychaind: a keychain labelled '\(shown)' exists already; nothing created")
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
            report("keychaind: a keychain labelled '\(shown)' exists already; nothing created")
            return .dismissed
        } catch {
            report("keychaind: the keychain '\(shown)' was not created: \(error.reason)")
            return .dismissed
        }
    }

    /// Deletes the keychain when the SO PIN asked is right; whether it did.
    private static func deleteKeychain(_ collection: KeychainCollection, ask: (String) -> SecureBytes?, keys: KeySource,
                                       report: @Sendable (String) -> Void) -> Bool {
        guard let so = ask("Delete the keychain '\(printable(collection.label))' and every item in it: its SO PIN") else { return false }
        do {
            let keychain = try Keychain.open(at: collection.file)
            _ = try so.withUnsafeBytes { bytes throws(KeychainError) in try keychain.unlock(.securityOfficer, pin: bytes) }
        } catch {
            report("keychaind: the keychain '\(printable(collection.label))' was not deleted: \(error.reason)")
            return false
        }
        keys.lock(path: collection.file)
        do {
            try KeychainDirectory(path: Configuration.current().directory).delete(at: collection.file, label: collection.label)
        } catch {
            report("keychaind: the keychain '\(printable(collection.label))' was not deleted: \(error.reason)")
            return false
        }
        return true
    }

    /// On the bus thread: announces the outcomes the prompt workers posted.
    func announceOutcomes() {
        wake?.drain()
        let ready = lock.withLock { () -> [PostedOutcome] in
            defer { outcomes.removeAll() }
            return outcomes
        }
        for posted in ready {
            switch posted.outcome {
            case .dismissed:
                dismiss(posted.path, posted.action)
            case .unlocked(let unlocked, let objects):
                for collection in collections() where unlocked.contains(collection) {
                    propertiesChanged(collection.path, CollectionInterface.name, ["Locked"])
                    emit(ObjectPath.root, ServiceInterface.name, "CollectionChanged", objectPath: collection.path)
                }
                let open = objects.filter { object in resolve(object).map { !isLocked($0.collection) } ?? false }
                completed(posted.path, dismissed: false, result: .objects(open))
            case .created(let file, let label):
                configurationRead = nil
                let collection = SecretCollection.keychain(KeychainCollection(file: file, label: label))
                emit(ObjectPath.root, ServiceInterface.name, "CollectionCreated", objectPath: collection.path)
                propertiesChanged(ObjectPath.root, ServiceInterface.name, ["Collections"])
                completed(posted.path, dismissed: false, result: .object(collection.path))
            case .deleted(let collection):
                emit(ObjectPath.root, ServiceInterface.name, "CollectionDeleted", objectPath: collection.path)
                propertiesChanged(ObjectPath.root, ServiceInterface.name, ["Collections"])
                completed(posted.path, dismissed: false, result: .objects([]))
            }
        }
    }
}
