// What both fuzz targets share: under scripts/fuzz.sh (-DFUZZING) libFuzzer's driver runs the
// target's per-input function; in a normal build the target replays files (the committed corpus
// and crashers) once each.
import Glibc

public enum FuzzHarness {
    #if FUZZING
    /// Hands the process to libFuzzer's driver, which calls `callback` once per input.
    public static func runLibFuzzer(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
                                    _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt {
        var count = argc, arguments = argv
        return runFuzzerDriver(&count, &arguments, callback)
    }
    #else
    /// Runs `body` on each file named in `arguments` (folders expanded one level); returns how many.
    public static func replay(_ arguments: ArraySlice<String>, _ body: ([UInt8]) -> Void) -> Int {
        let inputs = RegressionInputs.files(arguments)
        for path in inputs { body(RegressionInputs.read(path)) }
        return inputs.count
    }
    #endif
}

#if FUZZING
/// libFuzzer's driver (from libclang_rt.fuzzer_no_main, linked by scripts/fuzz.sh).
@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(_ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                     _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt
#endif
