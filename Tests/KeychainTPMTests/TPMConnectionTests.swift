import XCTest
import TPMTestSupport
import Glibc
import KeychainCrypto
@testable import KeychainTPM

/// Choosing the TPM, sealing, and a TPM that goes away or stops answering.
final class TPMConnectionTests: XCTestCase {
    private let authValue = SecureBytes([UInt8](repeating: 0x3C, count: 32))
    private let timeouts = TPMConnection.Timeouts(commandMilliseconds: 2_000, keyGenerationMilliseconds: 60_000)

    private static func milliseconds(since start: timespec) -> Int {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1_000_000
    }

    private static func now() -> timespec {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return time
    }

    // MARK: Which TPM

    func test_tcti_comes_from_configuration_then_the_device() {
        XCTAssertEqual(TPMDevice.tcti(configured: "swtpm:host=127.0.0.1,port=2321", deviceExists: { _ in true }), "swtpm:host=127.0.0.1,port=2321")
        XCTAssertEqual(TPMDevice.tcti(configured: nil, deviceExists: { $0 == "/dev/tpmrm0" }), "device:/dev/tpmrm0")
        XCTAssertEqual(TPMDevice.tcti(configured: "", deviceExists: { _ in true }), "device:/dev/tpmrm0")
        XCTAssertNil(TPMDevice.tcti(configured: nil, deviceExists: { _ in false }))
        XCTAssertNil(TPMDevice.tcti(configured: "none", deviceExists: { _ in true }))
    }

    func test_no_tpm_is_its_own_error() {
        for configured in [nil, "none"] {
            XCTAssertThrowsError(try TPMConnection.open(configured: configured, deviceExists: { _ in false })) {
                XCTAssertEqual(($0 as? TPMError)?.code, .noTPM)
                XCTAssertEqual(($0 as? TPMError)?.code.rawValue, 0x004B_0001)
            }
        }
    }

    func test_a_tcti_that_does_not_exist_is_a_tcti_error_not_no_tpm() {
        XCTAssertThrowsError(try TPMConnection(tcti: "no-such-tcti-module:x")) {
            let error = $0 as? TPMError
            XCTAssertNotEqual(error?.code, .noTPM)
            // TSS2_TCTI_RC_NOT_SUPPORTED from the TCTI loader: no libtss2-tcti-no-such-tcti-module.so.
            XCTAssertEqual(error?.code.rawValue, 0x000A_0015, "\(String(describing: error))")
        }
    }

    // MARK: Sealing

    func test_seal_and_unseal_round_trip_and_wrong_auth_is_bad_auth() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let connection = try TPMConnection(tcti: tpm.tcti, timeouts: timeouts)
        let secret = SecureBytes((0..<128).map { UInt8($0) })
        let blob = try connection.seal(secret, authValue: authValue)
        XCTAssertEqual(blob.kind, .sealedData)
        XCTAssertNil(blob.publicKey)
        XCTAssertTrue(try connection.unseal(blob, authValue: authValue).constantTimeEquals(secret))
        // From its bytes, in a new connection.
        let again = try TPMConnection(tcti: tpm.tcti, timeouts: timeouts)
        XCTAssertTrue(try again.unseal(try TPMBlob(bytes: blob.bytes), authValue: authValue).constantTimeEquals(secret))
        XCTAssertThrowsError(try again.unseal(blob, authValue: SecureBytes([1, 2, 3]))) {
            XCTAssertEqual(($0 as? TPMError)?.code.rawValue, 0x9A2)
            XCTAssertEqual(($0 as? TPMError)?.code.response, .badAuthorization)
        }
        XCTAssertThrowsError(try again.loadKey(blob, authValue: authValue)) { XCTAssertEqual(($0 as? TPMError)?.code, .invalidInput) }
    }

    func test_seal_refuses_more_than_128_bytes_and_nothing() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let connection = try TPMConnection(tcti: tpm.tcti, timeouts: timeouts)
        for count in [0, 129] {
            XCTAssertThrowsError(try connection.seal(SecureBytes(count: count), authValue: authValue)) {
                XCTAssertEqual(($0 as? TPMError)?.code, .invalidInput)
            }
        }
    }

    func test_sealed_data_from_one_tpm_does_not_unseal_on_another() throws {
        let first = try SoftwareTPM(), second = try SoftwareTPM()
        defer { first.stop(); second.stop() }
        let blob = try TPMConnection(tcti: first.tcti, timeouts: timeouts).seal(SecureBytes([7, 7, 7]), authValue: authValue)
        XCTAssertThrowsError(try TPMConnection(tcti: second.tcti, timeouts: timeouts).unseal(blob, authValue: authValue)) {
            XCTAssertEqual(($0 as? TPMError)?.code.rawValue, 0x1DF)
        }
    }

    // MARK: A TPM that goes away

    func test_tpm_killed_mid_session_gives_an_error_at_once_and_closes_the_connection() throws {
        let tpm = try SoftwareTPM()
        defer { tpm.stop() }
        let connection = try TPMConnection(tcti: tpm.tcti, timeouts: timeouts)
        let key = try connection.loadKey(try connection.createKey(.ecP256, authValue: authValue), authValue: authValue)
        let digest = [UInt8](repeating: 9, count: 32)
        XCTAssertEqual(try key.sign(digest: digest).count, 64)
        tpm.kill9()
        let start = Self.now()
        XCTAssertThrowsError(try key.sign(digest: digest)) {
            let error = $0 as? TPMError
            // TSS2_TCTI_RC_IO_ERROR: the swtpm TCTI's connection is refused.
            XCTAssertEqual(error?.code.rawValue, 0x000A_000A, "\(String(describing: error))")
        }
        XCTAssertLessThan(Self.milliseconds(since: start), 2_000)
        XCTAssertTrue(connection.isClosed)
        XCTAssertThrowsError(try key.sign(digest: digest)) { XCTAssertEqual(($0 as? TPMError)?.code, .connectionClosed) }
        XCTAssertThrowsError(try connection.seal(SecureBytes([1]), authValue: authValue)) {
            XCTAssertEqual(($0 as? TPMError)?.code, .connectionClosed)
        }
    }

    func test_a_tpm_that_resets_the_connection_is_an_error_not_a_SIGPIPE() throws {
        // The test process keeps SIGPIPE's default action (terminate): were a write to the reset
        // socket to raise it, this test would kill the whole run.
        let previous = signal(SIGPIPE, SIG_DFL)
        defer { signal(SIGPIPE, previous) }
        let slamming = try SilentTPM(slamming: true)
        var connection: TPMConnection? = try TPMConnection(tcti: slamming.tcti, timeouts: TPMConnection.Timeouts(commandMilliseconds: 2_000, keyGenerationMilliseconds: 2_000))
        usleep(100_000) // the reset has arrived before the first command is written
        for _ in 0..<3 {
            XCTAssertThrowsError(try connection?.supportedKeyTypes()) { XCTAssertNotNil($0 as? TPMError, "\($0)") }
        }
        XCTAssertEqual(connection?.isClosed, true)
        // Closing writes the TCTI's goodbye to the reset socket.
        connection = nil
    }

    func test_tpm_that_stops_answering_times_out_within_its_limit() throws {
        let silent = try SilentTPM()
        let connection = try TPMConnection(tcti: silent.tcti, timeouts: TPMConnection.Timeouts(commandMilliseconds: 1_000, keyGenerationMilliseconds: 1_000))
        let start = Self.now()
        XCTAssertThrowsError(try connection.supportedKeyTypes()) {
            XCTAssertEqual(($0 as? TPMError)?.code, .timeout, "\($0)")
        }
        let elapsed = Self.milliseconds(since: start)
        XCTAssertGreaterThanOrEqual(elapsed, 1_000)
        XCTAssertLessThan(elapsed, 3_000)
        XCTAssertThrowsError(try connection.seal(SecureBytes([1]), authValue: authValue)) {
            XCTAssertEqual(($0 as? TPMError)?.code, .connectionClosed)
        }
    }
}
