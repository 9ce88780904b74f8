#if !FUZZING
import Glibc

/// The files named on the command line, folders expanded one level (a corpus directory).
enum RegressionInputs {
    static func files(_ arguments: ArraySlice<String>) -> [String] {
        var found: [String] = []
        for path in arguments {
            guard let directory = opendir(path) else {
                found.append(path)
                continue
            }
            defer { closedir(directory) }
            var names: [String] = []
            while let entry = readdir(directory) {
                let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
                if name != "." && name != ".." { names.append(name) }
            }
            found += names.sorted().map { path + "/" + $0 }
        }
        return found
    }

    static func read(_ path: String) -> [UInt8] {
        guard let file = fopen(path, "rb") else { return [] }
        defer { fclose(file) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = fread(&buffer, 1, buffer.count, file)
            if count <= 0 { break }
            bytes += buffer.prefix(count)
        }
        return bytes
    }
}
#endif
