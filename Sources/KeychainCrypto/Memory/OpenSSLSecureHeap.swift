internal import COpenSSL
import Glibc

/// OpenSSL's secure heap, for the key objects OpenSSL builds from our keys.
///
/// `SecurePages` keeps our own copies of secrets out of core dumps and swap, but a key in use is
/// also an OpenSSL object (EVP_PKEY), and OpenSSL puts the private numbers of such objects — RSA
/// d, p, q and the CRT values, EC scalars, Ed25519/X25519/Ed448/X448 private keys — in its secure
/// heap (`BN_secure_new`, `OPENSSL_secure_malloc`) when one exists, on the ordinary heap
/// otherwise. The secure heap is one `mmap` per process, marked `MADV_DONTDUMP` and locked with
/// `mlock` (left unlocked, still out of dumps, beyond `RLIMIT_MEMLOCK`).
///
/// It is process-wide and can only be made once, so the module makes it lazily: the first time
/// private key material is handed to OpenSSL (`prepare()`), only if the host has not made one
/// itself (then the host's is used as it is), with the size of the `openssl_secure_heap`
/// setting (1 MiB by default; `off` never makes one). Processes that load the module without
/// using a private key (p11-kit's proxy in every GnuTLS program) never pay for it.
///
/// OpenSSL's secure heap fails allocations when full rather than falling back, and the host's
/// own private keys go there too once it exists. So the module keeps its share small: when more
/// than half is used (`isCrowded`), the token drops keys it keeps ready, and a key that cannot
/// be built is retried once after dropping them.
///
/// What stays outside: an RSA key's Montgomery contexts, which OpenSSL allocates on the ordinary
/// heap at its first use and which hold copies of p and q (Docs/security.md, attacker 4b).
public enum OpenSSLSecureHeap {
    /// The default size. The module's half of 1 MiB holds about 370 ready RSA-2048 keys (1.4 KiB
    /// each) or thousands of EC and Edwards keys.
    public static let defaultSize = 1 << 20
    /// The smallest allocation OpenSSL hands out from it (a power of two).
    static let minimumAllocation = 16

    private final class State: @unchecked Sendable {
        let mutex = PThreadMutex(.plain)
        var requestedSize = OpenSSLSecureHeap.defaultSize
        var decided = false
        /// The size of the heap this module made; 0 when it made none.
        var madeSize = 0

        func locked<T>(_ body: () -> T) -> T {
            mutex.withLock(body)
        }
    }

    private static let state = State()

    /// The size to make (rounded up to a power of two, at most 64 MiB; 0 for none). Takes effect
    /// only before the first `prepare()`.
    public static func configure(size: Int) {
        state.locked {
            guard !state.decided else { return }
            state.requestedSize = roundedSize(size)
        }
    }

    /// Makes the secure heap, once, unless configured off or the host made one. Called before
    /// private key material is given to OpenSSL.
    static func prepare() {
        state.locked {
            guard !state.decided else { return }
            state.decided = true
            guard state.requestedSize > 0, CRYPTO_secure_malloc_initialized() == 0 else { return }
            // 1: made and locked; 2: made, not locked (RLIMIT_MEMLOCK); 0: not made.
            if CRYPTO_secure_malloc_init(state.requestedSize, minimumAllocation) != 0 {
                state.madeSize = state.requestedSize
            }
        }
    }

    /// Whether a secure heap exists in this process (made by the module or by the host).
    public static var isAvailable: Bool { CRYPTO_secure_malloc_initialized() != 0 }

    /// The size of the heap the module made, 0 when it made none.
    public static var madeSize: Int { state.locked { state.madeSize } }

    /// True when the heap the module made is more than half used: time to drop ready keys, so
    /// that the host's own secure allocations keep room.
    public static var isCrowded: Bool {
        let size = madeSize
        return size > 0 && CRYPTO_secure_used() > size / 2
    }

    /// `size` as OpenSSL accepts it: a power of two between 16 KiB and 64 MiB, or 0.
    static func roundedSize(_ size: Int) -> Int {
        guard size > 0 else { return 0 }
        var rounded = 16 << 10
        while rounded < size && rounded < 64 << 20 { rounded <<= 1 }
        return rounded
    }

    /// Parses a setting: `off`/`0`, or a number of bytes with an optional K/M suffix.
    /// Returns nil for anything else (the caller keeps the default).
    public static func parseSize(_ text: String) -> Int? {
        let word = text.lowercased()
        if word == "off" || word == "no" || word == "0" { return 0 }
        var digits = Substring(word)
        var unit = 1
        if let last = digits.last, last == "k" || last == "m" {
            unit = last == "k" ? 1 << 10 : 1 << 20
            digits = digits.dropLast()
        }
        guard let number = Int(digits), number > 0, number <= (64 << 20) / unit else { return nil }
        return number * unit
    }
}
