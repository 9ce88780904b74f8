# keychainctl keys and certificates: generate-key (EC, RSA, Ed25519), import of PEM/DER
# certificates, PKCS#8 (plain and encrypted), PKCS#1, SEC1, OpenSSH private keys and PKCS#12
# bundles, export of certificates, public keys (PEM, DER, authorized_keys) and extractable private
# keys (encrypted PKCS#8, PKCS#12). What was imported is then used by real clients: pkcs11-tool
# signs with it and plain openssl verifies against the original key; ssh-keygen -D lists it exactly
# as ssh-keygen prints the original; openssl reads what was exported. Error paths: wrong and
# missing passphrases, a damaged file, a duplicate import, exporting a key that never leaves.
. "$HERE/lib.sh"
cd "$WORK" || fail "cd $WORK"
count_items() { kc items --json --pin-file user.pin | python3 -c 'import json,sys; print(len(json.load(sys.stdin)))'; }
printf '%s\n' so-secret-1 >so.pin
printf '%s\n' user-pin-1 >user.pin
printf '%s\n' file-pass-1 >file.pass
printf '%s\n' wrong-pass >wrong.pass
kc create --label keys --so-pin-file so.pin --pin-file user.pin >/dev/null || fail "create"
user() { p11 --token-label keys --login --pin user-pin-1 "$@"; }
# verify_with PUBLIC-PEM ID MECHANISM: pkcs11-tool signs data.txt with the token key ID; openssl verifies.
printf 'message to sign\n' >data.txt
verify_with() {
    local format=()
    [ "$3" = ECDSA-SHA256 ] && format=(--signature-format openssl)
    user --sign --id "$2" -m "$3" "${format[@]}" -i data.txt -o sig.bin >/dev/null 2>&1 || fail "pkcs11-tool sign with id $2"
    openssl dgst -sha256 -verify "$1" -signature sig.bin data.txt >/dev/null || fail "openssl verify of key $2"
}

# Generated keys.
out=$(kc generate-key --type ec --label gen-ec --pin-file user.pin) || fail "generate EC"
expect_contains "$out" "Generated EC-P256 'gen-ec'" "generate EC output"
expect_contains "$out" "SSH:         ecdsa-sha2-nistp256 " "generate prints the SSH line"
ssh_line=$(sed -n 's/^SSH: *//p' <<<"$out")
kc generate-key --type rsa --bits 2048 --label gen-rsa --id 0a --pin-file user.pin >/dev/null || fail "generate RSA"
kc generate-key --type ed25519 --label gen-ed --pin-file user.pin >/dev/null || fail "generate Ed25519"
expect_status 64 "unknown key type" kc generate-key --type dsa --label x --pin-file user.pin
expect_status 64 "RSA size out of range" kc generate-key --type rsa --bits 1016 --label x --pin-file user.pin
KEYCHAIN_PKCS11_KEY_POLICY=modern expect_status 64 "RSA-1024 under key_policy = modern" kc generate-key --type rsa --bits 1024 --label x --pin-file user.pin
listed=$(ssh-keygen -D "$MODULE" </dev/null 2>/dev/null)
expect_contains "$listed" "$(awk '{print $1, $2}' <<<"$ssh_line")" "ssh-keygen -D lists the generated key as generate-key printed it"
# --hide-public-key: the key pair's public-key object is private too, so its label is not
# readable without the PIN (security issue, item 5).
hidden=$(kc generate-key --type ec --label hidden-name --hide-public-key --pin-file user.pin) || fail "generate with --hide-public-key"
hidden_ssh=$(sed -n 's/^SSH: *//p' <<<"$hidden")
expect_not_contains "$(p11 -O 2>/dev/null)" "hidden-name" "objects listed without a login"
expect_not_contains "$(ssh-keygen -D "$MODULE" </dev/null 2>/dev/null)" "$(awk '{print $2}' <<<"$hidden_ssh")" "ssh-keygen -D without a login"
expect_contains "$(p11 --login --pin "$(cat user.pin)" -O --type pubkey 2>/dev/null)" "label:      hidden-name" "public key listed after a login"
out=$(kc export --label gen-ec --type public-key --format ssh --public-only); expect_eq "$out" "$ssh_line" "export --format ssh"
kc export --label gen-rsa --type public-key -o gen-rsa.pub.pem --public-only >/dev/null || fail "export public PEM"
verify_with gen-rsa.pub.pem 0a SHA256-RSA-PKCS
expect_status 8 "a generated key is not extractable" kc export --label gen-ec --type private-key --passphrase-file file.pass --pin-file user.pin

# PKCS#8 (plain), checked by a signature against the original key.
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out p8.pem 2>/dev/null || fail "genpkey"
openssl pkey -in p8.pem -pubout -out p8.pub.pem || fail "p8 pub"
kc import p8.pem --label imported-p8 --id 11 --pin-file user.pin >import.out || fail "import PKCS#8: $(cat import.out)"
expect_contains "$(cat import.out)" "(PKCS#8 private key)" "format detected"
verify_with p8.pub.pem 11 ECDSA-SHA256
# Encrypted PKCS#8: no passphrase file and no terminal, wrong passphrase, right one.
openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out rsa.pem 2>/dev/null || fail "genpkey rsa"
openssl pkey -in rsa.pem -aes256 -passout file:file.pass -out rsa.enc.pem || fail "encrypt"
openssl pkey -in rsa.pem -pubout -out rsa.pub.pem || fail "rsa pub"
before=$(count_items)
expect_status 7 "encrypted PKCS#8 with a wrong passphrase" kc import rsa.enc.pem --passphrase-file wrong.pass --pin-file user.pin
expect_status 7 "encrypted PKCS#8 without a passphrase source" kc import rsa.enc.pem --pin-file user.pin </dev/null
expect_eq "$(count_items)" "$before" "failed imports stored nothing"
kc import rsa.enc.pem --label imported-rsa --id 12 --extractable --passphrase-file file.pass --pin-file user.pin >/dev/null || fail "import encrypted PKCS#8"
verify_with rsa.pub.pem 12 SHA256-RSA-PKCS
expect_status 4 "the same key again" kc import rsa.enc.pem --label imported-rsa --id 12 --passphrase-file file.pass --pin-file user.pin
# PKCS#1 and SEC1.
openssl genrsa -traditional -out pkcs1.pem 2048 2>/dev/null || fail "genrsa"
openssl rsa -in pkcs1.pem -pubout -out pkcs1.pub.pem 2>/dev/null || fail "pkcs1 pub"
kc import pkcs1.pem --label imported-pkcs1 --id 13 --pin-file user.pin >import.out || fail "import PKCS#1"
expect_contains "$(cat import.out)" "(PKCS#1 RSA private key)" "PKCS#1 detected"
verify_with pkcs1.pub.pem 13 SHA256-RSA-PKCS
openssl ecparam -name secp384r1 -genkey -noout -out sec1.pem || fail "ecparam"
openssl ec -in sec1.pem -pubout -out sec1.pub.pem 2>/dev/null || fail "sec1 pub"
kc import sec1.pem --label imported-sec1 --id 14 --pin-file user.pin >import.out || fail "import SEC1"
expect_contains "$(cat import.out)" "(SEC 1 EC private key)" "SEC1 detected"
user --sign --id 14 -m ECDSA-SHA384 --signature-format openssl -i data.txt -o sig.bin >/dev/null 2>&1 || fail "sign P-384"
openssl dgst -sha384 -verify sec1.pub.pem -signature sig.bin data.txt >/dev/null || fail "verify P-384"
# DER PKCS#8.
openssl pkey -in p8.pem -outform DER -out p8.der || fail "der"
expect_status 4 "the PKCS#8 key again, as DER" kc import p8.der --label again --id 11 --pin-file user.pin
# OpenSSH: an unencrypted key is listed by ssh-keygen -D exactly as ssh-keygen prints the original.
ssh-keygen -q -t ecdsa -b 256 -N "" -C laptop -f id_ecdsa || fail "ssh-keygen"
kc import id_ecdsa --pin-file user.pin >import.out || fail "import OpenSSH: $(cat import.out)"
expect_contains "$(cat import.out)" "(OpenSSH private key)" "OpenSSH detected"
expect_contains "$(cat import.out)" "object=laptop;type=private" "the OpenSSH comment is the label"
listed=$(ssh-keygen -D "$MODULE" </dev/null 2>/dev/null)
expect_contains "$listed" "$(awk '{print $1, $2}' id_ecdsa.pub)" "ssh-keygen -D lists the imported OpenSSH key"
# An encrypted OpenSSH key (ssh-keygen's default: aes256-ctr, bcrypt_pbkdf) imports with its
# passphrase; a wrong one is refused. ECDSA: OpenSSH 9.2 does not list Ed25519 keys over PKCS#11.
ssh-keygen -q -t ecdsa -b 384 -N "locked" -C locked-laptop -f id_locked || fail "ssh-keygen encrypted"
printf '%s\n' locked >locked.pass
before=$(count_items)
expect_status 7 "an encrypted OpenSSH key with a wrong passphrase" kc import id_locked --passphrase-file wrong.pass --pin-file user.pin
expect_eq "$(count_items)" "$before" "a refused OpenSSH import stored nothing"
kc import id_locked --passphrase-file locked.pass --pin-file user.pin >import.out || fail "import encrypted OpenSSH: $(cat import.out)"
expect_contains "$(cat import.out)" "object=locked-laptop;type=private" "the encrypted OpenSSH key's comment is the label"
listed=$(ssh-keygen -D "$MODULE" </dev/null 2>/dev/null)
expect_contains "$listed" "$(ssh-keygen -y -P locked -f id_locked | awk '{print $1, $2}')" "ssh-keygen -D lists the imported encrypted OpenSSH key"
head -c "$(($(wc -c <p8.pem) / 2))" p8.pem >broken.pem
expect_status 7 "a damaged PEM file" kc import broken.pem --pin-file user.pin
expect_status 7 "a missing file" kc import nosuch.pem --pin-file user.pin

# Certificates: PEM and DER; they pair with their key by CKA_ID (SHA-1 of the public key).
openssl req -x509 -new -key p8.pem -subj "/CN=imported cert" -days 30 -out cert.pem 2>/dev/null || fail "req"
openssl x509 -in cert.pem -outform DER -out cert.der || fail "cert der"
kc import cert.pem --pin-file user.pin >import.out || fail "import certificate"
expect_contains "$(cat import.out)" "object=imported%20cert;type=cert" "certificate label from its subject"
expect_status 4 "the certificate again (DER)" kc import cert.der --pin-file user.pin
kc export 'pkcs11:token=keys;object=imported%20cert;type=cert' -o back.pem --public-only >/dev/null || fail "export certificate"
cmp -s back.pem <(openssl x509 -in cert.pem) || fail "exported PEM differs from the original"
kc export --label "imported cert" --type certificate --format der -o back.der --public-only >/dev/null || fail "export DER"
cmp -s back.der cert.der || fail "exported DER differs"

# PKCS#12: an identity (key + certificate with one CKA_ID), the password checked.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout id.key -subj "/CN=client" -days 30 -out id.crt 2>/dev/null || fail "identity"
openssl pkcs12 -export -inkey id.key -in id.crt -name "client identity" -passout pass:p12-pass -out id.p12 || fail "pkcs12"
printf '%s\n' p12-pass >p12.pass
expect_status 7 "PKCS#12 with a wrong password" kc import id.p12 --passphrase-file wrong.pass --pin-file user.pin
kc import id.p12 --passphrase-file p12.pass --extractable --pin-file user.pin >import.out || fail "import PKCS#12: $(cat import.out)"
expect_contains "$(cat import.out)" "(PKCS#12 bundle)" "PKCS#12 detected"
json=$(kc items --json --pin-file user.pin)
ids=$(python3 -c 'import json,sys; print(" ".join(sorted(i["kind"] + ":" + i.get("id", "") for i in json.loads(sys.argv[1]) if i["label"] == "client identity")))' "$json")
key_id=$(python3 -c 'import json,sys; print([i["id"] for i in json.loads(sys.argv[1]) if i["label"] == "client identity" and i["kind"] == "private-key"][0])' "$json")
expect_eq "$ids" "certificate:$key_id private-key:$key_id public-key:$key_id" "the identity's three objects share one CKA_ID"
openssl pkey -in id.key -pubout -out id.pub.pem || fail "id pub"
verify_with id.pub.pem "$key_id" ECDSA-SHA256
# Two identities issued by one CA, each bundle carrying the CA: the second import keeps the stored
# CA certificate and adds its own key and certificate; each certificate pairs with its own key.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout ca.key -subj "/CN=Test CA" -days 30 -out ca.crt 2>/dev/null || fail "CA"
for n in 1 2; do
    openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "leaf$n.key" -subj "/CN=leaf $n" -out "leaf$n.csr" 2>/dev/null || fail "csr $n"
    openssl x509 -req -in "leaf$n.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 -out "leaf$n.crt" 2>/dev/null || fail "sign $n"
    # The CA first in the bundle's chain: pairing goes by public key, not by position.
    cat ca.crt "leaf$n.crt" >"chain$n.pem"
    openssl pkcs12 -export -inkey "leaf$n.key" -in "leaf$n.crt" -certfile ca.crt -name "leaf $n" -passout pass:p12-pass -out "leaf$n.p12" || fail "p12 $n"
    kc import "leaf$n.p12" --passphrase-file p12.pass --pin-file user.pin >import.out || fail "import leaf $n: $(cat import.out)"
done
expect_contains "$(cat import.out)" "1 chain certificate(s) already in the keychain" "the second bundle kept the stored CA"
json=$(kc items --json --pin-file user.pin)
pairs=$(python3 -c '
import json, sys
items = json.loads(sys.argv[1])
for name in ("leaf 1", "leaf 2"):
    ids = sorted({i["id"] for i in items if i["label"] == name})
    print(name, len(ids), sorted(i["kind"] for i in items if i["label"] == name))
print("CA", sum(1 for i in items if i["kind"] == "certificate" and i["subject"] == "Test CA"))' "$json")
expect_eq "$pairs" "leaf 1 1 ['certificate', 'private-key', 'public-key']
leaf 2 1 ['certificate', 'private-key', 'public-key']
CA 1" "each leaf certificate pairs with its key; the CA is stored once"

# Export it again as PKCS#12 and as encrypted PKCS#8: openssl reads both, same key.
kc export --label "client identity" --type private-key --format pkcs12 -o back.p12 --passphrase-file file.pass --pin-file user.pin >/dev/null ||
    fail "export PKCS#12"
openssl pkcs12 -in back.p12 -passin file:file.pass -nodes -nocerts 2>/dev/null | openssl pkey -pubout >back.pub.pem || fail "openssl reads our PKCS#12"
cmp -s back.pub.pem id.pub.pem || fail "the PKCS#12 key differs"
openssl pkcs12 -in back.p12 -passin file:file.pass -nokeys 2>/dev/null | openssl x509 -noout -subject | grep -q "CN = client" || fail "PKCS#12 lacks the certificate"
kc export --label imported-rsa --type private-key --format pkcs8 -o back.p8 --passphrase-file file.pass --pin-file user.pin >/dev/null || fail "export PKCS#8"
head -1 back.p8 | grep -q "BEGIN ENCRYPTED PRIVATE KEY" || fail "PKCS#8 export is not encrypted"
[ "$(stat -c %a back.p8)" = 600 ] || fail "exported private key file is not 0600"
# Over an existing world-readable file: replaced by a 0600 one; an empty passphrase is refused.
printf 'old' >over.p8 && chmod 644 over.p8
kc export --label imported-rsa --type private-key -o over.p8 --passphrase-file file.pass --pin-file user.pin >/dev/null || fail "export over a file"
[ "$(stat -c %a over.p8)" = 600 ] || fail "an export over an existing 0644 file is not 0600"
: >empty.pass
expect_status 64 "an empty export passphrase" kc export --label imported-rsa --type private-key -o x.p8 --passphrase-file empty.pass --pin-file user.pin
[ -e x.p8 ] && fail "a refused export left a file"
openssl pkey -in back.p8 -passin file:file.pass -pubout | cmp -s - rsa.pub.pem || fail "openssl reads our encrypted PKCS#8"
expect_status 8 "an imported key without --extractable stays in" kc export --label imported-p8 --type private-key --passphrase-file file.pass --pin-file user.pin
echo "ok: keychainctl keys and certificates, used by pkcs11-tool, openssl and ssh-keygen"
