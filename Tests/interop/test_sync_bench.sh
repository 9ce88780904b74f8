# scripts/sync-bench.sh with 20 items, one round and one latency window of each direction,
# checked for form: the four sync rows each with a ratio, the range of the rounds' ratios and
# two times; the latency rows with a ratio and two figures; every raw measure of the sync and of
# git alone once per round, the signer's figures for both kinds of window; the benchmark's folder
# gone afterwards. (Every sync in it must report what it did, or the script fails.)
. "$HERE/lib.sh"

for tool in gcc git python3; do
    command -v "$tool" >/dev/null || fail "$tool is missing (scripts/install-deps.sh installs it)"
done
root=$(cd "$HERE/../.." && pwd)
cd "$WORK" || fail "cd $WORK"
mkdir -p tmp

# positive TEXT: a number above zero, as the table (1,234 / 12.5 / 0.98) or the raw lines print it.
positive() { awk -v v="$1" 'BEGIN { gsub(",", "", v); exit !(v ~ /^[0-9]+(\.[0-9]+)?$/ && v + 0 > 0) }'; }

expect_status 0 "sync-bench.sh, 20 items" env TMPDIR="$WORK/tmp" SYNC_BENCH_KEYCHAINCTL="$KEYCHAINCTL" SYNC_BENCH_MODULE="$MODULE" \
    SYNC_BENCH_RESULTS="$WORK/results" "$root/scripts/sync-bench.sh" 20 1 2
cp last.out table
sed 's/^/figure: /' table

expect_eq "$(sed -n 1p table)" "sync of 20 items over file://: medians of 1 alternating rounds (sync/git: the median of the rounds' ratios)" "the first line"
expect_eq "$(sed -n 2p table | tr -s ' ')" "row sync/git rounds sync (keychainctl) git alone" "the header"
expect_eq "$(sed -n '3,6p' table | sed -E 's/ +[0-9.]+x +[0-9.]+-[0-9.]+x +[0-9.,]+ ms +[0-9.,]+ ms$//')" "push: 20 changed items (A)
pull: 20 changed items (B)
push + pull: 20 items A to B
no-change sync (B)" "the four sync rows, each with a ratio, its range and two times"
while read -r line; do
    read -r ratio spread ours bound <<<"$(awk '{ print $(NF-5), $(NF-4), $(NF-3), $(NF-1) }' <<<"$line")"
    for value in "${ratio%x}" "${spread%%-*}" "$ours" "$bound"; do positive "$value" || fail "not a positive number: [$value] in: $line"; done
    # One round: its ratio is the two times' (both rounded for print: within 2 %), and the range is that ratio.
    awk -v r="${ratio%x}" -v a="$ours" -v b="$bound" 'BEGIN { gsub(",", "", a); gsub(",", "", b); d = r - a / b; exit !(d * d <= (0.02 * r + 0.01) ^ 2) }' ||
        fail "the ratio is not sync/git: $line"
    expect_eq "$spread" "${ratio%x}-$ratio" "one round's range is its ratio: $line"
done < <(sed -n '3,6p' table)
# The end-to-end row is the push's and the pull's times added up, on each side.
times() { sed -n "$1p" table | awk '{ print $(NF-3), $(NF-1) }' | tr -d ,; }
read -r push_ours push_git <<<"$(times 3)"
read -r pull_ours pull_git <<<"$(times 4)"
read -r both_ours both_git <<<"$(times 5)"
awk -v a="$push_ours" -v b="$pull_ours" -v s="$both_ours" -v c="$push_git" -v d="$pull_git" -v t="$both_git" \
    'BEGIN { e1 = s - (a + b); e2 = t - (c + d); exit !(e1 * e1 <= (0.01 * s + 0.1) ^ 2 && e2 * e2 <= (0.01 * t + 0.1) ^ 2) }' ||
    fail "push + pull is not the push's and the pull's times added up: $(sed -n 5p table)"

expect_eq "$(sed -n 8p table)" "C_Sign latency on A's keychain (ECDSA P-256 token key): 2 windows of each kind, all signatures of each kind" \
    "the latency title"
expect_eq "$(sed -n 9p table | tr -s ' ')" "row busy/quiet while syncing no sync" "the latency header"
expect_eq "$(sed -n '10,13p' table | sed -E 's/ +[0-9.]+x +[0-9.,]+( ms)? +[0-9.,]+( ms)?$//')" "C_SignInit + C_Sign p50
C_SignInit + C_Sign p99
C_SignInit + C_Sign max
signatures timed" "the latency rows, each with a ratio and two figures"
while read -r line; do
    for value in $(awk '{ sub(/x$/, "", $0); print }' <<<"$line" | grep -oE '[0-9][0-9.,]*'); do
        positive "$value" || fail "not a positive number: [$value] in: $line"
    done
done < <(sed -n '10,13p' table)

# The raw lines: each measure of both sides once per round, the signer's for both kinds of window.
for measure in push pull nochange; do
    for who in sync git; do
        expect_eq "$(grep -c "^$who $measure [0-9.]* ms$" results)" 1 "$who $measure once per round"
    done
done
expect_eq "$(grep -c '^sync window [0-9.]* ms$' results)" 2 "a busy window's sync each"
for kind in quiet busy; do
    for figure in signatures p50 p99 max; do
        expect_eq "$(grep -c "^signer latency.$kind.$figure [0-9.]* " results)" 1 "the signer's $figure in $kind windows"
    done
done
while read -r who measure value unit; do
    positive "$value" || fail "$who $measure: [$value $unit] is not a positive number"
done <results

expect_eq "$(ls -A tmp)" "" "the benchmark's folder is removed"
echo "sync bench: ok"
