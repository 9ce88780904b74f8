import BusSupport
import Glibc

// keychaind's own interface (keychain_pkcs11.Daemon on /org/freedesktop/secrets, beside the
// Service): Stop, which 'keychainctl secret-service disable --stop' sends to the connection that
// owns org.freedesktop.secrets on the user's session bus, so that exactly the keychaind serving
// that session stops — never a process found by its name.
extension SecretService {
    static let daemonInterface = KeychaindInterface.name

    func daemonMethod(_ member: String, _ message: OpaquePointer) throws(Failure) -> Int32 {
        switch member {
        // Stop(): replies, then the daemon stops as on SIGTERM.
        case KeychaindInterface.stop:
            // A session bus admits its own user only, but that is the bus's configuration: the
            // daemon checks the caller's uid itself, as its socket does (SO_PEERCRED).
            guard let caller = busSenderCredentials(message) else { throw .accessDenied("keychaind cannot tell which user asks it to stop") }
            guard caller.uid == getuid() else { throw .accessDenied("only uid \(getuid()) may stop this keychaind") }
            let replied = reply(message) { _ in }
            complain("keychaind: asked to stop over the session bus" + (caller.pid.map { " by PID \($0)" } ?? ""))
            stopRequested = 1
            return replied
        default:
            throw .unknownMethod(Self.daemonInterface, member)
        }
    }
}
