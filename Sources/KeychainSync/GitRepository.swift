import Glibc
import KeychainCrypto

/// A program's exit and what it wrote, from `Subprocess.run`.
public struct SubprocessResult: Sendable {
    public let status: Int32
    public let output: [UInt8]
    public let errors: [UInt8]

    public var succeeded: Bool { status == 0 }
    public var outputText: String { String(decoding: output, as: UTF8.self) }
    public var errorText: String { String(decoding: errors, as: UTF8.self) }
}

/// Runs a program with posix_spawnp and waits for it, reading its standard output and error
/// through pipes (both drained together, so a chatty program cannot block on a full pipe). The
/// child's standard input is /dev/null: git never waits on a prompt of ours.
public enum Subprocess {
    public static func run(_ arguments: [String], environment: [String: String] = [:]) throws(SyncError) -> SubprocessResult {
        guard let program = arguments.first else { throw SyncError(.malformed, "no program to run") }
        var outPipe: [Int32] = [-1, -1], errPipe: [Int32] = [-1, -1]
        guard pipe(&outPipe) == 0 else { throw SyncError(.crypto, "pipe: \(String(cString: strerror(errno)))") }
        guard pipe(&errPipe) == 0 else {
            close(outPipe[0]); close(outPipe[1])
            throw SyncError(.crypto, "pipe: \(String(cString: strerror(errno)))")
        }
        // Not inherited by other programs the host starts meanwhile (the child gets its copies by dup2).
        for fd in outPipe + errPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errPipe[1], 2)
        // The caller's environment with the given changes (a value of "" removes the variable).
        var variables: [String: String] = [:]
        var index = 0
        while let entry = environ[index] {
            let text = String(cString: entry)
            if let equals = text.firstIndex(of: "=") { variables[String(text[..<equals])] = String(text[text.index(after: equals)...]) }
            index += 1
        }
        for (key, value) in environment { variables[key] = value.isEmpty ? nil : value }
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = variables.sorted { $0.key < $1.key }.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv { free(pointer) }
            for pointer in envp { free(pointer) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawnp(&pid, program, &actions, nil, argv, envp)
        close(outPipe[1])
        close(errPipe[1])
        guard spawned == 0 else {
            close(outPipe[0]); close(errPipe[0])
            throw SyncError(.crypto, "cannot run \(program): \(String(cString: strerror(spawned)))")
        }
        var output: [UInt8] = [], errors: [UInt8] = []
        var open = [outPipe[0], errPipe[0]]
        var buffer = [UInt8](repeating: 0, count: 65536)
        while !open.isEmpty {
            var fds = open.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            if poll(&fds, nfds_t(fds.count), -1) < 0 {
                if errno == EINTR { continue }
                break
            }
            for entry in fds where entry.revents != 0 {
                let count = buffer.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress, $0.count) }
                if count > 0 {
                    if entry.fd == outPipe[0] { output += buffer[..<count] } else { errors += buffer[..<count] }
                } else if count == 0 || (errno != EINTR && errno != EAGAIN) {
                    close(entry.fd)
                    open.removeAll { $0 == entry.fd }
                }
            }
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let exited = (status & 0x7f) == 0
        return SubprocessResult(status: exited ? (status >> 8) & 0xff : 128 + (status & 0x7f), output: output, errors: errors)
    }
}

/// The circle's repository as a git work tree of this device, driven through the system's git
/// (Docs/sync.md, "A sync"): any remote git reaches, with git's own credentials. One branch,
/// `main`; commits by "keychain-pkcs11" with the device id as e-mail, no signing.
public struct GitRepository: Sendable {
    public enum PushResult: Sendable, Equatable {
        case pushed
        /// Another device pushed first: fetch, merge, try again.
        case rejected
        case failed(String)
    }

    public let directory: String
    public let remote: String
    private let environment: [String: String]

    public init(directory: String, remote: String, device: String) {
        self.directory = directory
        self.remote = remote
        // No user configuration or system configuration can turn on hooks, signing or pagers
        // here; identity and default branch are the circle's.
        environment = [
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "LC_ALL": "C",
            "GIT_AUTHOR_NAME": "keychain-pkcs11", "GIT_AUTHOR_EMAIL": "\(device)@keychain-pkcs11",
            "GIT_COMMITTER_NAME": "keychain-pkcs11", "GIT_COMMITTER_EMAIL": "\(device)@keychain-pkcs11",
            "GIT_AUTHOR_DATE": "", "GIT_COMMITTER_DATE": "",
        ]
    }

    @discardableResult
    func git(_ arguments: [String], allowFailure: Bool = false) throws(SyncError) -> SubprocessResult {
        let result = try Subprocess.run(["git", "-C", directory, "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgSign=false",
                                         "-c", "init.defaultBranch=main"] + arguments, environment: environment)
        if !result.succeeded, !allowFailure {
            throw SyncError(.malformed, "git \(arguments.first ?? ""): \(result.errorText.trimmedLines)")
        }
        return result
    }

    /// Makes the work tree if it is not there (a fresh `git init` with the remote as `origin`),
    /// and points `origin` at `remote`.
    public func prepare() throws(SyncError) {
        if access(directory + "/.git", F_OK) != 0 {
            guard mkdir(directory, 0o700) == 0 || errno == EEXIST else { throw SyncError(.malformed, "cannot make \(directory): \(String(cString: strerror(errno)))") }
            try git(["init", "-q", "-b", "main"])
            try git(["remote", "add", "origin", remote])
        } else {
            try git(["remote", "set-url", "origin", remote])
        }
    }

    /// Removes the lock files a git killed mid-way leaves (a fetch's ref lock, say), which would
    /// make the next git command here fail. Only for a caller holding the work tree's lock: no
    /// git of ours runs here meanwhile.
    public func removeStaleLocks() {
        for stale in ["index.lock", "HEAD.lock", "ORIG_HEAD.lock", "config.lock", "packed-refs.lock", "refs/heads/main.lock",
                      "refs/remotes/origin/main.lock", "FETCH_HEAD.lock", "shallow.lock"] {
            unlink(directory + "/.git/" + stale)
        }
    }

    /// Puts the work tree back at its last commit: what a git or a sync killed mid-way leaves
    /// behind — git's lock files, an unfinished merge, files written but not committed — is
    /// dropped (a sync writes everything again from the keychain). Only for a caller holding the
    /// work tree's lock, when nothing of ours runs in it: a lock file here is stale.
    public func recover() throws(SyncError) {
        guard access(directory + "/.git", F_OK) == 0 else { return }
        removeStaleLocks()
        if access(directory + "/.git/MERGE_HEAD", F_OK) == 0 { try git(["merge", "--abort"], allowFailure: true) }
        if try hasCommits() { try git(["reset", "-q", "--hard", "HEAD"]) }
        try git(["clean", "-q", "-f", "-d"])
    }

    /// Fetches the remote's `main`; false when the remote has none yet (a new, empty repository).
    public func fetch() throws(SyncError) -> Bool {
        let result = try git(["fetch", "-q", "origin", "main"], allowFailure: true)
        if result.succeeded { return true }
        let text = result.errorText
        if text.contains("couldn't find remote ref") || text.contains("could not find remote ref") { return false }
        throw SyncError(.malformed, "git fetch: \(text.trimmedLines)")
    }

    /// Whether the work tree has a commit yet.
    public func hasCommits() throws(SyncError) -> Bool {
        if looseHead() != nil { return true }
        return try git(["rev-parse", "-q", "--verify", "HEAD"], allowFailure: true).succeeded
    }

    /// `main`'s commit when HEAD is `main` and `main` a loose ref (as a commit leaves them), read
    /// from the files: no process. nil for anything else (packed refs, a detached HEAD, no commit
    /// yet), which the callers ask git about.
    func looseHead() -> String? {
        guard WorkTreeFiles.read(directory + "/.git/HEAD").map({ String(decoding: $0, as: UTF8.self) }) == "ref: refs/heads/main\n" else { return nil }
        return Self.objectName(WorkTreeFiles.read(directory + "/.git/refs/heads/main"))
    }

    /// The fetched `origin/main`'s commit when it is a loose ref, read from its file; nil otherwise.
    func looseRemote() -> String? { Self.objectName(WorkTreeFiles.read(directory + "/.git/refs/remotes/origin/main")) }

    /// Merges the fetched `origin/main` into `main` without resolving anything: the paths both
    /// sides changed are returned, with the merge left open for the caller to settle and commit.
    public func mergeFetched() throws(SyncError) -> [String] {
        guard try hasCommits() else {
            try git(["reset", "-q", "--hard", "origin/main"])
            return []
        }
        // A fast-forward when this side has nothing of its own: a merge commit there would be
        // news for the other devices, whose syncs would merge and push it back, and so on.
        let result = try git(["merge", "-q", "--no-edit", "origin/main"], allowFailure: true)
        if result.succeeded { return [] }
        let conflicted = try git(["diff", "--name-only", "--diff-filter=U", "-z"])
        let paths = conflicted.output.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
        if paths.isEmpty { throw SyncError(.malformed, "git merge: \(result.errorText.trimmedLines)") }
        return paths
    }

    /// The two sides of a conflicted path: ours (stage 2) and theirs (stage 3); nil for a side
    /// that deleted it.
    public func conflictSides(_ path: String) throws(SyncError) -> (ours: [UInt8]?, theirs: [UInt8]?) {
        let ours = try git(["show", ":2:\(path)"], allowFailure: true)
        let theirs = try git(["show", ":3:\(path)"], allowFailure: true)
        return (ours.succeeded ? ours.output : nil, theirs.succeeded ? theirs.output : nil)
    }

    /// Stages everything in the work tree and commits it (nothing to commit is not an error).
    public func commitAll(_ message: String) throws(SyncError) {
        try git(["add", "-A"])
        // Nothing staged (exit 0; 1 when something is) and no merge to conclude: no commit. (Not
        // `status`, which also walks the tree for untracked files `add -A` has just taken.)
        let staged = try git(["diff", "--cached", "--quiet"], allowFailure: true)
        guard staged.status == 0 || staged.status == 1 else { throw SyncError(.malformed, "git diff: \(staged.errorText.trimmedLines)") }
        if staged.status == 0, try git(["rev-parse", "-q", "--verify", "MERGE_HEAD"], allowFailure: true).succeeded == false { return }
        try git(["commit", "-q", "--no-verify", "-m", message])
    }

    /// The commits of the work tree's `HEAD` and of the fetched `origin/main` (nil where there is none).
    public func revisions() throws(SyncError) -> (head: String?, remote: String?) {
        if let head = looseHead(), let remote = looseRemote() {
            return (head, remote)
        }
        let result = try git(["rev-parse", "HEAD", "refs/remotes/origin/main"], allowFailure: true)
        let lines = result.outputText.split(separator: "\n").map(String.init)
        guard result.succeeded, lines.count == 2 else {
            let head = try git(["rev-parse", "-q", "--verify", "HEAD"], allowFailure: true)
            return (head.succeeded ? head.outputText.split(separator: "\n").first.map(String.init) : nil, nil)
        }
        return (lines[0], lines[1])
    }

    /// A loose ref file's object name: 40 or 64 lower-case hex digits and a newline; nil otherwise.
    static func objectName(_ file: [UInt8]?) -> String? {
        guard let file, file.last == 0x0a else { return nil }
        let name = file.dropLast()
        guard name.count == 40 || name.count == 64, name.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else { return nil }
        return String(decoding: name, as: UTF8.self)
    }

    /// Whether `main` holds a commit that `origin/main`, as last fetched, does not (or there is
    /// no `origin/main` yet): false when a push would have nothing to send.
    public func hasUnpushedCommits() throws(SyncError) -> Bool {
        // Nothing to push when main is where the fetch left origin/main (read from the refs' files).
        if let head = looseHead(), looseRemote() == head { return false }
        let result = try git(["rev-list", "-n", "1", "origin/main..HEAD"], allowFailure: true)
        return !result.succeeded || !result.output.isEmpty
    }

    public func push() throws(SyncError) -> PushResult {
        let result = try git(["push", "-q", "origin", "main:main"], allowFailure: true)
        if result.succeeded { return .pushed }
        let text = result.errorText
        if text.contains("[rejected]") || text.contains("non-fast-forward") || text.contains("fetch first") { return .rejected }
        return .failed(text.trimmedLines)
    }

    /// The path of a file in the work tree.
    public func path(_ relative: String) -> String { directory + "/" + relative }
}

extension String {
    /// Without leading and trailing blanks and line ends (git's messages end in a newline).
    var trimmedLines: String {
        let kept = drop { $0 == " " || $0 == "\n" }
        return String(kept.reversed().drop { $0 == " " || $0 == "\n" }.reversed())
    }
}

/// Files of the work tree: whole reads, atomic writes (a temporary file renamed over the name, so
/// a sync killed mid-write leaves the old file or the new, never half of one), plain writes for
/// what a sync commits before it ends, listings.
public enum WorkTreeFiles {
    public static func read(_ path: String) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        // One read of the file's size (one more finds its end); a file that grows meanwhile is
        // read on in steps.
        var status = stat()
        let expected = fstat(fd, &status) == 0 ? max(Int(status.st_size), 0) : 0
        var result = [UInt8](repeating: 0, count: expected + 1)
        var filled = 0
        while true {
            if filled == result.count { result += [UInt8](repeating: 0, count: max(result.count, 4096)) }
            let count = result.withUnsafeMutableBytes { buffer -> Int in
                guard let base = buffer.baseAddress else { return -1 }
                return Glibc.read(fd, base + filled, buffer.count - filled)
            }
            if count < 0, errno == EINTR { continue }
            if count < 0 { return nil }
            if count == 0 { break }
            filled += count
        }
        result.removeLast(result.count - filled)
        return result
    }

    public static func write(_ bytes: [UInt8], to path: String) throws(SyncError) {
        let temporary = path + ".partial"
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SyncError(.malformed, "cannot write \(path): \(String(cString: strerror(errno)))") }
        do { try System.writeAll(fd, bytes) } catch {
            close(fd)
            unlink(temporary)
            throw SyncError(.malformed, "cannot write \(path): \(error.reason)")
        }
        guard fsync(fd) == 0, close(fd) == 0, rename(temporary, path) == 0 else {
            unlink(temporary)
            throw SyncError(.malformed, "cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// Writes a file that the running sync commits before it ends (an item file, the manifest):
    /// the old file unlinked, the new one written under its name, no fsync. A sync killed before
    /// its commit leaves nothing that lasts (`GitRepository.recover()` puts the work tree back at
    /// its last commit before the next one), so the temporary file, rename and fsync of
    /// `write(_:to:)` buy nothing here — and on ext4 a rename over a file flushes it at once:
    /// for 1,000 item files that was more than half the sync's own work (Docs/performance.md).
    public static func writeForCommit(_ bytes: [UInt8], to path: String) throws(SyncError) {
        guard unlink(path) == 0 || errno == ENOENT else { throw SyncError(.malformed, "cannot replace \(path): \(String(cString: strerror(errno)))") }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SyncError(.malformed, "cannot write \(path): \(String(cString: strerror(errno)))") }
        do { try System.writeAll(fd, bytes) } catch {
            close(fd)
            throw SyncError(.malformed, "cannot write \(path): \(error.reason)")
        }
        guard close(fd) == 0 else { throw SyncError(.malformed, "cannot write \(path): \(String(cString: strerror(errno)))") }
    }

    /// The plain files of a folder, sorted; empty when the folder is not there.
    public static func list(_ directory: String) -> [String] {
        guard let handle = opendir(directory) else { return [] }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != ".", name != "..", !name.hasSuffix(".partial") { names.append(name) }
        }
        return names.sorted()
    }

    /// Makes an empty file at `path` (if it is not there) that survives a crash or power loss:
    /// the folder holding it is flushed after.
    public static func makeDurableMarker(_ path: String) throws(SyncError) {
        guard access(path, F_OK) != 0 else { return }
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw SyncError(.malformed, "cannot make \(path): \(String(cString: strerror(errno)))") }
        close(fd)
        let folder = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        let directory = open(folder.isEmpty ? (path.hasPrefix("/") ? "/" : ".") : folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directory >= 0 else { throw SyncError(.malformed, "cannot open the folder of \(path): \(String(cString: strerror(errno)))") }
        defer { close(directory) }
        guard fsync(directory) == 0 else { throw SyncError(.malformed, "cannot flush the folder of \(path): \(String(cString: strerror(errno)))") }
    }

    public static func makeDirectory(_ path: String) throws(SyncError) {
        var built = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/") {
            built += "/" + part
            if mkdir(built, 0o700) != 0, errno != EEXIST { throw SyncError(.malformed, "cannot make \(built): \(String(cString: strerror(errno)))") }
        }
    }
}
