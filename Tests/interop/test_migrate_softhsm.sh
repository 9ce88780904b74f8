# keychainctl migrate from a real SoftHSMv2 token (Debian softhsm2), as someone leaving SoftHSM
# would: softhsm2-util --init-token and --import, pkcs11-tool key generation (one key pair
# extractable, one not), a certificate, a private data object and an extractable AES key. Checks:
# --dry-run changes nothing; migrate copies the certificate, the data object (found by
# find-generic-password), the extractable EC key pair (a signature made with the copy verifies
# against SoftHSM's public key) and the AES key (the copy encrypts as SoftHSM's does), copies the
# public halves of keys that stay behind, lists the non-extractable keys as left behind (exit 8);
# a second run copies nothing new; a wrong source PIN is exit 3, an unknown token exit 6 with the
# token labels, a file that is not a module exit 7. The SoftHSM token is unchanged afterwards.
. "$HERE/lib.sh"

SOFTHSM=/usr/lib/softhsm/libsofthsm2.so
[ -f "$SOFTHSM" ] || fail "SoftHSMv2 is not installed ($SOFTHSM; scripts/install-deps.sh installs softhsm2)"
cd "$WORK" || fail "cd $WORK"
export KEYCHAIN_PKCS11_AGENT=off
mkdir -p softhsm/tokens
echo "directories.tokendir = $WORK/softhsm/tokens" >softhsm/softhsm2.conf
export SOFTHSM2_CONF="$WORK/softhsm/softhsm2.conf"
sh11() { pkcs11-tool --module "$SOFTHSM" --token-label old --login --pin 1111 "$@"; }

softhsm2-util --init-token --free --label old --so-pin 87654321 --pin 1111 >/dev/null || fail "softhsm2-util --init-token"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out imported.pem 2>/dev/null || fail "genpkey"
softhsm2-util --import imported.pem --token old --label imported-ec --id a1 --pin 1111 >/dev/null || fail "softhsm2-util --import"
openssl req -x509 -new -key imported.pem -subj /CN=imported -days 30 -outform DER -out imported.der 2>/dev/null || fail "certificate"
sh11 --write-object imported.der --type cert --id a1 --label imported-ec >/dev/null 2>&1 || fail "write certificate"
sh11 --keypairgen --key-type rsa:2048 --id b2 --label stuck-rsa >/dev/null 2>&1 || fail "RSA key pair"
sh11 --keypairgen --key-type EC:prime256v1 --id c3 --label moving-ec --extractable >/dev/null 2>&1 || fail "extractable EC key pair"
printf 'data from softhsm' >note.txt
sh11 --write-object note.txt --type data --label note --application-label notes --private >/dev/null 2>&1 || fail "data object"
sh11 --keygen --key-type AES:32 --id d4 --label aes-key --extractable >/dev/null 2>&1 || fail "AES key"
before=$(sh11 -O 2>/dev/null | sha256sum)

printf 'user-pin-1\n' >user.pin
printf '1111\n' >source.pin
printf '9999\n' >wrong.pin
kc create --label login --so-pin-file user.pin --pin-file user.pin >/dev/null || fail "create keychain"
migrate() { kc migrate --from-module "$SOFTHSM" --token old --pin-file user.pin "$@"; }

expect_status 8 "dry run" migrate --from-pin-file source.pin --dry-run
out=$(cat "$WORK/last.out")
expect_contains "$out" "Would copy 7 object(s)" "dry run counts"
expect_eq "$(kc items --pin-file user.pin)" "No items in 'login'." "the dry run changed nothing"

expect_status 8 "migrate" migrate --from-pin-file source.pin
out=$(cat "$WORK/last.out")
expect_contains "$out" "Copied 7 object(s) (1 certificate, 1 generic-password, 1 private-key, 3 public-key, 1 secret-key); 0 already in the keychain; 2 left behind." "summary"
expect_contains "$out" "left behind  private key 'stuck-rsa' (id b2): the source token marks it non-extractable" "RSA left behind"
expect_contains "$out" "left behind  private key 'imported-ec' (id a1)" "softhsm2-util's import left behind"
expect_contains "$(cat "$WORK/last.err")" "2 object(s) stayed behind" "the exit reason"
# The public keys of the keys left behind come on their own (softhsm2-util --import and pkcs11-tool
# --keypairgen each store one); moving-ec's is made from its copied private key.
out=$(kc items --pin-file user.pin)
for row in "certificate imported-ec" "generic-password note" "private-key moving-ec" "public-key moving-ec" "secret-key aes-key" \
    "public-key stuck-rsa" "public-key imported-ec"; do
    expect_contains "$(tr -s ' ' <<<"$out")" "$row" "migrated: $row"
done

# The data object is a generic password.
expect_eq "$(kc find-generic-password -l note -w --pin-file user.pin)" "data from softhsm" "the data object's value"
# The EC key: a signature by the copy verifies with SoftHSM's public key.
sh11 --read-object --type pubkey --id c3 -o moving.pub.der >/dev/null 2>&1 || fail "read SoftHSM public key"
openssl pkey -pubin -inform DER -in moving.pub.der -out moving.pub.pem 2>/dev/null || fail "public key"
printf 'message to sign' >msg
pkcs11-tool --module "$MODULE" --token-label login --login --pin user-pin-1 --sign --mechanism ECDSA-SHA256 --signature-format openssl \
    --id c3 -i msg -o msg.sig >/dev/null 2>&1 || fail "sign with the migrated key"
openssl dgst -sha256 -verify moving.pub.pem -signature msg.sig msg >/dev/null || fail "the migrated key's signature does not verify with SoftHSM's public key"
# The AES key encrypts as SoftHSM's does.
head -c 32 /dev/zero >zeros
iv=00000000000000000000000000000000
sh11 --encrypt --mechanism AES-CBC --iv "$iv" --id d4 -i zeros -o softhsm.enc >/dev/null 2>&1 || fail "SoftHSM encrypt"
pkcs11-tool --module "$MODULE" --token-label login --login --pin user-pin-1 --encrypt --mechanism AES-CBC --iv "$iv" --id d4 \
    -i zeros -o keychain.enc >/dev/null 2>&1 || fail "keychain encrypt"
cmp -s softhsm.enc keychain.enc || fail "the migrated AES key encrypts differently"
# The certificate is the same DER.
pkcs11-tool --module "$MODULE" --token-label login --read-object --type cert --id a1 -o copy.der >/dev/null 2>&1 || fail "read copied certificate"
cmp -s imported.der copy.der || fail "the copied certificate differs"

# A second run copies nothing new.
expect_status 8 "second run" migrate --from-pin-file source.pin
expect_contains "$(cat "$WORK/last.out")" "Copied 0 object(s); 7 already in the keychain; 2 left behind." "second run"

# Errors.
expect_status 3 "wrong source PIN" migrate --from-pin-file wrong.pin
expect_contains "$(cat "$WORK/last.err")" "CKR_PIN_INCORRECT" "the source's CK_RV named"
expect_status 6 "unknown token" kc migrate --from-module "$SOFTHSM" --token nosuch --from-pin-file source.pin --pin-file user.pin
expect_contains "$(cat "$WORK/last.err")" "its tokens: 'old'" "the token labels are listed"
expect_status 7 "not a module" kc migrate --from-module "$WORK/note.txt" --token old --from-pin-file source.pin --pin-file user.pin

expect_eq "$(sh11 -O 2>/dev/null | sha256sum)" "$before" "the SoftHSM token is unchanged"
echo "ok: migrate from SoftHSM"
