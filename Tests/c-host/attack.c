/*
 * attack.c — an attacker's PKCS#11 client for the security tests (Tests/interop/test_attack_*.sh):
 *   attack MODULE guess LABEL PROCS PIN     PROCS processes, started together, each logging in with PIN
 *                                           until the answer is no longer CKR_PIN_INCORRECT; prints
 *                                           "incorrect=N locked=N ok=N other=N" over all attempts
 *   attack MODULE login LABEL USER PIN      one C_Login (USER: user, so); prints the CK_RV in hex
 * The token is chosen by its label. Exit status 0 when the run completed (whatever the CK_RVs),
 * 1 when the PKCS#11 set-up failed.
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include "labelled-token.h"

/* One guessing process: logs in until the answer changes; writes its tallies to `out`. */
static void guesser(const char *module, const char *label, const char *pin, int start, int out) {
    char go;
    if (read(start, &go, 1) != 1) _exit(1);
    CK_SESSION_HANDLE session = open_labelled_session(module, label);
    long tally[4] = {0, 0, 0, 0}; /* incorrect, locked, ok, other */
    for (int i = 0; i < 1000; i++) {
        CK_RV rv = p11->C_Login(session, CKU_USER, (CK_UTF8CHAR_PTR)pin, strlen(pin));
        if (rv == CKR_PIN_INCORRECT) { tally[0]++; continue; }
        if (rv == CKR_PIN_LOCKED) tally[1]++;
        else if (rv == CKR_OK) tally[2]++;
        else { tally[3]++; fprintf(stderr, "C_Login: 0x%lx\n", rv); }
        break;
    }
    if (write(out, tally, sizeof tally) != (ssize_t)sizeof tally) _exit(1);
    _exit(0);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: attack MODULE guess LABEL PROCS PIN | login LABEL USER PIN\n"); return 64; }
    const char *module = argv[1];
    if (strcmp(argv[2], "guess") == 0 && argc == 6) {
        int procs = atoi(argv[4]);
        if (procs < 1 || procs > 64) return 64;
        int start[2], results[2];
        if (pipe(start) != 0 || pipe(results) != 0) return 1;
        for (int i = 0; i < procs; i++) {
            pid_t pid = fork();
            if (pid < 0) return 1;
            if (pid == 0) { close(start[1]); close(results[0]); guesser(module, argv[3], argv[5], start[0], results[1]); }
        }
        close(start[0]);
        close(results[1]);
        /* All processes wait on the pipe, so that they guess at the same moment. */
        for (int i = 0; i < procs; i++) if (write(start[1], "g", 1) != 1) return 1;
        long total[4] = {0, 0, 0, 0};
        long tally[4];
        int reports = 0;
        while (read(results[0], tally, sizeof tally) == (ssize_t)sizeof tally) {
            for (int k = 0; k < 4; k++) total[k] += tally[k];
            reports++;
        }
        int failed = 0;
        for (int i = 0; i < procs; i++) {
            int status;
            if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
        }
        if (failed || reports != procs) { fprintf(stderr, "a guessing process failed\n"); return 1; }
        printf("incorrect=%ld locked=%ld ok=%ld other=%ld\n", total[0], total[1], total[2], total[3]);
        return 0;
    }
    if (strcmp(argv[2], "login") == 0 && argc == 6) {
        CK_SESSION_HANDLE session = open_labelled_session(module, argv[3]);
        CK_USER_TYPE user = strcmp(argv[4], "so") == 0 ? CKU_SO : CKU_USER;
        CK_RV rv = p11->C_Login(session, user, (CK_UTF8CHAR_PTR)argv[5], strlen(argv[5]));
        printf("0x%08lx\n", rv);
        return 0;
    }
    fprintf(stderr, "unknown command %s\n", argv[2]);
    return 64;
}
