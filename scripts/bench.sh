#!/usr/bin/env bash
# Side-by-side benchmark: this module (release build) and SoftHSMv2 (Debian softhsm2, on its own
# temporary token), alternating round by round, with `openssl speed` in the same run; prints the
# median of each measure per module and the ratios.
# Usage: scripts/bench.sh [rounds, default 3] [seconds per measure, default 1]
# (Issue 7 extends this with find/create at N objects, load time, memory and two processes.)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
seconds=${2:-1}
whole=${seconds%.*}
openssl_seconds=$(( ${whole:-0} > 0 ? ${whole:-0} : 1 ))  # openssl speed takes whole seconds
[ -f .build/release-path ] || scripts/build-release.sh >/dev/null
ours=$(cat .build/release-path)/libkeychain-pkcs11.so
softhsm=/usr/lib/softhsm/libsofthsm2.so
[ -f "$softhsm" ] || { echo "bench: SoftHSMv2 not installed (apt-get install softhsm2)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
gcc -O2 -Wall -Wextra -IInclude Benchmarks/bench.c -o "$work/bench" -ldl

for round in $(seq 1 "$rounds"); do
    rm -rf "$work/kc" "$work/sh" && mkdir -p "$work/sh"
    printf 'directories.tokendir = %s\nobjectstore.backend = file\nlog.level = ERROR\n' "$work/sh" >"$work/softhsm2.conf"
    KEYCHAIN_PKCS11_DIR="$work/kc" KEYCHAIN_PKCS11_KDF_LOG_N=10 "$work/bench" "$ours" "$seconds" | sed 's/^/keychain /' >>"$work/results"
    SOFTHSM2_CONF="$work/softhsm2.conf" "$work/bench" "$softhsm" "$seconds" | sed 's/^/softhsm /' >>"$work/results"
    openssl speed -seconds "$openssl_seconds" rsa2048 ecdsap256 ecdsap384 ed25519 2>/dev/null | awk '
        /^rsa 2048 bits/ { print "openssl sign.rsa2048.pkcs1", $6, "op/s"; print "openssl verify.rsa2048.pkcs1", $7, "op/s" }
        /256 bits ecdsa/ { print "openssl sign.ecdsa.p256", $(NF-1), "op/s"; print "openssl verify.ecdsa.p256", $NF, "op/s" }
        /384 bits ecdsa/ { print "openssl sign.ecdsa.p384", $(NF-1), "op/s"; print "openssl verify.ecdsa.p384", $NF, "op/s" }
        /253 bits EdDSA/ { print "openssl sign.ed25519", $(NF-1), "op/s"; print "openssl verify.ed25519", $NF, "op/s" }' >>"$work/results"
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
    return "n/a" if x is None else (f"{x:,.0f}" if x >= 100 else f"{x:.2f}")
def ratio(a, b):
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}x"
print(f"medians of {sys.argv[2]} alternating rounds")
print(f"{'measure':24} {'unit':6} {'keychain':>10} {'softhsm':>10} {'openssl':>10} {'vs softhsm':>11} {'vs openssl':>11}")
for m in order:
    k, s, o = med("keychain", m), med("softhsm", m), med("openssl", m)
    print(f"{m:24} {units[m]:6} {fmt(k):>10} {fmt(s):>10} {fmt(o):>10} {ratio(k, s):>11} {ratio(k, o):>11}")
PY
