import BusSupport
import CSystemd
import KeychainCore
import KeychainCrypto

// The Prompt interface (org.freedesktop.Secret.Prompt): Unlock, CreateCollection and a
// collection's Delete answer with a prompt, which the caller runs; its worker (PromptWorker.swift)
// asks the person, and Completed announces the result.
extension SecretService {
    /// What a prompt does when its caller runs it.
    enum PromptAction {
        /// Unlock these keychains; the result lists the object paths the caller named that are then unlocked.
        case unlock(keychains: [KeychainCollection], objects: [String])
        /// Make a keychain (its SO PIN and user PIN are asked), optionally the default alias.
        case create(label: String, alias: String)
        /// Delete a keychain and everything in it (its SO PIN is asked).
        case delete(KeychainCollection)
    }

    final class Prompt {
        let sender: String
        let action: PromptAction
        init(sender: String, action: PromptAction) {
            self.sender = sender
            self.action = action
        }
    }

    func newPrompt(sender: String, _ action: PromptAction) -> String {
        counter += 1
        let path = Self.promptPrefix + "p\(counter)"
        prompts[path] = Prompt(sender: sender, action: action)
        return path
    }

    func promptMethod(_ member: String, _ message: OpaquePointer, path: String, sender: String) throws(Failure) -> Int32 {
        switch member {
        // Prompt(s window-id)
        case "Prompt": return try runPrompt(message, path: path, sender: sender)
        // Dismiss()
        case "Dismiss":
            guard let prompt = prompts[path], prompt.sender == sender else { throw .noSuchObject }
            prompts[path] = nil
            let result = reply(message) { _ in }
            dismiss(path, prompt.action)
            return result
        default:
            throw .unknownMethod(Self.promptInterface, member)
        }
    }

    /// Prompt(window-id): answers at once; a worker thread asks what the action needs with the
    /// prompt program (no bus call waits for the person), and the bus thread then signals
    /// Completed (dismissed when the user cancels, a PIN is wrong, or no prompt program is set).
    private func runPrompt(_ message: OpaquePointer, path: String, sender: String) throws(Failure) -> Int32 {
        guard let prompt = prompts[path], prompt.sender == sender else { throw .noSuchObject }
        prompts[path] = nil
        let result = reply(message) { _ in }
        guard let program = Configuration.current().promptProgram else {
            complain("keychaind: a Secret Service prompt was run, but no prompt program is configured (KEYCHAIN_PKCS11_PROMPT / prompt_program)")
            dismiss(path, prompt.action)
            return result
        }
        let existing = collections().map(\.label)
        let keys = self.keys
        let service = self
        DetachedThread {
            let outcome = Self.ask(program: program, action: prompt.action, existingLabels: existing, keys: keys)
            service.post(path: path, action: prompt.action, outcome: outcome)
        }.start()
        return result
    }

    /// Completed as dismissed, with the result type the action's callers expect.
    func dismiss(_ path: String, _ action: PromptAction) {
        if case .create = action {
            completed(path, dismissed: true, result: .object("/"))
        } else {
            completed(path, dismissed: true, result: .objects([]))
        }
    }

    /// A prompt's result: object paths (Unlock, Delete) or one object path (CreateCollection).
    enum PromptResult {
        case objects([String])
        case object(String)
    }

    func completed(_ path: String, dismissed: Bool, result: PromptResult) {
        guard let bus else { return }
        var signal: OpaquePointer?
        guard sd_bus_message_new_signal(bus, &signal, path, Self.promptInterface, "Completed") >= 0, let signal else { return }
        defer { sd_bus_message_unref(signal) }
        var writer = BusWriter(message: signal)
        writer.bool(dismissed)
        switch result {
        case .objects(let paths):
            writer.open("v", "ao")
            writer.objectPaths(paths)
        case .object(let objectPath):
            writer.open("v", "o")
            writer.string(objectPath, type: "o")
        }
        writer.close()
        if !writer.failed { _ = sd_bus_send(bus, signal, nil) }
    }
}
