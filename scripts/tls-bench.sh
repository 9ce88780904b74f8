#!/usr/bin/env bash
# Full TLS 1.3 handshakes per second against Debian's nginx (2 workers, master as root, workers as
# www-data) with the same server key held three ways, in one run, round by round, medians:
#
#   file       the key in a PEM file (the limit: OpenSSL signs in the worker itself)
#   keychain   the key in a keychain, through OpenSSL's pkcs11-provider over this module
#              (the files written by `keychainctl tls-config`)
#   softhsm    the key in a SoftHSMv2 token (Debian softhsm2), through the same provider
#
# for an ECDSA P-256 and an RSA-2048 key (the same key material and certificate in all three),
# with the ratios keychain/file (goal >= 0.9) and keychain/softhsm (goal > 1). The load comes from
# Tests/c-host/tls-load.c in a second process on 127.0.0.1 (full handshakes, no resumption, one
# HTTP request each, certificate verified), THREADS threads for SECONDS seconds per measure.
#
# Usage (as root): scripts/tls-bench.sh [seconds, default 5] [rounds, default 3] [threads, default 8]
# Environment: TLS_BENCH_MODULE / TLS_BENCH_KEYCHAINCTL (default: the release build's, built if
# missing), TLS_BENCH_RESULTS=FILE keeps the raw lines ("KIND STORE VALUE").
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
rounds=${2:-3}
threads=${3:-8}
[ "$(id -u)" = 0 ] || { echo "tls-bench: run as root (nginx's master binds and starts www-data workers)" >&2; exit 1; }
command -v nginx >/dev/null || { echo "tls-bench: nginx is missing (scripts/install-deps.sh)" >&2; exit 1; }
softhsm=/usr/lib/softhsm/libsofthsm2.so
[ -f "$softhsm" ] || { echo "tls-bench: SoftHSMv2 is missing (apt-get install softhsm2)" >&2; exit 1; }
if [ -z "${TLS_BENCH_MODULE:-}" ] || [ -z "${TLS_BENCH_KEYCHAINCTL:-}" ]; then
    [ -f .build/release-path ] || scripts/build-release.sh >/dev/null
fi
module=${TLS_BENCH_MODULE:-$(cat .build/release-path)/libkeychain-pkcs11.so}
keychainctl=${TLS_BENCH_KEYCHAINCTL:-$(cat .build/release-path)/keychainctl}
provider=$(openssl version -m | sed -n 's/^MODULESDIR: "\(.*\)"$/\1/p')/pkcs11.so
[ -f "$provider" ] || { echo "tls-bench: pkcs11-provider is missing (scripts/install-deps.sh)" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/tls-bench.XXXXXX")
chmod 0711 "$work"
masters=()
stop_all() {
    local pid
    for pid in "${masters[@]}"; do
        kill -QUIT "$pid" 2>/dev/null || true
    done
    sleep 0.5
    for pid in "${masters[@]}"; do
        pkill -9 -P "$pid" 2>/dev/null || true
        kill -9 "$pid" 2>/dev/null || true
    done
    masters=()
}
trap 'stop_all; rm -rf "$work"' EXIT
cc -O2 -Wall -Wextra -pthread -o "$work/tls-load" Tests/c-host/tls-load.c -lssl -lcrypto

PIN=31415926
printf '%s\n' "$PIN" >"$work/pin"
printf '87654321\n' >"$work/so"
chmod 0644 "$work/pin" "$work/so"
export KEYCHAIN_PKCS11_DIR="$work/keychains" KEYCHAIN_PKCS11_SERVICE_USER=www-data
mkdir -m 0700 "$KEYCHAIN_PKCS11_DIR"
"$keychainctl" create --label bench --so-pin-file "$work/so" --pin-file "$work/pin" >/dev/null
mkdir -p "$work/softhsm"
printf 'directories.tokendir = %s\nobjectstore.backend = file\nlog.level = ERROR\n' "$work/softhsm" >"$work/softhsm2.conf"
chmod 0644 "$work/softhsm2.conf"
export SOFTHSM2_CONF="$work/softhsm2.conf"
softhsm2-util --init-token --free --label bench --so-pin 87654321 --pin "$PIN" >/dev/null

# The same key and certificate for the three stores.
for kind in ec rsa; do
    case $kind in
        ec) openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$work/$kind.key" 2>/dev/null ;;
        rsa) openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$work/$kind.key" 2>/dev/null ;;
    esac
    OPENSSL_CONF=/dev/null openssl req -new -x509 -key "$work/$kind.key" -subj /CN=localhost -addext subjectAltName=DNS:localhost \
        -days 30 -out "$work/$kind.crt" 2>/dev/null
    "$keychainctl" import -k bench "$work/$kind.key" --label "tls-$kind" --pin-file "$work/pin" >/dev/null
    "$keychainctl" import -k bench "$work/$kind.crt" --pin-file "$work/pin" >/dev/null
    "$keychainctl" tls-config -k bench --label "tls-$kind" --out "$work/keychain-$kind" --pin-path "$work/pin" --pin-file "$work/pin" >/dev/null
    id=$([ $kind = ec ] && echo 01 || echo 02)
    openssl pkey -in "$work/$kind.key" -outform DER -out "$work/$kind.der"
    pkcs11-tool --module "$softhsm" --token-label bench --login --pin "$PIN" --write-object "$work/$kind.der" --type privkey \
        --id "$id" --label "tls-$kind" >/dev/null 2>&1
    # SoftHSM's private key object has no public half: the provider pairs the key with this one.
    openssl pkey -in "$work/$kind.key" -pubout -outform DER -out "$work/$kind.pub.der"
    pkcs11-tool --module "$softhsm" --token-label bench --login --pin "$PIN" --write-object "$work/$kind.pub.der" --type pubkey \
        --id "$id" --label "tls-$kind" >/dev/null 2>&1
    # pkcs11-provider's key file for the SoftHSM key, in the same PEM wrapper tls-config writes.
    python3 - "$work/softhsm-$kind.key.pem" "pkcs11:token=bench;id=%$id;object=tls-$kind;type=private" <<'PY'
import base64, sys
def tlv(tag, body):
    n = len(body)
    length = bytes([n]) if n < 128 else (bytes([0x81, n]) if n < 256 else bytes([0x82, n >> 8, n & 255]))
    return bytes([tag]) + length + body
der = tlv(0x30, tlv(0x1A, b"PKCS#11 Provider URI v1.0") + tlv(0x0C, sys.argv[2].encode()))
open(sys.argv[1], "w").write("-----BEGIN PKCS#11 PROVIDER URI-----\n" + base64.encodebytes(der).decode() + "-----END PKCS#11 PROVIDER URI-----\n")
PY
done
sed "s|^pkcs11-module-path = .*|pkcs11-module-path = $softhsm|" "$work/keychain-ec/openssl.cnf" >"$work/softhsm.cnf"
chown -R www-data:www-data "$KEYCHAIN_PKCS11_DIR" "$work/softhsm"

# One nginx per store and key kind, each on its own port, all running for the whole benchmark.
port=20443
declare -A ports
start() {  # start STORE KIND KEYFILE OPENSSL_CONF
    local dir="$work/nginx-$1-$2"
    mkdir -p "$dir/logs" "$dir/tmp"
    cat >"$dir/nginx.conf" <<EOF
user www-data;
worker_processes 2;
pid $dir/nginx.pid;
error_log $dir/logs/error.log warn;
env KEYCHAIN_PKCS11_DIR=$KEYCHAIN_PKCS11_DIR;
env SOFTHSM2_CONF=$SOFTHSM2_CONF;
events { worker_connections 1024; }
http {
    access_log off;
    client_body_temp_path $dir/tmp/body;
    proxy_temp_path $dir/tmp/proxy;
    fastcgi_temp_path $dir/tmp/fastcgi;
    uwsgi_temp_path $dir/tmp/uwsgi;
    scgi_temp_path $dir/tmp/scgi;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache off;
    ssl_session_tickets off;
    server {
        listen 127.0.0.1:$port ssl;
        ssl_certificate $work/$2.crt;
        ssl_certificate_key $3;
        location / { return 200 "hello\n"; }
    }
}
EOF
    OPENSSL_CONF=$4 nginx -p "$dir" -c "$dir/nginx.conf"
    masters+=("$(cat "$dir/nginx.pid")")
    ports[$1-$2]=$port
    port=$((port + 1))
}
for kind in ec rsa; do
    start file "$kind" "$work/$kind.key" /dev/null
    start keychain "$kind" "$work/keychain-$kind/tls-$kind.key.pem" "$work/keychain-$kind/openssl.cnf"
    start softhsm "$kind" "$work/softhsm-$kind.key.pem" "$work/softhsm.cnf"
done
sleep 1

results=$work/results
: >"$results"
for kind in ec rsa; do
    for store in file keychain softhsm; do  # warm-up: every worker has logged in and loaded its key
        OPENSSL_CONF=/dev/null "$work/tls-load" "${ports[$store-$kind]}" "$work/$kind.crt" 4 count 200 tls1.3 >/dev/null ||
            { echo "tls-bench: $store $kind: handshakes failed" >&2; tail -n 5 "$work/nginx-$store-$kind/logs/error.log" >&2; exit 1; }
    done
done
for round in $(seq "$rounds"); do
    for kind in ec rsa; do
        for store in file keychain softhsm; do
            out=$(OPENSSL_CONF=/dev/null "$work/tls-load" "${ports[$store-$kind]}" "$work/$kind.crt" "$threads" seconds "$seconds" tls1.3)
            failed=$(sed -n 's/^handshakes: [0-9]* ok, \([0-9]*\) failed.*/\1/p' <<<"$out")
            [ "$failed" = 0 ] || { echo "tls-bench: $store $kind round $round: $out" >&2; exit 1; }
            echo "$kind $store $(sed -n 's/.* failed, \([0-9.]*\) per second/\1/p' <<<"$out")" >>"$results"
        done
    done
done
[ -z "${TLS_BENCH_RESULTS:-}" ] || cp "$results" "$TLS_BENCH_RESULTS"
python3 - "$results" "$seconds" "$rounds" "$threads" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    kind, store, value = line.split()
    rows.setdefault((kind, store), []).append(float(value))
print(f"Full TLS 1.3 handshakes/s, nginx 2 workers, {sys.argv[4]} client threads, {sys.argv[2]} s x {sys.argv[3]} rounds, medians")
print(f"{'key':10} {'file':>9} {'keychain':>9} {'softhsm':>9} {'keychain/file':>14} {'keychain/softhsm':>17}")
for kind, name in (("ec", "ECDSA P-256"), ("rsa", "RSA-2048")):
    m = {store: statistics.median(rows[(kind, store)]) for store in ("file", "keychain", "softhsm")}
    print(f"{name:10} {m['file']:9.0f} {m['keychain']:9.0f} {m['softhsm']:9.0f} {m['keychain'] / m['file']:13.2f}x {m['keychain'] / m['softhsm']:16.2f}x")
PY
