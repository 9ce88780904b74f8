#!/usr/bin/env bash
# ML-DSA and ML-KEM through this module against swift-crypto called directly (the limit), in one
# run, round by round (module, limit, module, limit …), medians:
#
#   module   Benchmarks/pq_bench.c: the release module through the PKCS#11 3.2 function list
#            (dlopen, C_GetInterface "PKCS 11" {3,2}, C_Initialize, a logged-in R/W session):
#            C_GenerateKeyPair of session pairs, C_SignInit + C_Sign and C_VerifyInit + C_Verify
#            (CKM_ML_DSA, a fixed 1 KiB message), C_EncapsulateKey and C_DecapsulateKey (CKM_ML_KEM)
#            into session secret keys
#   limit    Benchmarks/PQLimit (pq-limit): the same operations on swift-crypto's MLDSA65, MLDSA87,
#            MLKEM768 and MLKEM1024 — the library the module wraps, the same build of it — with
#            nothing around them
#
# for ML-DSA-65, ML-DSA-87, ML-KEM-768 and ML-KEM-1024, and the ratio module/limit per row
# (goal >= 0.9). Then, in fresh processes alternating between this module and the module built
# from f089d4e (before swift-crypto entered the module): dlopen, the first C_Initialize,
# C_Finalize + C_Initialize, and C_GetMechanismList (goal: no slower than before).
#
# Usage: scripts/pq-bench.sh [seconds per measure, default 1] [rounds, default 5]
#                            [startup processes per module and round, default 5]
# Environment:
#   PQ_BENCH_MODULE=PATH     this module (default: the release build's, built if missing)
#   PQ_BENCH_LIMIT=PATH      the pq-limit executable (default: the release build's)
#   PQ_BENCH_BASELINE=PATH   the module from f089d4e (default: the one built in the worktree
#                            /tmp/old-f089d4e, as its .build/release-path names it). Make it with
#                              git worktree add /tmp/old-f089d4e f089d4e && cd /tmp/old-f089d4e &&
#                              scripts/build-release.sh
#                            When it is absent the startup rows show this module alone and say so.
#   PQ_BENCH_STARTUP_COUNT=N C_Finalize + C_Initialize pairs and C_GetMechanismList pairs timed in
#                            each startup process (default 200; their medians are its figures)
#   PQ_BENCH_RESULTS=FILE    also keep the raw lines ("WHO MEASURE VALUE UNIT")
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-1}
rounds=${2:-5}
processes=${3:-5}
startup_count=${PQ_BENCH_STARTUP_COUNT:-200}

if [ -z "${PQ_BENCH_MODULE:-}" ] || [ -z "${PQ_BENCH_LIMIT:-}" ]; then
    [ -f .build/release-path ] && [ -x "$(cat .build/release-path)/pq-limit" ] || scripts/build-release.sh >/dev/null
fi
module=${PQ_BENCH_MODULE:-$(cat .build/release-path)/libkeychain-pkcs11.so}
limit=${PQ_BENCH_LIMIT:-$(cat .build/release-path)/pq-limit}
[ -f "$module" ] || { echo "pq-bench: no module at $module" >&2; exit 1; }
[ -x "$limit" ] || { echo "pq-bench: no pq-limit at $limit" >&2; exit 1; }
if [ -n "${PQ_BENCH_BASELINE:-}" ]; then
    baseline=$PQ_BENCH_BASELINE
elif [ -f /tmp/old-f089d4e/.build/release-path ]; then
    baseline=$(cat /tmp/old-f089d4e/.build/release-path)/libkeychain-pkcs11.so
else
    baseline=/tmp/old-f089d4e/.build/x86_64-unknown-linux-gnu/release/libkeychain-pkcs11.so
fi
[ -f "$baseline" ] || {
    echo "pq-bench: no module from f089d4e at $baseline: the startup rows show this module alone" >&2
    baseline=
}

work=$(mktemp -d "${TMPDIR:-/tmp}/pq-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
gcc -O2 -Wall -Wextra -IInclude -o "$work/pq_bench" Benchmarks/pq_bench.c -ldl

# Each module its own keychain folder with one empty keychain ("pqbench", made by that module);
# a fast PIN cost for the logins (no figure depends on it).
in_folder() {
    local folder=$work/$1
    shift
    env KEYCHAIN_PKCS11_DIR="$folder/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$folder/device-key" KEYCHAIN_PKCS11_KDF_LOG_N=10 "$@"
}
# run WHO COMMAND...: appends COMMAND's "MEASURE VALUE UNIT" lines as "WHO MEASURE VALUE UNIT";
# any failure ends the run.
run() {
    local who=$1 status=0
    shift
    "$@" >"$work/out" 2>"$work/err" || status=$?
    if [ "$status" -ne 0 ]; then
        echo "pq-bench: $who failed (exit $status):" >&2
        cat "$work/err" >&2
        exit 1
    fi
    sed "s/^/$who /" "$work/out" >>"$work/results"
}
: >"$work/results"
in_folder new "$work/pq_bench" "$module" init
if [ -n "$baseline" ]; then in_folder old "$work/pq_bench" "$baseline" init; fi
echo "pq-bench: $module against $limit${baseline:+ and $baseline}; $seconds s per measure, $rounds rounds" >&2

for _ in $(seq 1 "$rounds"); do
    run module in_folder new "$work/pq_bench" "$module" ops "$seconds"
    run limit "$limit" "$seconds"
    for _ in $(seq 1 "$processes"); do
        run new in_folder new "$work/pq_bench" "$module" startup "$startup_count"
        if [ -n "$baseline" ]; then run old in_folder old "$work/pq_bench" "$baseline" startup "$startup_count"; fi
    done
done

if [ -n "${PQ_BENCH_RESULTS:-}" ]; then cp "$work/results" "$PQ_BENCH_RESULTS"; fi

python3 - "$work/results" "$rounds" "$seconds" "$processes" "${baseline:-}" <<'PY'
import statistics, sys
results, rounds, seconds, processes, baseline = sys.argv[1:6]
rows = {}
for line in open(results):
    who, measure, value, unit = line.split()
    rows.setdefault((who, measure), []).append(float(value))
def med(who, measure):
    values = rows.get((who, measure))
    return statistics.median(values) if values else None
def fmt(x, unit=""):
    if x is None:
        return "n/a"
    text = f"{x:,.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"
    return f"{text} {unit}".rstrip()
def ratio(a, b):
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}x"

names = {"mldsa65": "ML-DSA-65", "mldsa87": "ML-DSA-87", "mlkem768": "ML-KEM-768", "mlkem1024": "ML-KEM-1024"}
operations = {"keygen": "key pairs/s", "sign": "signatures/s (1 KiB)", "verify": "verifications/s (1 KiB)",
              "encaps": "encapsulations/s", "decaps": "decapsulations/s"}
print(f"medians of {rounds} alternating rounds, {seconds} s per measure")
print(f"{'row':40} {'module/limit':>12} {'module (C_*)':>13} {'limit (swift-crypto)':>21}")
for set_name, title in names.items():
    for operation in (("keygen", "sign", "verify") if set_name.startswith("mldsa") else ("keygen", "encaps", "decaps")):
        measure = f"{operation}.{set_name}"
        ours, bound = med("module", measure), med("limit", measure)
        print(f"{title + ' ' + operations[operation]:40} {ratio(ours, bound):>12} {fmt(ours):>13} {fmt(bound):>21}")

count = len(rows.get(("new", "dlopen"), []))
print()
if baseline:
    print(f"startup, fresh processes: medians of {count} per module (alternating); before: {baseline}")
else:
    print(f"startup, fresh processes: medians of {count}; before: skipped, no module from f089d4e (see scripts/pq-bench.sh)")
print(f"{'row':40} {'now/before':>12} {'now':>13} {'before':>21}")
for measure, title, unit in (("dlopen", "dlopen", "ms"), ("initialize.first", "first C_Initialize", "ms"),
                             ("initialize.finalize", "C_Finalize + C_Initialize", "us"),
                             ("mechanism.list", "C_GetMechanismList (count, list)", "us"),
                             ("mechanism.count", "mechanisms listed", "")):
    now, before = med("new", measure), med("old", measure) if baseline else None
    print(f"{title:40} {ratio(now, before) if baseline else 'skipped':>12} {fmt(now, unit):>13} {fmt(before, unit) if baseline else 'n/a':>21}")
PY
