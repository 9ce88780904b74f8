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

/* The first page of the connection's own wal-index mapping (region 0 of its -shm file), through
 * the VFS's xShmMap on the connection's main file: no second file descriptor. Opening and closing
 * the -shm file ourselves would drop every POSIX lock this process holds on it (fcntl locks
 * belong to the process and go with ANY close of the file), and another process would then see
 * no reader here and re-initialise the wal-index under this connection (sqlite.org/howtocorrupt,
 * 2.2). NULL when the connection has no wal-index yet (no read since it opened) or none at all.
 * The mapping is SQLite's: valid until the connection closes, never unmapped by the caller. */
static inline const void *kc_wal_index_region(sqlite3 *db) {
    sqlite3_file *file = NULL;
    volatile void *region = NULL;
    if (db == NULL || sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK) return NULL;
    if (file == NULL || file->pMethods == NULL || file->pMethods->iVersion < 2 || file->pMethods->xShmMap == NULL) return NULL;
    if (file->pMethods->xShmMap(file, 0, 32768, 0, &region) != SQLITE_OK) return NULL;
    return (const void *)region;
}
