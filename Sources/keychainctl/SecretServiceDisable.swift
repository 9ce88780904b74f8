import ArgumentParser
import BusSupport
import Glibc
import KeychainCore
import KeychainCrypto

/// `secret-service disable [--stop]`: the user's activation file goes; with --stop, so does the
/// keychaind that serves the session bus now, asked over that bus by its own connection.
struct SecretServiceDisable: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "disable",
        abstract: "Remove the activation file that 'enable' wrote (the system's provider, if any, is used again); with --stop, also stop the keychaind that serves now.",
        discussion: """
        A keychaind that serves the Secret Service keeps the name until it stops. --stop asks \
        the program that owns org.freedesktop.secrets on this session bus \
        (DBUS_SESSION_BUS_ADDRESS), if it is keychaind, to stop, and waits until it has \
        released the name. Only that process stops: not a keychaind of another login session, \
        bus or user, nor another provider (gnome-keyring, KeePassXC), which is left running. If \
        it held the unlock session, its keychains are locked; a keychaind that 'keychainctl \
        unlock' started beside it keeps running. With --stop, an activation file that is \
        already gone is not an error.

        Examples:
          keychainctl secret-service disable
          keychainctl secret-service disable --stop
        """
    )

    @Flag(help: "Also stop the keychaind that serves org.freedesktop.secrets on this session bus (that process only).")
    var stop = false

    func run() throws {
        let file = SecretServiceCommand.userActivationFile
        var removed = true
        do {
            try System.unlink(file)
        } catch {
            if error.code != ENOENT { throw fail("cannot remove \(file): \(error.reason).", status: ExitStatus.storage) }
            guard stop else { throw fail("\(file) does not exist: keychaind was not enabled for this user.", status: ExitStatus.notFound) }
            removed = false
        }
        guard stop else {
            print("Removed \(file). A running keychaind --secret-service keeps the name until it stops: 'keychainctl secret-service disable --stop' stops it (or log out).")
            return
        }
        if removed { print("Removed \(file).") }
        let client: SecretServiceClient
        do { client = try SecretServiceClient() } catch let error as SecretServiceClient.Failure {
            throw fail(error.message + ".", status: ExitStatus.failure)
        }
        let owner = client.owner()
        guard let owner, owner.exe?.hasSuffix("/keychaind") == true else {
            let why = owner.map { "\($0.exe ?? "a program") (PID \($0.pid.map { String($0) } ?? "?")) serves org.freedesktop.secrets, not keychaind (left running)" }
                ?? "no program serves org.freedesktop.secrets on this session bus"
            guard removed else { throw fail("\(file) does not exist and \(why): nothing was changed.", status: ExitStatus.notFound) }
            print("Nothing to stop: \(why).")
            return
        }
        try Self.stopKeychaind(owner, client: client)
        print("Stopped keychaind (PID \(owner.pid.map { String($0) } ?? "?")), which served org.freedesktop.secrets on this session bus.")
        if UnlockSession.isRunning {
            print("The unlock session's keychaind still runs on \(UnlockSession.socketPath ?? "?"): 'keychainctl lock --all' locks its keychains.")
        }
    }

    /// Asks `owner` — that connection, by its unique name — to stop, and waits (10 s at most)
    /// until it has released the name.
    static func stopKeychaind(_ owner: (uniqueName: String?, pid: pid_t?, exe: String?), client: SecretServiceClient) throws {
        let pid = owner.pid.map { String($0) } ?? "?"
        guard let uniqueName = owner.uniqueName else {
            throw fail("the bus does not say which connection owns org.freedesktop.secrets; keychaind (PID \(pid)) was not stopped.", status: ExitStatus.failure)
        }
        do {
            try client.call(KeychaindInterface.path, KeychaindInterface.name, KeychaindInterface.stop, destination: uniqueName) { _ in }
        } catch let error as SecretServiceClient.Failure {
            // A keychaind from before Stop answers UnknownInterface (or UnknownMethod).
            let older = error.message.contains("org.freedesktop.DBus.Error.Unknown") ? " (a keychaind older than this keychainctl: it stops when you log out)" : ""
            throw fail("keychaind (PID \(pid)) did not stop: \(error.message)\(older).", status: ExitStatus.failure)
        }
        for _ in 0..<200 {
            guard let current = client.owner(), current.uniqueName == uniqueName else { return }
            usleep(50_000)
        }
        throw fail("keychaind (PID \(pid)) was asked to stop but still owns org.freedesktop.secrets after 10 s.", status: ExitStatus.failure)
    }
}
