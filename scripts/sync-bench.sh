#!/usr/bin/env bash
# Sync over git (issue 47 part 7) against git alone doing the same work (the limit), in one run,
# round by round (the two sides' order alternating from one round to the next), medians. Two
# "machines" A and B — each its own keychain folder, device key, home and no keychaind, exactly as
# Tests/interop/test_sync_git.sh makes them — in one circle through a local bare repository
# (file://); git alone has a bare repository and two clones of its own. Each round:
#
#   push       sync  `keychainctl sync now` on A after Benchmarks/sync_bench.c changed N of A's
#                    synchronizable generic passwords (a new value each; the changes untimed): it
#                    fetches, checks and merges, reads the keychain, seals N item files and A's
#                    manifest, commits and pushes
#              git   in clone 1: N files of the sizes the sync writes (each item file's: 1 KiB
#                    padded, sealed) and one of its manifest's size, random bytes, written by one
#                    process (each old file unlinked and a new one written, as the sync writes
#                    them); `git add -A`, `git commit`, `git push`
#   pull       sync  `keychainctl sync now` on B: fetches and merges A's push, checks it, stores
#                    the N items in B's keychain (a sync that only receives commits and pushes
#                    nothing: A's manifest lists the new versions)
#              git   in clone 2: `git pull` (fetch + merge) of clone 1's push
#   push + pull      the N items from A to B end to end: the round's push and pull added up on
#                    each side (git alone: commit, push and pull)
#   no change  sync  `keychainctl sync now` on B again, when nothing changed anywhere
#              git   in clone 2: `git pull` with nothing new + `git push` with nothing to push
#
# Each time is a process's (or git alone's commands') wall time, read from $EPOCHREALTIME; the
# table gives each side's median over the rounds, and the median and range of the rounds' ratios
# sync/git (goal <= 1.5): the two sides of a round run seconds apart, and this machine's disk is
# fast one minute and slow the next, so a round's ratio is steadier than the ratio of two medians.
# Every sync must say what it did ("sent N, received 0" …) or the run fails.
#
# Then the cost a running sync adds to C_Sign latency in another process on the same keychain:
# Benchmarks/sync_bench.c's signer signs with a P-256 token key of A's keychain (C_SignInit +
# C_Sign, CKM_ECDSA, one thread, back to back), each signature timed, while the script runs
# windows, each window's signatures kept under its name:
#   busy   a `sync now` on A carrying N changed items: alternately receiving N items B changed
#          (B first takes A's last changes, then changes N items and pushes them, all outside any
#          window) and sending N items A changed (the changes made outside any window)
#   quiet  as long as the busy window beside it, with no sync and no change anywhere
# Quiet and busy alternate (which comes first alternating too); the table gives p50, p99 and max
# over all signatures of each kind, and the ratios busy/quiet.
#
# Usage: scripts/sync-bench.sh [items changed per sync, default 1000] [rounds, default 9]
#                              [latency windows of each kind, default 6]
# Environment:
#   SYNC_BENCH_KEYCHAINCTL=PATH  keychainctl (default: the release build's, built if missing)
#   SYNC_BENCH_MODULE=PATH       libkeychain-pkcs11.so (default: the release build's)
#   SYNC_BENCH_RESULTS=FILE      also keep the raw lines ("WHO MEASURE VALUE UNIT")
set -euo pipefail
cd "$(dirname "$0")/.."
# $EPOCHREALTIME, awk and sleep read and write decimal points: one locale for all of them.
export LC_ALL=C
items=${1:-1000}
rounds=${2:-9}
windows=${3:-6}
for count in "$items" "$rounds" "$windows"; do
    [[ "$count" =~ ^[1-9][0-9]*$ ]] || { echo "usage: scripts/sync-bench.sh [items] [rounds] [latency windows] (each a whole number from 1)" >&2; exit 2; }
done

if [ -z "${SYNC_BENCH_KEYCHAINCTL:-}" ] || [ -z "${SYNC_BENCH_MODULE:-}" ]; then
    [ -f .build/release-path ] && [ -x "$(cat .build/release-path)/keychainctl" ] || scripts/build-release.sh >/dev/null
fi
keychainctl=${SYNC_BENCH_KEYCHAINCTL:-$(cat .build/release-path)/keychainctl}
module=${SYNC_BENCH_MODULE:-$(cat .build/release-path)/libkeychain-pkcs11.so}
[ -x "$keychainctl" ] || { echo "sync-bench: no keychainctl at $keychainctl" >&2; exit 1; }
[ -f "$module" ] || { echo "sync-bench: no module at $module" >&2; exit 1; }
command -v git >/dev/null || { echo "sync-bench: git is missing" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/sync-bench.XXXXXX")
signer_pid=
cleanup() {
    if [ -n "$signer_pid" ]; then kill "$signer_pid" 2>/dev/null || true; wait "$signer_pid" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT
gcc -O2 -Wall -Wextra -IInclude -o "$work/sync_bench" Benchmarks/sync_bench.c -ldl -lpthread
printf '12345678' >"$work/so.pin"
printf '1234' >"$work/user.pin"

# on NAME COMMAND...: COMMAND as machine NAME (its keychain folder, device key and home; no
# keychaind; a fast PIN cost, which no figure depends on).
on() {
    local name=$1
    shift
    env KEYCHAIN_PKCS11_DIR="$work/$name/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$work/$name/state/device-key" \
        KEYCHAIN_PKCS11_AGENT="$work/$name/no-agent.sock" HOME="$work/$name/home" KEYCHAIN_PKCS11_KDF_LOG_N=10 "$@"
}
# kc NAME ARGS...: keychainctl on machine NAME, unlocked by the PIN file.
kc() {
    local name=$1
    shift
    on "$name" "$keychainctl" "$@" --pin-file "$work/user.pin"
}
# change NAME TAG: N synchronizable generic passwords of machine NAME get a new value (made when missing).
change() {
    on "$1" "$work/sync_bench" "$module" "$work/user.pin" items "$items" "$2" >"$work/out" 2>"$work/err" || {
        echo "sync-bench: changing $items items on $1 failed:" >&2
        cat "$work/err" >&2
        exit 1
    }
}
# sync NAME EXPECTED: `sync now` on NAME, whose report must match EXPECTED (an extended regular
# expression); its time in $elapsed (ms).
sync() {
    local start status=0
    start=$EPOCHREALTIME
    kc "$1" sync now >"$work/out" 2>"$work/err" || status=$?
    elapsed=$(ms_since "$start")
    if [ "$status" -ne 0 ] || ! grep -Eqx "$2" "$work/out"; then
        echo "sync-bench: sync now on $1 (exit $status) did not report [$2]:" >&2
        cat "$work/out" "$work/err" >&2
        exit 1
    fi
}
ms_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", (b - a) * 1000 }'; }
: >"$work/results"
record() { echo "$1 $2 $3 ms" >>"$work/results"; }

# Git alone: git with what the sync's driver sets (Sources/KeychainSync/GitRepository.swift): no
# system configuration, no hooks, no signing, an identity of its own.
export GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0 GIT_AUTHOR_NAME=sync-bench GIT_AUTHOR_EMAIL=sync-bench@example.invalid \
    GIT_COMMITTER_NAME=sync-bench GIT_COMMITTER_EMAIL=sync-bench@example.invalid
plain() {
    local clone=$1
    shift
    HOME="$work/git/home" git -C "$work/git/$clone" -c core.hooksPath=/dev/null -c commit.gpgSign=false "$@"
}

echo "sync-bench: $keychainctl and $module; $items items, $rounds rounds, $windows latency windows of each kind" >&2
for name in a b; do
    mkdir -p "$work/$name/keychains" "$work/$name/state" "$work/$name/home"
    on "$name" "$keychainctl" create --label login --so-pin-file "$work/so.pin" --pin-file "$work/user.pin" >/dev/null
done
git init -q --bare -b main "$work/remote.git"
remote=file://$work/remote.git

# The circle: A with N items sets up, B joins, A approves, B receives them; both settle.
change a setup
kc a sync setup --remote "$remote" --device-name a >"$work/out"
grep -qx "sent $items, received 0, conflicts settled 0" "$work/out" || { echo "sync-bench: setup did not send $items items" >&2; cat "$work/out" >&2; exit 1; }
code=$(kc b sync join --remote "$remote" --device-name b --wait 0 | sed -n 's/^pairing code: //p')
kc a sync approve "$code" >/dev/null
sync b "sent 0, received $items, conflicts settled 0"
sync a "sent 0, received 0, conflicts settled 0"

# Git alone's repositories: clone 1 holds files of the names and sizes of A's work tree, clone 2
# is its clone. Each round rewrites the item files and A's manifest (what a push-side sync writes).
tree=$(ls -d "$work"/a/state/sync/*/)
device=$(ls "$tree/manifests" | head -n 1)
(cd "$tree" && find . -path ./.git -prune -o -type f -printf '%s %P\n') | sort -k2 >"$work/git-files.all"
grep -E " (items/|manifests/$device\$)" "$work/git-files.all" | sed "s|^\([0-9]*\) |\1 $work/git/one/|" >"$work/git-files.round"
[ "$(wc -l <"$work/git-files.round")" -eq $((items + 1)) ] || { echo "sync-bench: A's work tree does not hold $items item files and a manifest" >&2; exit 1; }
mkdir -p "$work/git/home" "$work/git/one"
git init -q --bare -b main "$work/git/remote.git"
plain one init -q -b main
plain one remote add origin "file://$work/git/remote.git"
(cd "$tree" && find . -path ./.git -prune -o -type d -printf '%P\n') | while read -r folder; do mkdir -p "$work/git/one/$folder"; done
sed "s|^\([0-9]*\) |\1 $work/git/one/|" "$work/git-files.all" >"$work/git-files.first"
"$work/sync_bench" write-files "$work/git-files.first" >/dev/null
plain one add -A
plain one commit -q -m first
plain one push -q origin main:main
HOME="$work/git/home" git clone -q "file://$work/git/remote.git" "$work/git/two"

# Git alone's three measures; each time in $elapsed (ms).
git_push() {
    local start
    start=$EPOCHREALTIME
    "$work/sync_bench" write-files "$work/git-files.round" >/dev/null
    plain one add -A
    plain one commit -q -m sync
    plain one push -q origin main:main
    elapsed=$(ms_since "$start")
}
git_pull() {
    local start
    start=$EPOCHREALTIME
    plain two pull -q --no-rebase origin main
    elapsed=$(ms_since "$start")
    [ "$(plain two rev-parse HEAD)" = "$(plain one rev-parse HEAD)" ] || { echo "sync-bench: git pull did not bring clone 1's commit" >&2; exit 1; }
}
git_nothing() {
    local start
    start=$EPOCHREALTIME
    plain two pull -q --no-rebase origin main
    plain two push -q origin main:main
    elapsed=$(ms_since "$start")
}

for round in $(seq 1 "$rounds"); do
    change a "round-$round"
    if [ $((round % 2)) -eq 1 ]; then
        sync a "sent $items, received 0, conflicts settled 0"; record sync push "$elapsed"
        git_push; record git push "$elapsed"
        sync b "sent 0, received $items, conflicts settled 0"; record sync pull "$elapsed"
        git_pull; record git pull "$elapsed"
        sync b "sent 0, received 0, conflicts settled 0"; record sync nochange "$elapsed"
        git_nothing; record git nochange "$elapsed"
    else
        git_push; record git push "$elapsed"
        sync a "sent $items, received 0, conflicts settled 0"; record sync push "$elapsed"
        git_pull; record git pull "$elapsed"
        sync b "sent 0, received $items, conflicts settled 0"; record sync pull "$elapsed"
        git_nothing; record git nochange "$elapsed"
        sync b "sent 0, received 0, conflicts settled 0"; record sync nochange "$elapsed"
    fi
done

# The signer on A's keychain; phases by name on its standard input.
sync a "sent 0, received 0, conflicts settled 0"
mkfifo "$work/signer.in"
on a "$work/sync_bench" "$module" "$work/user.pin" signer <"$work/signer.in" >"$work/signer.out" 2>"$work/signer.err" &
signer_pid=$!
exec 3>"$work/signer.in"
for _ in $(seq 1 300); do
    grep -qx ready "$work/signer.out" 2>/dev/null && break
    kill -0 "$signer_pid" 2>/dev/null || { echo "sync-bench: the signer exited:" >&2; cat "$work/signer.err" >&2; exit 1; }
    sleep 0.1
done
grep -qx ready "$work/signer.out" || { echo "sync-bench: the signer is not ready after 30 s" >&2; exit 1; }
# window KIND: a quiet window as long as the last busy one, or a busy one (the sync in $1's args).
quiet() { echo quiet >&3; sleep "$(awk -v ms="$1" 'BEGIN { printf "%.3f", ms / 1000 }')"; echo idle >&3; }
busy() { echo busy >&3; sync a "$1"; echo idle >&3; }
for window in $(seq 1 "$windows"); do
    if [ $((window % 2)) -eq 1 ]; then
        # B first takes A's last changes (else its own would conflict with them).
        sync b "sent 0, received [0-9]+, conflicts settled 0"
        change b "window-$window"
        sync b "sent $items, received 0, conflicts settled 0"
        expected="sent 0, received $items, conflicts settled 0"
    else
        change a "window-$window"
        expected="sent $items, received 0, conflicts settled 0"
    fi
    if [ $(((window + 1) / 2 % 2)) -eq 1 ]; then
        busy "$expected"; record sync window "$elapsed"
        quiet "$elapsed"
    else
        # The quiet window first, as long as the last busy one (the first: 1 s).
        quiet "$(awk '$1 == "sync" && $2 == "window" { last = $3 } END { print last ? last : 1000 }' "$work/results")"
        busy "$expected"; record sync window "$elapsed"
    fi
done
echo report >&3
exec 3>&-
wait "$signer_pid" || { echo "sync-bench: the signer failed:" >&2; cat "$work/signer.err" >&2; signer_pid=; exit 1; }
signer_pid=
grep '^latency\.' "$work/signer.out" | sed 's/^/signer /' >>"$work/results"

if [ -n "${SYNC_BENCH_RESULTS:-}" ]; then cp "$work/results" "$SYNC_BENCH_RESULTS"; fi

python3 - "$work/results" "$items" "$rounds" "$windows" <<'PY'
import statistics, sys
results, items, rounds, windows = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows = {}
for line in open(results):
    who, measure, value, unit = line.split()
    rows.setdefault((who, measure), []).append(float(value))
# The items from A to B end to end: each round's push and pull added up, on each side.
for who in ("sync", "git"):
    pushes, pulls = rows.get((who, "push"), []), rows.get((who, "pull"), [])
    if pushes and len(pushes) == len(pulls):
        rows[(who, "transfer")] = [a + b for a, b in zip(pushes, pulls)]
def paired(measure):
    """The median and the range of the rounds' ratios sync/git (the results list each round's pair in order)."""
    ours, bound = rows.get(("sync", measure), []), rows.get(("git", measure), [])
    ratios = [a / b for a, b in zip(ours, bound) if b > 0]
    if not ratios or len(ours) != len(bound):
        return "n/a", "n/a"
    return f"{statistics.median(ratios):.2f}x", f"{min(ratios):.2f}-{max(ratios):.2f}x"
def med(who, measure):
    values = rows.get((who, measure))
    return statistics.median(values) if values else None
def fmt(x, unit="ms"):
    if x is None:
        return "n/a"
    text = f"{x:,.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}" if x >= 1 else f"{x:.3f}"
    return f"{text} {unit}".rstrip()
def ratio(a, b):
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}x"

print(f"sync of {items:,} items over file://: medians of {rounds} alternating rounds (sync/git: the median of the rounds' ratios)")
print(f"{'row':40} {'sync/git':>9} {'rounds':>12} {'sync (keychainctl)':>19} {'git alone':>11}")
for measure, title in (("push", f"push: {items:,} changed items (A)"), ("pull", f"pull: {items:,} changed items (B)"),
                       ("transfer", f"push + pull: {items:,} items A to B"), ("nochange", "no-change sync (B)")):
    median, spread = paired(measure)
    print(f"{title:40} {median:>9} {spread:>12} {fmt(med('sync', measure)):>19} {fmt(med('git', measure)):>11}")
print()
print(f"C_Sign latency on A's keychain (ECDSA P-256 token key): {windows} windows of each kind, all signatures of each kind")
print(f"{'row':40} {'busy/quiet':>10} {'while syncing':>14} {'no sync':>10}")
for measure, title in (("p50", "C_SignInit + C_Sign p50"), ("p99", "C_SignInit + C_Sign p99"), ("max", "C_SignInit + C_Sign max")):
    busy, quiet = med("signer", f"latency.busy.{measure}"), med("signer", f"latency.quiet.{measure}")
    print(f"{title:40} {ratio(busy, quiet):>10} {fmt(busy):>14} {fmt(quiet):>10}")
busy, quiet = med("signer", "latency.busy.signatures"), med("signer", "latency.quiet.signatures")
print(f"{'signatures timed':40} {ratio(busy, quiet):>10} {fmt(busy, ''):>14} {fmt(quiet, ''):>10}")
PY
