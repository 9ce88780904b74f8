# Protection classes through pkcs11-tool. A secret key pkcs11-tool imports without --private has
# CKA_PRIVATE = FALSE: here that is the Always class — usable without a login, yet never in clear
# in the file: its record is sealed under the keychain's Always key, which opens with the device
# key (a 0600 file outside the keychain folder) or with the master key. A copy of the keychain
# folder on a machine without the device key shows nothing of it until one login there.
# pkcs11-tool logs in before every encryption or signature, so use without a login is checked
# through the C API (Tests/PKCS11Tests/ProtectionClassModuleTests.swift); here: visibility, the
# value's integrity (encryptions compared with openssl's) and the file contents.
. "$HERE/lib.sh"

SO=so-pin-0001
PIN=user-pin-01
new_keychain dev "$SO" "$PIN"
slot=$(slot_of dev)
cd "$WORK" || fail "no work directory"

head -c 32 /dev/urandom >aes.key
key_hex=$(xxd -p -c 64 aes.key)
iv=000102030405060708090a0b0c0d0e0f
p11 --slot "$slot" --login --pin "$PIN" --write-object aes.key --type secrkey --key-type AES:32 --id a1 --label always-key >/dev/null 2>&1 \
    || fail "import an AES key without --private"
p11 --slot "$slot" --login --pin "$PIN" --write-object aes.key --type secrkey --key-type AES:32 --id b2 --label private-key --private >/dev/null 2>&1 \
    || fail "import an AES key with --private"
[ -f "$KEYCHAIN_PKCS11_DEVICE_KEY" ] || fail "the device key was not created at $KEYCHAIN_PKCS11_DEVICE_KEY"
expect_eq "$(stat -c %a "$KEYCHAIN_PKCS11_DEVICE_KEY")" "600" "mode of the device key"

# Not in clear anywhere in the keychain's files.
for file in "$KEYCHAIN_PKCS11_DIR"/*; do
    xxd -p "$file" | tr -d '\n' | grep -q "$key_hex" && fail "the key's value is readable in $(basename "$file")"
done

# A new process, no login: the Always key is listed; the private one is invisible.
out=$(p11 --slot "$slot" --list-objects --type secrkey 2>&1)
expect_contains "$out" "always-key" "secret keys listed without login"
expect_not_contains "$out" "private-key" "secret keys listed without login"
head -c 1000 /dev/urandom >plain.bin
openssl enc -aes-256-cbc -K "$key_hex" -iv "$iv" -in plain.bin -out expected.bin || fail "openssl AES-CBC"
p11 --slot "$slot" --login --pin "$PIN" --encrypt --id a1 -m AES-CBC-PAD --iv "$iv" -i plain.bin -o cbc.bin >/dev/null 2>&1 || fail "encrypt"
cmp -s cbc.bin expected.bin || fail "ciphertext differs from openssl's"

# The folder copied to another machine (another device key): the Always key is not there without a
# login; after one login it is bound to the new device and works without one again.
mkdir -p other-machine
cp -r "$KEYCHAIN_PKCS11_DIR" other-machine/keychains
other() { KEYCHAIN_PKCS11_DIR="$WORK/other-machine/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$WORK/other-machine/state/device-key" p11 "$@"; }
out=$(other --slot "$slot" --list-objects --type secrkey 2>&1)
expect_not_contains "$out" "always-key" "the copy before a login"
out=$(other --slot "$slot" --login --pin "$PIN" --list-objects --type secrkey 2>&1)
expect_contains "$out" "always-key" "the copy after a login"
expect_contains "$out" "private-key" "the copy after a login"
out=$(other --slot "$slot" --list-objects --type secrkey 2>&1)
expect_contains "$out" "always-key" "the copy, bound to its new device, without a login"
other --slot "$slot" --login --pin "$PIN" --encrypt --id a1 -m AES-CBC-PAD --iv "$iv" -i plain.bin -o copy.bin >/dev/null 2>&1 || fail "encrypt on the new device"
cmp -s copy.bin expected.bin || fail "ciphertext from the copy differs"

# The original is untouched by all of this.
out=$(p11 --slot "$slot" --list-objects --type secrkey 2>&1)
expect_contains "$out" "always-key" "the original after the copy moved"
echo "ok: an Always key is visible without login, sealed at rest, and waits for one login on a copy"
