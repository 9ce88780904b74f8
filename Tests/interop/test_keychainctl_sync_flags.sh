# Which items sync (issue 47, part 1), through every door: keychainctl --sync on the password add
# commands, generate-key and import (a key pair and its certificate together) and --sync yes|no on
# update; the flag read back by keychainctl (items, show --json), by a C client through the module
# (CKA_KC_SYNCHRONIZABLE) and by Apple's SecItem API (the secitem executable, --sync yes|no|any).
# Each refused combination — a ThisDeviceOnly class, user presence, private-key-usage, a key in
# the TPM, a session object — prints its one-line reason and exits 64 (keychainctl), 0xd1
# CKR_TEMPLATE_INCONSISTENT (the module) or OSStatus -50 (SecItem), and stores nothing. Secret
# Service items follow the keychain's choice (secret-service sync yes|no, shown by status):
# secret-tool's items over D-Bus, from keychaind on a private session bus.
. "$HERE/lib.sh"
. "$HERE/servers.sh"

for tool in dbus-run-session secret-tool gcc openssl python3; do
    command -v "$tool" >/dev/null || fail "$tool is missing (scripts/install-deps.sh installs it)"
done
KEYCHAIND="$(dirname "$KEYCHAINCTL")/keychaind"
SECITEM="$(dirname "$KEYCHAINCTL")/secitem"
[ -x "$KEYCHAIND" ] || fail "no keychaind beside $KEYCHAINCTL"
[ -x "$SECITEM" ] || fail "no secitem (Apple's SecItem calls) beside $KEYCHAINCTL"
cd "$WORK" || fail "cd $WORK"
gcc -Wall -Wextra -Werror -I"$HERE/../../Include" "$HERE/../c-host/synchronizable.c" -o synchronizable -ldl || fail "compile synchronizable.c"

PIN=user-pin-1
printf '%s\n' "$PIN" >user.pin
# secitem asks the prompt program for the keychain password, as a locked keychain asks on a Mac.
printf '#!/bin/sh\necho %s\n' "$PIN" >prompt.sh && chmod +x prompt.sh
export KEYCHAIN_PKCS11_PROMPT="$WORK/prompt.sh"
kc create --label login --so-pin-file user.pin --pin-file user.pin >/dev/null || fail "create"
printf 'git-secret' >git.txt
printf 'imap-secret' >imap.txt

# synced LABEL: each object labelled LABEL (else whose service is LABEL) as the module shows it
# ("CLASS yes|no" lines, sorted).
synced() { ./synchronizable "$MODULE" "$PIN" show "$1" | sort; }
# json_sync ARGS...: show --json's synchronizable boolean for the item ARGS select.
json_sync() { kc show "$@" --json --pin-file user.pin | python3 -c 'import json, sys; print(json.load(sys.stdin)["synchronizable"])'; }

# --- marked through keychainctl, read through every door -----------------------------------------
kc add-generic-password -a alice -s git.example.org --sync --pin-file user.pin --password-file git.txt >/dev/null || fail "add-generic-password --sync"
kc add-internet-password -a bob -s mail.example.org -r imap --sync --pin-file user.pin --password-file imap.txt >/dev/null ||
    fail "add-internet-password --sync"
kc add-generic-password -a carol -s local.example.org --pin-file user.pin --password-file git.txt >/dev/null || fail "add without --sync"
kc generate-key --type ec --label synced-key --sync --pin-file user.pin >/dev/null || fail "generate-key --sync"
kc generate-key --type ed25519 --label local-key --pin-file user.pin >/dev/null || fail "generate-key"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout tls.key -out tls.crt -subj /CN=sync.example -days 2 2>/dev/null ||
    fail "openssl req"
printf 'bundle-pass' >p12.pass
openssl pkcs12 -export -inkey tls.key -in tls.crt -out tls.p12 -passout file:p12.pass -name tls 2>/dev/null || fail "openssl pkcs12"
kc import tls.p12 --label tls-identity --passphrase-file p12.pass --sync --pin-file user.pin >/dev/null || fail "import --sync"

expect_eq "$(json_sync --label git.example.org)" "True" "show --json: the generic password"
expect_eq "$(json_sync --label mail.example.org)" "True" "show --json: the internet password"
expect_eq "$(json_sync --label local.example.org)" "False" "show --json: a password added without --sync"
expect_eq "$(json_sync --label synced-key --type public-key)" "True" "show --json: the public key of a synchronizable pair"
expect_eq "$(json_sync --label tls-identity --type certificate)" "True" "show --json: the imported certificate"
expect_contains "$(kc show --label git.example.org --pin-file user.pin)" "Synchronizable  yes" "show prints the flag"
out=$(kc items --pin-file user.pin | sed 's/  */ /g')
expect_contains "$out" "KIND LABEL DETAILS PROTECTION SYNC URI" "items has a SYNC column"
expect_contains "$out" "generic-password git.example.org alice @ git.example.org when-unlocked yes pkcs11:" "items: synchronizable"
expect_contains "$out" "generic-password local.example.org carol @ local.example.org when-unlocked no pkcs11:" "items: not synchronizable"

expect_eq "$(synced git.example.org)" "data yes" "module: the generic password"
expect_eq "$(synced mail.example.org)" "data yes" "module: the internet password"
expect_eq "$(synced local.example.org)" "data no" "module: the local password"
expect_eq "$(synced synced-key)" "private-key yes
public-key yes" "module: a generated pair syncs together"
expect_eq "$(synced local-key)" "private-key no
public-key no" "module: a pair generated without --sync"
expect_eq "$(synced tls-identity)" "certificate yes
private-key yes
public-key yes" "module: an imported key, its public key and its certificate sync together"

expect_eq "$("$SECITEM" find git.example.org alice --sync yes)" "git-secret" "SecItemCopyMatching with kSecAttrSynchronizable true"
expect_eq "$("$SECITEM" find git.example.org alice --sync any)" "git-secret" "kSecAttrSynchronizableAny"
expect_status 6 "a query without kSecAttrSynchronizable sees no synchronizable item" "$SECITEM" find git.example.org alice
expect_status 6 "kSecAttrSynchronizable false" "$SECITEM" find git.example.org alice --sync no
expect_eq "$("$SECITEM" find local.example.org carol)" "git-secret" "a local item without the key"
expect_status 6 "a local item is not synchronizable" "$SECITEM" find local.example.org carol --sync yes

# --- through SecItem: add, find, delete by the flag ----------------------------------------------
printf 'apple-secret' | "$SECITEM" add apple.example dave --sync yes || fail "SecItemAdd with kSecAttrSynchronizable"
expect_eq "$(synced apple.example)" "data yes" "module: the SecItemAdd item"
expect_contains "$(kc find-generic-password -s apple.example -a dave --json --pin-file user.pin)" '"synchronizable":true' "keychainctl: the SecItemAdd item"
expect_status 6 "delete without the key leaves the synchronizable item" "$SECITEM" delete apple.example dave
"$SECITEM" delete apple.example dave --sync yes || fail "SecItemDelete with kSecAttrSynchronizable true"
expect_status 6 "deleted" "$SECITEM" find apple.example dave --sync any

# --- refusals: one line, the reason, status 64, nothing stored -----------------------------------
# refused WHAT MESSAGE COMMAND...: keychainctl exits 64 with exactly MESSAGE on stderr.
refused() {
    local what=$1 message=$2
    shift 2
    expect_status 64 "$what" "$@"
    expect_eq "$(cat "$WORK/last.err")" "$message" "$what: the message"
}
refused "a ThisDeviceOnly password" \
    "keychainctl: a ThisDeviceOnly item cannot sync (--sync with --accessible when-unlocked-this-device-only)." \
    kc add-generic-password -a erin -s refused.example --sync --accessible when-unlocked-this-device-only --pin-file user.pin --password-file git.txt
refused "user presence" \
    "keychainctl: an item bound to this device by user presence cannot sync (--sync with --access-control user-presence)." \
    kc add-internet-password -a erin -s refused.example --sync --access-control user-presence --pin-file user.pin --password-file git.txt
refused "private-key-usage" \
    "keychainctl: an item bound to this device by private-key-usage cannot sync (--sync with --access-control private-key-usage)." \
    kc generate-key --type ec --label refused.example --sync --access-control private-key-usage --pin-file user.pin
refused "a key in the TPM (whether or not this machine has one)" \
    "keychainctl: a key in the TPM cannot sync (--sync with --tpm)." \
    kc generate-key --type ec --label refused.example --sync --tpm --pin-file user.pin
refused "an imported ThisDeviceOnly key" \
    "keychainctl: a ThisDeviceOnly item cannot sync (--sync with --accessible always-this-device-only)." \
    kc import tls.p12 --label refused.example --passphrase-file p12.pass --sync --accessible always-this-device-only --pin-file user.pin
expect_eq "$(./synchronizable "$MODULE" "$PIN" show refused.example)" "not found" "nothing was stored by the refusals"
# An application password alone travels with the item.
printf 'app-pass' >app.txt
kc add-generic-password -a frank -s app.example --sync --access-control application-password --application-password-file app.txt \
    --pin-file user.pin --password-file git.txt >/dev/null || fail "--sync with an application password"
expect_eq "$(synced app.example)" "data yes" "module: the item sealed by its application password"

# --- update: --sync yes|no, and through the module ------------------------------------------------
kc add-generic-password -a grace -s device.example --accessible when-unlocked-this-device-only --pin-file user.pin --password-file git.txt >/dev/null ||
    fail "add a ThisDeviceOnly password"
refused "update --sync yes of a ThisDeviceOnly item" \
    "keychainctl: a ThisDeviceOnly item cannot sync (--sync yes on an item accessible when-unlocked-this-device-only)." \
    kc update-generic-password -a grace -s device.example --sync yes --pin-file user.pin
expect_eq "$(json_sync --label device.example)" "False" "the refused update changed nothing"
expect_eq "$(./synchronizable "$MODULE" "$PIN" set device.example 1)" "0xd1" "C_SetAttributeValue: CKR_TEMPLATE_INCONSISTENT"
expect_eq "$(synced device.example)" "data no" "the refused C_SetAttributeValue changed nothing"
expect_eq "$(./synchronizable "$MODULE" "$PIN" session session.example)" "0xd1" "C_CreateObject of a synchronizable session object"
kc update-generic-password -a carol -s local.example.org --sync yes --pin-file user.pin >/dev/null || fail "update --sync yes"
expect_eq "$(json_sync --label local.example.org)" "True" "update --sync yes"
expect_eq "$("$SECITEM" find local.example.org carol --sync yes)" "git-secret" "SecItem sees the update"
kc update-internet-password -a bob -s mail.example.org --sync no --pin-file user.pin >/dev/null || fail "update --sync no"
expect_eq "$(synced mail.example.org)" "data no" "update --sync no"
expect_eq "$(./synchronizable "$MODULE" "$PIN" set mail.example.org 1)" "0x0" "C_SetAttributeValue marks a portable item"
expect_eq "$(json_sync --label mail.example.org)" "True" "keychainctl sees the module's change"

# --- Secret Service items: the keychain's choice --------------------------------------------------
expect_eq "$(kc secret-service sync)" "Secret Service items of keychain 'login' sync: no" "off by default"
export KEYCHAIN_PKCS11_AGENT="$WORK/run/agent.sock" KEYCHAIND
mkdir -p "$WORK/run" && chmod 700 "$WORK/run"
cat >inner.sh <<'EOF'
set -u
. "$HERE/lib.sh"
. "$HERE/servers.sh"
cd "$WORK" || exit 1
"$KEYCHAIND" --foreground --secret-service --socket "$KEYCHAIN_PKCS11_AGENT" 2>daemon.log &
daemon=$!
trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null' EXIT
wait_for_log daemon.log "serving the Secret Service" "$daemon" 10
kc unlock --pin-file user.pin >/dev/null || fail "keychainctl unlock"
json_sync() { kc show "$@" --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["synchronizable"])'; }

printf 'before' | secret-tool store --label=ss-before service before.example account ann || fail "secret-tool store"
expect_eq "$(json_sync --label ss-before)" "False" "a Secret Service item before the choice"
expect_contains "$(kc secret-service status)" "Secret Service items of keychain 'login' sync: no" "status shows the choice"
expect_eq "$(kc secret-service sync yes)" "Secret Service items of keychain 'login' sync: yes (1 item(s) made synchronizable, 0 already so)." \
    "sync yes marks the one Secret Service item (not the other doors' passwords)"
expect_eq "$(json_sync --label ss-before)" "True" "the existing item is synchronizable"
expect_eq "$(json_sync --label git.example.org)" "True" "another door's item keeps its own flag"
expect_eq "$(json_sync --label device.example)" "False" "another door's item keeps its own flag"
printf 'after' | secret-tool store --label=ss-after service after.example account ann || fail "secret-tool store after"
expect_eq "$(json_sync --label ss-after)" "True" "an item stored over D-Bus afterwards is synchronizable"
expect_eq "$(secret-tool lookup service after.example account ann)" "after" "and served as before"
expect_eq "$(kc secret-service status --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["keychains"])')" \
    "[{'label': 'login', 'syncItems': True}]" "status --json"
expect_eq "$(kc secret-service sync no)" "Secret Service items of keychain 'login' sync: no (2 item(s) made non-synchronizable, 0 already so)." "sync no"
expect_eq "$(json_sync --label ss-before) $(json_sync --label ss-after) $(json_sync --label git.example.org)" "False False True" \
    "sync no unmarks the Secret Service items only"
printf 'later' | secret-tool store --label=ss-later service later.example account ann || fail "secret-tool store later"
expect_eq "$(json_sync --label ss-later)" "False" "an item stored after 'sync no'"
EOF
dbus-run-session -- bash inner.sh || fail "the Secret Service part (above)"
echo "ok: --sync through keychainctl, the module and SecItem; refusals with their reasons; Secret Service items follow the keychain's choice"
