import XCTest
import TPMTestSupport
import Glibc
import KeychainCrypto
@testable import KeychainTPM

/// tpm2-tss's own log lines never reach the standard error of the process the module runs in
/// (ssh, Firefox, nginx): with a TPM that is absent, silent or answers errors, stderr stays empty,
/// and the lines that tpm2-tss did write arrive at our log handler instead.
final class TPMLogTests: XCTestCase {
    private let authValue = SecureBytes([UInt8](repeating: 0x5A, count: 32))
    private let timeouts = TPMConnection.Timeouts(commandMilliseconds: 1_000, keyGenerationMilliseconds: 60_000)

    /// Lines the handler received, in order.
    private final class Received: @unchecked Sendable {
        let lock = PThreadMutex(.plain)
        var lines: [(TPMLog.Level, String)] = []
    }
    private var received = Received()

    override func setUp() {
        super.setUp()
        let received = Received()
        self.received = received
        TPMLog.setHandler { level, line in received.lock.withLock { received.lines.append((level, line)) } }
    }

    override func tearDown() {
        TPMLog.setHandler(nil)
        super.tearDown()
    }

    private var lines: [String] { received.lock.withLock { received.lines.map(\.1) } }

    /// A port on 127.0.0.1 that nothing listens on.
    private func closedPort() throws -> UInt16 {
        let bound = try XCTUnwrap(SoftwareTPM.bindPort(0))
        close(bound.socket)
        return bound.port
    }

    func test_an_unreachable_tpm_writes_nothing_to_stderr_and_its_lines_reach_the_handler() throws {
        let port = try closedPort()
        for tcti in ["mssim:host=127.0.0.1,port=\(port)", "swtpm:host=127.0.0.1,port=\(port)"] {
            let (_, written) = try capturingStandardError {
                XCTAssertThrowsError(try TPMConnection(tcti: tcti, timeouts: timeouts)) { XCTAssertNotNil($0 as? TPMError) }
            }
            XCTAssertEqual(written, "", tcti)
        }
        // tpm2-tss did complain (the test would pass vacuously otherwise), to us.
        XCTAssertTrue(lines.contains { $0.hasPrefix("WARNING:tcti:") && $0.contains("Failed to connect to host 127.0.0.1, port \(port)") }, "\(lines)")
        XCTAssertTrue(lines.contains { $0.hasPrefix("ERROR:tcti:") && $0.contains("Failed to instantiate TCTI") }, "\(lines)")
        XCTAssertEqual(received.lock.withLock { received.lines.first?.0 }, .warning)
    }

    func test_a_silent_tpm_writes_nothing_to_stderr() throws {
        let silent = try SilentTPM()
        let (_, written) = try capturingStandardError {
            let connection = try TPMConnection(tcti: silent.tcti, timeouts: timeouts)
            XCTAssertThrowsError(try connection.supportedKeyTypes()) { XCTAssertEqual(($0 as? TPMError)?.code, .timeout, "\($0)") }
            XCTAssertThrowsError(try connection.seal(SecureBytes([1]), authValue: authValue))
        }
        XCTAssertEqual(written, "")
    }

    func test_a_tpm_answering_errors_writes_nothing_to_stderr_and_its_lines_reach_the_handler() throws {
        let first = try SoftwareTPM(), second = try SoftwareTPM()
        defer { first.stop(); second.stop() }
        let (_, written) = try capturingStandardError {
            let blob = try TPMConnection(tcti: first.tcti, timeouts: timeouts).seal(SecureBytes([7, 7, 7]), authValue: authValue)
            // Another TPM refuses the blob: TPM_RC_INTEGRITY from Load, which tpm2-tss reports.
            XCTAssertThrowsError(try TPMConnection(tcti: second.tcti, timeouts: timeouts).unseal(blob, authValue: authValue)) {
                XCTAssertEqual(($0 as? TPMError)?.code.rawValue, 0x1DF)
            }
        }
        XCTAssertEqual(written, "")
        XCTAssertTrue(lines.contains { $0.contains(":esys:") && $0.contains("Esys_Load") }, "\(lines)")
    }

    func test_every_loaded_tpm2_tss_library_is_routed() {
        // libtss2-esys, -sys, -mu, -rc, -tctildr are linked, and the TCTIs used above were loaded.
        XCTAssertGreaterThanOrEqual(TPMLog.routedSlots(), 5)
    }
}
