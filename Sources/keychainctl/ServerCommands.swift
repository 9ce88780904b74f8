import ArgumentParser
import Glibc
import KeychainCore
import KeychainCrypto

/// `keychainctl tls-config`: the files a TLS server needs to use a keychain key through OpenSSL's
/// pkcs11-provider, written for one key. Docs/user-guide.md, "A web server whose key never leaves
/// the keychain".
struct TLSConfig: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tls-config",
        abstract: "Write what a TLS server needs to use a keychain key: key and certificate files, OpenSSL and server configuration, a systemd drop-in.",
        discussion: """
        The private key stays in the keychain: the key file written is a PKCS#11 URI in a PEM \
        wrapper ('PKCS#11 PROVIDER URI'), which OpenSSL's pkcs11-provider loads as the key. The \
        certificate is the keychain certificate with the key's ID (import one first with \
        'keychainctl import cert.pem'). Files written into --out: KEY.key.pem, KEY.crt.pem, \
        openssl.cnf (the default and pkcs11 providers, this module, the PIN file), nginx.conf \
        (directives to include), and SERVICE.d/keychain-pkcs11.conf (a systemd drop-in: \
        OPENSSL_CONF, the PIN as an encrypted credential, a PIN check before the server starts). \
        Nothing secret is written: the PIN reaches the server as a systemd credential, sealed \
        with 'systemd-creds encrypt' (TPM-bound where there is a TPM), which systemd decrypts \
        into a folder only the service can read.

        The keychain's folder must belong to the user the server's workers run as (--user): \
        they open the keychain again after the root master starts them.

        Examples:
          keychainctl tls-config -k web --label www \\
              --out /etc/keychain-pkcs11/nginx
          keychainctl tls-config -k web --label www --out ./tls \\
              --pin-path /run/keys/web.pin
        """
    )

    @OptionGroup var selection: KeychainOptions

    @Option(help: "The private key's label (CKA_LABEL).")
    var label: String

    @Option(help: "The server the configuration is for: nginx.")
    var server: String = "nginx"

    @Option(help: ArgumentHelp("The folder to write into (made if missing).", valueName: "folder"))
    var out: String

    @Option(help: ArgumentHelp("The systemd unit of the server.", valueName: "unit"))
    var service: String = "nginx.service"

    @Option(help: ArgumentHelp("The user the server's workers run as.", valueName: "user"))
    var user: String = "www-data"

    @Option(help: ArgumentHelp("Where the server reads the PIN at start (default: the credential's file in the service's credentials folder, /run/credentials/UNIT/keychain-pin).", valueName: "file"))
    var pinPath: String?

    @Option(help: ArgumentHelp("The encrypted credential the drop-in loads (default: /etc/credstore.encrypted/keychain-pkcs11-KEYCHAIN.pin).", valueName: "file"))
    var credential: String?

    func validate() throws {
        guard server == "nginx" else { throw ValidationError("--server: only nginx is written for now (its OpenSSL files serve any OpenSSL server)") }
        guard !label.isEmpty else { throw ValidationError("--label: give the private key's label") }
        for (name, value) in [("--out", out), ("--service", service), ("--user", user)] where value.contains("\n") || value.isEmpty {
            throw ValidationError("\(name) must be one non-empty line")
        }
    }

    func run() throws {
        let configuration = Configuration.current()
        let open = try selection.open()
        let token = try open.tokenIdentity()
        guard let modulePath = ModulePath.locate() else {
            throw fail("libkeychain-pkcs11.so not found next to keychainctl or in ../lib: the OpenSSL configuration must name it.", status: ExitStatus.failure)
        }
        // Private keys and their labels are visible only after login.
        try open.unlock()
        let keys = try open.run { () throws(KeychainError) in
            try open.keychain.find([(.objectClass, AttributeValue.ulong(ObjectClass.privateKey.rawValue)), (.label, Array(label.utf8))], master: open.master)
        }
        guard keys.count == 1, let row = keys.first else {
            throw fail(keys.isEmpty ? "no private key labelled '\(label)' in keychain '\(open.label)' (see 'keychainctl items --type private-key')."
                : "\(keys.count) private keys are labelled '\(label)' in keychain '\(open.label)': the server's URI would match them all; relabel one.",
                       status: keys.isEmpty ? ExitStatus.notFound : ExitStatus.usage)
        }
        let key = try open.run { () throws(KeychainError) in try open.keychain.object(id: row.id, master: open.master) }
        let keyID = key[.id] ?? []
        // The provider finds the key by token, serial, ID and label.
        var attributes: [(name: String, value: [UInt8])] = [("serial", Array(token.serial.utf8)), ("token", Array(token.label.utf8))]
        if !keyID.isEmpty { attributes.append(("id", keyID)) }
        attributes.append(("object", Array(label.utf8)))
        attributes.append(("type", Array("private".utf8)))
        let uri = PKCS11URI(attributes: attributes).text

        var certificates: [[UInt8]] = []
        if !keyID.isEmpty {
            let rows = try open.run { () throws(KeychainError) in
                try open.keychain.find([(.objectClass, AttributeValue.ulong(ObjectClass.certificate.rawValue)), (.id, keyID)], master: open.master)
            }
            for certificateRow in rows {
                if let object = try? open.keychain.object(id: certificateRow.id, master: open.master), let der = object[.value] { certificates.append(der) }
            }
        }

        let folder = out.hasPrefix("/") ? out : currentDirectory() + "/" + out
        let unitFolder = folder + "/" + service + ".d"
        try makeFolder(folder)
        try makeFolder(unitFolder)
        let keychainLabel = open.label
        let pinFile = pinPath ?? "/run/credentials/\(service)/keychain-pin"
        let credentialFile = credential ?? "/etc/credstore.encrypted/keychain-pkcs11-\(fileSafe(keychainLabel)).pin"
        let name = fileSafe(label)
        let keyFile = folder + "/" + name + ".key.pem"
        let certificateFile = folder + "/" + name + ".crt.pem"
        let opensslFile = folder + "/openssl.cnf"
        let keychainctlPath = (ModulePath.executableFolder() ?? "/usr/bin") + "/keychainctl"

        try writeOutput(Array(Self.uriPEM(uri).utf8), to: keyFile, secret: false)
        if !certificates.isEmpty {
            try writeOutput(Array(certificates.map { KeyFile.pem("CERTIFICATE", $0) }.joined().utf8), to: certificateFile, secret: false)
        }
        try writeOutput(Array(Self.opensslConfiguration(module: modulePath, pinFile: pinFile).utf8), to: opensslFile, secret: false)
        try writeOutput(Array(Self.nginxDirectives(keychainFolder: configuration.directory, user: user, certificate: certificateFile, key: keyFile).utf8),
                        to: folder + "/nginx.conf", secret: false)
        try writeOutput(Array(Self.systemdDropIn(unit: service, openssl: opensslFile, credential: credentialFile, keychainctl: keychainctlPath,
                                                 keychain: keychainLabel, keychainFolder: configuration.directory,
                                                 user: user).utf8),
                        to: unitFolder + "/keychain-pkcs11.conf", secret: false)

        print("Key '\(label)' of keychain '\(keychainLabel)': \(uri)")
        print("Wrote into \(folder):")
        print("  \(name).key.pem   the key's URI for ssl_certificate_key (no key material)")
        if certificates.isEmpty {
            print("  (no certificate: the keychain has none with this key's ID; import it with 'keychainctl import -k \(keychainLabel) cert.pem',")
            print("   or make a request: OPENSSL_CONF=\(opensslFile) openssl req -new -key \(keyFile) -subj /CN=… -out \(name).csr)")
        } else {
            print("  \(name).crt.pem   the certificate\(certificates.count > 1 ? "s" : "") with the key's ID, for ssl_certificate")
        }
        print("  openssl.cnf            OpenSSL with the pkcs11 provider over \(modulePath); the PIN from \(pinFile)")
        print("  nginx.conf             include it at the top of /etc/nginx/nginx.conf (main context) and in your server block as its comments say")
        print("  \(service).d/keychain-pkcs11.conf   copy to /etc/systemd/system/\(service).d/")
        print("Then seal the PIN for the service (it is read from standard input; TPM-bound where there is one):")
        print("  systemd-creds encrypt --name=keychain-pin - \(credentialFile)")
        print("  systemctl daemon-reload && systemctl restart \(service.hasSuffix(".service") ? String(service.dropLast(8)) : service)")
        print("The keychain folder \(configuration.directory) must belong to \(user) (mode 0700): chown -R \(user): \(configuration.directory)")
    }

    /// pkcs11-provider's key file: DER SEQUENCE { VisibleString description, UTF8String uri } in a
    /// PEM block labelled "PKCS#11 PROVIDER URI" (the provider's PEM decoder reads it as the key).
    static func uriPEM(_ uri: String) -> String {
        let description = Array("PKCS#11 Provider URI v1.0".utf8)
        let text = Array(uri.utf8)
        let body = [0x1A] + DER.lengthBytes(description.count) + description + [0x0C] + DER.lengthBytes(text.count) + text
        return KeyFile.pem("PKCS#11 PROVIDER URI", [0x30] + DER.lengthBytes(body.count) + body)
    }

    static func opensslConfiguration(module: String, pinFile: String) -> String {
        """
        # Written by keychainctl tls-config: OpenSSL with the default provider and pkcs11-provider
        # over the keychain module. Give it to the server only (OPENSSL_CONF in its unit), not system-wide.
        openssl_conf = openssl_init

        [openssl_init]
        providers = provider_sect

        [provider_sect]
        default = default_sect
        pkcs11 = pkcs11_sect

        [default_sect]
        activate = 1

        [pkcs11_sect]
        module = pkcs11.so
        pkcs11-module-path = \(module)
        # The PIN, read once when the server starts (its master process, as root).
        pkcs11-module-token-pin = file:\(pinFile)
        activate = 1

        """
    }

    static func nginxDirectives(keychainFolder: String, user: String, certificate: String, key: String) -> String {
        """
        # Written by keychainctl tls-config.
        # In the main context of nginx.conf, beside 'user \(user);' (nginx starts its workers with an
        # empty environment; they open the keychain again after fork and must find it):
        env KEYCHAIN_PKCS11_DIR=\(keychainFolder);

        # In the server block, instead of a key file:
        #   ssl_certificate     \(certificate);
        #   ssl_certificate_key \(key);

        """
    }

    static func systemdDropIn(unit: String, openssl: String, credential: String, keychainctl: String, keychain: String, keychainFolder: String, user: String) -> String {
        """
        # Written by keychainctl tls-config: /etc/systemd/system/\(unit).d/keychain-pkcs11.conf
        [Service]
        Environment=OPENSSL_CONF=\(openssl)
        Environment=KEYCHAIN_PKCS11_DIR=\(keychainFolder)
        Environment=KEYCHAIN_PKCS11_SERVICE_USER=\(user)
        # The PIN, sealed with systemd-creds; systemd decrypts it into %d, readable by the service only.
        LoadCredentialEncrypted=keychain-pin:\(credential)
        # A wrong or locked PIN stops the start here, naming the keychain and the cause (checked once,
        # before nginx -t, so one start counts one try).
        ExecStartPre=
        ExecStartPre=\(keychainctl) check-pin -k \(keychain) --pin-file %d/keychain-pin
        ExecStartPre=/usr/sbin/nginx -t -q -g 'daemon on; master_process on;'

        """
    }

    private func makeFolder(_ path: String) throws {
        do { try System.mkdir(path, mode: 0o755) } catch where error.code != EEXIST {
            throw fail("cannot make \(path): \(error.reason).", status: ExitStatus.failure)
        } catch {}
    }

    private func currentDirectory() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        guard getcwd(&buffer, buffer.count) != nil else { return "." }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// A label as a file name: letters, digits, '-', '_', '.'; others become '_'.
    private func fileSafe(_ text: String) -> String {
        String(text.unicodeScalars.map { scalar -> Character in
            let ok = (scalar >= "a" && scalar <= "z") || (scalar >= "A" && scalar <= "Z") || (scalar >= "0" && scalar <= "9") || "-_.".unicodeScalars.contains(scalar)
            return ok ? Character(scalar) : "_"
        })
    }
}

/// `keychainctl check-pin`: whether a PIN opens a keychain, for a service's start (the drop-in
/// `tls-config` writes runs it before the server), so that a wrong or locked PIN stops the start
/// with a message naming the keychain and the cause instead of failing inside the server.
struct CheckPIN: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-pin",
        abstract: "Check that the user PIN opens a keychain (for a service's start); a wrong PIN counts as a failed try.",
        discussion: """
        Exit status 0 when the PIN opens the keychain; 3 when it is wrong (with the tries left) or \
        the user PIN is locked (the SO sets a new one with 'keychainctl reset-pin'); 6 when there \
        is no such keychain. The PIN is checked against the keychain itself, never through keychaind.

        Example (a systemd unit's ExecStartPre):
          keychainctl check-pin -k web --pin-file %d/keychain-pin
        """
    )

    @OptionGroup var selection: KeychainOptions

    func run() throws {
        let open = try selection.open()
        let pin = try readSecret(file: selection.pinFile, environment: "KEYCHAIN_PKCS11_PIN", prompt: "User PIN of keychain '\(open.label)'",
                                 confirm: false, option: "--pin-file")
        do {
            _ = try pin.withBytes { bytes throws(KeychainError) in try open.keychain.unlock(.user, pin: bytes) }
        } catch {
            let status = (try? open.keychain.info(countingObjects: false))?.userPIN
            let tries = status.map { " (\($0.failures) of \($0.maximumFailures) failed tries)" } ?? ""
            switch error.code {
            case .pinIncorrect:
                throw fail("keychain '\(open.label)': the PIN is wrong\(tries).", status: ExitStatus.pin)
            case .pinLocked:
                throw fail("keychain '\(open.label)': the user PIN is locked\(tries); the SO sets a new one with 'keychainctl reset-pin -k \(open.label)'.", status: ExitStatus.pin)
            default:
                throw fail("keychain '\(open.label)': \(error.reason).", status: ExitStatus.pin)
            }
        }
        print("keychain '\(open.label)': the PIN opens it")
    }
}
