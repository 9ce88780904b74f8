# Where a sync device's identity key lives (issue 47, Docs/sync.md "Identities and keys"): two
# "machines" (own keychain folder, device key, home) and a bare repository by path. Machine a has
# a TPM (a swtpm this test starts on 127.0.0.1, stopped by its PID): `sync setup --identity-key
# tpm` makes the key there and `sync status` (text and --json) says so. Machine b has none
# (KEYCHAIN_PKCS11_TCTI=none): `sync join --identity-key tpm` fails with exit status 64 and its
# reason, and writes nothing (no sync state, no request on the remote); `--identity-key auto`
# then joins in software, and items cross both ways. With its TPM gone, machine a's syncs fail
# saying the key is in this machine's TPM — `sync now`, and keychaind's own syncs, which keep it as
# the last error and back off while the daemon goes on — and `sync leave --local` still forgets
# the circle.
. "$HERE/lib.sh"
. "$HERE/servers.sh"

command -v git >/dev/null || fail "git is missing"
if ! command -v swtpm >/dev/null 2>&1; then
    echo "skip: swtpm is missing (scripts/install-deps.sh installs swtpm and swtpm-tools); TPM identity keys untested"
    exit 0
fi
cd "$WORK" || fail "cd $WORK"
printf '12345678' >so.pin
printf '1234' >user.pin
trap 'stop_swtpms' EXIT
start_swtpm "$WORK/tpm"
tpm_a=$tcti

# machine NAME TCTI COMMAND...: keychainctl as machine NAME with TCTI as its TPM (none: no TPM).
machine() {
    local name=$1 machine_tcti=$2
    shift 2
    KEYCHAIN_PKCS11_DIR="$WORK/$name/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$WORK/$name/state/device-key" \
        KEYCHAIN_PKCS11_AGENT="$WORK/$name/no-agent.sock" HOME="$WORK/$name/home" KEYCHAIN_PKCS11_TCTI="$machine_tcti" \
        "$KEYCHAINCTL" "$@" --pin-file "$WORK/user.pin"
}
for name in a b; do
    mkdir -p "$name/keychains" "$name/state" "$name/home" || fail "mkdir $name"
    KEYCHAIN_PKCS11_DIR="$WORK/$name/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$WORK/$name/state/device-key" KEYCHAIN_PKCS11_TCTI=none \
        "$KEYCHAINCTL" create --label login --so-pin-file so.pin --pin-file user.pin >/dev/null || fail "create the keychain of $name"
done
git init -q --bare -b main remote.git || fail "git init --bare"
remote="file://$WORK/remote.git"

# --- a: the identity key in the TPM ---------------------------------------------------------------
printf 'from-a-secret' >a.txt
machine a "$tpm_a" add-generic-password -a alice -s a.example.com --sync --password-file a.txt >/dev/null || fail "add on a"
out=$(machine a "$tpm_a" sync setup --remote "$remote" --device-name laptop --identity-key tpm 2>&1) || fail "sync setup --identity-key tpm: $out"
expect_contains "$out" "sent 1, received 0" "setup with a TPM identity sends the item"
out=$(machine a "$tpm_a" sync status) || fail "sync status on a: $out"
expect_contains "$out" "identity key:      TPM" "status names the TPM"
out=$(machine a "$tpm_a" sync status --json) || fail "sync status --json on a"
expect_eq "$(printf '%s' "$out" | python3 -c 'import json, sys; print(json.load(sys.stdin)["identityKey"])')" "tpm" "status --json: identityKey"

# --- b: no TPM ------------------------------------------------------------------------------------
expect_status 64 "--identity-key tpm without a TPM" machine b none sync join --remote "$remote" --device-name desktop --identity-key tpm --wait 0
expect_contains "$(cat "$WORK/last.err")" "--identity-key tpm: this machine has no TPM" "the refusal says why"
expect_eq "$(cat "$WORK/last.out")" "" "no pairing code"
expect_contains "$(machine b none sync status)" "is in no circle" "nothing of the circle was kept on b"
expect_eq "$(git --git-dir remote.git ls-tree -r --name-only main circle/requests)" "" "no join request on the remote"
expect_status 64 "an unknown --identity-key" machine b none sync join --remote "$remote" --identity-key hsm --wait 0
expect_status 64 "--identity-key tpm for setup without a TPM" machine b none sync setup --remote "file://$WORK/other.git" --identity-key tpm
[ ! -e "$WORK/other.git" ] || fail "setup without a TPM touched its remote"

out=$(machine b none sync join --remote "$remote" --device-name desktop --wait 0) || fail "sync join (auto, no TPM): $out"
code=$(printf '%s\n' "$out" | sed -n 's/^pairing code: //p')
expect_eq "${#code}" "12" "a pairing code"
out=$(machine a "$tpm_a" sync approve "$code") || fail "approve on the TPM device: $out"
out=$(machine b none sync now) || fail "sync now on b: $out"
expect_contains "$out" "received 1" "b reads a's item"
expect_contains "$(machine b none sync status)" "identity key:      software" "status names software on b"
expect_eq "$(machine b none sync status --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["identityKey"])')" "software" "status --json on b"
printf 'from-b-secret' >b.txt
machine b none add-generic-password -a bob -s b.example.com --sync --password-file b.txt >/dev/null || fail "add on b"
out=$(machine b none sync now) || fail "sync now on b: $out"
expect_contains "$out" "sent 1" "b sends its item"
out=$(machine a "$tpm_a" sync now) || fail "sync now on a: $out"
expect_contains "$out" "received 1" "a reads b's item"
expect_eq "$(machine a "$tpm_a" find-generic-password -s b.example.com -a bob -w)" "from-b-secret" "b's secret on a"

# --- a without its TPM ------------------------------------------------------------------------------
printf 'after-the-tpm' >c.txt
machine a none add-generic-password -a carol -s c.example.com --sync --password-file c.txt >/dev/null || fail "add on a without its TPM"
expect_status 1 "a TPM identity without its TPM" machine a none sync now
expect_contains "$(cat "$WORK/last.err")" "identity key is in this machine's TPM" "the failure says where the key is"
expect_contains "$(cat "$WORK/last.err")" "sync leave --local" "and what to do"
out=$(machine a none sync status) || fail "status without the TPM: $out"
expect_contains "$out" "identity key:      TPM" "status reads without the TPM"

# keychaind's own syncs without the TPM: the one after unlock fails with the same words, kept as
# the last error and said on keychaind's stderr with the back-off (30 s first); a change made during
# the back-off waits for it; the daemon goes on serving its session.
keychaind=$(dirname "$KEYCHAINCTL")/keychaind
[ -x "$keychaind" ] || fail "no keychaind beside keychainctl"
mkdir -m 700 "$WORK/a/agent" || fail "agent folder"
a_session() {
    KEYCHAIN_PKCS11_DIR="$WORK/a/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$WORK/a/state/device-key" KEYCHAIN_PKCS11_AGENT="$WORK/a/agent/agent.sock" \
        HOME="$WORK/a/home" KEYCHAIN_PKCS11_TCTI=none "$@"
}
machine a none session-policy --sync-interval 120s >/dev/null || fail "session-policy --sync-interval"
KEYCHAIN_PKCS11_DIR="$WORK/a/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$WORK/a/state/device-key" KEYCHAIN_PKCS11_AGENT="$WORK/a/agent/agent.sock" \
    HOME="$WORK/a/home" KEYCHAIN_PKCS11_TCTI=none "$keychaind" --foreground --socket "$WORK/a/agent/agent.sock" 2>"$WORK/a/daemon.log" &
daemon=$!
trap 'stop_swtpms; kill "$daemon" 2>/dev/null' EXIT
for _ in $(seq 1 50); do [ -S "$WORK/a/agent/agent.sock" ] && break; sleep 0.1; done
a_session "$KEYCHAINCTL" unlock --pin-file "$WORK/user.pin" >/dev/null || fail "unlock a in its session: $(cat "$WORK/a/daemon.log")"
for _ in $(seq 1 40); do grep -q "failed (1 in a row" "$WORK/a/daemon.log" && break; sleep 0.5; done
expect_contains "$(cat "$WORK/a/daemon.log")" "failed (1 in a row; next try in 30 s)" "keychaind's sync after unlock fails and backs off"
expect_contains "$(cat "$WORK/a/daemon.log")" "identity key is in this machine's TPM" "in the same words as sync now"
error=$(a_session "$KEYCHAINCTL" sync status --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["lastError"] or "")') || fail "sync status in the session"
expect_contains "$error" "identity key is in this machine's TPM" "the last error in words"
printf 'while-the-tpm-is-gone' >d.txt
a_session "$KEYCHAINCTL" add-generic-password -a dave -s d.example.com --sync --password-file d.txt >/dev/null || fail "add on a in its session"
sleep 5
expect_eq "$(grep -c "keychaind: sync of" "$WORK/a/daemon.log")" "1" "a change during the back-off waits for it (no second try within 5 s)"
kill -0 "$daemon" 2>/dev/null || fail "keychaind exited after its failed sync: $(cat "$WORK/a/daemon.log")"
expect_eq "$(a_session "$KEYCHAINCTL" find-generic-password -a dave -s d.example.com -w)" "while-the-tpm-is-gone" "the session goes on serving"
kill "$daemon" 2>/dev/null
wait "$daemon" 2>/dev/null
out=$(machine a none sync leave --local) || fail "sync leave --local without the TPM: $out"
expect_contains "$(machine a none sync status)" "is in no circle" "a forgot the circle"
echo "ok"
