internal import CTSS2
import Glibc
import KeychainCrypto

/// One connection to a TPM: the owner of a TCTI context (from tpm2-tss's TCTI loader) and the
/// ESYS_CONTEXT over it, with this connection's primary key and session; all freed in `deinit`.
///
/// Every command runs under the connection's lock: the lock protects the ESYS context, which
/// tpm2-tss does not share between threads, so it is held for one TPM command (or the few of one
/// operation) and nothing else. Commands are sent asynchronously and their answers awaited with
/// a deadline (`Timeouts`), so a TPM that stops answering gives `.timeout` rather than a hang
/// where the TCTI can wait with a limit (`device:`, `mssim:`; tpm2-tss's `swtpm:` and `cmd:`
/// TCTIs block in their receive, but a swtpm that goes away refuses the next connection at once).
/// After a transport failure or a timeout the connection is closed for good: every later call
/// throws `.connectionClosed` with the cause, and the caller opens a new connection.
///
/// Authorisation: a salted HMAC session (salted to the primary key, AES-128-CFB parameter
/// encryption, SHA-256), started once per connection. Object authValues are never sent in the
/// clear, and secrets crossing the bus (sensitive data of Create, ECDH results, unsealed data)
/// are encrypted; what is not secret (a digest to sign, a peer's public point) is authenticated
/// by the HMAC only.
///
/// The socket TCTIs write with write(2), not send(MSG_NOSIGNAL): a TPM that goes away between
/// connection and command would raise SIGPIPE in the host process. Every command runs with
/// SIGPIPE blocked on its thread (`withoutSIGPIPE`), so it is an I/O error instead.
public final class TPMConnection: @unchecked Sendable {
    /// How long a command may take before the connection gives up on the TPM.
    public struct Timeouts: Sendable {
        /// Everything but key generation. Hardware TPMs sign in well under a second.
        public var command: Int32
        /// Create of a key: RSA key generation takes up to a minute on some hardware TPMs.
        public var keyGeneration: Int32

        /// Milliseconds.
        public init(commandMilliseconds: Int32, keyGenerationMilliseconds: Int32) {
            command = commandMilliseconds
            keyGeneration = keyGenerationMilliseconds
        }

        public static let standard = Timeouts(commandMilliseconds: 20_000, keyGenerationMilliseconds: 180_000)
    }

    public let tcti: String
    public let timeouts: Timeouts

    let lock = PThreadMutex(.plain)
    private var tctiContext: OpaquePointer?
    private var esys: OpaquePointer?
    /// The primary key and the session, made on first use (ESYS_TR_NONE until then).
    private var primary = ESYS_TR(ESYS_TR_NONE)
    private var session = ESYS_TR(ESYS_TR_NONE)
    /// Why this connection was closed, once a transport failure or timeout closed it.
    private var closedBy: TPMError?

    /// Opens the TPM a configuration names (`TPMDevice.tcti(configured:)`): `.noTPM` when none.
    public static func open(configured: String?, timeouts: Timeouts = .standard,
                            deviceExists: (String) -> Bool = TPMDevice.fileExists) throws(TPMError) -> TPMConnection {
        guard let tcti = TPMDevice.tcti(configured: configured, deviceExists: deviceExists) else {
            throw TPMError(.noTPM, "no TPM: neither KEYCHAIN_PKCS11_TCTI nor `tcti` is set and \(TPMDevice.defaultDevice) does not exist")
        }
        return try TPMConnection(tcti: tcti, timeouts: timeouts)
    }

    /// Opens a TCTI configuration string (`device:/dev/tpmrm0`, `swtpm:host=…,port=…`, …).
    /// Nothing is sent to the TPM yet.
    public init(tcti: String, timeouts: Timeouts = .standard) throws(TPMError) {
        self.tcti = tcti
        self.timeouts = timeouts
        guard timeouts.command > 0, timeouts.keyGeneration > 0 else { throw .invalidInput("TPM timeouts must be positive") }
        // tpm2-tss logs to stderr: its libraries, and the TCTI's about to be loaded, write to our log instead.
        TPMLog.route(beforeOpening: tcti)
        var context: OpaquePointer?
        var rc = Tss2_TctiLdr_Initialize(tcti, &context)
        guard rc == 0, let context else { throw TPMError(returned: rc, from: "opening TCTI \"\(tcti)\"") }
        tctiContext = context
        var esysContext: OpaquePointer?
        rc = HostOpenSSL.withModuleContextAsDefault { Esys_Initialize(&esysContext, context, nil) }
        guard rc == 0, let esysContext else {
            // deinit finalises the TCTI context.
            throw TPMError(returned: rc, from: "Esys_Initialize")
        }
        esys = esysContext
    }

    deinit {
        if let esys {
            if closedBy == nil {
                // Best effort, bounded like any command: a transient object or session left in a
                // TPM without a resource manager takes one of its few slots until a restart.
                for handle in [session, primary] where handle != ESYS_TR(ESYS_TR_NONE) { try? flush(handle) }
            }
            var context: OpaquePointer? = esys
            // The TCTI says goodbye on its sockets (mssim: a session-end command).
            Self.withoutSIGPIPE { Esys_Finalize(&context) }
        }
        if tctiContext != nil { Self.withoutSIGPIPE { Tss2_TctiLdr_Finalize(&tctiContext) } }
    }

    /// Whether an earlier failure closed this connection.
    public var isClosed: Bool { lock.withLock { closedBy != nil } }

    // MARK: Running commands

    /// Runs one command: `start` sends it (Esys_…_Async), `finish` collects the answer
    /// (Esys_…_Finish), asked again while tpm2-tss says TRY_AGAIN, until `timeout` milliseconds
    /// have passed. Call with `lock` held. tpm2-tss's own OpenSSL work for the command (session
    /// HMACs, parameter encryption, salts) runs in the module's library context, not the host's.
    func execute(_ name: String, timeout: Int32,
                 start: (OpaquePointer) -> TSS2_RC, finish: (OpaquePointer) -> TSS2_RC) throws(TPMError) {
        try HostOpenSSL.withModuleContextAsDefault { () throws(TPMError) in
            try Self.withoutSIGPIPE { () throws(TPMError) in try executeUnguarded(name, timeout: timeout, start: start, finish: finish) }
        }
    }

    /// Runs `body` with SIGPIPE blocked on this thread: a socket TCTI (`swtpm:`, `mssim:`)
    /// writing to a TPM that went away must give an I/O error, not kill the process the module
    /// runs in (whose SIGPIPE disposition is its own). A SIGPIPE raised meanwhile is taken off
    /// this thread's pending set before the mask is put back. Costs three system calls per command,
    /// next to the milliseconds a TPM command takes.
    static func withoutSIGPIPE<R, Failure: Error>(_ body: () throws(Failure) -> R) throws(Failure) -> R {
        var pipe = sigset_t()
        sigemptyset(&pipe)
        sigaddset(&pipe, SIGPIPE)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &pipe, &previous)
        defer {
            if sigismember(&previous, SIGPIPE) == 0 {
                var pending = sigset_t()
                if sigpending(&pending) == 0, sigismember(&pending, SIGPIPE) == 1 {
                    var now = timespec(tv_sec: 0, tv_nsec: 0)
                    _ = sigtimedwait(&pipe, nil, &now)
                }
                pthread_sigmask(SIG_SETMASK, &previous, nil)
            }
        }
        return try body()
    }

    private func executeUnguarded(_ name: String, timeout: Int32,
                                  start: (OpaquePointer) -> TSS2_RC, finish: (OpaquePointer) -> TSS2_RC) throws(TPMError) {
        if let closedBy { throw TPMError(.connectionClosed, "the TPM connection was closed by an earlier failure (\(closedBy.reason))") }
        let esys = try context()
        var rc = start(esys)
        guard rc == 0 else { throw failure(rc, name) }
        let deadline = Self.now() + Int64(timeout)
        while true {
            let remaining = deadline - Self.now()
            guard remaining > 0 else {
                let error = TPMError(.timeout, "\(name): the TPM did not answer within \(timeout) ms")
                closedBy = error
                throw error
            }
            _ = Esys_SetTimeout(esys, Int32(clamping: remaining))
            rc = finish(esys)
            if rc == 0 { return }
            guard rc & 0xFFFF == kc_TSS2_BASE_RC_TRY_AGAIN, rc & kc_TSS2_RC_LAYER_MASK != 0 else { throw failure(rc, name) }
        }
    }

    /// The ESYS context, while the connection has one.
    private func context() throws(TPMError) -> OpaquePointer {
        guard let esys else { throw TPMError(.connectionClosed, "the TPM connection is not open") }
        return esys
    }

    /// The error of a failed command; a transport failure closes the connection.
    private func failure(_ rc: TSS2_RC, _ name: String) -> TPMError {
        let error = TPMError(returned: rc, from: name)
        if error.code.isTransportFailure { closedBy = error }
        return error
    }

    /// Milliseconds on the monotonic clock.
    private static func now() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000
    }

    // MARK: Primary key and session

    /// Makes the primary key and the session now (each command does it on first use): whether
    /// this TPM answers and can hold our keys.
    public func prepare() throws(TPMError) {
        try lock.withLock { () throws(TPMError) in _ = try ready() }
    }

    /// The primary key and the HMAC session, made on first use. Call with `lock` held.
    func ready() throws(TPMError) -> (primary: ESYS_TR, session: ESYS_TR) {
        if primary == ESYS_TR(ESYS_TR_NONE) {
            var template = TPMTemplates.primary()
            var sensitive = TPM2B_SENSITIVE_CREATE()
            var outsideInfo = TPM2B_DATA()
            var pcrs = TPML_PCR_SELECTION()
            var handle = ESYS_TR(ESYS_TR_NONE)
            try execute("Esys_CreatePrimary", timeout: timeouts.keyGeneration, start: {
                Esys_CreatePrimary_Async($0, ESYS_TR(ESYS_TR_RH_OWNER), ESYS_TR(ESYS_TR_PASSWORD), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                                         &sensitive, &template, &outsideInfo, &pcrs)
            }, finish: {
                var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
                var creationData: UnsafeMutablePointer<TPM2B_CREATION_DATA>?
                var creationHash: UnsafeMutablePointer<TPM2B_DIGEST>?
                var ticket: UnsafeMutablePointer<TPMT_TK_CREATION>?
                defer { Esys_Free(outPublic); Esys_Free(creationData); Esys_Free(creationHash); Esys_Free(ticket) }
                return Esys_CreatePrimary_Finish($0, &handle, &outPublic, &creationData, &creationHash, &ticket)
            })
            primary = handle
        }
        if session == ESYS_TR(ESYS_TR_NONE) {
            var symmetric = TPMT_SYM_DEF()
            symmetric.algorithm = kc_TPM2_ALG_AES
            symmetric.keyBits.aes = kc_TPM2_AES_128
            symmetric.mode.aes = kc_TPM2_ALG_CFB
            var handle = ESYS_TR(ESYS_TR_NONE)
            let salt = primary
            try execute("Esys_StartAuthSession", timeout: timeouts.command, start: {
                Esys_StartAuthSession_Async($0, salt, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE),
                                            nil, kc_TPM2_SE_HMAC, &symmetric, kc_TPM2_ALG_SHA256)
            }, finish: { Esys_StartAuthSession_Finish($0, &handle) })
            session = handle
        }
        return (primary, session)
    }

    /// Sets the session's parameter encryption for the next command: `decrypt` encrypts the
    /// command's first parameter, `encrypt` the response's (each only where that is a TPM2B).
    func useSession(decrypt: Bool, encrypt: Bool) throws(TPMError) -> ESYS_TR {
        let (_, session) = try ready()
        let esys = try context()
        var attributes = kc_TPMA_SESSION_CONTINUESESSION
        if decrypt { attributes |= kc_TPMA_SESSION_DECRYPT }
        if encrypt { attributes |= kc_TPMA_SESSION_ENCRYPT }
        let rc = Esys_TRSess_SetAttributes(esys, session, attributes, 0xFF)
        guard rc == 0 else { throw TPMError(returned: rc, from: "Esys_TRSess_SetAttributes") }
        return session
    }

    /// Gives ESAPI an object's authValue for the commands in `body`, then overwrites ESAPI's
    /// copy with zeros. Call with `lock` held.
    func withAuthorization<R>(_ handle: ESYS_TR, _ authValue: SecureBytes,
                              _ body: () throws(TPMError) -> R) throws(TPMError) -> R {
        let esys = try context()
        var auth = try authValue.authorization(what: "the authValue")
        let rc = Esys_TR_SetAuth(esys, handle, &auth)
        TPMBuffer.wipe(&auth)
        guard rc == 0 else { throw TPMError(returned: rc, from: "Esys_TR_SetAuth") }
        defer {
            var empty = TPM2B_AUTH()
            _ = Esys_TR_SetAuth(esys, handle, &empty)
        }
        return try body()
    }

    /// Runs one command on the loaded object `handle` with its authValue, through the session
    /// (`start` gets the context and the session). Call with `lock` held.
    func executeAuthorized(_ name: String, on handle: ESYS_TR, authValue: SecureBytes, decrypt: Bool, encrypt: Bool,
                           start: (OpaquePointer, ESYS_TR) -> TSS2_RC, finish: (OpaquePointer) -> TSS2_RC) throws(TPMError) {
        let session = try useSession(decrypt: decrypt, encrypt: encrypt)
        try withAuthorization(handle, authValue) { () throws(TPMError) in
            try execute(name, timeout: timeouts.command, start: { start($0, session) }, finish: finish)
        }
    }

    /// Flushes a transient object (a loaded key). Call with `lock` held.
    func flush(_ handle: ESYS_TR) throws(TPMError) {
        try execute("Esys_FlushContext", timeout: timeouts.command,
                    start: { Esys_FlushContext_Async($0, handle) }, finish: { Esys_FlushContext_Finish($0) })
    }

    /// Loads a blob under the primary key; the caller flushes the handle. Call with `lock` held.
    func load(_ blob: TPMBlob) throws(TPMError) -> ESYS_TR {
        var (_, publicPart, privatePart) = try blob.parts()
        let (primary, _) = try ready()
        let session = try useSession(decrypt: false, encrypt: false)
        var handle = ESYS_TR(ESYS_TR_NONE)
        try execute("Esys_Load", timeout: timeouts.command, start: {
            Esys_Load_Async($0, primary, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &privatePart, &publicPart)
        }, finish: { Esys_Load_Finish($0, &handle) })
        return handle
    }

    /// Creates an object under the primary key and returns its blob. Call with `lock` held.
    /// Our copy of the sensitive part is wiped; tpm2-tss 3.2.1 keeps one of its own in the ESYS
    /// context (`in.Create.inSensitiveData`) until the next Create or `Esys_Finalize`, unwiped.
    func create(_ template: TPM2B_PUBLIC, kind: TPMBlob.Kind, authValue: SecureBytes, data: SecureBytes?,
                timeout: Int32) throws(TPMError) -> TPMBlob {
        var template = template
        var sensitive = TPM2B_SENSITIVE_CREATE()
        defer { TPMBuffer.wipe(&sensitive) }
        sensitive.sensitive.userAuth = try authValue.authorization(what: "the authValue")
        if let data {
            try data.withUnsafeBytes { (raw) throws(TPMError) in
                try TPMBuffer.fill(&sensitive.sensitive.data.buffer, size: &sensitive.sensitive.data.size, with: raw,
                                   limit: TPMTemplates.maximumSealedLength, what: "the secret to seal")
            }
        }
        let (primary, _) = try ready()
        let session = try useSession(decrypt: true, encrypt: true)
        var outsideInfo = TPM2B_DATA()
        var pcrs = TPML_PCR_SELECTION()
        var outPrivate: UnsafeMutablePointer<TPM2B_PRIVATE>?
        var outPublic: UnsafeMutablePointer<TPM2B_PUBLIC>?
        defer { Esys_Free(outPrivate); Esys_Free(outPublic) }
        try execute("Esys_Create", timeout: timeout, start: {
            Esys_Create_Async($0, primary, session, ESYS_TR(ESYS_TR_NONE), ESYS_TR(ESYS_TR_NONE), &sensitive, &template, &outsideInfo, &pcrs)
        }, finish: {
            var creationData: UnsafeMutablePointer<TPM2B_CREATION_DATA>?
            var creationHash: UnsafeMutablePointer<TPM2B_DIGEST>?
            var ticket: UnsafeMutablePointer<TPMT_TK_CREATION>?
            defer { Esys_Free(creationData); Esys_Free(creationHash); Esys_Free(ticket) }
            return Esys_Create_Finish($0, &outPrivate, &outPublic, &creationData, &creationHash, &ticket)
        })
        guard let outPrivate, let outPublic else { throw TPMError(.invalidInput, "Esys_Create returned no object") }
        return try TPMBlob.make(kind: kind, public: outPublic.pointee, private: outPrivate.pointee)
    }
}
