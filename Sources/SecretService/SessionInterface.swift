internal import BusSupport
import KeychainCore
import KeychainCrypto

/// An open transfer session of one client connection: secrets pass in plain, or encrypted with
/// the key a Diffie-Hellman exchange agreed (SecretServiceTransport).
final class TransferSession {
    let sender: String
    let key: SecureBytes?

    init(sender: String, key: SecureBytes?) {
        self.sender = sender
        self.key = key
    }
}

/// org.freedesktop.Secret.Session: one object per transfer session, opened by the Service's
/// OpenSession (answered here, since it makes the session).
enum SessionInterface {
    static let name = "org.freedesktop.Secret.Session"

    static let table = Interface(
        name: name,
        methods: [
            Method("Close", takes: "", returns: "") { server, call throws(BusError) in
                guard let session = server.sessions[call.path], session.sender == call.sender else { throw .noSession }
                server.sessions[call.path] = nil
                return call.reply()
            },
        ],
        properties: [],
        signals: [],
        finds: { server, path in server.sessions[path] != nil })

    /// OpenSession(s algorithm, v input) -> (v output, o result): "plain", or the DH exchange
    /// whose agreed key encrypts each secret.
    static func openSession(_ server: SecretServiceServer, _ call: MethodCall) throws(BusError) -> Replied {
        let reader = call.arguments
        guard let algorithm = reader.string(), let signature = reader.variantSignature() else { throw .invalid("algorithm, input") }
        server.counter += 1
        let path = ObjectPath.sessionPrefix + "s\(server.counter)"
        switch algorithm {
        case "plain":
            guard signature == "s" else { throw .invalid("the plain algorithm takes an empty string") }
            server.sessions[path] = TransferSession(sender: call.sender, key: nil)
            return call.reply { writer in
                writer.open("v", "s")
                writer.string("")
                writer.close()
                writer.string(path, type: "o")
            }
        case SecretServiceTransport.algorithm:
            guard signature == "ay", reader.enter("v", "ay") == true, let clientPublic = reader.bytes(), reader.exit() else {
                throw .invalid("the DH algorithm takes the client's public value as bytes")
            }
            let agreed: (publicValue: [UInt8], key: SecureBytes)
            do { agreed = try SecretServiceTransport.agree(clientPublic: clientPublic) } catch { throw .invalid("the client's public value is not usable") }
            server.sessions[path] = TransferSession(sender: call.sender, key: agreed.key)
            return call.reply { writer in
                writer.open("v", "ay")
                writer.bytes(agreed.publicValue)
                writer.close()
                writer.string(path, type: "o")
            }
        default:
            throw .notSupported("Algorithm \(algorithm) is not supported (plain, \(SecretServiceTransport.algorithm))")
        }
    }
}

// MARK: secrets in transfer

extension SecretServiceServer {
    /// The session at `path`, when `sender` opened it; NoSession otherwise.
    func session(_ path: String, sender: String) throws(BusError) -> TransferSession {
        guard let session = sessions[path], session.sender == sender else { throw .noSession }
        return session
    }

    /// Appends the Secret struct (oayays) of `secret` as the session carries it.
    func encode(_ secret: [UInt8], contentType: String, sessionPath: String, session: TransferSession, into writer: inout BusWriter) throws(BusError) {
        if let key = session.key {
            do {
                let sealed = try SecretServiceTransport.encrypt(secret, key: key)
                writer.secret(session: sessionPath, parameters: sealed.iv, value: sealed.value, contentType: contentType)
            } catch {
                throw .failed("cannot encrypt the secret")
            }
        } else {
            writer.secret(session: sessionPath, parameters: [], value: secret, contentType: contentType)
        }
    }

    /// The secret a client sent through its session (the caller wipes it).
    func decode(_ secret: (session: String, parameters: [UInt8], value: [UInt8], contentType: String), sender: String) throws(BusError) -> [UInt8] {
        let session = try session(secret.session, sender: sender)
        guard let key = session.key else {
            guard secret.parameters.isEmpty else { throw .invalid("a plain session's secret has no parameters") }
            return secret.value
        }
        do { return try SecretServiceTransport.decrypt(secret.value, iv: secret.parameters, key: key).bytes } catch {
            throw .invalid("The secret was transferred or encrypted in an invalid way.")
        }
    }
}
