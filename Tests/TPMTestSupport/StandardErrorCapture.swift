import Glibc

/// What a piece of code writes to this process's standard error (file descriptor 2): the
/// descriptor points at a pipe while `body` runs, then back where it was. For tests that require
/// library code to stay silent in its host's stderr.
public func capturingStandardError<R>(_ body: () throws -> R) rethrows -> (result: R, written: String) {
    var ends: [Int32] = [0, 0]
    guard pipe(&ends) == 0 else { return (try body(), "capturingStandardError: pipe failed") }
    let saved = dup(2)
    fflush(nil)
    dup2(ends[1], 2)
    close(ends[1])
    // Reads the pipe as it fills, so a chatty body cannot block on a full pipe.
    var collected: [UInt8] = []
    let flags = fcntl(ends[0], F_GETFL)
    _ = fcntl(ends[0], F_SETFL, flags | O_NONBLOCK)
    func drain() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = read(ends[0], &buffer, buffer.count)
            if count <= 0 { break }
            collected += buffer[0..<count]
        }
    }
    defer { close(ends[0]) }
    let result: R
    do {
        result = try body()
    } catch {
        fflush(nil)
        dup2(saved, 2)
        close(saved)
        throw error
    }
    fflush(nil)
    dup2(saved, 2)
    close(saved)
    drain()
    return (result, String(decoding: collected, as: UTF8.self))
}
