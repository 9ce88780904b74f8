# "This device" bound to the TPM, through keychainctl, with two swtpm processes as two machines:
# a keychain made with a TPM gets a sealed device key (info says so); a ThisDeviceOnly password
# and an ordinary one are stored; the keychain folder and the key file copied to another home
# with another TPM open the ordinary password only, with the documented reason; the first TPM
# opens both again; `seal-device-key` seals a clear key in place and every item still reads.
# Prints how long `keychainctl info` and a PKCS#11 login take with a sealed and a clear key.
. "$HERE/lib.sh"
. "$HERE/servers.sh"
if ! command -v swtpm >/dev/null 2>&1; then
    echo "skip: swtpm is missing (scripts/install-deps.sh installs it)"
    exit 0
fi
cd "$WORK" || fail "cd $WORK"
printf '%s\n' so-secret-1 >so.pin
printf '%s\n' user-pin-1 >user.pin

trap stop_swtpms EXIT

# home NAME: keychainctl with its own keychain folder and device key (a home directory; DEVICE_KEY
# names another key file).
home() {
    local name=$1
    shift
    KEYCHAIN_PKCS11_DIR="$WORK/$name/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="${DEVICE_KEY:-$WORK/$name/state/device-key}" "$KEYCHAINCTL" "$@"
}
sq() { "$@" | tr -s " "; }

start_swtpm "$WORK/tpm-first"
first=$tcti
start_swtpm "$WORK/tpm-second"
second=$tcti

# A keychain made with a TPM: its device key is sealed from the start.
export KEYCHAIN_PKCS11_TCTI=$first
home mine create --label login --so-pin-file so.pin --pin-file user.pin >/dev/null || fail "create with a TPM"
out=$(sq home mine info) || fail "info"
expect_contains "$out" "Device key sealed by the TPM ($first): $WORK/mine/state/device-key" "info with a sealed key"
expect_eq "$(head -c 4 "$WORK/mine/state/device-key")" "KCDK" "the key file's format"
expect_eq "$(stat -c %a "$WORK/mine/state/device-key")" "600" "the key file's mode"
printf 'bound-secret' | home mine add-generic-password -a alice -s bound --accessible when-unlocked-this-device-only \
    --pin-file user.pin --password-file - >/dev/null || fail "add a ThisDeviceOnly password"
printf 'plain-secret' | home mine add-generic-password -a alice -s plain --pin-file user.pin --password-file - >/dev/null || fail "add a password"
expect_eq "$(home mine find-generic-password -s bound -w --pin-file user.pin)" "bound-secret" "ThisDeviceOnly password, first TPM"
expect_eq "$(home mine find-generic-password -s plain -w --pin-file user.pin)" "plain-secret" "ordinary password, first TPM"

# Two processes making the first device key at once (two keychains, one key file): one key, sealed,
# that both keychains are bound to.
DEVICE_KEY="$WORK/race/state/device-key" home race1 create --label one --so-pin-file so.pin --pin-file user.pin >race1.out 2>&1 &
racer=$!
DEVICE_KEY="$WORK/race/state/device-key" home race2 create --label two --so-pin-file so.pin --pin-file user.pin >race2.out 2>&1 ||
    fail "create two at once: $(cat race2.out)"
wait "$racer" || fail "create one at once: $(cat race1.out)"
expect_eq "$(ls "$WORK/race/state")" "device-key" "one key file, no temporary left"
for n in 1 2; do
    out=$(DEVICE_KEY="$WORK/race/state/device-key" sq home "race$n" info) || fail "info race$n"
    expect_contains "$out" "Device key sealed by the TPM ($first)" "keychain $n of two made at once"
done

# The keychain folder and the device key copied to another home on a machine with another TPM.
mkdir -p "$WORK/copy/state"
cp -r "$WORK/mine/keychains" "$WORK/copy/keychains" || fail "copy the folder"
cp -p "$WORK/mine/state/device-key" "$WORK/copy/state/device-key" || fail "copy the device key"
export KEYCHAIN_PKCS11_TCTI=$second
expect_eq "$(home copy find-generic-password -s plain -w --pin-file user.pin)" "plain-secret" "ordinary password, another TPM"
expect_status 6 "ThisDeviceOnly password, another TPM" home copy find-generic-password -s bound -w --pin-file user.pin
out=$(sq home copy info) || fail "info on another TPM"
expect_contains "$out" "Device key the device key $WORK/copy/state/device-key was sealed by another TPM than this machine's ($second)" "info on another TPM"
out=$(sq home copy list) || fail "list on another TPM"
expect_contains "$out" "login: 1 ThisDeviceOnly item(s) unavailable: the device key $WORK/copy/state/device-key was sealed by another TPM" "list on another TPM"
cmp -s "$WORK/mine/state/device-key" "$WORK/copy/state/device-key" || fail "the copied key file was changed on another TPM"
# No TPM at all there.
out=$(KEYCHAIN_PKCS11_TCTI=none sq home copy info) || fail "info without a TPM"
expect_contains "$out" "is sealed by a TPM, and this machine has none" "info without a TPM"

# The same copy back on the first TPM: everything reads.
export KEYCHAIN_PKCS11_TCTI=$first
expect_eq "$(home copy find-generic-password -s bound -w --pin-file user.pin)" "bound-secret" "ThisDeviceOnly password, the copy on the first TPM"

# A clear device key (made without a TPM), sealed in place.
export KEYCHAIN_PKCS11_TCTI=none
home old create --label login --so-pin-file so.pin --pin-file user.pin >/dev/null || fail "create without a TPM"
printf 'old-bound' | home old add-generic-password -a bob -s bound --accessible always-this-device-only \
    --pin-file user.pin --password-file - >/dev/null || fail "add an AlwaysThisDeviceOnly password"
printf 'old-plain' | home old add-generic-password -a bob -s plain --pin-file user.pin --password-file - >/dev/null || fail "add a password"
expect_eq "$(stat -c %s "$WORK/old/state/device-key")" "32" "a clear key"
out=$(sq home old info); expect_contains "$out" "Device key file (not sealed): $WORK/old/state/device-key" "info with a clear key"
expect_status 1 "seal-device-key without a TPM" home old seal-device-key
expect_contains "$(cat "$WORK/last.err")" "this machine has no TPM" "seal-device-key without a TPM"
expect_eq "$(stat -c %s "$WORK/old/state/device-key")" "32" "the clear key is left alone without a TPM"
expect_status 6 "seal-device-key with no key" home nothing seal-device-key
# Timing with the clear key (with a TPM configured, which a clear key does not touch).
export KEYCHAIN_PKCS11_TCTI=$first
time_ms() { local start=$(date +%s%N); "$@" >/dev/null 2>&1 || fail "timed: $*"; echo $((($(date +%s%N) - start) / 1000000)); }
clear_info=$(time_ms home old info)
clear_login=$(time_ms env KEYCHAIN_PKCS11_DIR="$WORK/old/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$WORK/old/state/device-key" \
    pkcs11-tool --module "$MODULE" --login --pin user-pin-1 --list-objects --type data)
out=$(home old seal-device-key) || fail "seal-device-key: $out"
expect_eq "$out" "The device key $WORK/old/state/device-key is sealed by the TPM ($first)." "seal-device-key"
expect_eq "$(head -c 4 "$WORK/old/state/device-key")" "KCDK" "sealed in place"
out=$(home old seal-device-key) || fail "seal-device-key again"
expect_contains "$out" "is already sealed by a TPM" "seal-device-key again"
out=$(sq home old info); expect_contains "$out" "Device key sealed by the TPM ($first)" "info after sealing"
expect_eq "$(home old find-generic-password -s bound -w --pin-file user.pin)" "old-bound" "ThisDeviceOnly password after sealing"
expect_eq "$(home old find-generic-password -s plain -w --pin-file user.pin)" "old-plain" "ordinary password after sealing"
sealed_info=$(time_ms home old info)
sealed_login=$(time_ms env KEYCHAIN_PKCS11_DIR="$WORK/old/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$WORK/old/state/device-key" \
    pkcs11-tool --module "$MODULE" --login --pin user-pin-1 --list-objects --type data)
# A TPM whose owner hierarchy got a password: nothing unseals (the primary key needs it empty),
# and the reason says so; a new device key is then made in clear (device_key_tpm = auto).
if command -v tpm2_changeauth >/dev/null 2>&1; then
    TPM2TOOLS_TCTI=$first tpm2_changeauth -c owner owner-password >/dev/null 2>&1 || fail "tpm2_changeauth"
    export KEYCHAIN_PKCS11_TCTI=$first
    out=$(sq home old info) || fail "info with an owner password"
    expect_contains "$out" "refused its owner authorisation, which this keychain needs empty" "info with an owner password"
    home fresh create --label login --so-pin-file so.pin --pin-file user.pin >/dev/null || fail "create with an owner password"
    out=$(sq home fresh info); expect_contains "$out" "Device key file (not sealed)" "a new key with an owner password"
    TPM2TOOLS_TCTI=$first tpm2_changeauth -c owner -p owner-password >/dev/null 2>&1 || fail "tpm2_changeauth back"
    expect_eq "$(home old find-generic-password -s bound -w --pin-file user.pin)" "old-bound" "the owner password cleared again"
else
    echo "note: tpm2_changeauth (tpm2-tools) is missing: the owner-password case is not checked"
fi
echo "figure: keychainctl info ${clear_info} ms with a clear device key, ${sealed_info} ms sealed (swtpm)"
echo "figure: pkcs11-tool --login --list-objects ${clear_login} ms with a clear device key, ${sealed_login} ms sealed (swtpm)"
echo "ok: a sealed device key opens ThisDeviceOnly items on its own TPM only; seal-device-key keeps every item"
