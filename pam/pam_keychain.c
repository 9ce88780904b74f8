/*
 * pam_keychain.so: unlock the login keychains with the login password (Docs/security.md,
 * "The unlock session").
 *
 *   auth      optional  pam_keychain.so      keeps the password the stack just checked
 *   session   optional  pam_keychain.so      gives the login keychains to keychaind
 *   password  optional  pam_keychain.so      changes their user PIN with the login password
 *
 * The work is done by `keychainctl pam-helper` run as the user (never as root), with the
 * password on a pipe; the module waits for it at most `timeout` seconds (default 10). Every
 * function returns PAM_IGNORE or PAM_SUCCESS: nothing here ever blocks a login or a password
 * change. Options: keychainctl=PATH, agent=SOCKET (KEYCHAIN_PKCS11_AGENT for the helper),
 * timeout=SECONDS, debug.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>
#include <security/pam_ext.h>
#include <security/pam_modules.h>

#ifndef KEYCHAINCTL_PATH
#define KEYCHAINCTL_PATH "/usr/bin/keychainctl"
#endif

#define PASSWORD_DATA "keychain-pkcs11-login-password"

struct options {
    const char *keychainctl;
    const char *agent;
    int timeout;
    int debug;
    int ask_old;
};

static void parse(int argc, const char **argv, struct options *o) {
    o->keychainctl = KEYCHAINCTL_PATH;
    o->agent = NULL;
    o->timeout = 10;
    o->debug = 0;
    o->ask_old = 0;
    for (int i = 0; i < argc; i++) {
        if (strncmp(argv[i], "keychainctl=", 12) == 0) o->keychainctl = argv[i] + 12;
        else if (strncmp(argv[i], "agent=", 6) == 0) o->agent = argv[i] + 6;
        else if (strncmp(argv[i], "timeout=", 8) == 0) o->timeout = atoi(argv[i] + 8);
        else if (strcmp(argv[i], "debug") == 0) o->debug = 1;
        else if (strcmp(argv[i], "ask_old") == 0) o->ask_old = 1;
    }
    if (o->timeout <= 0 || o->timeout > 120) o->timeout = 10;
}

static void wipe_free(pam_handle_t *pamh, void *data, int status) {
    (void)pamh;
    (void)status;
    if (data) {
        explicit_bzero(data, strlen(data));
        free(data);
    }
}

/* Runs `keychainctl pam-helper MODE` as the user, writing `input` to its standard input. */
static void run_helper(pam_handle_t *pamh, const struct options *o, const char *mode, const char *input) {
    const char *user = NULL;
    if (pam_get_user(pamh, &user, NULL) != PAM_SUCCESS || !user) return;
    struct passwd pw, *found = NULL;
    char buffer[4096];
    if (getpwnam_r(user, &pw, buffer, sizeof buffer, &found) != 0 || !found) {
        pam_syslog(pamh, LOG_WARNING, "pam_keychain: no user %s", user);
        return;
    }
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return;
    const char *runtime = pam_getenv(pamh, "XDG_RUNTIME_DIR");
    char runtime_default[64];
    snprintf(runtime_default, sizeof runtime_default, "/run/user/%u", (unsigned)pw.pw_uid);
    pid_t child = fork();
    if (child < 0) {
        close(fds[0]);
        close(fds[1]);
        return;
    }
    if (child == 0) {
        /* The user's identity, environment and standard input; never root. */
        if (dup2(fds[0], 0) < 0) _exit(127);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0 && !o->debug) { dup2(devnull, 1); dup2(devnull, 2); }
        if (setgid(pw.pw_gid) != 0 || initgroups(pw.pw_name, pw.pw_gid) != 0 || setuid(pw.pw_uid) != 0 || (getuid() == 0 && pw.pw_uid != 0)) _exit(126);
        char home[4200], runtime_env[4200], agent_env[4200], path_env[] = "PATH=/usr/local/bin:/usr/bin:/bin";
        snprintf(home, sizeof home, "HOME=%s", pw.pw_dir);
        snprintf(runtime_env, sizeof runtime_env, "XDG_RUNTIME_DIR=%s", runtime ? runtime : runtime_default);
        char *envp[5];
        int n = 0;
        envp[n++] = home;
        envp[n++] = runtime_env;
        envp[n++] = path_env;
        if (o->agent) {
            snprintf(agent_env, sizeof agent_env, "KEYCHAIN_PKCS11_AGENT=%s", o->agent);
            envp[n++] = agent_env;
        }
        envp[n] = NULL;
        char *args[] = {(char *)o->keychainctl, "pam-helper", (char *)mode, NULL};
        execve(o->keychainctl, args, envp);
        _exit(127);
    }
    close(fds[0]);
    size_t length = strlen(input), sent = 0;
    signal(SIGPIPE, SIG_IGN);
    while (sent < length) {
        ssize_t w = write(fds[1], input + sent, length - sent);
        if (w > 0) sent += (size_t)w;
        else if (w < 0 && errno == EINTR) continue;
        else break;
    }
    close(fds[1]);
    /* Wait, bounded: a stuck helper is killed, and the login goes on. */
    int status = 0;
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        pid_t done = waitpid(child, &status, WNOHANG);
        if (done == child) break;
        if (done < 0 && errno != EINTR) break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec >= o->timeout) {
            kill(child, SIGKILL);
            waitpid(child, &status, 0);
            pam_syslog(pamh, LOG_WARNING, "pam_keychain: keychainctl pam-helper %s timed out", mode);
            return;
        }
        usleep(20000);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        pam_syslog(pamh, LOG_NOTICE, "pam_keychain: keychainctl pam-helper %s for %s did not complete (status %d)", mode, user, status);
}

PAM_EXTERN int pam_sm_authenticate(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)flags; (void)argc; (void)argv;
    const void *item = NULL;
    if (pam_get_item(pamh, PAM_AUTHTOK, &item) == PAM_SUCCESS && item) {
        char *copy = strdup(item);
        if (copy && pam_set_data(pamh, PASSWORD_DATA, copy, wipe_free) != PAM_SUCCESS) wipe_free(pamh, copy, 0);
    }
    return PAM_IGNORE;
}

PAM_EXTERN int pam_sm_setcred(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)pamh; (void)flags; (void)argc; (void)argv;
    return PAM_IGNORE;
}

PAM_EXTERN int pam_sm_open_session(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)flags;
    struct options o;
    parse(argc, argv, &o);
    const void *password = NULL;
    if (pam_get_data(pamh, PASSWORD_DATA, &password) != PAM_SUCCESS || !password) return PAM_IGNORE;
    char *line = NULL;
    if (asprintf(&line, "%s\n", (const char *)password) < 0) return PAM_IGNORE;
    run_helper(pamh, &o, "unlock", line);
    explicit_bzero(line, strlen(line));
    free(line);
    /* The password is not kept beyond the session's start. */
    pam_set_data(pamh, PASSWORD_DATA, NULL, NULL);
    return PAM_SUCCESS;
}

PAM_EXTERN int pam_sm_close_session(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    (void)pamh; (void)flags; (void)argc; (void)argv;
    return PAM_SUCCESS;
}

PAM_EXTERN int pam_sm_chauthtok(pam_handle_t *pamh, int flags, int argc, const char **argv) {
    struct options o;
    parse(argc, argv, &o);
    if (flags & PAM_PRELIM_CHECK) {
        /* A change by root carries no old password; with ask_old the module asks for it (the
         * keychains' PINs can change only with it). */
        const void *old = NULL;
        if (o.ask_old && (pam_get_item(pamh, PAM_OLDAUTHTOK, &old) != PAM_SUCCESS || !old)) {
            const char *answer = NULL;
            (void)pam_get_authtok(pamh, PAM_OLDAUTHTOK, &answer, "Current password (for the keychains): ");
        }
        return PAM_IGNORE;
    }
    if (!(flags & PAM_UPDATE_AUTHTOK)) return PAM_IGNORE;
    const void *old = NULL, *new = NULL;
    if (pam_get_item(pamh, PAM_OLDAUTHTOK, &old) != PAM_SUCCESS || !old) return PAM_IGNORE;
    if (pam_get_item(pamh, PAM_AUTHTOK, &new) != PAM_SUCCESS || !new) return PAM_IGNORE;
    char *lines = NULL;
    if (asprintf(&lines, "%s\n%s\n", (const char *)old, (const char *)new) < 0) return PAM_IGNORE;
    run_helper(pamh, &o, "change-pin", lines);
    explicit_bzero(lines, strlen(lines));
    free(lines);
    return PAM_IGNORE;
}
