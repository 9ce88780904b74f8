#!/usr/bin/env bash
# The TPM rows of the benchmark: ECDSA P-256 signatures per second on ONE swtpm, in one run,
# one process after another (swtpm serves one connection at a time; each process exits before
# the next starts), round by round, medians:
#
#   esapi            Benchmarks/esapi_sign.c: the same primary template, key template and session
#                    as KeychainTPM (salted HMAC, no encryption of the digest) straight through
#                    tpm2-tss's ESAPI — the limit for anything built on ESAPI; also with AES-128-CFB
#                    on the digest (what tpm2-pkcs11 does), with a password session, and one
#                    TPM2_GetRandom round trip (what a command costs through this TCTI at all)
#   tpm2-pkcs11      Debian's libtpm2-pkcs11-1 (C_Sign CKM_ECDSA; Benchmarks/p11_sign.c)
#   keychain         this module's C_Sign on a key with CKA_KC_TPM = TRUE (made in the TPM)
#   seckey           SecKeyCreateSignature on a kSecAttrTokenIDSecureEnclave key
#                    (Benchmarks/SecKeySign, this package's Security module)
#   keychain-soft    this module's C_Sign on an ordinary software key (reference: no TPM)
#   seckey-soft      SecKeyCreateSignature on an ordinary software key (reference: no TPM)
#
# and the ratios keychain/esapi (goal >= 0.9) and keychain/tpm2-pkcs11 (goal >= 1.0).
#
# Usage: scripts/tpm-bench.sh [signatures per measure, default 300] [rounds, default 3]
# Environment:
#   TPM_BENCH_MODULE=PATH        our module (default: the release build's, built if missing)
#   TPM_BENCH_SECKEY=PATH        the seckey-sign executable (default: the release build's)
#   TPM_BENCH_TPM2_PKCS11=PATH   libtpm2_pkcs11.so (default: Debian's libtpm2-pkcs11-1, fetched
#                                with `apt-get download` and unpacked into .build/tpm2-pkcs11 —
#                                never installed: its p11-kit module file would make every
#                                p11-kit program load it)
#   TPM_BENCH_RESULTS=FILE       also keep the raw lines ("WHO MEASURE VALUE UNIT")
# A row whose part is not in this build yet — C_GenerateKeyPair refusing CKA_KC_TPM with
# CKR_ATTRIBUTE_VALUE_INVALID (0x13), SecKeyCreateRandomKey answering errSecUnimplemented for the
# Secure Enclave — is reported as "pending"; any other failure stops the run.
set -euo pipefail
cd "$(dirname "$0")/.."
count=${1:-300}
rounds=${2:-3}
root=$(pwd)

work=$(mktemp -d "${TMPDIR:-/tmp}/tpm-bench.XXXXXX")
swtpm_pid=
stop_swtpm() {
    if [ -n "$swtpm_pid" ]; then
        kill "$swtpm_pid" 2>/dev/null || true
        wait "$swtpm_pid" 2>/dev/null || true
        swtpm_pid=
    fi
}
trap 'stop_swtpm; rm -rf "$work"' EXIT

# --- the programs
read -ra tss2 <<<"$(pkg-config --cflags --libs tss2-esys tss2-tctildr)"
cc -O2 -Wall -Wextra -o "$work/esapi_sign" Benchmarks/esapi_sign.c "${tss2[@]}"
cc -O2 -Wall -Wextra -IInclude -o "$work/p11_sign" Benchmarks/p11_sign.c -ldl

if [ -z "${TPM_BENCH_MODULE:-}" ] || [ -z "${TPM_BENCH_SECKEY:-}" ]; then
    [ -f .build/release-path ] || scripts/build-release.sh >/dev/null
fi
module=${TPM_BENCH_MODULE:-$(cat .build/release-path)/libkeychain-pkcs11.so}
seckey=${TPM_BENCH_SECKEY:-$(cat .build/release-path)/seckey-sign}
[ -f "$module" ] || { echo "tpm-bench: no module at $module" >&2; exit 1; }

# tpm2-pkcs11 in a private folder: the package's files unpacked, nothing registered.
tpm2_pkcs11=${TPM_BENCH_TPM2_PKCS11:-}
if [ -z "$tpm2_pkcs11" ]; then
    mkdir -p "$root/.build/tpm2-pkcs11"
    tpm2_pkcs11=$(find "$root/.build/tpm2-pkcs11" -name 'libtpm2_pkcs11.so.1*' -type f | head -n 1)
    if [ -z "$tpm2_pkcs11" ]; then
        mkdir -p "$work/deb"
        # apt-get download needs the package lists: fetched once more when they lack it (as root).
        download() { (cd "$work/deb" && apt-get download libtpm2-pkcs11-1 >/dev/null 2>&1); }
        download || { [ "$(id -u)" -eq 0 ] && apt-get update -qq >/dev/null 2>&1 && download; } ||
            { echo "tpm-bench: apt-get download libtpm2-pkcs11-1 failed" >&2; exit 1; }
        dpkg -x "$work"/deb/libtpm2-pkcs11-1_*.deb "$root/.build/tpm2-pkcs11"
        tpm2_pkcs11=$(find "$root/.build/tpm2-pkcs11" -name 'libtpm2_pkcs11.so.1*' -type f | head -n 1)
    fi
fi
[ -f "$tpm2_pkcs11" ] || { echo "tpm-bench: no libtpm2_pkcs11.so" >&2; exit 1; }

# --- one swtpm for the whole run, fresh state, on a free pair of ports (TPM, control)
for _ in 1 2 3 4 5 6 7 8 9 10; do
    port=$((20000 + (RANDOM % 20000) * 2))
    mkdir -p "$work/swtpm"
    swtpm socket --tpm2 --server type=tcp,port=$port,bindaddr=127.0.0.1 --ctrl type=tcp,port=$((port + 1)),bindaddr=127.0.0.1 \
        --tpmstate dir="$work/swtpm" --flags not-need-init,startup-clear >"$work/swtpm.log" 2>&1 &
    swtpm_pid=$!
    for _ in $(seq 1 50); do
        kill -0 "$swtpm_pid" 2>/dev/null || break
        (exec 3<>"/dev/tcp/127.0.0.1/$((port + 1))") 2>/dev/null && break
        sleep 0.1
    done
    kill -0 "$swtpm_pid" 2>/dev/null && break
    wait "$swtpm_pid" 2>/dev/null || true
    swtpm_pid=
done
[ -n "$swtpm_pid" ] || { echo "tpm-bench: swtpm did not start: $(cat "$work/swtpm.log")" >&2; exit 1; }
tcti="swtpm:host=127.0.0.1,port=$port"
echo "tpm-bench: swtpm $(swtpm --version 2>/dev/null | awk 'NR == 1 { sub(/,$/, "", $4); print $4 }') at $tcti, $count signatures per measure, $rounds rounds" >&2

# measure WHO PENDING-PATTERN PENDING-REASON COMMAND...: runs COMMAND (one process, to its exit)
# and appends its "MEASURE VALUE UNIT" lines as "WHO MEASURE VALUE UNIT"; when it fails with a
# last error line matching PENDING-PATTERN, the row is "pending"; any other failure ends the run.
measure() {
    local who=$1 pattern=$2 reason=$3 status=0
    shift 3
    "$@" >"$work/out" 2>"$work/err" || status=$?
    if [ "$status" -eq 0 ]; then
        sed "s/^/$who /" "$work/out" >>"$work/results"
    elif [ -n "$pattern" ] && grep -v 'Cannot prepare version query' "$work/err" | tail -n 1 | grep -qE "$pattern"; then
        echo "$who sign.ecdsa.p256 pending op/s" >>"$work/results"
        echo "tpm-bench: $who pending: $reason" >&2
    else
        echo "tpm-bench: $who failed (exit $status):" >&2
        cat "$work/err" >&2
        exit 1
    fi
}

# Our keychains: a fast PIN cost for the setup (the signatures do not depend on it). The Apple
# API finds the keychain locked, as an app's first call does, and the prompt program answers.
ours() {
    env KEYCHAIN_PKCS11_DIR="$work/keychain-$1" KEYCHAIN_PKCS11_DEVICE_KEY="$work/state-$1/device-key" KEYCHAIN_PKCS11_KDF_LOG_N=10 \
        KEYCHAIN_PKCS11_PROMPT="$work/prompt" KEYCHAIN_PKCS11_TCTI="$2" "${@:3}"
}
printf '#!/bin/sh\necho 1234\n' >"$work/prompt" && chmod 700 "$work/prompt"
mkdir -p "$work/tpm2-pkcs11-store"

for _ in $(seq 1 "$rounds"); do
    measure esapi "" "" "$work/esapi_sign" "$tcti" "$count" aes hmac password roundtrip
    measure tpm2-pkcs11 "" "" env TPM2_PKCS11_BACKEND=esysdb TPM2_PKCS11_STORE="$work/tpm2-pkcs11-store" TPM2_PKCS11_TCTI="$tcti" \
        "$work/p11_sign" "$tpm2_pkcs11" tpmbench 1234 "$count"
    measure keychain 'C_GenerateKeyPair: 0x13$' \
        "C_GenerateKeyPair refuses CKA_KC_TPM (CKR_ATTRIBUTE_VALUE_INVALID): the TPM key path is not in this build" \
        ours tpm "$tcti" "$work/p11_sign" "$module" tpmbench 1234 "$count" --tpm
    if [ -x "$seckey" ]; then
        measure seckey 'SecKeyCreateRandomKey: -4$' \
            "SecKeyCreateRandomKey answers errSecUnimplemented for kSecAttrTokenIDSecureEnclave: enclave keys are not in this build" \
            ours tpm "$tcti" "$seckey" "$count" --enclave
    else
        echo "seckey sign.ecdsa.p256 pending op/s" >>"$work/results"
        echo "tpm-bench: seckey pending: no seckey-sign at $seckey" >&2
    fi
    measure keychain-soft "" "" ours soft none "$work/p11_sign" "$module" tpmbench 1234 "$count"
    if [ -x "$seckey" ]; then measure seckey-soft "" "" ours soft none "$seckey" "$count"; fi
done
stop_swtpm

if [ -n "${TPM_BENCH_RESULTS:-}" ]; then cp "$work/results" "$TPM_BENCH_RESULTS"; fi

python3 - "$work/results" "$rounds" "$count" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    who, measure, value, unit = line.split()
    rows.setdefault((who, measure), []).append(value)
def med(who, measure):
    values = [float(v) for v in rows.get((who, measure), []) if v != "pending"]
    return statistics.median(values) if values else None
def fmt(x):
    return "pending" if x is None else f"{x:,.0f}" if x >= 100 else f"{x:.1f}"
def ratio(a, b):
    return "" if a is None or b is None or b == 0 else f"{a / b:.2f}x"
limit = med("esapi", "sign.ecdsa.p256.hmac")
peer = med("tpm2-pkcs11", "sign.ecdsa.p256")
print(f"medians of {sys.argv[2]} rounds, {sys.argv[3]} signatures per measure, one swtpm, one process at a time")
print(f"{'row':58} {'op/s':>8} {'vs ESAPI':>9} {'vs tpm2-pkcs11':>15}")
table = [
    ("ESAPI Esys_Sign, salted HMAC session (limit)", "esapi", "sign.ecdsa.p256.hmac"),
    ("ESAPI Esys_Sign, salted HMAC + AES-CFB on the digest", "esapi", "sign.ecdsa.p256.aes"),
    ("ESAPI Esys_Sign, password session", "esapi", "sign.ecdsa.p256.password"),
    ("ESAPI Esys_GetRandom round trip, no session", "esapi", "roundtrip.getrandom"),
    ("tpm2-pkcs11 C_Sign CKM_ECDSA", "tpm2-pkcs11", "sign.ecdsa.p256"),
    ("keychain C_Sign CKM_ECDSA, CKA_KC_TPM key", "keychain", "sign.ecdsa.p256"),
    ("keychain SecKeyCreateSignature, Secure Enclave key", "seckey", "sign.ecdsa.p256"),
    ("keychain C_Sign CKM_ECDSA, software key (no TPM)", "keychain-soft", "sign.ecdsa.p256"),
    ("keychain SecKeyCreateSignature, software key (no TPM)", "seckey-soft", "sign.ecdsa.p256"),
]
for name, who, measure in table:
    value = med(who, measure)
    tpm = who in ("esapi", "tpm2-pkcs11", "keychain", "seckey") and measure != "roundtrip.getrandom"
    print(f"{name:58} {fmt(value):>8} {ratio(value, limit) if tpm else '':>9} {ratio(value, peer) if tpm else '':>15}")
keygen = [(who, med(who, "keygen.ecdsa.p256")) for who in ("tpm2-pkcs11", "keychain", "seckey")]
print("key generation (first round, ms): " + ", ".join(f"{who} {fmt(v)}" for who, v in keygen if v is not None))
PY
