import CryptoKit
import Glibc
import TPMTestSupport
import XCTest

/// Not one of Apple's samples: the library's silence in the app it runs in. CryptoKit's Secure
/// Enclave calls with a TPM that does not answer write nothing to the app's standard error.
final class EnclaveQuietTests: AppleEnclaveCase {
    func test_an_unreachable_tpm_is_unavailable_and_nothing_reaches_stderr() throws {
        // A TPM named but not answering (nothing listens on the port): tpm2-tss complains, to our
        // log, never on the standard error of the app the library runs in.
        removeTPM()
        let bound = try XCTUnwrap(SoftwareTPM.bindPort(0))
        close(bound.socket)
        for tcti in ["mssim:host=127.0.0.1,port=\(bound.port)", "swtpm:host=127.0.0.1,port=\(bound.port)"] {
            setenv("KEYCHAIN_PKCS11_TCTI", tcti, 1)
            let (available, written) = capturingStandardError { SecureEnclave.isAvailable }
            XCTAssertFalse(available, tcti)
            XCTAssertEqual(written, "", tcti)
            let (_, creating) = try capturingStandardError {
                XCTAssertThrowsError(try SecureEnclave.P256.Signing.PrivateKey()) { XCTAssertNotNil($0 as? CryptoKitError) }
            }
            XCTAssertEqual(creating, "", tcti)
        }
    }
}
