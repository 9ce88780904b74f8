import ArgumentParser
import Glibc
import KeychainCore
import KeychainCrypto
import KeychainSync

struct SyncCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Sync a keychain's synchronizable items with your other devices through a git repository.",
        discussion: """
        Items marked synchronizable (--sync, kSecAttrSynchronizable, CKA_KC_SYNCHRONIZABLE) travel between the \
        devices of a circle through a git remote of your choice (ssh, https, a local bare repository), sealed: \
        the remote sees file names and sizes that reveal nothing, and cannot read, forge, replay or roll back \
        what it holds without being caught. The keychain must be unlocked, except for a 'sync now' with nothing \
        new on either side, which finds that out without the PIN. See Docs/sync.md.

        Examples:
          keychainctl sync setup --remote git@example.com:me/kc.git \\
              --device-name laptop
          keychainctl sync join --remote git@example.com:me/kc.git \\
              --device-name desktop
          keychainctl sync approve K7QX2M4A
          keychainctl sync now
          keychainctl sync status
        """,
        subcommands: [SyncSetup.self, SyncJoin.self, SyncApprove.self, SyncNow.self, SyncStatus.self, SyncRemoveDevice.self, SyncLeave.self]
    )
}

/// The engine for the chosen keychain, unlocked (or, `unlocking` false, over the locked keychain:
/// for `quickSync` only); its work tree lives beside the device key.
private func engine(_ options: KeychainOptions, unlocking: Bool = true) throws -> (SyncEngine, OpenKeychain) {
    let opened = try options.open()
    let master = unlocking ? try opened.unlock() : nil
    let serial = try opened.tokenIdentity().serial
    let workTree: String
    do { workTree = try SyncEngine.defaultWorkTree(serial: serial) } catch { throw fail("\(error.reason).", status: ExitStatus.storage) }
    return (SyncEngine(keychain: opened.keychain, master: master, workTree: workTree), opened)
}

/// A sync error as a one-line message and its exit status: refusals of the remote's content are
/// `badInput` (nothing was applied), anything else a failure.
private func syncFailure(_ error: SyncError) -> ExitCode {
    switch error.kind {
    case .tampered, .replayed, .rolledBack, .withheld, .badSignature:
        return fail("sync refused: \(error.reason). Nothing was applied.", status: ExitStatus.badInput)
    case .notFound:
        return fail("\(error.reason).", status: ExitStatus.notFound)
    default:
        return fail("\(error.reason).", status: ExitStatus.failure)
    }
}

private func printReport(_ report: SyncReport) {
    var line = "sent \(report.sent), received \(report.received), conflicts settled \(report.settled)"
    if !report.skipped.isEmpty { line += ", skipped \(report.skipped.count) (another item here has the same account and service)" }
    if report.devicesRemoved > 0 { line += ", removed \(report.devicesRemoved) device\(report.devicesRemoved == 1 ? "" : "s") that left" }
    print(line)
}

extension IdentityKeyChoice: ExpressibleByArgument {}

/// What `--identity-key` says in the help of setup and join.
private let identityKeyHelp = ArgumentHelp(
    "Where this device's identity key in the circle lives: auto (in the TPM when this machine has one, else in software), tpm (refused without a TPM), software.",
    valueName: "where")

/// `--identity-key tpm` on a machine whose TPM is missing or does not answer: refused before the
/// keychain is opened, so nothing is written.
private func requireTPM(for choice: IdentityKeyChoice) throws {
    guard choice == .tpm, !EnclaveTPM.isAvailable else { return }
    let why = EnclaveTPM.configuredTCTI.map { "the TPM (\($0)) does not answer" } ?? EnclaveTPM.noTPM
    throw fail("--identity-key tpm: \(why); use --identity-key auto or software.", status: ExitStatus.usage)
}

private func defaultDeviceName() -> String {
    var buffer = [CChar](repeating: 0, count: 256)
    guard gethostname(&buffer, buffer.count - 1) == 0 else { return "device" }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

struct SyncSetup: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "setup",
        abstract: "Start a circle on this device, with an empty git repository as its remote, and sync."
    )

    @OptionGroup var options: KeychainOptions

    @Option(help: ArgumentHelp("The git remote (any URL git reaches: ssh, https, file://, a path).", valueName: "url"))
    var remote: String

    @Option(help: ArgumentHelp("What the circle calls this device (default: the host name).", valueName: "name"))
    var deviceName: String?

    @Option(help: identityKeyHelp)
    var identityKey: IdentityKeyChoice = .auto

    func run() throws {
        try requireTPM(for: identityKey)
        let (engine, opened) = try engine(options)
        do {
            let report = try engine.setup(remote: remote, deviceName: deviceName ?? defaultDeviceName(), identityKey: identityKey)
            print("keychain '\(opened.label)' now syncs with \(remote) as \(deviceName ?? defaultDeviceName())")
            printReport(report)
        } catch { throw syncFailure(error) }
    }
}

struct SyncJoin: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "join",
        abstract: "Ask to join the circle at a remote: prints a pairing code, then waits for a member to approve it.",
        discussion: """
        On a device already in the circle, run 'keychainctl sync approve CODE' after checking that it shows \
        the same code. Only then does this device receive the circle's key; until then it reads nothing.
        """
    )

    @OptionGroup var options: KeychainOptions

    @Option(help: ArgumentHelp("The circle's git remote.", valueName: "url"))
    var remote: String

    @Option(help: ArgumentHelp("What the circle calls this device (default: the host name).", valueName: "name"))
    var deviceName: String?

    @Option(help: ArgumentHelp("How long to wait for the approval, in seconds (0: do not wait; 'sync now' completes the join later).", valueName: "seconds"))
    var wait: Int = 600

    @Option(help: identityKeyHelp)
    var identityKey: IdentityKeyChoice = .auto

    func run() throws {
        try requireTPM(for: identityKey)
        let (engine, _) = try engine(options)
        let code: String
        do {
            code = try engine.requestJoin(remote: remote, deviceName: deviceName ?? defaultDeviceName(), identityKey: identityKey)
        } catch { throw syncFailure(error) }
        print("pairing code: \(code)")
        print("on a device of the circle, run: keychainctl sync approve \(code)")
        fflush(nil)  // the code shows before the wait, also through a pipe
        guard wait > 0 else { return }
        var waited = 0
        while waited < wait {
            sleep(2)
            waited += 2
            if let report = try Self.syncIfApproved(engine) {
                print("approved: this device is in the circle")
                printReport(report)
                return
            }
        }
        throw fail("no approval within \(wait) s; 'keychainctl sync now' completes the join once a member approved it.", status: ExitStatus.failure)
    }

    /// A sync, or nil while no member has approved this device yet.
    private static func syncIfApproved(_ engine: SyncEngine) throws -> SyncReport? {
        let result: Result<SyncReport, SyncError>
        do { result = .success(try engine.sync()) } catch { result = .failure(error) }
        switch result {
        case .success(let report): return report
        case .failure(let error) where error.kind == .withheld || error.kind == .unknownGeneration: return nil
        case .failure(let error): throw syncFailure(error)
        }
    }
}

struct SyncApprove: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "approve",
        abstract: "Admit the device that asked to join with this pairing code (compare it with the joining device's screen)."
    )

    @OptionGroup var options: KeychainOptions

    @Argument(help: ArgumentHelp("The code 'sync join' printed on the other device.", valueName: "code"))
    var code: String

    func run() throws {
        let (engine, _) = try engine(options)
        do {
            let device = try engine.approve(code: code)
            print("approved device \(device); it reads the circle's items at its next sync")
        } catch { throw syncFailure(error) }
    }
}

struct SyncNow: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "now",
        abstract: "Sync now: fetch, check and apply the other devices' changes, send this device's, push."
    )

    @OptionGroup var options: KeychainOptions

    func run() throws {
        // Nothing new on either side: said after one fetch, without the PIN (and its KDF).
        let (locked, opened) = try engine(options, unlocking: false)
        do { if let report = try locked.quickSync() { return printReport(report) } } catch { throw syncFailure(error) }
        let engine = SyncEngine(keychain: opened.keychain, master: try opened.unlock(), workTree: locked.workTree)
        do { printReport(try engine.sync(tryingQuick: false, fetched: locked.fetchedByQuickSync)) } catch { throw syncFailure(error) }
    }
}

struct SyncStatus: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show the remote, the circle's devices, the last sync, pending changes, settled conflicts, where the identity key lives and the last error."
    )

    @OptionGroup var options: KeychainOptions

    @Flag(help: "Print JSON (Docs/parts/json-output.md).")
    var json = false

    func run() throws {
        let (engine, opened) = try engine(options)
        let status: SyncEngine.Status
        do { status = try engine.status() } catch { throw syncFailure(error) }
        guard status.remote != nil else {
            if json { print("{\"keychain\":\(JSON.string(opened.label)),\"syncing\":false}") } else { print("keychain '\(opened.label)' is in no circle") }
            return
        }
        // The device list needs the remote; without it the rest still shows.
        var devices: [SyncEngine.Device] = []
        var fetchError: String?
        if status.isMember {
            do { devices = try engine.devices() } catch { fetchError = error.reason }
        }
        let last = status.lastSync.map { formatTime(Int64($0 / 1000)) }
        if json {
            let list = devices.map { "{\"id\":\(JSON.string($0.id)),\"name\":\($0.name.map(JSON.string) ?? "null"),\"thisDevice\":\($0.isThisDevice)}" }
            var fields = ["\"keychain\":\(JSON.string(opened.label))", "\"syncing\":true", "\"remote\":\(JSON.string(status.remote ?? ""))",
                          "\"device\":\(JSON.string(status.device ?? ""))", "\"deviceName\":\(status.deviceName.map(JSON.string) ?? "null")",
                          "\"approved\":\(status.isMember)", "\"devices\":[\(list.joined(separator: ","))]"]
            fields += ["\"lastSync\":\(last.map(JSON.string) ?? "null")", "\"pendingChanges\":\(status.pending)", "\"conflictsSettled\":\(status.settled)",
                       "\"lastError\":\((status.lastError ?? fetchError).map(JSON.string) ?? "null")",
                       "\"identityKey\":\(status.identityKey.map { JSON.string($0.rawValue) } ?? "null")"]
            print("{" + fields.joined(separator: ",") + "}")
            return
        }
        print("keychain:          \(opened.label)")
        print("remote:            \(status.remote ?? "")")
        print("this device:       \(status.deviceName ?? "") (\(status.device ?? ""))\(status.isMember ? "" : ", waiting for approval")")
        for device in devices {
            print("device:            \(device.name ?? "(no name yet)") \(device.id)\(device.isThisDevice ? " (this one)" : "")")
        }
        print("last sync:         \(last ?? "never")")
        print("pending changes:   \(status.pending)")
        print("conflicts settled: \(status.settled)")
        print("identity key:      \(status.identityKey == .tpm ? "TPM" : "software")")
        if let error = status.lastError ?? fetchError { print("last error:        \(error)") }
    }
}

struct SyncRemoveDevice: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove-device",
        abstract: "Remove a device from the circle and rotate the circle's key: it cannot read anything written afterwards."
    )

    @OptionGroup var options: KeychainOptions

    @Argument(help: ArgumentHelp("The device's name or id (see 'sync status').", valueName: "device"))
    var device: String

    func run() throws {
        let (engine, _) = try engine(options)
        do {
            let removed = try engine.removeDevice(device)
            print("removed device \(removed); the circle's key was rotated")
        } catch { throw syncFailure(error) }
    }
}

struct SyncLeave: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "leave",
        abstract: "Leave the circle: a last sync, then this device asks to be removed (the next member to sync removes it and rotates the key) and forgets its keys; its items stay in the keychain."
    )

    @OptionGroup var options: KeychainOptions

    @Flag(help: "Only forget the circle here, without touching the remote (it is gone or unreachable).")
    var local = false

    func run() throws {
        let (engine, opened) = try engine(options)
        do {
            try engine.leave(local: local)
            print("keychain '\(opened.label)' left its circle")
        } catch { throw syncFailure(error) }
    }
}

/// A time as UTC ISO 8601 (no locale, no time zone).
private func formatTime(_ seconds: Int64) -> String {
    var time = time_t(seconds)
    var parts = tm()
    gmtime_r(&time, &parts)
    var buffer = [CChar](repeating: 0, count: 32)
    let count = strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%SZ", &parts)
    return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
