internal import BusSupport
import KeychainCore
import KeychainCrypto

/// What a prompt does when its caller runs it.
enum PromptAction {
    /// Unlock these collections; the result lists the object paths the caller named that are then unlocked.
    case unlock(collections: [SecretCollection], objects: [String])
    /// Make a keychain (its SO PIN and user PIN are asked), optionally the default alias.
    case create(label: String, alias: String)
    /// Delete a collection and everything in it (a keychain's SO PIN is asked).
    case delete(SecretCollection)
}

/// A prompt made by a call and not yet run or dismissed by the same client.
final class PendingPrompt {
    let sender: String
    let action: PromptAction

    init(sender: String, action: PromptAction) {
        self.sender = sender
        self.action = action
    }
}

/// A prompt's result, as its Completed signal carries it: object paths (Unlock, Delete) or one
/// object path (CreateCollection).
enum PromptResult {
    case objects([String])
    case object(String)
}

/// org.freedesktop.Secret.Prompt: Unlock, CreateCollection and a collection's Delete answer with
/// a prompt, which the caller runs; its worker (PromptWorker.swift) asks the person, and
/// Completed announces the result.
enum PromptInterface {
    static let name = "org.freedesktop.Secret.Prompt"

    static let table = Interface(
        name: name,
        methods: [
            Method("Prompt", takes: "s", returns: "", runPrompt),
            Method("Dismiss", takes: "", returns: "") { server, call throws(BusError) in
                guard let prompt = server.prompts[call.path], prompt.sender == call.sender else { throw .noSuchObject }
                server.prompts[call.path] = nil
                let replied = call.reply()
                server.dismiss(call.path, prompt.action)
                return replied
            },
        ],
        properties: [],
        signals: [Signal("Completed", carries: "bv")],
        finds: { server, path in server.prompts[path] != nil })

    /// Prompt(s window-id): answers at once; a worker thread asks what the action needs with the
    /// prompt program (no bus call waits for the person), and the bus thread then signals
    /// Completed (dismissed when the user cancels, a PIN is wrong, or no prompt program is set).
    private static func runPrompt(_ server: SecretServiceServer, _ call: MethodCall) throws(BusError) -> Replied {
        guard let prompt = server.prompts[call.path], prompt.sender == call.sender else { throw .noSuchObject }
        server.prompts[call.path] = nil
        let replied = call.reply()
        guard let program = Configuration.current().promptProgram else {
            server.report("keychaind: a Secret Service prompt was run, but no prompt program is configured (KEYCHAIN_PKCS11_PROMPT / prompt_program)")
            server.dismiss(call.path, prompt.action)
            return replied
        }
        let existing = server.collections().map(\.label)
        let keys = server.keys
        let report = server.report
        let path = call.path
        DetachedThread {
            let outcome = SecretServiceServer.ask(program: program, action: prompt.action, existingLabels: existing, keys: keys, report: report)
            server.post(path: path, action: prompt.action, outcome: outcome)
        }.start()
        return replied
    }
}

extension SecretServiceServer {
    /// A new prompt for `sender`; its path.
    func newPrompt(sender: String, _ action: PromptAction) -> String {
        counter += 1
        let path = ObjectPath.promptPrefix + "p\(counter)"
        prompts[path] = PendingPrompt(sender: sender, action: action)
        return path
    }

    /// Completed as dismissed, with the result type the action's callers expect.
    func dismiss(_ path: String, _ action: PromptAction) {
        if case .create = action {
            completed(path, dismissed: true, result: .object(ObjectPath.none))
        } else {
            completed(path, dismissed: true, result: .objects([]))
        }
    }

    /// Completed(b dismissed, v result).
    func completed(_ path: String, dismissed: Bool, result: PromptResult) {
        connection?.signal(path, PromptInterface.name, "Completed") { writer in
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
        }
    }
}
