import CPKCS11
import Glibc
import XCTest

/// Loads the built libkeychain-pkcs11.so as a host does and calls through its function list.
final class LoadedModuleTests: XCTestCase {
    func test_the_built_shared_library_loads_and_answers() throws {
        // Under ThreadSanitizer the instrumented library needs the runtime's symbols, which the
        // test executable does not export to libraries it opens; the other runs cover this test.
        try XCTSkipIf(getenv("KEYCHAIN_TEST_SANITIZER").map { String(cString: $0) } == "thread", "ThreadSanitizer run")
        let directory = testBinaryDirectory()
        let path = directory + "/libkeychain-pkcs11.so"
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL) else {
            return XCTFail("dlopen \(path): \(String(cString: dlerror()))")
        }
        defer { dlclose(handle) }
        guard let symbol = dlsym(handle, "C_GetFunctionList") else { return XCTFail("C_GetFunctionList is not exported") }
        XCTAssertNil(dlsym(handle, "$s6PKCS1112C_InitializeyS2uSvSgF"), "Swift symbols are not exported")
        typealias GetFunctionList = @convention(c) (UnsafeMutablePointer<UnsafeMutablePointer<CK_FUNCTION_LIST>?>?) -> CK_RV
        var list: UnsafeMutablePointer<CK_FUNCTION_LIST>?
        XCTAssertEqual(unsafeBitCast(symbol, to: GetFunctionList.self)(&list), CK_RV(CKR_OK))
        guard let functions = list?.pointee else { return XCTFail("no function list") }
        XCTAssertEqual(functions.version.major, 2)
        XCTAssertEqual(functions.version.minor, 40)
        var template = Array("/tmp/kc-dl.XXXXXX".utf8CString)
        let keychains = template.withUnsafeMutableBufferPointer { String(cString: mkdtemp($0.baseAddress!)) }
        defer { _ = system("rm -rf '\(keychains)'") }
        setenv("KEYCHAIN_PKCS11_DIR", keychains, 1)
        XCTAssertEqual(functions.C_Initialize(nil), CK_RV(CKR_OK))
        var count: CK_ULONG = 0
        XCTAssertEqual(functions.C_GetSlotList!(0, nil, &count), CK_RV(CKR_OK))
        XCTAssertEqual(count, 1)
        XCTAssertEqual(functions.C_Finalize(nil), CK_RV(CKR_OK))
    }
}

/// The folder of the test executable, where SwiftPM also puts the built products.
func testBinaryDirectory() -> String {
    var buffer = [CChar](repeating: 0, count: 4096)
    let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    let path = String(decoding: buffer.prefix(max(length, 0)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    var directory = String(path[..<(path.lastIndex(of: "/") ?? path.endIndex)])
    // Linux test bundles are executables named *.xctest inside the build folder.
    if directory.hasSuffix(".xctest") { directory = String(directory[..<(directory.lastIndex(of: "/") ?? directory.endIndex)]) }
    return directory
}
