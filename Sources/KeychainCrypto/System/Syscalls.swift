import Glibc

/// A failed system call: the errno it set, the call's name and the path it was about. Compared
/// by errno only; `description` reads as a person would write it ("open /x: Permission denied").
public struct SystemError: Error, Equatable, CustomStringConvertible, Sendable {
    /// The errno value (ENOENT, EACCES…).
    public let code: Int32
    public let call: String
    public let path: String?

    public init(_ code: Int32, call: String, path: String? = nil) {
        self.code = code
        self.call = call
        self.path = path
    }

    /// strerror's words for the errno.
    public var reason: String { String(cString: strerror(code)) }
    public var description: String { call + (path.map { " " + $0 } ?? "") + ": " + reason }

    public static func == (lhs: SystemError, rhs: SystemError) -> Bool { lhs.code == rhs.code }
}

/// The system calls the keychain code makes on files, descriptors and sockets, in one place (as
/// swift-system's Syscalls.swift): each turns -1 into a thrown `SystemError` naming the errno,
/// retries EINTR where the call may be interrupted, and passes `System.failure` first, so that a
/// test can make any of them fail (a full disk, a read-only folder, a lock held elsewhere).
public enum System {
    /// The test seam: consulted before each call with the call's name and path (nil for calls on
    /// a descriptor); an errno returned fails the call without making it. Nil outside tests.
    nonisolated(unsafe) public static var failure: ((_ call: String, _ path: String?) -> Int32?)?

    @inline(__always)
    private static func check(_ call: String, _ path: String?) throws(SystemError) {
        if let failure, let code = failure(call, path) { throw SystemError(code, call: call, path: path) }
    }

    /// Runs `body` once; -1 (EINTR included) becomes a `SystemError`.
    @inline(__always)
    private static func once<T: BinaryInteger>(_ call: String, _ path: String?, _ body: () -> T) throws(SystemError) -> T {
        try check(call, path)
        let result = body()
        if result == -1 { throw SystemError(errno, call: call, path: path) }
        return result
    }

    /// Runs `body` until it does not fail with EINTR; -1 becomes a `SystemError`.
    @inline(__always)
    private static func retrying<T: BinaryInteger>(_ call: String, _ path: String?, _ body: () -> T) throws(SystemError) -> T {
        try check(call, path)
        while true {
            let result = body()
            if result != -1 { return result }
            if errno != EINTR { throw SystemError(errno, call: call, path: path) }
        }
    }

    // MARK: paths

    /// open(2); O_CLOEXEC is always added.
    public static func open(_ path: String, _ flags: Int32, mode: mode_t = 0) throws(SystemError) -> Int32 {
        try retrying("open", path) { Glibc.open(path, flags | O_CLOEXEC, mode) }
    }

    /// stat(2) of `path`, following a final symbolic link.
    public static func stat(_ path: String) throws(SystemError) -> Glibc.stat {
        var info = Glibc.stat()
        _ = try retrying("stat", path) { statPath(path, &info) }
        return info
    }

    /// lstat(2): the link itself when `path` is a symbolic link.
    public static func lstat(_ path: String) throws(SystemError) -> Glibc.stat {
        var info = Glibc.stat()
        _ = try retrying("lstat", path) { Glibc.lstat(path, &info) }
        return info
    }

    /// Whether something exists at `path` (a dangling link counts as nothing).
    public static func exists(_ path: String) -> Bool {
        (try? stat(path)) != nil
    }

    public static func unlink(_ path: String) throws(SystemError) {
        _ = try retrying("unlink", path) { Glibc.unlink(path) }
    }

    /// unlink(2), with nothing there counted as done.
    public static func removeIfPresent(_ path: String) throws(SystemError) {
        do { try unlink(path) } catch where error.code == ENOENT {}
    }

    public static func rename(_ source: String, to target: String) throws(SystemError) {
        _ = try retrying("rename", source) { Glibc.rename(source, target) }
    }

    /// link(2): a second name for a file; an existing `target` is EEXIST.
    public static func link(_ source: String, to target: String) throws(SystemError) {
        _ = try retrying("link", target) { Glibc.link(source, target) }
    }

    /// mkdir(2); an existing entry is EEXIST, for the caller to judge.
    public static func mkdir(_ path: String, mode: mode_t) throws(SystemError) {
        _ = try retrying("mkdir", path) { Glibc.mkdir(path, mode) }
    }

    public static func chmod(_ path: String, mode: mode_t) throws(SystemError) {
        _ = try retrying("chmod", path) { Glibc.chmod(path, mode) }
    }

    /// The names in the folder at `path`, without "." and "..".
    public static func directoryEntries(_ path: String) throws(SystemError) -> [String] {
        try check("opendir", path)
        guard let folder = opendir(path) else { throw SystemError(errno, call: "opendir", path: path) }
        defer { closedir(folder) }
        var names: [String] = []
        while let entry = readdir(folder) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != ".", name != ".." { names.append(name) }
        }
        return names
    }

    // MARK: descriptors

    public static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    public static func fstat(_ fd: Int32) throws(SystemError) -> Glibc.stat {
        var info = Glibc.stat()
        _ = try retrying("fstat", nil) { Glibc.fstat(fd, &info) }
        return info
    }

    /// flock(2): LOCK_SH, LOCK_EX, LOCK_UN, with LOCK_NB to fail with EWOULDBLOCK instead of waiting.
    public static func flock(_ fd: Int32, _ operation: Int32) throws(SystemError) {
        _ = try retrying("flock", nil) { flockDescriptor(fd, operation) }
    }

    public static func fsync(_ fd: Int32) throws(SystemError) {
        _ = try retrying("fsync", nil) { Glibc.fsync(fd) }
    }

    public static func ftruncate(_ fd: Int32, to length: Int) throws(SystemError) {
        _ = try retrying("ftruncate", nil) { Glibc.ftruncate(fd, off_t(length)) }
    }

    public static func fchmod(_ fd: Int32, mode: mode_t) throws(SystemError) {
        _ = try retrying("fchmod", nil) { Glibc.fchmod(fd, mode) }
    }

    /// fcntl(2) with an integer argument (F_GETFD, F_SETFD, F_GETFL, F_SETFL…); its result.
    @discardableResult
    public static func fcntl(_ fd: Int32, _ command: Int32, _ argument: Int32 = 0) throws(SystemError) -> Int32 {
        try retrying("fcntl", nil) { Glibc.fcntl(fd, command, argument) }
    }

    /// read(2) into `buffer`: the count read, 0 at the end.
    public static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        try retrying("read", nil) { Glibc.read(fd, buffer.baseAddress, buffer.count) }
    }

    /// pread(2) at `offset`: the count read.
    public static func pread(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, at offset: Int) throws(SystemError) -> Int {
        try retrying("pread", nil) { Glibc.pread(fd, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// Writes all of `bytes` (write(2) until done).
    public static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) {
        try writingAll("write", bytes) { start, count, _ in Glibc.write(fd, start, count) }
    }

    /// Calls `write` (start, count, bytes done so far) until all of `bytes` are written; a call
    /// that writes nothing is EIO.
    private static func writingAll(_ call: String, _ bytes: UnsafeRawBufferPointer,
                                   _ write: (UnsafeRawPointer?, Int, Int) -> Int) throws(SystemError) {
        var written = 0
        while written < bytes.count {
            let count = try retrying(call, nil) { write(bytes.baseAddress.map { $0 + written }, bytes.count - written, written) }
            guard count > 0 else { throw SystemError(EIO, call: call) }
            written += count
        }
    }

    /// Up to `count` bytes from `offset` (pread(2) once): fewer at the end of the file.
    public static func pread(_ fd: Int32, count: Int, at offset: Int) throws(SystemError) -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        let read = bytes.withUnsafeMutableBytes { buffer in Result { () throws(SystemError) in try pread(fd, into: buffer, at: offset) } }
        bytes.removeSubrange(try read.get()...)
        return bytes
    }

    /// Writes all of `bytes` (write(2) until done).
    public static func writeAll(_ fd: Int32, _ bytes: [UInt8]) throws(SystemError) {
        try bytes.withUnsafeBytes { buffer in Result { () throws(SystemError) in try writeAll(fd, buffer) } }.get()
    }

    /// Writes all of `bytes` at `offset` (pwrite(2) until done).
    public static func pwriteAll(_ fd: Int32, _ bytes: [UInt8], at offset: Int) throws(SystemError) {
        try bytes.withUnsafeBytes { buffer in Result { () throws(SystemError) in try pwriteAll(fd, buffer, at: offset) } }.get()
    }

    /// Writes all of `bytes` at `offset` (pwrite(2) until done).
    public static func pwriteAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer, at offset: Int) throws(SystemError) {
        try writingAll("pwrite", bytes) { start, count, done in Glibc.pwrite(fd, start, count, off_t(offset + done)) }
    }

    // MARK: sockets

    /// socket(2); SOCK_CLOEXEC is always added.
    public static func socket(_ domain: Int32, _ type: Int32, _ protocolNumber: Int32 = 0) throws(SystemError) -> Int32 {
        try retrying("socket", nil) { Glibc.socket(domain, type | Int32(SOCK_CLOEXEC.rawValue), protocolNumber) }
    }

    /// bind(2) to `address` (a sockaddr_un as UnlockSession.withUnixAddress gives it).
    public static func bind(_ fd: Int32, _ address: UnsafePointer<sockaddr>, _ length: socklen_t) throws(SystemError) {
        _ = try once("bind", nil) { Glibc.bind(fd, address, length) }
    }

    public static func listen(_ fd: Int32, backlog: Int32) throws(SystemError) {
        _ = try once("listen", nil) { Glibc.listen(fd, backlog) }
    }

    /// accept(2) of the next connection, close-on-exec (Glibc's module has no accept4). EINTR is
    /// thrown, not retried: a server's loop sees the signal that asks it to stop.
    public static func accept(_ fd: Int32) throws(SystemError) -> Int32 {
        let connection = try once("accept", nil) { Glibc.accept(fd, nil, nil) }
        _ = Glibc.fcntl(connection, F_SETFD, FD_CLOEXEC)
        return connection
    }

    /// getsockopt(2) into `value`: the length the option filled.
    public static func getsockopt(_ fd: Int32, _ level: Int32, _ option: Int32, into value: UnsafeMutableRawBufferPointer) throws(SystemError) -> Int {
        var length = socklen_t(value.count)
        _ = try once("getsockopt", nil) { Glibc.getsockopt(fd, level, option, value.baseAddress, &length) }
        return Int(length)
    }

    public static func setsockopt(_ fd: Int32, _ level: Int32, _ option: Int32, _ value: UnsafeRawBufferPointer) throws(SystemError) {
        _ = try once("setsockopt", nil) { Glibc.setsockopt(fd, level, option, value.baseAddress, socklen_t(value.count)) }
    }

    // MARK: pipes, polling, the file mode mask

    /// pipe(2), both ends close-on-exec (Glibc's module has no pipe2): the read end and the write end.
    public static func pipe() throws(SystemError) -> (read: Int32, write: Int32) {
        var ends: [Int32] = [-1, -1]
        _ = try once("pipe", nil) { Glibc.pipe(&ends) }
        for end in ends { _ = Glibc.fcntl(end, F_SETFD, FD_CLOEXEC) }
        return (ends[0], ends[1])
    }

    /// poll(2): how many of `descriptors` are ready (0 when `timeout` ms passed). EINTR is thrown,
    /// not retried: a waiting loop sees the signal that asks it to stop.
    public static func poll(_ descriptors: inout [pollfd], timeout: Int32) throws(SystemError) -> Int {
        let count = nfds_t(descriptors.count)
        return Int(try once("poll", nil) { Glibc.poll(&descriptors, count, timeout) })
    }

    /// umask(2), which cannot fail: the mask before.
    @discardableResult
    public static func umask(_ mask: mode_t) -> mode_t {
        Glibc.umask(mask)
    }
}

// stat(2) and flock(2) by names that do not meet their structures' (inside `System`, `stat`
// and `flock` name the wrappers).
private func statPath(_ path: String, _ info: inout Glibc.stat) -> Int32 { stat(path, &info) }
private func flockDescriptor(_ fd: Int32, _ operation: Int32) -> Int32 { flock(fd, operation) }
