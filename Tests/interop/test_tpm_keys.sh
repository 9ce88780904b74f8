# Keys made in the TPM (CKA_KC_TPM) with `keychainctl generate-key --tpm`, used by real clients
# against a swtpm this test starts on 127.0.0.1 (fresh state, stopped by its PID): the header's
# constant; no TPM is a clear refusal (exit 7); keychainctl lists and shows the keys as TPM keys
# and never exports their private half; pkcs11-tool shows them never extractable, cannot read
# them, and signs with CKM_ECDSA (raw digests of several lengths), ECDSA-SHA256, RSA-PKCS over a
# DigestInfo and SHA256-RSA-PKCS, each signature verified by plain openssl against the public key
# pkcs11-tool exported; ssh-keygen -D lists them; ssh -I and ssh-agent (ssh-add -s) log in to a
# throwaway sshd with them; a second swtpm ("another machine") cannot use them.
# Client quirks: as in test_ssh_login.sh (askpass for ssh -I, the agent's -P list by real path).
. "$HERE/lib.sh"
. "$HERE/servers.sh"

if ! command -v swtpm >/dev/null 2>&1; then
    echo "skip: swtpm is missing (scripts/install-deps.sh installs swtpm and swtpm-tools); TPM keys untested"
    exit 0
fi
cd "$WORK" || fail "cd $WORK"
me=$(id -un)

sshd_pid=
agent_pid=
trap 'stop_swtpms; stop_pid "$sshd_pid"; stop_pid "$agent_pid"' EXIT
start_swtpm "$WORK/tpm1"
export KEYCHAIN_PKCS11_TCTI=$tcti

# --- the header ---------------------------------------------------------------------------------
printf '#include <stdio.h>\n#include "keychain-pkcs11.h"\nint main(void) { printf("%%lx\\n", (unsigned long) CKA_KC_TPM); return 0; }\n' >header.c
gcc -Wall -Werror -I"$HERE/../../Include" header.c -o header || fail "compile against keychain-pkcs11.h"
expect_eq "$(./header)" cb43002c "CKA_KC_TPM in keychain-pkcs11.h"

# --- keychainctl ----------------------------------------------------------------------------------
PIN=246810
echo "$PIN" >user.pin
echo 13579135 >so.pin
kc create --label tpmkeys --so-pin-file so.pin --pin-file user.pin >/dev/null || fail "create"
slot=$(slot_of tpmkeys)
[ -n "$slot" ] || fail "no slot for keychain tpmkeys"
user() { p11 --slot "$slot" --login --pin "$PIN" "$@"; }

KEYCHAIN_PKCS11_TCTI=none expect_status 7 "generate-key --tpm without a TPM" kc generate-key --type ec --tpm --label none --pin-file user.pin
expect_eq "$(cat "$WORK/last.err")" \
    "keychainctl: --tpm: this machine has no TPM (no /dev/tpmrm0; name one with KEYCHAIN_PKCS11_TCTI or 'tcti =' in the configuration file)." \
    "message without a TPM"
expect_status 64 "generate-key --tpm --extractable" kc generate-key --type ec --tpm --extractable --label bad --pin-file user.pin
expect_status 64 "generate-key --tpm of an Ed25519 key" kc generate-key --type ed25519 --tpm --label bad --pin-file user.pin

out=$(kc generate-key --type ec --tpm --label tpm-ssh --pin-file user.pin) || fail "generate-key --type ec --tpm"
expect_contains "$out" "Generated EC-P256 'tpm-ssh' in the TPM" "generate-key --tpm output"
grep '^SSH: ' <<<"$out" | sed 's/^SSH: *//' >tpm-ssh.line
out=$(kc generate-key --type rsa --tpm --label tpm-rsa --pin-file user.pin) || fail "generate-key --type rsa --tpm"
expect_contains "$out" "Generated RSA-2048 'tpm-rsa' in the TPM" "RSA-2048 in the TPM (the default size with --tpm)"
kc generate-key --type ec --label plain-ec --pin-file user.pin >/dev/null || fail "a software key beside them"

out=$(kc items --pin-file user.pin) || fail "items"
expect_contains "$out" "EC-P256 (TPM)" "items marks the EC TPM key"
expect_contains "$out" "RSA-2048 (TPM)" "items marks the RSA TPM key"
expect_eq "$(grep -c '(TPM)' <<<"$out")" 2 "only the private halves of the TPM keys are marked"
out=$(kc show --label tpm-ssh --type private-key --json --pin-file user.pin) || fail "show --json"
expect_contains "$out" '"extractable":false,"perUsePIN":false,"tpm":true' "show --json of the TPM key"
expect_contains "$(kc show --label plain-ec --type private-key --json --pin-file user.pin)" '"tpm":false' "show --json of a software key"
printf 'export-pass\n' >export.pass
expect_status 8 "export of the TPM key's private half" kc export --label tpm-ssh --type private-key --passphrase-file export.pass -o never.p8 --pin-file user.pin
[ ! -e never.p8 ] || fail "an export file was written"

# --- pkcs11-tool ----------------------------------------------------------------------------------
# pkcs11-tool --sign and --read-object pick keys by --id (OpenSC 0.23 ignores --label there).
id_of() { kc show --label "$1" --type private-key --json --pin-file user.pin | python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])'; }
ec_id=$(id_of tpm-ssh) && rsa_id=$(id_of tpm-rsa) && plain_id=$(id_of plain-ec) || fail "key IDs"
out=$(user -O --type privkey 2>/dev/null) || fail "pkcs11-tool -O"
priv=$(sed -n '/label:      tpm-ssh$/,/^Private Key Object\|^$/p' <<<"$out")
expect_contains "$priv" "Access:     sensitive, always sensitive, never extractable, local" "pkcs11-tool's view of the TPM key"
rsa_priv=$(sed -n '/label:      tpm-rsa$/,/^Private Key Object\|^$/p' <<<"$out")
expect_contains "$rsa_priv" $'Usage:      sign\n' "the RSA TPM key signs and does not decrypt"
user --read-object --type pubkey --id "$ec_id" -o pub.der >/dev/null 2>&1 || fail "export the public key"
openssl pkey -pubin -inform DER -in pub.der -out pub.pem || fail "public key"
user --read-object --type pubkey --id "$rsa_id" -o rsa.der >/dev/null 2>&1 || fail "export the RSA public key"
openssl pkey -pubin -inform DER -in rsa.der -out rsa.pem || fail "RSA public key"
expect_eq "$(ssh-keygen -i -m PKCS8 -f pub.pem | awk '{ print $2 }')" "$(awk '{ print $2 }' tpm-ssh.line)" "the SSH line of generate-key is the token's key"

# CKM_ECDSA over raw inputs as clients give them (digests of 20, 32, 48 and 64 bytes), each
# verified by openssl over the same bytes.
for n in 32 20 48 64; do
    head -c "$n" /dev/urandom >"digest$n.bin"
    user --sign --id "$ec_id" -m ECDSA --signature-format openssl -i "digest$n.bin" -o "ecdsa$n.sig" >/dev/null 2>&1 || fail "sign ECDSA ($n bytes)"
    out=$(openssl pkeyutl -verify -pubin -inkey pub.pem -in "digest$n.bin" -sigfile "ecdsa$n.sig" 2>&1) || fail "openssl does not verify ECDSA ($n bytes): $out"
    expect_eq "$out" "Signature Verified Successfully" "openssl pkeyutl -verify, ECDSA over $n bytes"
done
head -c 5000 /dev/urandom >data.bin
user --sign --id "$ec_id" -m ECDSA-SHA256 --signature-format openssl -i data.bin -o sha256.sig >/dev/null 2>&1 || fail "sign ECDSA-SHA256"
expect_eq "$(openssl dgst -sha256 -verify pub.pem -signature sha256.sig data.bin 2>&1)" "Verified OK" "openssl, ECDSA-SHA256"
printf 'x' >>data.bin
openssl dgst -sha256 -verify pub.pem -signature sha256.sig data.bin >/dev/null 2>&1 && fail "a signature verifies over other data"
# RSA: a DigestInfo (as OpenSSH signs) and the hashing mechanism.
{ printf '3031300d060960864801650304020105000420' | xxd -r -p; openssl dgst -sha256 -binary data.bin; } >digestinfo.bin
out=$(user --sign --id "$rsa_id" -m RSA-PKCS -i digestinfo.bin -o rsa-pkcs.sig 2>&1) || fail "sign RSA-PKCS: $out"
expect_eq "$(openssl dgst -sha256 -verify rsa.pem -signature rsa-pkcs.sig data.bin 2>&1)" "Verified OK" "openssl, RSA-PKCS over a DigestInfo"
user --sign --id "$rsa_id" -m SHA256-RSA-PKCS -i data.bin -o rsa-sha256.sig >/dev/null 2>&1 || fail "sign SHA256-RSA-PKCS"
cmp -s rsa-pkcs.sig rsa-sha256.sig || fail "RSA-PKCS over the DigestInfo and SHA256-RSA-PKCS differ (PKCS#1 v1.5 is deterministic)"
# Mechanisms the TPM does not run with these keys are refused, not emulated.
out=$(user --sign --id "$rsa_id" -m SHA256-RSA-PKCS-PSS -i data.bin -o pss.sig 2>&1) && fail "PSS with a TPM key: $out"
expect_contains "$out" "CKR_MECHANISM_INVALID" "PSS with a TPM key"

# --- OpenSSH --------------------------------------------------------------------------------------
ssh-keygen -D "$MODULE" </dev/null >token.pub 2>/dev/null || fail "ssh-keygen -D exit $?"
expect_eq "$(awk '{ print $1, $3 }' token.pub | LC_ALL=C sort | tr '\n' ';')" \
    "ecdsa-sha2-nistp256 plain-ec;ecdsa-sha2-nistp256 tpm-ssh;ssh-rsa tpm-rsa;" "keys listed by ssh-keygen -D"
grep ' tpm-ssh$' token.pub >tpm-ssh.pub || fail "no tpm-ssh in ssh-keygen -D"
grep ' tpm-rsa$' token.pub >tpm-rsa.pub || fail "no tpm-rsa in ssh-keygen -D"
expect_eq "$(awk '{ print $2 }' tpm-ssh.pub)" "$(awk '{ print $2 }' tpm-ssh.line)" "ssh-keygen -D and generate-key agree"

: >authorized_keys
start_sshd "MaxAuthTries 10"
cat >askpass <<EOF || fail "write askpass"
#!/bin/sh
echo $PIN
EOF
chmod +x askpass
for key in tpm-ssh tpm-rsa; do
    cp "$key.pub" authorized_keys || fail "authorized_keys"
    ssh_login -I "$MODULE" -o IdentitiesOnly=yes -o IdentityFile="$WORK/$key.pub" -o IdentityAgent=none -o BatchMode=no
    expect_eq "$rc" 0 "ssh -I with $key: $(cat ssh.err)"
    expect_eq "$out" ok "ssh output with $key"
    expect_eq "$(ssh_accepted)" "$(ssh_fingerprint "$key.pub")" "key accepted by sshd ($key)"
done

export SSH_AUTH_SOCK="$WORK/agent.sock"
ssh-agent -D -a "$SSH_AUTH_SOCK" -P "$(realpath "$MODULE")" >agent.log 2>&1 &
agent_pid=$!
wait_for_log agent.log "SSH_AUTH_SOCK=" "$agent_pid" 10
res=$(SSH_ASKPASS="$WORK/askpass" SSH_ASKPASS_REQUIRE=force DISPLAY=:0 timeout 30 ssh-add -s "$MODULE" </dev/null 2>&1) || fail "ssh-add -s: $res"
cp tpm-ssh.pub authorized_keys || fail "authorized_keys"
ssh_login -o IdentityAgent="$SSH_AUTH_SOCK" -o IdentitiesOnly=yes -o IdentityFile="$WORK/tpm-ssh.pub" -o BatchMode=yes
expect_eq "$rc" 0 "ssh through the agent with the TPM key: $(cat ssh.err)"
expect_eq "$(ssh_accepted)" "$(ssh_fingerprint tpm-ssh.pub)" "key accepted by sshd (agent)"
stop_pid "$agent_pid"
agent_pid=

# --- another machine ------------------------------------------------------------------------------
# The same keychain with another TPM (its own seeds): the key does not load, so nothing signs.
stop_swtpms
start_swtpm "$WORK/tpm2"
export KEYCHAIN_PKCS11_TCTI=$tcti
out=$(user --sign --id "$ec_id" -m ECDSA -i digest32.bin -o elsewhere.sig 2>&1) && fail "another TPM signed with the key: $out"
expect_contains "$out" "CKR_DEVICE_ERROR" "signing with another TPM"
ssh_login -I "$MODULE" -o IdentitiesOnly=yes -o IdentityFile="$WORK/tpm-ssh.pub" -o IdentityAgent=none -o BatchMode=no
expect_eq "$rc" 255 "ssh -I with the key on another TPM"
# ... while a software key of the same keychain still signs there.
user --sign --id "$plain_id" -m ECDSA -i digest32.bin -o plain.sig >/dev/null 2>&1 || fail "software key next to the TPM keys"
echo "ok: TPM keys sign for pkcs11-tool, openssl and OpenSSH, and not on another TPM"
