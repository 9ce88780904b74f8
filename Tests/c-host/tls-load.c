/*
 * tls-load.c — full TLS handshakes against a server on 127.0.0.1, from several threads, each
 * followed by one HTTP request whose answer is checked: counts what succeeded and what failed,
 * for the server tests (zero failed handshakes) and the handshake benchmark (handshakes per second).
 *
 * Usage: tls-load PORT CAFILE THREADS (count N | seconds S) [tls1.2|tls1.3] [expect TEXT]
 *   count N    N handshakes in all, shared by the threads
 *   seconds S  as many as fit in S seconds
 * Every handshake is new (no session resumption), verifies the server's certificate against
 * CAFILE for the name "localhost", sends "GET / HTTP/1.0" and requires TEXT (default "hello") in
 * the answer. Prints "handshakes: OK ok, F failed, R per second" and, for the first few
 * failures, why. Exit 0 when none failed.
 *
 * Build: gcc -Wall -Wextra -Werror -O2 -pthread tls-load.c -o tls-load -lssl -lcrypto
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

static int port;
static SSL_CTX *context;
static const char *expected = "hello";
static atomic_long remaining;   /* count mode: handshakes left to start */
static double deadline;         /* seconds mode: stop starting new ones after this */
static atomic_long succeeded, failed;
static atomic_int reported;
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void report(const char *what)
{
    if (atomic_fetch_add(&reported, 1) >= 5)
        return;
    char detail[256] = "";
    unsigned long error = ERR_get_error();
    if (error != 0)
        ERR_error_string_n(error, detail, sizeof(detail));
    pthread_mutex_lock(&report_lock);
    printf("failure: %s %s\n", what, detail);
    fflush(stdout);
    pthread_mutex_unlock(&report_lock);
}

/* One connection: handshake, request, answer. 1 when all went as expected. */
static int one(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        report("socket");
        return 0;
    }
    struct sockaddr_in address = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int yes = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
    struct timeval timeout = { .tv_sec = 20, .tv_usec = 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
    if (connect(fd, (struct sockaddr *)&address, sizeof(address)) != 0) {
        report("connect");
        close(fd);
        return 0;
    }
    int ok = 0;
    SSL *ssl = SSL_new(context);
    if (ssl == NULL) {
        report("SSL_new");
        close(fd);
        return 0;
    }
    SSL_set_fd(ssl, fd);
    SSL_set_tlsext_host_name(ssl, "localhost");
    SSL_set1_host(ssl, "localhost");
    if (SSL_connect(ssl) != 1) {
        report("handshake");
    } else {
        static const char request[] = "GET / HTTP/1.0\r\nHost: localhost\r\n\r\n";
        char answer[4096];
        int total = 0, got;
        if (SSL_write(ssl, request, (int)strlen(request)) <= 0) {
            report("write");
        } else {
            while (total < (int)sizeof(answer) - 1 && (got = SSL_read(ssl, answer + total, (int)sizeof(answer) - 1 - total)) > 0)
                total += got;
            answer[total] = '\0';
            if (strstr(answer, expected) != NULL)
                ok = 1;
            else
                report("answer without the expected text");
        }
        SSL_shutdown(ssl);
    }
    SSL_free(ssl);
    close(fd);
    ERR_clear_error();
    return ok;
}

static void *worker(void *unused)
{
    (void)unused;
    for (;;) {
        if (deadline > 0) {
            if (now() >= deadline)
                break;
        } else if (atomic_fetch_sub(&remaining, 1) <= 0) {
            break;
        }
        if (one())
            atomic_fetch_add(&succeeded, 1);
        else
            atomic_fetch_add(&failed, 1);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: tls-load PORT CAFILE THREADS count N|seconds S [tls1.2|tls1.3] [expect TEXT]\n");
        return 64;
    }
    port = atoi(argv[1]);
    int threads = atoi(argv[3]);
    long amount = atol(argv[5]);
    if (port <= 0 || threads <= 0 || threads > 256 || amount <= 0) {
        fprintf(stderr, "tls-load: bad port, thread count or amount\n");
        return 64;
    }
    context = SSL_CTX_new(TLS_client_method());
    if (context == NULL || SSL_CTX_load_verify_locations(context, argv[2], NULL) != 1) {
        fprintf(stderr, "tls-load: cannot load %s\n", argv[2]);
        return 1;
    }
    SSL_CTX_set_verify(context, SSL_VERIFY_PEER, NULL);
    SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_options(context, SSL_OP_NO_TICKET);
    for (int i = 6; i < argc; i++) {
        if (strcmp(argv[i], "tls1.2") == 0) {
            SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
            SSL_CTX_set_max_proto_version(context, TLS1_2_VERSION);
        } else if (strcmp(argv[i], "tls1.3") == 0) {
            SSL_CTX_set_min_proto_version(context, TLS1_3_VERSION);
        } else if (strcmp(argv[i], "expect") == 0 && i + 1 < argc) {
            expected = argv[++i];
        } else {
            fprintf(stderr, "tls-load: unknown argument %s\n", argv[i]);
            return 64;
        }
    }
    double start = now();
    if (strcmp(argv[4], "seconds") == 0)
        deadline = start + (double)amount;
    else if (strcmp(argv[4], "count") == 0)
        atomic_store(&remaining, amount);
    else {
        fprintf(stderr, "tls-load: count or seconds\n");
        return 64;
    }
    pthread_t ids[256];
    for (int i = 0; i < threads; i++)
        pthread_create(&ids[i], NULL, worker, NULL);
    for (int i = 0; i < threads; i++)
        pthread_join(ids[i], NULL);
    double elapsed = now() - start;
    long ok = atomic_load(&succeeded), bad = atomic_load(&failed);
    printf("handshakes: %ld ok, %ld failed, %.1f per second\n", ok, bad, elapsed > 0 ? (double)ok / elapsed : 0.0);
    SSL_CTX_free(context);
    return bad == 0 ? 0 : 1;
}
