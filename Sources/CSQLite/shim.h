#include <sqlite3.h>

#include <stdint.h>
#include <string.h>

/* The change stamp of a WAL-mode database, read from its wal-index header: the first 96 bytes
 * of the -shm file, two copies of a 48-byte header that every writer updates (second copy,
 * barrier, first copy), as SQLite's file-format documentation (walformat.html) describes.
 * Words, in native byte order: 0 iVersion (3007000), 2 iChange (counts transactions), byte 12
 * isInit, 4 mxFrame, 8-9 the WAL salts. Reads the copies as SQLite's own readers do (first,
 * barrier, second) and accepts them only when they agree and the header is initialised.
 * Returns 1 with stamp = {iChange, mxFrame, salt1, salt2}, or 0 (then ask SQLite instead). */
static inline int kc_wal_index_stamp(const void *base, uint32_t stamp[4]) {
    const volatile uint32_t *first = (const volatile uint32_t *)base;
    const volatile uint32_t *second = first + 12;
    for (int attempt = 0; attempt < 8; attempt++) {
        uint32_t a[12], b[12];
        for (int i = 0; i < 12; i++) a[i] = first[i];
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        for (int i = 0; i < 12; i++) b[i] = second[i];
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (memcmp(a, b, sizeof a) != 0) continue;
        if (a[0] != 3007000 || ((const uint8_t *)a)[12] != 1) return 0;
        stamp[0] = a[2];
        stamp[1] = a[4];
        stamp[2] = a[8];
        stamp[3] = a[9];
        return 1;
    }
    return 0;
}
