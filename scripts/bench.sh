#!/usr/bin/env bash
# Side-by-side benchmark: this module (release build) and SoftHSMv2 (Debian softhsm2, on its own
# temporary token), alternating round by round, with raw OpenSSL in the same run — for signatures
# in the bench process right after each of our measures (EVP, as `openssl speed` does it), for
# ciphers and digests `openssl speed -evp`; prints the median of each measure and the ratios.
#
# Usage: scripts/bench.sh [rounds, default 3] [seconds per measure, default 1]
#                         [object counts for the scale runs, default "1000 10000 100000"]
#                         [PNG file for the plot of find time and memory against N]
# The scale runs create N durable token objects in each token and measure creation, find by
# CKA_LABEL and by CKA_ID, and in fresh processes dlopen+C_Initialize, C_Login and resident
# memory. Logins there use each token's default PIN cost (ours: scrypt N = 2^15).
# SoftHSMv2's file store syncs each object to disk at about 16 creations/s here, so its scale
# runs use a token directory on tmpfs (/dev/shm) — in its favour — and stop at
# BENCH_SOFTHSM_MAX_N objects (default 10000: it searches by reading every object, ~50 µs each).
# BENCH_BASELINE=PATH/libkeychain-pkcs11.so adds an earlier build of this module to the same run
# (single-thread measures, alternating with the others each round) and a "vs baseline" column:
# how a change moved the figures, measured side by side on one machine.
# BENCH_TPM=N adds the TPM rows after the table: scripts/tpm-bench.sh with N signatures per
# measure and the same number of rounds (one swtpm; ESAPI, tpm2-pkcs11, this module, the Apple API).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
seconds=${2:-1}
counts=${3:-1000 10000 100000}
plot=${4:-}
whole=${seconds%.*}
openssl_seconds=$(( ${whole:-0} > 0 ? ${whole:-0} : 1 ))  # openssl speed takes whole seconds
[ -f .build/release-path ] || scripts/build-release.sh >/dev/null
ours=$(cat .build/release-path)/libkeychain-pkcs11.so
softhsm=/usr/lib/softhsm/libsofthsm2.so
[ -f "$softhsm" ] || { echo "bench: SoftHSMv2 not installed (apt-get install softhsm2)" >&2; exit 1; }
work=$(mktemp -d)
fast=$( [ -d /dev/shm ] && mktemp -d -p /dev/shm || mktemp -d )
trap 'rm -rf "$work" "$fast"' EXIT
softhsm_max=${BENCH_SOFTHSM_MAX_N:-10000}
gcc -O2 -Wall -Wextra -IInclude Benchmarks/bench.c -o "$work/bench" -ldl -lcrypto -lsqlite3 -pthread

# run WHO ARGS...: one bench process against a fresh token of WHO, results appended.
run() {
    local who=$1
    shift
    rm -rf "$work/kc" "$work/sh" "$work/state" "$fast/sh" && mkdir -p "$work/sh" "$fast/sh"
    local tokens="$work/sh"
    [ "${1:-}" = scale ] && tokens="$fast/sh"
    printf 'directories.tokendir = %s\nobjectstore.backend = file\nlog.level = ERROR\n' "$tokens" >"$work/softhsm2.conf"
    if [ "$who" = baseline ]; then
        KEYCHAIN_PKCS11_DIR="$work/kc" KEYCHAIN_PKCS11_DEVICE_KEY="$work/state/device-key" "$work/bench" "$BENCH_BASELINE" "$@" |
            sed 's/^@openssl .*//; /^$/d; s/^/baseline /' >>"$work/results"
    elif [ "$who" = keychain ]; then
        # Signatures on raw OpenSSL run inside this process right after ours ("@openssl" lines).
        # Scale runs: raw SQLite then does the same writes per commit beside the keychain file.
        BENCH_RAW_SQLITE="$work/kc/bench.keychain-db" BENCH_OPENSSL_INLINE=1 KEYCHAIN_PKCS11_DIR="$work/kc" KEYCHAIN_PKCS11_DEVICE_KEY="$work/state/device-key" "$work/bench" "$ours" "$@" |
            sed -e 's/^@openssl /openssl /' -e t -e 's/^/keychain /' >>"$work/results"
    else
        SOFTHSM2_CONF="$work/softhsm2.conf" "$work/bench" "$softhsm" "$@" | sed 's/^/softhsm /' >>"$work/results"
    fi
}

# speed MEASURE ALGORITHM BYTES [-aead]: `openssl speed -evp ALGORITHM` on BYTES-byte messages, as
# "openssl MEASURE MiB/s" (its result line starts with the algorithm's name, its figure is in
# 1000s of bytes per second); nothing when openssl gives no result.
speed() {
    openssl speed -seconds "$openssl_seconds" "${@:4}" -evp "$2" -bytes "$3" 2>/dev/null |
        awk -v measure="$1" -v algorithm="$2" 'toupper($1) == toupper(algorithm) { print "openssl", measure, $NF / 1.048576 / 1000, "MiB/s" }' >>"$work/results"
}

for round in $(seq 1 "$rounds"); do
    KEYCHAIN_PKCS11_KDF_LOG_N=10 run keychain "$seconds"
    if [ -n "${BENCH_BASELINE:-}" ]; then KEYCHAIN_PKCS11_KDF_LOG_N=10 run baseline "$seconds"; fi
    run softhsm "$seconds"
    # -aead at 1 KiB: each message is a whole AEAD operation (new IV, AAD, data, tag), as each of
    # ours is C_EncryptInit + C_Encrypt; without it openssl streams updates through one context
    # (AES-CBC has no such mode; CCM is whole operations in openssl speed either way).
    speed aes256.gcm.1KiB aes-256-gcm 1024 -aead
    speed aes256.gcm.1MiB aes-256-gcm 1048576
    speed aes256.cbc.1KiB aes-256-cbc 1024
    speed aes256.cbc.1MiB aes-256-cbc 1048576
    speed chacha20poly1305.1KiB chacha20-poly1305 1024 -aead
    speed chacha20poly1305.1MiB chacha20-poly1305 1048576
    speed aes256.ccm.1KiB aes-256-ccm 1024 -aead
    speed aes256.ccm.1MiB aes-256-ccm 1048576
    speed digest.sha256.1MiB sha256 1048576
    # Threads in one process (1, 2, 4 signers on one token key; a signer's latency while another
    # thread logs in and out of a second token or generates RSA-3072 pairs), next to
    # `openssl speed` with 1, 2 and 4 processes (-multi) doing the same signatures.
    run keychain threads "$seconds"
    run softhsm threads "$seconds"
    for t in 1 2 4; do
        multi=$( [ "$t" -gt 1 ] && echo "-multi $t" || true )
        # shellcheck disable=SC2086
        openssl speed -seconds "$openssl_seconds" $multi rsa2048 2>/dev/null | awk -v t="$t" '/^rsa 2048 bits/ { print "openssl threads.sign.rsa2048.pkcs1.t" t, $(NF-1), "op/s" }' >>"$work/results"
        # shellcheck disable=SC2086
        openssl speed -seconds "$openssl_seconds" $multi ecdsap256 2>/dev/null | awk -v t="$t" '/^ *256 bits ecdsa \(nistp256\)/ { print "openssl threads.sign.ecdsa.p256.t" t, $(NF-1), "op/s" }' >>"$work/results"
        # shellcheck disable=SC2086
        openssl speed -seconds "$openssl_seconds" $multi ed25519 2>/dev/null | awk -v t="$t" '/^ *253 bits EdDSA \(Ed25519\)/ { print "openssl threads.sign.ed25519.t" t, $(NF-1), "op/s" }' >>"$work/results"
    done
    for n in $counts; do
        run keychain scale "$n"
        [ "$n" -le "$softhsm_max" ] && run softhsm scale "$n"
    done
done

python3 - "$work/results" "$rounds" <<'PY'
import statistics, sys
rows = {}
units = {}
order = []
for line in open(sys.argv[1]):
    who, measure, value, unit = line.split()
    if measure not in units:
        order.append(measure)
    units[measure] = unit
    if value != "n/a":
        rows.setdefault((who, measure), []).append(float(value))
def med(who, measure):
    values = rows.get((who, measure))
    return statistics.median(values) if values else None
def fmt(x):
    return "n/a" if x is None else (f"{x:,.0f}" if x >= 100 else f"{x:.2f}" if x >= 0.1 else f"{x:.3f}")
def ratio(a, b):
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}x"
print(f"medians of {sys.argv[2]} alternating rounds")
baseline = any(who == "baseline" for who, _ in rows)
extra = f" {'baseline':>10} {'vs baseline':>12}" if baseline else ""
print(f"{'measure':24} {'unit':6} {'keychain':>10} {'softhsm':>10} {'openssl':>10} {'vs softhsm':>11} {'vs openssl':>11}" + extra)
for m in order:
    k, s, o, b = med("keychain", m), med("softhsm", m), med("openssl", m), med("baseline", m)
    line = f"{m:24} {units[m]:6} {fmt(k):>10} {fmt(s):>10} {fmt(o):>10} {ratio(k, s):>11} {ratio(k, o):>11}"
    if baseline:
        line += f" {fmt(b):>10} {ratio(k, b):>12}"
    print(line)
PY

if [ -n "${BENCH_TPM:-}" ]; then
    echo
    scripts/tpm-bench.sh "$BENCH_TPM" "$rounds"
fi

if [ -n "$plot" ]; then
    # find time and resident memory against N, both tokens, log-log (gnuplot's png terminal).
    for who in keychain softhsm; do
        for n in $counts; do
            python3 - "$work/results" "$who" "$n" <<'PY' >>"$work/plot-$who.dat"
import statistics, sys
path, who, n = sys.argv[1], sys.argv[2], sys.argv[3]
values = {}
for line in open(path):
    w, measure, value, _ = line.split()
    if w == who and value != "n/a":
        values.setdefault(measure, []).append(float(value))
get = lambda m: statistics.median(values[m]) if m in values else float("nan")
print(n, get(f"find.label.N{n}"), get(f"find.id.N{n}"), get(f"rss.N{n}"))
PY
        done
    done
    gnuplot <<EOF
set terminal png size 1100,440 font ",10" noenhanced
set output "$plot"
set multiplot layout 1,2 title "Keychain PKCS#11 and SoftHSMv2 against the number of token objects (medians of $rounds rounds)"
set logscale xy
set grid
set key top left
set xlabel "token objects (N)"
set ylabel "C_FindObjectsInit+FindObjects+Final (ms)"
set title "find one object"
plot "$work/plot-keychain.dat" using 1:2 with linespoints title "keychain, by CKA_LABEL", \
     "$work/plot-keychain.dat" using 1:3 with linespoints title "keychain, by CKA_ID", \
     "$work/plot-softhsm.dat" using 1:2 with linespoints title "SoftHSMv2, by CKA_LABEL", \
     "$work/plot-softhsm.dat" using 1:3 with linespoints title "SoftHSMv2, by CKA_ID"
unset logscale y
set logscale x
set ylabel "resident memory after login and one find (MiB)"
set title "memory of a fresh process"
plot "$work/plot-keychain.dat" using 1:4 with linespoints title "keychain", \
     "$work/plot-softhsm.dat" using 1:4 with linespoints title "SoftHSMv2"
unset multiplot
EOF
    echo "plot: $plot"
fi
