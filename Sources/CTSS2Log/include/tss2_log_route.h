/* Routing tpm2-tss's log lines away from the host process's stderr.
 *
 * tpm2-tss 3.x writes its ERROR/WARNING lines with vfprintf(stderr, …) unless TSS2_LOGFILE names
 * another file, and reads both TSS2_LOG and TSS2_LOGFILE from the environment, which belongs to
 * the program our module runs in. Instead of changing that environment, the `stderr` that the
 * loaded tpm2-tss libraries read is redirected: their global-offset-table slot for the C
 * library's `stderr` variable is pointed at a stream of ours, whose complete lines go to a sink
 * function. Nothing else in the process is touched. */
#ifndef KC_TSS2_LOG_ROUTE_H
#define KC_TSS2_LOG_ROUTE_H

#include <stddef.h>

/* Receives one log line (without its newline), not NUL-terminated, at most 1023 bytes. Called with
 * the stream's lock held by the thread that logged: it must not log through tpm2-tss itself. */
typedef void (*kc_tss2_log_sink)(const char *line, size_t length);

/* Sets the sink (NULL: lines are dropped) and redirects every loaded library whose file name
 * starts with "libtss2-" that does not yet write to our stream. Safe to call repeatedly and from
 * several threads; call it again after loading another tpm2-tss library (a TCTI).
 * Returns the number of slots now pointing at our stream (0 on platforms it does not support),
 * or -1 if a slot could not be made writable. */
int kc_tss2_log_route(kc_tss2_log_sink sink);

/* Loads the TCTI library a TCTI configuration string names ("mssim:host=…" -> libtss2-tcti-mssim.so.0,
 * as tpm2-tss's TCTI loader names it), so that it is redirected before the loader initialises it
 * (a TCTI that cannot connect logs from its initialisation). The library stays loaded. Returns 0 if
 * loaded, -1 if no such library was found (the loader will then report the failure itself). */
int kc_tss2_preload_tcti(const char *configuration);

#endif
