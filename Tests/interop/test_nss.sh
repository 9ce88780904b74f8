# NSS (libnss3-tools): modutil -add registers the module in a fresh NSS database and -list shows
# it with its keychain token; certutil lists the certificates stored in the keychain by nickname
# "<token>:<label>" (with a PIN, then without one once the slot is marked FRIENDLY, since
# certificates are public objects), with the "u" trust flags only where the private key with the
# same CKA_ID is on the token; a listed certificate comes out byte-identical; certutil -K lists the
# private keys after login and nothing with a wrong PIN; NSS signs through the token: a CSR from
# certutil -R with a token key verifies with plain openssl, and a self-signed certificate made by
# certutil -S with a generated P-256 key is stored in the keychain, pairs with the key by CKA_ID and
# verifies with plain openssl.
# Client quirks (NSS 3.87): a token with CKF_LOGIN_REQUIRED has its certificates listed without
# login only when the slot is marked FRIENDLY (modutil -mechanisms FRIENDLY); certutil -S also tries
# to store an NSS trust object (vendor class CKO_NSS_TRUST), which the module refuses and certutil
# ignores; certutil -K prints a CKA_ID made of printable characters as a quoted string, so the IDs
# here are not printable.
. "$HERE/lib.sh"

PIN=123456
TOKEN=nsskeys
new_keychain "$TOKEN" 87654321 "$PIN"
slot=$(slot_of "$TOKEN")
[ -n "$slot" ] || fail "no slot for keychain $TOKEN"
serial=$(p11 --slot "$slot" -T 2>/dev/null | sed -n "/token label        : $TOKEN$/,/serial num/s/^  serial num         : //p")
[[ "$serial" =~ ^[0-9a-f]{16}$ ]] || fail "serial from pkcs11-tool: [$serial]"
user() { p11 --slot "$slot" --login --pin "$PIN" "$@"; }
cd "$WORK" || fail "cd $WORK"

# An RSA key pair from a file (private and public key written as two objects: the module makes
# none the client did not write) with its self-signed certificate (same CKA_ID), a CA certificate without
# its key, and a P-256 key generated on the token (default CKA_ID: SHA-1 of its EC point).
openssl genrsa -out rsa.pem 2048 2>/dev/null || fail "genrsa"
openssl req -x509 -new -key rsa.pem -subj "/CN=NSS RSA" -days 2 -outform DER -out rsa.crt 2>/dev/null || fail "RSA certificate"
openssl ecparam -name prime256v1 -genkey -noout -out ca.pem || fail "CA key"
openssl req -x509 -new -key ca.pem -subj "/CN=NSS Orphan CA" -days 2 -outform DER -out ca.crt 2>/dev/null || fail "CA certificate"
user --write-object rsa.pem --type privkey --id c1c1 --label nss-rsa >/dev/null 2>&1 || fail "import RSA key"
openssl pkey -in rsa.pem -pubout -outform DER -out rsa.pub.der || fail "RSA public key"
user --write-object rsa.pub.der --type pubkey --id c1c1 --label nss-rsa >/dev/null 2>&1 || fail "import RSA public key"
user --write-object rsa.crt --type cert --id c1c1 --label nss-rsa-cert >/dev/null 2>&1 || fail "import RSA certificate"
user --write-object ca.crt --type cert --id c2c2 --label nss-ca-cert >/dev/null 2>&1 || fail "import CA certificate"
user --keypairgen --key-type EC:prime256v1 --label nss-p256 >/dev/null 2>&1 || fail "generate P-256 key"
point=$(p11 --slot "$slot" -O --type pubkey 2>/dev/null | awk '/^  EC_POINT:/ { p = $2 } /^  label: +nss-p256$/ { print p }')
[[ "$point" =~ ^0441(04[0-9a-f]{128})$ ]] || fail "P-256 CKA_EC_POINT: [$point]"
p256id=$(printf '%s' "${BASH_REMATCH[1]}" | xxd -r -p | sha1sum | cut -c1-40)

printf '%s\n' "$PIN" >pin.txt
printf '000000\n' >badpin.txt
db="sql:$WORK/nss"
mkdir nss || fail "mkdir nss"
out=$(certutil -N -d "$db" --empty-password 2>&1) || fail "certutil -N: $out"
out=$(modutil -add keychain -libfile "$MODULE" -dbdir "$db" -force 2>&1) || fail "modutil -add: $out"
expect_contains "$out" 'Module "keychain" added to database.' "modutil -add"

out=$(modutil -list -dbdir "$db" 2>&1) || fail "modutil -list: $out"
module=$(sed -n '/^  2\. keychain$/,/^---/p' <<<"$out")
[ -n "$module" ] || fail "module keychain not listed: $out"
expect_contains "$module" $'\n\tlibrary name: '"$MODULE"$'\n' "library of the keychain module"
expect_contains "$module" $'\n\t   uri: pkcs11:library-manufacturer=Keychain%20PKCS%2311;library-description=Keychain%20items%20over%20PKCS%2311;' "module URI"
expect_contains "$module" $'\n\tstatus: loaded\n' "module status"
expect_contains "$module" $'\n\t slot: Keychain '"$TOKEN"$'.keychain-db\n\ttoken: '"$TOKEN"$'\n\t  uri: pkcs11:token='"$TOKEN"$';manufacturer=Keychain%20PKCS%2311;serial='"$serial"$';model=Keychain\n' "keychain token"

# certutil -L -h TOKEN: each certificate by nickname; "u,u,u" where the token holds its key.
nicknames() { awk 'NR > 3 && NF' <<<"$1" | sed 's/ \{2,\}/|/; s/ *$//' | LC_ALL=C sort; }
expected_list="$TOKEN:nss-ca-cert|,,
$TOKEN:nss-rsa-cert|u,u,u"
out=$(certutil -L -d "$db" -h "$TOKEN" -f pin.txt </dev/null 2>&1) || fail "certutil -L -h $TOKEN exit $?: $out"
expect_eq "$(nicknames "$out")" "$expected_list" "certutil -L -h $TOKEN"
certutil -L -d "$db" -h "$TOKEN" -f pin.txt -n "$TOKEN:nss-rsa-cert" -r >rsa.nss.der </dev/null || fail "certutil -L -r"
cmp -s rsa.nss.der rsa.crt || fail "the certificate from NSS differs from the one stored"

# Without a PIN once the slot is marked FRIENDLY (its certificates are public).
out=$(modutil -default keychain -mechanisms FRIENDLY -dbdir "$db" -force 2>&1) || fail "modutil -default FRIENDLY: $out"
out=$(certutil -L -d "$db" -h "$TOKEN" </dev/null 2>&1) || fail "certutil -L -h $TOKEN without PIN exit $?: $out"
expect_eq "$(nicknames "$out")" "$expected_list" "certutil -L -h $TOKEN without PIN"

# certutil -K: the private keys after login.
keys() { grep '^<' <<<"$1" | sed 's/^< *[0-9]*> //; s/ \{2,\}/|/g' | LC_ALL=C sort; }
out=$(certutil -K -d "$db" -h "$TOKEN" -f pin.txt </dev/null 2>&1) || fail "certutil -K exit $?: $out"
expect_eq "$(keys "$out")" "ec|$p256id|nss-p256
rsa|c1c1|nss-rsa" "certutil -K -h $TOKEN"
out=$(certutil -K -d "$db" -h "$TOKEN" -f badpin.txt </dev/null 2>&1) && fail "certutil -K with a wrong PIN succeeded: $out"
expect_contains "$out" "SEC_ERROR_BAD_PASSWORD" "certutil -K with a wrong PIN"
expect_not_contains "$out" "nss-rsa" "certutil -K with a wrong PIN"

# NSS signs with the token's RSA key (selected by CKA_ID): a CSR that plain openssl verifies.
head -c 64 /dev/urandom >noise.bin
out=$(certutil -R -d "$db" -h "$TOKEN" -f pin.txt -k c1c1 -s "CN=NSS CSR" -Z SHA256 -z noise.bin -o rsa.csr </dev/null 2>&1) ||
    fail "certutil -R exit $?: $out"
out=$(openssl req -inform DER -in rsa.csr -noout -verify 2>&1)
expect_eq "$out" "Certificate request self-signature verify OK" "CSR signed through NSS"
expect_eq "$(openssl req -inform DER -in rsa.csr -noout -pubkey | openssl pkey -pubin -outform DER | sha1sum)" \
    "$(openssl pkey -in rsa.pem -pubout -outform DER | sha1sum)" "public key of the NSS CSR"

# certutil -S: a self-signed certificate made with the generated P-256 key, stored in the keychain.
out=$(certutil -S -x -d "$db" -h "$TOKEN" -f pin.txt -k "$p256id" -n nss-p256-cert -s "CN=NSS P-256" -t u,u,u \
    -Z SHA256 -z noise.bin -v 2 </dev/null 2>&1) || fail "certutil -S exit $?: $out"
out=$(certutil -L -d "$db" -h "$TOKEN" </dev/null 2>&1) || fail "certutil -L after -S exit $?: $out"
expect_eq "$(nicknames "$out")" "$TOKEN:nss-ca-cert|,,
$TOKEN:nss-p256-cert|u,u,u
$TOKEN:nss-rsa-cert|u,u,u" "certutil -L -h $TOKEN after certutil -S"
out=$(p11 --slot "$slot" -O --type cert 2>/dev/null)
expect_contains "$out" $'\n  label:      nss-p256-cert\n  subject:    DN: CN=NSS P-256\n' "certificate stored by NSS, as pkcs11-tool lists it"
expect_contains "$(sed -n '/label: *nss-p256-cert$/,/^Certificate Object/p' <<<"$out")" $'\n  ID:         '"$p256id"$'\n' "CKA_ID of the certificate stored by NSS"
p11 --slot "$slot" --read-object --type cert --label nss-p256-cert -o p256.crt >/dev/null 2>&1 || fail "read the NSS certificate"
openssl x509 -inform DER -in p256.crt -out p256.pem || fail "NSS certificate is not X.509 DER"
out=$(openssl verify -CAfile p256.pem p256.pem 2>&1)
expect_eq "$out" "p256.pem: OK" "self-signed certificate made by NSS with the token key"
# NSS finds the P-256 key from its certificate (CKA_ID = SHA-1 of the EC point, NSS's convention).
out=$(certutil -R -d "$db" -h "$TOKEN" -f pin.txt -k "$TOKEN:nss-p256-cert" -s "CN=NSS CSR 2" -z noise.bin -o p256.csr </dev/null 2>&1) ||
    fail "certutil -R -k $TOKEN:nss-p256-cert exit $?: $out"
expect_eq "$(openssl req -inform DER -in p256.csr -noout -verify 2>&1)" "Certificate request self-signature verify OK" "CSR from the P-256 key found by its certificate"
