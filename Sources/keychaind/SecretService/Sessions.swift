import BusSupport
import CSystemd
import KeychainCore
import KeychainCrypto

// The Session interface (org.freedesktop.Secret.Session) and the transfer of secrets through a
// session: in plain, or encrypted with the key a Diffie-Hellman exchange agreed (SecretServiceTransport).
extension SecretService {
    /// An open transfer session of one client connection.
    final class Session {
        let sender: String
        let key: SecureBytes?
        init(sender: String, key: SecureBytes?) {
            self.sender = sender
            self.key = key
        }
    }

    /// The Service's OpenSession, answered here since it makes a session: "plain", or the DH
    /// exchange whose agreed key encrypts each secret.
    func openSession(_ message: OpaquePointer, _ reader: BusReader, sender: String) throws(Failure) -> Int32 {
        guard let algorithm = reader.string(), let signature = reader.variantSignature() else { throw .invalid("algorithm, input") }
        counter += 1
        let path = Self.sessionPrefix + "s\(counter)"
        switch algorithm {
        case "plain":
            guard signature == "s" else { throw .invalid("the plain algorithm takes an empty string") }
            sessions[path] = Session(sender: sender, key: nil)
            return reply(message) { writer in
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
            sessions[path] = Session(sender: sender, key: agreed.key)
            return reply(message) { writer in
                writer.open("v", "ay")
                writer.bytes(agreed.publicValue)
                writer.close()
                writer.string(path, type: "o")
            }
        default:
            throw .notSupported("Algorithm \(algorithm) is not supported (plain, \(SecretServiceTransport.algorithm))")
        }
    }

    func sessionMethod(_ member: String, _ message: OpaquePointer, path: String, sender: String) throws(Failure) -> Int32 {
        switch member {
        // Close()
        case "Close":
            guard let session = sessions[path], session.sender == sender else { throw .noSession }
            sessions[path] = nil
            return reply(message) { _ in }
        default:
            throw .unknownMethod(Self.sessionInterface, member)
        }
    }

    // MARK: secrets in transfer

    func session(_ path: String, sender: String) throws(Failure) -> Session {
        guard let session = sessions[path], session.sender == sender else { throw .noSession }
        return session
    }

    func encode(_ secret: [UInt8], contentType: String, sessionPath: String, session: Session, into writer: inout BusWriter) throws(Failure) {
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

    func decode(_ secret: (session: String, parameters: [UInt8], value: [UInt8], contentType: String), sender: String) throws(Failure) -> [UInt8] {
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
