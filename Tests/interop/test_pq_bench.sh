# scripts/pq-bench.sh with a few milliseconds per measure, checked for form: every ML-DSA and
# ML-KEM row has a ratio and two positive rates, every raw measure of the module (C_* through this
# module) and of the limit (pq-limit, swift-crypto called directly) is there once per round, and
# the startup rows compare two modules. CI has no module from f089d4e: the first run gives the
# module under test as the "before" module (the form of those rows), the second gives none, and
# the script must say so and mark the rows skipped. The benchmark's folder is gone afterwards.
. "$HERE/lib.sh"

for tool in gcc python3; do
    command -v "$tool" >/dev/null || fail "$tool is missing (scripts/install-deps.sh installs it)"
done
root=$(cd "$HERE/../.." && pwd)
limit=$(dirname "$KEYCHAINCTL")/pq-limit
[ -x "$limit" ] || fail "no pq-limit beside $KEYCHAINCTL (swift build makes it; scripts/build-release.sh too)"
cd "$WORK" || fail "cd $WORK"
mkdir -p tmp

# positive TEXT: a number above zero, as the table (1,234 / 12.5 / 0.98) or the raw lines print it.
positive() { awk -v v="$1" 'BEGIN { gsub(",", "", v); exit !(v ~ /^[0-9]+(\.[0-9]+)?$/ && v + 0 > 0) }'; }

expect_status 0 "pq-bench.sh, this module as the 'before' module" env TMPDIR="$WORK/tmp" PQ_BENCH_MODULE="$MODULE" PQ_BENCH_LIMIT="$limit" \
    PQ_BENCH_BASELINE="$MODULE" PQ_BENCH_STARTUP_COUNT=5 PQ_BENCH_RESULTS="$WORK/results" "$root/scripts/pq-bench.sh" 0.02 2 2
cp last.out table
sed 's/^/figure: /' table

expect_eq "$(sed -n 1p table)" "medians of 2 alternating rounds, 0.02 s per measure" "the first line"
expect_eq "$(sed -n 2p table | tr -s ' ')" "row module/limit module (C_*) limit (swift-crypto)" "the header"
rows="ML-DSA-65 key pairs/s
ML-DSA-65 signatures/s (1 KiB)
ML-DSA-65 verifications/s (1 KiB)
ML-DSA-87 key pairs/s
ML-DSA-87 signatures/s (1 KiB)
ML-DSA-87 verifications/s (1 KiB)
ML-KEM-768 key pairs/s
ML-KEM-768 encapsulations/s
ML-KEM-768 decapsulations/s
ML-KEM-1024 key pairs/s
ML-KEM-1024 encapsulations/s
ML-KEM-1024 decapsulations/s"
expect_eq "$(sed -n '3,14p' table | sed -E 's/ +[0-9.]+x +[0-9.,]+ +[0-9.,]+$//')" "$rows" "the twelve rows, each with a ratio and two rates"
while read -r line; do
    read -r ratio ours bound <<<"$(awk '{ print $(NF-2), $(NF-1), $NF }' <<<"$line")"
    for value in "${ratio%x}" "$ours" "$bound"; do positive "$value" || fail "not a positive number: [$value] in: $line"; done
    # The ratio is the two rates' (both rounded for print: within 2 %).
    awk -v r="${ratio%x}" -v a="$ours" -v b="$bound" 'BEGIN { gsub(",", "", a); gsub(",", "", b); d = r - a / b; exit !(d * d <= (0.02 * r + 0.01) ^ 2) }' ||
        fail "the ratio is not module/limit: $line"
done < <(sed -n '3,14p' table)

# The raw lines: each measure of both once per round, each a positive rate.
for set in mldsa65 mldsa87 mlkem768 mlkem1024; do
    case $set in mldsa*) operations="keygen sign verify" ;; *) operations="keygen encaps decaps" ;; esac
    for operation in $operations; do
        for who in module limit; do
            expect_eq "$(grep -c "^$who $operation.$set [0-9.]* op/s$" results)" 2 "$who $operation.$set once per round"
        done
    done
done
expect_eq "$(grep -c '^module ' results)" 24 "the module's measures, no others"
expect_eq "$(grep -c '^limit ' results)" 24 "the limit's measures, no others"
while read -r who measure value unit; do
    positive "$value" || fail "$who $measure: [$value $unit] is not a positive number"
done <results

# Startup: fresh processes, both modules, two per round.
expect_eq "$(sed -n 16p table)" "startup, fresh processes: medians of 4 per module (alternating); before: $MODULE" "the startup title"
expect_eq "$(sed -n 17p table | tr -s ' ')" "row now/before now before" "the startup header"
expect_eq "$(sed -n '18,22p' table | sed -E 's/ +[0-9.]+x +[0-9.,]+( (ms|us))? +[0-9.,]+( (ms|us))?$//')" "dlopen
first C_Initialize
C_Finalize + C_Initialize
C_GetMechanismList (count, list)
mechanisms listed" "the five startup rows, each with a ratio and two figures"
# The same module both times: the same mechanisms.
expect_contains "$(sed -n 22p table)" " 1.00x " "the same module lists the same mechanisms"
for who in new old; do
    for measure in dlopen initialize.first initialize.finalize mechanism.list mechanism.count; do
        expect_eq "$(grep -c "^$who $measure " results)" 4 "$who $measure in each startup process"
    done
done

# Without the module from f089d4e: said on standard error, the startup rows marked skipped.
expect_status 0 "pq-bench.sh without a 'before' module" env TMPDIR="$WORK/tmp" PQ_BENCH_MODULE="$MODULE" PQ_BENCH_LIMIT="$limit" \
    PQ_BENCH_BASELINE="$WORK/absent/libkeychain-pkcs11.so" PQ_BENCH_STARTUP_COUNT=3 "$root/scripts/pq-bench.sh" 0.01 1 1
expect_contains "$(cat last.err)" "pq-bench: no module from f089d4e at $WORK/absent/libkeychain-pkcs11.so: the startup rows show this module alone" \
    "the missing module is named"
expect_eq "$(sed -n '3,14p' last.out | grep -cE ' [0-9.]+x +[0-9.,]+ +[0-9.,]+$')" 12 "the twelve rows are still measured"
expect_eq "$(sed -n 16p last.out)" "startup, fresh processes: medians of 1; before: skipped, no module from f089d4e (see scripts/pq-bench.sh)" \
    "the startup title says why"
expect_eq "$(sed -n '18,22p' last.out | grep -cE ' skipped +[0-9.,]+( (ms|us))? +n/a$')" 5 "each startup row: skipped, this module's figure, n/a"

expect_eq "$(ls -A tmp)" "" "the benchmark's folders are removed"
echo "pq bench: ok"
