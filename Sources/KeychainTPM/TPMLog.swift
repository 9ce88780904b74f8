internal import CTSS2Log
import Glibc
import KeychainCrypto

/// tpm2-tss's own log lines (`WARNING:tcti:…`, `ERROR:esys:…`), kept off the standard error of the
/// program we run in. tpm2-tss writes them to `stderr` and takes its settings from the host's
/// environment; rather than change that environment, the `stderr` the tpm2-tss libraries see is
/// redirected to a stream of ours (`CTSS2Log`), and each line comes here. By default a line is
/// written only when `KEYCHAIN_PKCS11_LOG` asks for its level (the module's log setting); a door
/// with a logger of its own installs a handler. `TSS2_LOG` still chooses what tpm2-tss produces,
/// and a `TSS2_LOGFILE` the user set still receives it (tpm2-tss then writes there, not to us).
public enum TPMLog {
    /// tpm2-tss's levels, most severe first.
    public enum Level: Int, Sendable, Comparable {
        case error, warning, info, debug, trace

        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rawValue < rhs.rawValue }

        /// The level at the start of a tpm2-tss line ("WARNING:tcti:src/util/io.c:262:…").
        init(line: Substring) {
            switch line.prefix(while: { $0 != ":" }) {
            case "ERROR": self = .error
            case "WARNING": self = .warning
            case "info": self = .info
            case "debug": self = .debug
            case "trace": self = .trace
            default: self = .warning
            }
        }
    }

    public typealias Handler = @Sendable (Level, String) -> Void

    private static let lock = PThreadMutex(.plain)
    nonisolated(unsafe) private static var handler: Handler?

    /// Where lines go from now on; nil gives back the default (`KEYCHAIN_PKCS11_LOG`).
    public static func setHandler(_ newHandler: Handler?) {
        lock.withLock { handler = newHandler }
    }

    /// Redirects the loaded tpm2-tss libraries and the TCTI library `tcti` names (loading it first,
    /// as tpm2-tss's TCTI loader would) before anything runs in them. Called before every TCTI is
    /// opened; cheap after the first time.
    /// Returns false if a library could not be redirected (its lines may still reach stderr).
    @discardableResult
    static func route(beforeOpening tcti: String) -> Bool {
        _ = kc_tss2_preload_tcti(tcti)
        return kc_tss2_log_route(receive) >= 0
    }

    /// Whether routing works on this machine: the count of tpm2-tss library slots redirected.
    public static func routedSlots() -> Int { Int(kc_tss2_log_route(receive)) }

    /// The sink the C side calls, one line at a time, with its stream locked.
    private static let receive: kc_tss2_log_sink = { bytes, count in
        guard let bytes else { return }
        let line = String(decoding: UnsafeRawBufferPointer(start: bytes, count: count), as: UTF8.self)
        let level = Level(line: line[...])
        if let handler = TPMLog.lock.withLock({ TPMLog.handler }) {
            handler(level, line)
        } else {
            TPMLog.writeIfAsked(level, line)
        }
    }

    /// The default: `KEYCHAIN_PKCS11_LOG` is the module's setting (swift-log's level names, or
    /// unset for silence); a line at that level or more severe goes to standard error, which the
    /// user asked for by setting it.
    private static let configuredLevel: Level? = {
        guard let value = getenv("KEYCHAIN_PKCS11_LOG") else { return nil }
        switch String(cString: value) {
        case "trace": return .trace
        case "debug": return .debug
        case "info", "notice": return .info
        case "warning": return .warning
        case "error", "critical": return .error
        default: return nil
        }
    }()

    private static func writeIfAsked(_ level: Level, _ line: String) {
        guard let wanted = configuredLevel, level <= wanted else { return }
        var text = "keychain-pkcs11 tpm2-tss: " + line + "\n"
        text.withUTF8 { bytes in
            guard let base = bytes.baseAddress else { return }
            var offset = 0
            while offset < bytes.count {
                let written = write(2, base + offset, bytes.count - offset)
                if written <= 0 { break }
                offset += written
            }
        }
    }
}
