internal import COpenSSL
import Glibc

/// Memory for secrets, apart from the ordinary heap: private anonymous mappings marked
/// `MADV_DONTDUMP` (left out of core dumps) and, within `RLIMIT_MEMLOCK`, locked in RAM with
/// `mlock` (never written to swap). When the lock limit is reached the pages are still excluded
/// from dumps; nothing fails because of it.
///
/// Buffers of up to 4 KiB come from slots of fixed sizes cut from 64 KiB chunks (a chunk stays
/// mapped, its slots are reused); larger ones get a mapping of their own, unmapped when released.
/// Every slot is wiped before it is reused or unmapped.
public final class SecurePages: @unchecked Sendable {
    static let shared = SecurePages()

    /// Registers the fork handlers now. A library that holds its own lock across fork and whose
    /// callers allocate secure memory under it (the PKCS#11 module's fork gate) calls this first:
    /// prepare handlers run in reverse order of registration, so its own handler then runs
    /// before this one, and no thread waits inside it for the mutex a forking thread holds.
    public static func registerForkHandlers() { _ = shared }

    static let slotSizes = [32, 64, 128, 256, 512, 1024, 2048, 4096]
    static let chunkSize = 64 << 10

    private let mutex = PThreadMutex(.plain)
    private var free: [[UnsafeMutableRawPointer]]

    private init() {
        free = Array(repeating: [], count: Self.slotSizes.count)
        // A fork while another thread holds the mutex would leave the child's copy locked for
        // ever: hold it across fork instead.
        pthread_atfork(
            { SecurePages.shared.mutex.lock() },
            { SecurePages.shared.mutex.unlock() },
            { SecurePages.shared.mutex.unlock() })
    }

    /// A zeroed buffer of at least `count` bytes, and its capacity; nil when no mapping can be made.
    func allocate(_ count: Int) -> (pointer: UnsafeMutableRawPointer, capacity: Int)? {
        guard let slot = Self.slotSizes.firstIndex(where: { $0 >= count }) else {
            let size = Self.roundToPages(count)
            guard let region = Self.map(size) else { return nil }
            return (region, size)
        }
        mutex.lock()
        defer { mutex.unlock() }
        if free[slot].isEmpty {
            guard let chunk = Self.map(Self.chunkSize) else { return nil }
            let size = Self.slotSizes[slot]
            for offset in stride(from: Self.chunkSize - size, through: 0, by: -size) { free[slot].append(chunk + offset) }
        }
        guard let pointer = free[slot].popLast() else { return nil }
        return (pointer, Self.slotSizes[slot])
    }

    /// Wipes a buffer from `allocate` and takes it back.
    func release(_ pointer: UnsafeMutableRawPointer, capacity: Int) {
        OPENSSL_cleanse(pointer, capacity)
        guard capacity <= Self.slotSizes[Self.slotSizes.count - 1], let slot = Self.slotSizes.firstIndex(of: capacity) else {
            munlock(pointer, capacity)
            munmap(pointer, capacity)
            return
        }
        mutex.lock()
        free[slot].append(pointer)
        mutex.unlock()
    }

    /// A private mapping out of core dumps, zeroed in a forked child, locked in RAM if the limit
    /// allows (`test_attack_memory.sh` reads the result in /proc/self/smaps).
    private static func map(_ size: Int) -> UnsafeMutableRawPointer? {
        let region = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        guard let region, region != MAP_FAILED else { return nil }
        _ = madvise(region, size, MADV_DONTDUMP)
        // Not inherited by a child process after fork: a forked host never holds our secrets.
        _ = madvise(region, size, MADV_WIPEONFORK)
        _ = mlock(region, size)
        return region
    }

    private static func roundToPages(_ count: Int) -> Int {
        let page = max(Int(sysconf(Int32(_SC_PAGESIZE))), 4096)
        return (max(count, 1) + page - 1) / page * page
    }
}
