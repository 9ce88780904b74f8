internal import BusSupport
import Glibc

/// keychaind's own interface (keychain_pkcs11.Daemon on /org/freedesktop/secrets, beside the
/// Service): Stop, which 'keychainctl secret-service disable --stop' sends to the connection that
/// owns org.freedesktop.secrets on the user's session bus, so that exactly the keychaind serving
/// that session stops — never a process found by its name.
enum DaemonInterface {
    static let name = KeychaindInterface.name

    static let table = Interface(
        name: name,
        methods: [
            // Stop(): replies, then the daemon stops as on SIGTERM (its keys wiped, its socket
            // removed, the bus name released last).
            Method(KeychaindInterface.stop, takes: "", returns: "") { server, call throws(BusError) in
                // A session bus admits its own user only, but that is the bus's configuration: the
                // daemon checks the caller's uid itself, as its socket does (SO_PEERCRED).
                guard let caller = busSenderCredentials(call.message) else { throw .accessDenied("keychaind cannot tell which user asks it to stop") }
                guard caller.uid == getuid() else { throw .accessDenied("only uid \(getuid()) may stop this keychaind") }
                let replied = call.reply()
                server.report("keychaind: asked to stop over the session bus" + (caller.pid.map { " by PID \($0)" } ?? ""))
                server.askedToStop()
                return replied
            },
        ],
        properties: [],
        signals: [],
        finds: nil)
}
