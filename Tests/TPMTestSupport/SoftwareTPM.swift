import Foundation
import Glibc
// A release build (scripts/build-release.sh) compiles every target and finds no XCTest there.
#if canImport(XCTest)
import XCTest
#endif

/// Shared by the test targets that need a TPM (KeychainTPMTests, KeychainCoreTests, PKCS11Tests,
/// KeychainServicesTests, AppleSampleTests).
///
/// A swtpm (Debian's `swtpm socket --tpm2`) on 127.0.0.1 with its own state folder: a fresh
/// TPM, with its own seeds, for each instance. Started with Foundation's Process; stopped (or
/// killed) by its PID.
public final class SoftwareTPM {
    public let port: UInt16
    public let folder: String
    private let process = Process()

    /// The TCTI configuration that reaches it.
    public var tcti: String { "swtpm:host=127.0.0.1,port=\(port)" }

    public init() throws {
        let program = "/usr/bin/swtpm"
        guard access(program, X_OK) == 0 else {
            #if canImport(XCTest)
            throw XCTSkip("swtpm is missing (scripts/install-deps.sh installs it)")
            #else
            throw SoftwareTPMFailure(description: "swtpm is missing (scripts/install-deps.sh installs it)")
            #endif
        }
        folder = NSTemporaryDirectory() + "keychain-tpm-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        port = try Self.freePortPair()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = [
            "socket", "--tpm2",
            "--server", "type=tcp,port=\(port),bindaddr=127.0.0.1",
            "--ctrl", "type=tcp,port=\(port + 1),bindaddr=127.0.0.1",
            "--tpmstate", "dir=\(folder)",
            "--flags", "not-need-init,startup-clear",
        ]
        let log = folder + "/swtpm.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let handle = FileHandle(forWritingAtPath: log)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        // Ready when the TPM port accepts a connection (at most 5 s).
        for _ in 0..<500 {
            if Self.accepts(port) { return }
            guard process.isRunning else { break }
            usleep(10_000)
        }
        stop()
        let said = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        throw SoftwareTPMFailure(description: "swtpm did not listen on \(port): \(said)")
    }

    /// Terminates it (SIGTERM) and waits; the state folder goes too.
    public func stop() {
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: folder)
    }

    /// Kills it without warning, as a TPM that goes away.
    public func kill9() {
        guard process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Two consecutive free ports (the TPM's and its control channel), from the kernel's
    /// ephemeral range: bind port 0, then check the next one is free too.
    private static func freePortPair() throws -> UInt16 {
        for _ in 0..<50 {
            guard let first = bindPort(0) else { continue }
            defer { close(first.socket) }
            guard first.port < UInt16.max, let second = bindPort(first.port + 1) else { continue }
            close(second.socket)
            return first.port
        }
        throw SoftwareTPMFailure(description: "no two consecutive free ports")
    }

    /// A socket bound to 127.0.0.1:`port` (0: any), and its port.
    public static func bindPort(_ port: UInt16) -> (socket: Int32, port: UInt16)? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
            }
        }
        guard bound else { close(fd); return nil }
        return (fd, UInt16(bigEndian: address.sin_port))
    }

    private static func accepts(_ port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

/// A TPM behind the `mssim:` TCTI that stops answering: its platform port answers the TCTI's
/// power-on and NV-on commands (4 bytes each, answered with a 4-byte 0) from a thread, and its
/// TPM port never accepts (TCP completes the handshake from the backlog), so commands go out and
/// no answer comes back.
public final class SilentTPM {
    public let port: UInt16
    private let tpmSocket: Int32
    private let platformSocket: Int32
    private let platform: Thread

    public var tcti: String { "mssim:host=127.0.0.1,port=\(port)" }

    /// `slamming`: the TPM port accepts each connection and closes it at once, as a TPM process
    /// that dies under its client: the client's first write draws a reset, its next one EPIPE.
    public init(slamming: Bool = false) throws {
        for _ in 0..<50 {
            guard let first = SoftwareTPM.bindPort(0) else { continue }
            guard first.port < UInt16.max, let second = SoftwareTPM.bindPort(first.port + 1) else { close(first.socket); continue }
            guard listen(first.socket, 8) == 0, listen(second.socket, 8) == 0 else {
                close(first.socket); close(second.socket); continue
            }
            port = first.port
            tpmSocket = first.socket
            platformSocket = second.socket
            let listening = second.socket
            // Every connection is answered (a process opens one per TCTI it initialises: the
            // mssim TCTI's initialisation waits for this answer with no time limit).
            platform = Thread {
                while true {
                    let connection = accept(listening, nil, nil)
                    guard connection >= 0 else { return }
                    Thread {
                        defer { close(connection) }
                        var command = [UInt8](repeating: 0, count: 4)
                        while read(connection, &command, 4) == 4 {
                            let answer = [UInt8](repeating: 0, count: 4)
                            guard write(connection, answer, 4) == 4 else { return }
                        }
                    }.start()
                }
            }
            platform.start()
            if slamming {
                let tpmListening = first.socket
                Thread {
                    while true {
                        let connection = accept(tpmListening, nil, nil)
                        guard connection >= 0 else { return }
                        close(connection)
                    }
                }.start()
            }
            return
        }
        throw SoftwareTPMFailure(description: "no two consecutive free ports")
    }

    deinit {
        // shutdown wakes a thread still waiting in accept.
        shutdown(platformSocket, Int32(SHUT_RDWR))
        close(platformSocket)
        close(tpmSocket)
    }
}

public struct SoftwareTPMFailure: Error, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}
