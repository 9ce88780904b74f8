import ArgumentParser
import Glibc

struct ModulePath: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "module-path",
        abstract: "Print the path of libkeychain-pkcs11.so, for clients such as pkcs11-tool --module.",
        discussion: """
        Examples:
          pkcs11-tool --module "$(keychainctl module-path)" -L
          ssh -I "$(keychainctl module-path)" user@host
        """
    )

    func run() throws {
        guard let path = Self.locate() else {
            throw fail("libkeychain-pkcs11.so not found next to keychainctl or in ../lib; build it with 'swift build' or install it with 'make install'.",
                       status: ExitStatus.failure)
        }
        print(path)
    }

    /// The module beside this executable (a build folder) or in ../lib (an installed prefix).
    static func locate() -> String? {
        guard let directory = executableFolder() else { return nil }
        let parent = String(directory[..<(directory.lastIndex(of: "/") ?? directory.startIndex)])
        let candidates = [directory + "/libkeychain-pkcs11.so", parent + "/lib/libkeychain-pkcs11.so",
                          parent + "/lib/x86_64-linux-gnu/libkeychain-pkcs11.so", parent + "/lib/pkcs11/libkeychain-pkcs11.so",
                          parent + "/lib/x86_64-linux-gnu/pkcs11/libkeychain-pkcs11.so"]
        return candidates.first { access($0, R_OK) == 0 }
    }

    /// The folder of this executable (its real path, from /proc/self/exe).
    static func executableFolder() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return nil }
        let executable = String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return String(executable[..<(executable.lastIndex(of: "/") ?? executable.startIndex)])
    }
}
