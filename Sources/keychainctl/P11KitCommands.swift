import ArgumentParser
import Glibc
import KeychainCrypto

struct P11Kit: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "p11-kit",
        abstract: "Register the module with p11-kit so that every p11-kit aware program sees the keychains.",
        subcommands: [Register.self, Unregister.self]
    )

    /// Where p11-kit reads module files: the user's ~/.config/pkcs11/modules (ignored by p11-kit
    /// for root and setuid programs), or the system's /etc/pkcs11/modules.
    struct Location: ParsableArguments {
        @Flag(help: "The system configuration (/etc/pkcs11/modules) instead of the user's (~/.config/pkcs11/modules).")
        var system = false

        @Option(help: ArgumentHelp("Another module-configuration folder (for tests or a private p11-kit setup).", valueName: "dir"))
        var directory: String?

        /// Root gets the system folder without asking: p11-kit never reads root's own
        /// ~/.config/pkcs11 (containers and servers run as root).
        var isSystem: Bool { directory == nil && (system || getuid() == 0) }

        var folder: String {
            if let directory { return directory }
            if isSystem { return "/etc/pkcs11/modules" }
            let home = getenv("HOME").map { String(cString: $0) } ?? "/"
            return home + "/.config/pkcs11/modules"
        }

        var file: String { folder + "/keychain-pkcs11.module" }
    }

    struct Register: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "register",
            abstract: "Write keychain-pkcs11.module into p11-kit's configuration.",
            discussion: """
            Afterwards 'p11-kit list-modules' shows the module, and programs that load p11-kit-proxy.so \
            (GnuTLS tools, Firefox/NSS with p11-kit-proxy, GNOME) see the keychains. p11-kit ignores \
            root's own configuration, so as root the module is registered for the whole system \
            (/etc/pkcs11/modules), as --system does for anyone with sudo.

            Examples:
              keychainctl p11-kit register
              sudo keychainctl p11-kit register --system
            """
        )

        @OptionGroup var location: Location

        @Option(help: ArgumentHelp("The module to register (default: 'keychainctl module-path').", valueName: "path"))
        var module: String?

        func run() throws {
            guard let path = module ?? ModulePath.locate() else {
                throw fail("libkeychain-pkcs11.so not found next to keychainctl; give it with --module.", status: ExitStatus.notFound)
            }
            guard path.hasPrefix("/"), access(path, R_OK) == 0 else {
                throw fail("the module must be an absolute path to a readable file: \(path).", status: ExitStatus.usage)
            }
            if getuid() == 0, !location.system, location.directory == nil {
                print("Running as root: p11-kit reads no per-user configuration for root, so the module is registered for the whole system.")
            }
            var prefix = ""
            for part in location.folder.split(separator: "/") {
                prefix += "/" + part
                if System.exists(prefix) { continue }
                do {
                    try System.mkdir(prefix, mode: 0o755)
                } catch where error.code != EEXIST {
                    throw fail("cannot create \(prefix): \(error.reason).", status: ExitStatus.storage)
                } catch {}
            }
            let text = """
                # Keychain PKCS#11, registered by keychainctl p11-kit register.
                module: \(path)
                # Keychain items are the user's own: not a source of trust anchors.
                trust-policy: no

                """
            let temporary = location.file + ".new"
            try writeOutput(Array(text.utf8), to: temporary, secret: false)
            do {
                try System.chmod(temporary, mode: 0o644)
                try System.rename(temporary, to: location.file)
            } catch {
                try? System.unlink(temporary)
                throw fail("cannot write \(location.file): \(error.reason).", status: ExitStatus.storage)
            }
            print("Registered \(path) in \(location.file)")
            print("Check with: p11-kit list-modules" + (location.isSystem ? " (every user's p11-kit programs now load it)" : ""))
        }
    }

    struct Unregister: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "unregister",
            abstract: "Remove keychain-pkcs11.module from p11-kit's configuration.",
            discussion: """
            Examples:
              keychainctl p11-kit unregister
              sudo keychainctl p11-kit unregister --system
            """
        )

        @OptionGroup var location: Location

        func run() throws {
            do {
                try System.unlink(location.file)
            } catch {
                if error.code == ENOENT { throw fail("the module is not registered in \(location.folder).", status: ExitStatus.notFound) }
                throw fail("cannot remove \(location.file): \(error.reason).", status: ExitStatus.storage)
            }
            print("Removed \(location.file)")
        }
    }
}
