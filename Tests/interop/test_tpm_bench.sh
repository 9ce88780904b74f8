# scripts/tpm-bench.sh with a few signatures, beside a swtpm of the user's own: that swtpm,
# started first, still runs and still answers afterwards; the benchmark's own swtpm is gone (its
# port refuses connections) and so is its folder; tpm2-pkcs11 was not installed (no p11-kit
# module file); every row of the table has a positive number (a "pending" row — a part the build
# lacks — fails).
. "$HERE/lib.sh"
. "$HERE/servers.sh"

for tool in swtpm cc pkg-config python3 apt-get dpkg; do
    command -v "$tool" >/dev/null || fail "$tool is missing (scripts/install-deps.sh installs it)"
done
root=$(cd "$HERE/../.." && pwd)
bin=$(dirname "$KEYCHAINCTL")
cd "$WORK" || fail "cd $WORK"
mkdir -p tmp own

# The user's own swtpm, started first.
start_swtpm "$WORK/own"
own=$swtpm_pid
port=${tcti##*port=}
trap stop_swtpms EXIT
read -ra tss2 <<<"$(pkg-config --cflags --libs tss2-esys tss2-tctildr)"
cc -O2 -o esapi_sign "$root/Benchmarks/esapi_sign.c" "${tss2[@]}" || fail "esapi_sign does not build"

expect_status 0 "tpm-bench.sh" env TMPDIR="$WORK/tmp" TPM_BENCH_MODULE="$MODULE" TPM_BENCH_SECKEY="$bin/seckey-sign" \
    TPM_BENCH_RESULTS="$WORK/results" "$root/scripts/tpm-bench.sh" 20 1
cp last.out table && cp last.err table.err
cat table

# Every row a number.
expect_eq "$(sed -n '3,11p' table | grep -cE '^(ESAPI|tpm2-pkcs11|keychain) ')" 9 "nine rows"
expect_eq "$(sed -n 2p table | tr -s ' ')" "row op/s vs ESAPI vs tpm2-pkcs11" "the header"
while read -r who measure value unit; do
    expect_eq "$unit" "op/s" "the unit of $who $measure"
    case "$value" in
        pending) fail "$who $measure is pending" ;;
        *) if ! [[ "$value" =~ ^[0-9]+(\.[0-9]+)?$ ]] || ! python3 -c "import sys; sys.exit(0 if float('$value') > 0 else 1)"; then
               fail "$who $measure: [$value] is not a positive number"
           fi ;;
    esac
done < <(grep ' op/s$' results)
for row in "esapi sign.ecdsa.p256.aes" "esapi sign.ecdsa.p256.hmac" "esapi sign.ecdsa.p256.password" "esapi roundtrip.getrandom" \
    "tpm2-pkcs11 sign.ecdsa.p256" "keychain sign.ecdsa.p256" "seckey sign.ecdsa.p256" "keychain-soft sign.ecdsa.p256" "seckey-soft sign.ecdsa.p256"; do
    grep -q "^$row " results || fail "no result for $row"
done
# The table's ratios: the limit against itself, tpm2-pkcs11 against itself.
expect_contains "$(grep '(limit)' table)" " 1.00x " "the ESAPI row is its own limit"
grep -qE '^tpm2-pkcs11 .* 1\.00x$' table || fail "tpm2-pkcs11 against itself: $(grep '^tpm2-pkcs11' table)"
if grep -q '^keychain sign.ecdsa.p256 [0-9]' results; then
    grep -qE '^keychain C_Sign CKM_ECDSA, CKA_KC_TPM key .*x +[0-9.]+x$' table || fail "our TPM row has no ratios: $(grep CKA_KC_TPM table)"
fi
sed 's/^/figure: /' table

# Only what it started was stopped: the user's swtpm still runs and still answers; the
# benchmark's swtpm no longer listens; its folder is gone; tpm2-pkcs11 is not registered.
kill -0 "$own" 2>/dev/null || fail "the user's swtpm was stopped by the benchmark"
expect_status 0 "the user's swtpm still answers" ./esapi_sign "swtpm:host=127.0.0.1,port=$port" 3 roundtrip
bench_port=$(sed -n 's/.*at swtpm:host=127.0.0.1,port=\([0-9]*\),.*/\1/p' table.err)
[ -n "$bench_port" ] || fail "the benchmark did not say its swtpm's port: $(cat table.err)"
(exec 3<>"/dev/tcp/127.0.0.1/$bench_port") 2>/dev/null && fail "the benchmark's swtpm still listens on $bench_port"
(exec 3<>"/dev/tcp/127.0.0.1/$((bench_port + 1))") 2>/dev/null && fail "the benchmark's swtpm control port still listens"
expect_eq "$(ls -A tmp)" "" "the benchmark's folder is gone"
[ -e /usr/share/p11-kit/modules/tpm2_pkcs11.module ] && fail "tpm2-pkcs11's p11-kit module file is installed"
stop_swtpms
trap - EXIT
echo "tpm bench: ok"
