# Sync over git as users meet it (issue 47): three "machines" — each its own keychain folder,
# device key and home — and one bare repository, reached over ssh through a throwaway sshd on
# 127.0.0.1 by two of them and by file:// by the third. An item added with --sync on the first
# reads on the others through keychainctl and pkcs11-tool; an item without --sync never leaves;
# offline edits on two machines converge; the repository holds none of the labels, accounts or
# secrets; a removed machine cannot read what is added afterwards; a sync killed with SIGKILL at
# random points, then run again, loses and duplicates nothing.
. "$HERE/lib.sh"
. "$HERE/servers.sh"

command -v git >/dev/null || fail "git is missing"
cd "$WORK" || fail "cd $WORK"
me=$(id -un)
printf '12345678' >so.pin
printf '1234' >user.pin

# machine NAME COMMAND...: keychainctl as machine NAME (no keychaind: the PIN file unlocks).
machine() {
    local name=$1
    shift
    KEYCHAIN_PKCS11_DIR="$WORK/$name/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$WORK/$name/state/device-key" \
        KEYCHAIN_PKCS11_AGENT="$WORK/$name/no-agent.sock" HOME="$WORK/$name/home" "$KEYCHAINCTL" "$@" --pin-file "$WORK/user.pin"
}
# machine_exec NAME COMMAND...: the same, replacing the calling (sub)shell, so that `( machine_exec … ) &`
# leaves keychainctl itself as $! (for kill -9).
machine_exec() {
    local name=$1
    shift
    exec env KEYCHAIN_PKCS11_DIR="$WORK/$name/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$WORK/$name/state/device-key" \
        KEYCHAIN_PKCS11_AGENT="$WORK/$name/no-agent.sock" HOME="$WORK/$name/home" "$KEYCHAINCTL" "$@" --pin-file "$WORK/user.pin"
}
for name in a b c; do
    mkdir -p "$name/keychains" "$name/state" "$name/home" || fail "mkdir $name"
    KEYCHAIN_PKCS11_DIR="$WORK/$name/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$WORK/$name/state/device-key" \
        "$KEYCHAINCTL" create --label login --so-pin-file so.pin --pin-file user.pin >/dev/null || fail "create the keychain of $name"
done

# The remote: a bare repository, over ssh (a key of its own in authorized_keys) and as a path.
git init -q --bare -b main remote.git || fail "git init --bare"
ssh-keygen -q -t ed25519 -N '' -C sync -f "$WORK/id_sync" || fail "ssh key"
cp id_sync.pub authorized_keys
start_sshd
trap 'stop_pid "$sshd_pid"' EXIT
export GIT_SSH_COMMAND="ssh -F /dev/null -p $port -i $WORK/id_sync -o IdentitiesOnly=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=$WORK/known_hosts -o BatchMode=yes"
over_ssh="ssh://$me@127.0.0.1:$port$WORK/remote.git"
by_path="file://$WORK/remote.git"

printf 'correct-horse-42' >secret.txt
machine a add-generic-password -a alice-account -s sync.example.com --sync --password-file secret.txt >/dev/null || fail "add with --sync"
printf 'stays-on-a' >local.txt
machine a add-generic-password -a bob-account -s local.example.com --password-file local.txt >/dev/null || fail "add without --sync"

out=$(machine a sync setup --remote "$over_ssh" --device-name laptop) || fail "sync setup: $out"
expect_contains "$out" "sent 1, received 0" "setup sends the one synchronizable item"

# b joins over ssh: it reads nothing before a member approves its code.
out=$(machine b sync join --remote "$over_ssh" --device-name desktop --wait 0) || fail "sync join: $out"
code=$(printf '%s\n' "$out" | sed -n 's/^pairing code: //p')
expect_eq "${#code}" "12" "a 12-character pairing code"
expect_status 7 "an unapproved device reads nothing" machine b sync now
expect_contains "$(cat "$WORK/last.err")" "not a member of the circle" "the refusal names the reason"
expect_status 6 "a wrong code admits nobody" machine a sync approve AAAAAAAAAAAA
expect_contains "$(cat "$WORK/last.err")" "no device asks to join with code AAAAAAAAAAAA" "the wrong code is named"
expect_status 0 "approve" machine a sync approve "$code"
out=$(machine b sync now) || fail "sync now on b: $out"
expect_contains "$out" "received 1" "b receives the item"
expect_eq "$(machine b find-generic-password -a alice-account -s sync.example.com -w)" "correct-horse-42" "keychainctl on b reads it"
expect_status 6 "the item without --sync stayed on a" machine b find-generic-password -a bob-account -s local.example.com -w
# pkcs11-tool on b sees it as a data object of b's token.
objects=$(KEYCHAIN_PKCS11_DIR="$WORK/b/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$WORK/b/state/device-key" \
    pkcs11-tool --module "$MODULE" --token-label login --login --pin 1234 --list-objects --type data 2>&1) || fail "pkcs11-tool on b: $objects"
expect_contains "$objects" "sync.example.com" "pkcs11-tool on b lists the synced item"
# SecItemCopyMatching on b (the secitem executable, Apple's API): found with kSecAttrSynchronizable,
# and not without it (Apple's rule: a query without the key sees non-synchronizable items only).
SECITEM="$(dirname "$KEYCHAINCTL")/secitem"
[ -x "$SECITEM" ] || fail "no secitem beside $KEYCHAINCTL"
printf '#!/bin/sh\necho 1234\n' >prompt.sh && chmod +x prompt.sh
secitem_b() {
    KEYCHAIN_PKCS11_DIR="$WORK/b/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$WORK/b/state/device-key" KEYCHAIN_PKCS11_AGENT="$WORK/b/no-agent.sock" \
        KEYCHAIN_PKCS11_PROMPT="$WORK/prompt.sh" "$SECITEM" "$@"
}
out=$(secitem_b find sync.example.com alice-account --sync yes) || fail "secitem find --sync yes on b: $out"
expect_eq "$out" "correct-horse-42" "SecItemCopyMatching on b reads the synced item"
expect_status 6 "without kSecAttrSynchronizable the query does not see it" secitem_b find sync.example.com alice-account

# c joins through the file:// remote; any member approves.
out=$(machine c sync join --remote "$by_path" --device-name server --wait 0) || fail "sync join c: $out"
code=$(printf '%s\n' "$out" | sed -n 's/^pairing code: //p')
expect_status 0 "b approves c" machine b sync approve "$code"
machine c sync now >/dev/null || fail "sync now on c"
expect_eq "$(machine c find-generic-password -a alice-account -s sync.example.com -w)" "correct-horse-42" "keychainctl on c reads it"

# Offline edits on b and c (c's is the later one), then both sync in either order: both converge.
printf 'from-b' >b.txt
printf 'from-c' >c.txt
machine b update-generic-password -a alice-account -s sync.example.com --password-file b.txt >/dev/null || fail "update on b"
sleep 1
machine c update-generic-password -a alice-account -s sync.example.com --password-file c.txt >/dev/null || fail "update on c"
machine c sync now >/dev/null || fail "sync c"
out=$(machine b sync now) || fail "sync b: $out"
expect_contains "$out" "conflicts settled 1" "b settles the conflict"
machine c sync now >/dev/null || fail "sync c again"
machine a sync now >/dev/null || fail "sync a"
for name in a b c; do
    expect_eq "$(machine $name find-generic-password -a alice-account -s sync.example.com -w)" "from-c" "$name has the later edit"
done

# Two machines pushing at the same moment: git refuses the later push, that machine fetches,
# merges and pushes again; both end up with both items.
printf 'race-a' >race-a.txt
printf 'race-c' >race-c.txt
machine a add-generic-password -a race-a -s sync.example.com --sync --password-file race-a.txt >/dev/null || fail "add race-a"
machine c add-generic-password -a race-c -s sync.example.com --sync --password-file race-c.txt >/dev/null || fail "add race-c"
machine a sync now >race-a.out 2>&1 &
pid_a=$!
machine c sync now >race-c.out 2>&1 &
pid_c=$!
wait "$pid_a" || fail "sync a during the race: $(cat race-a.out)"
wait "$pid_c" || fail "sync c during the race: $(cat race-c.out)"
# The remote has both: each machine gets the other's item at its next sync.
machine a sync now >/dev/null || fail "sync a after the race"
machine c sync now >/dev/null || fail "sync c after the race"
for name in a c; do
    expect_eq "$(machine $name find-generic-password -a race-a -s sync.example.com -w)" "race-a" "$name has a's item"
    expect_eq "$(machine $name find-generic-password -a race-c -s sync.example.com -w)" "race-c" "$name has c's item"
done

# The repository holds none of the labels, accounts, services, secrets or device names in clear:
# every object it holds, decompressed (blobs, trees with their file names, commits with their
# messages and authors), is searched, not the zlib-compressed files.
git --git-dir remote.git cat-file --batch-all-objects --batch >objects.txt || fail "cat-file"
[ "$(wc -c <objects.txt)" -gt 10000 ] || fail "the remote's objects were not read"
for word in alice-account sync.example.com correct-horse-42 from-b from-c bob-account laptop desktop server; do
    if grep -a -q -F -- "$word" objects.txt; then fail "the remote holds [$word] in clear"; fi
done
# The control: the same search finds what git does keep in clear (the committer's domain).
grep -a -q -F -- "@keychain-pkcs11" objects.txt || fail "the search over the remote's objects finds nothing at all"

status=$(machine a sync status --json) || fail "sync status"
expect_contains "$status" '"approved":true' "status: approved"
expect_contains "$status" '"name":"server"' "status: the devices' names"
expect_contains "$status" '"pendingChanges":0' "status: nothing pending"

# a removes b: b cannot read what is added afterwards, c can.
machine a sync remove-device desktop >/dev/null || fail "remove-device"
printf 'after-removal' >after.txt
machine a add-generic-password -a carol-account -s sync.example.com --sync --password-file after.txt >/dev/null || fail "add after removal"
machine a sync now >/dev/null || fail "sync a after removal"
machine c sync now >/dev/null || fail "sync c after removal"
expect_eq "$(machine c find-generic-password -a carol-account -s sync.example.com -w)" "after-removal" "c reads the new item"
expect_status 7 "b is no longer a member" machine b sync now
expect_status 6 "b never got the new item" machine b find-generic-password -a carol-account -s sync.example.com -w

# SIGKILL during syncs at random points, with changes on both sides; then a sync completes and
# nothing is lost or duplicated.
killed=0
for round in 1 2 3 4 5 6; do
    printf "value-$round" >round.txt
    machine a add-generic-password -a "round-$round" -s sync.example.com --sync --password-file round.txt >/dev/null || fail "add round $round"
    for name in c a; do
        (machine_exec "$name" sync now >/dev/null 2>&1) &
        pid=$!
        sleep "0.$((RANDOM % 9))"
        kill -9 "$pid" 2>/dev/null && killed=$((killed + 1))
        wait "$pid" 2>/dev/null
    done
done
machine a sync now >/dev/null || fail "sync a after the kills: $(cat "$WORK/last.err" 2>/dev/null)"
machine c sync now >/dev/null || fail "sync c after the kills"
machine a sync now >/dev/null || fail "sync a once more"
for round in 1 2 3 4 5 6; do
    expect_eq "$(machine c find-generic-password -a "round-$round" -s sync.example.com -w)" "value-$round" "round $round reached c"
done
[ "$killed" -ge 3 ] || fail "only $killed of 12 syncs were still running when killed: the kills tested little"
echo "figure: $killed of 12 syncs killed with SIGKILL mid-way, then synced: nothing lost or duplicated"
count_a=$(machine a items | grep -c 'sync.example.com')
count_c=$(machine c items | grep -c 'sync.example.com')
expect_eq "$count_c" "$count_a" "the same items on a and c, none duplicated"
# keychaind syncs on its own: machine c's keychain unlocked in its session (a private socket), a
# 2 s interval; an item added on a arrives on c without 'sync now', and one added on c while
# keychaind holds it reaches the remote a few seconds later.
keychaind=$(dirname "$KEYCHAINCTL")/keychaind
[ -x "$keychaind" ] || fail "no keychaind beside keychainctl"
mkdir -m 700 "$WORK/c/agent" || fail "agent folder"
c_env() {
    KEYCHAIN_PKCS11_DIR="$WORK/c/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$WORK/c/state/device-key" \
        KEYCHAIN_PKCS11_AGENT="$WORK/c/agent/agent.sock" HOME="$WORK/c/home" "$@"
}
machine c session-policy --sync-interval 2s >/dev/null || fail "session-policy --sync-interval"
expect_contains "$(machine c session-policy)" "sync interval: 2 s" "the interval is kept"
# Started directly (not through c_env, a function: its background subshell's pid is not the daemon's).
KEYCHAIN_PKCS11_DIR="$WORK/c/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$WORK/c/state/device-key" KEYCHAIN_PKCS11_AGENT="$WORK/c/agent/agent.sock" \
    HOME="$WORK/c/home" "$keychaind" --foreground --socket "$WORK/c/agent/agent.sock" 2>"$WORK/c/daemon.log" &
daemon=$!
trap 'stop_pid "$sshd_pid"; kill "$daemon" 2>/dev/null' EXIT
for _ in $(seq 1 50); do [ -S "$WORK/c/agent/agent.sock" ] && break; sleep 0.1; done
c_env "$KEYCHAINCTL" unlock --pin-file "$WORK/user.pin" >/dev/null || fail "unlock c in its session: $(cat "$WORK/c/daemon.log")"
printf 'by-the-daemon' >daemon.txt
machine a add-generic-password -a daemon-in -s sync.example.com --sync --password-file daemon.txt >/dev/null || fail "add on a"
machine a sync now >/dev/null || fail "sync a"
arrived=
for _ in $(seq 1 40); do
    if [ "$(c_env "$KEYCHAINCTL" find-generic-password -a daemon-in -s sync.example.com -w 2>/dev/null)" = "by-the-daemon" ]; then arrived=yes; break; fi
    sleep 0.5
done
[ -n "$arrived" ] || fail "keychaind did not sync c within 20 s: $(cat "$WORK/c/daemon.log")"
printf 'from-c-daemon' >c-daemon.txt
c_env "$KEYCHAINCTL" add-generic-password -a daemon-out -s sync.example.com --sync --password-file c-daemon.txt >/dev/null || fail "add on c"
sent=
for _ in $(seq 1 40); do
    machine a sync now >/dev/null 2>&1
    if [ "$(machine a find-generic-password -a daemon-out -s sync.example.com -w 2>/dev/null)" = "from-c-daemon" ]; then sent=yes; break; fi
    sleep 0.5
done
[ -n "$sent" ] || fail "keychaind did not send c's new item within 20 s: $(cat "$WORK/c/daemon.log")"
status=$(c_env "$KEYCHAINCTL" sync status --json) || fail "sync status on c"
expect_contains "$status" '"lastError":null' "no error on c"
kill "$daemon" 2>/dev/null
wait "$daemon" 2>/dev/null

echo "ok: three machines over ssh and file://: add, join with approval, edits converge, nothing in clear, removal, SIGKILL, keychaind syncing by itself"
