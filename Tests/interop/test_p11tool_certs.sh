# GnuTLS p11tool with certificates: --list-all-certs by token URI (no login: certificates are
# public) lists every certificate with its URI, type, label and ID; --export by URI gives back the
# DER that was stored, byte for byte; --list-all-privkeys --login shows the private key that pairs
# with each certificate by the same ID, both for IDs given to pkcs11-tool and for the default IDs
# (SHA-1 of the public key, the same for a generated key pair and for a certificate of that key);
# selecting by that ID returns the private key, the public key and the certificate. Two of the
# certificates are made by certtool through the module with a token key (GnuTLS signing), and
# verify with plain openssl.
. "$HERE/lib.sh"

PIN=123456
TOKEN=gnucerts
new_keychain "$TOKEN" 87654321 "$PIN"
slot=$(slot_of "$TOKEN")
[ -n "$slot" ] || fail "no slot for keychain $TOKEN"
user() { p11 --slot "$slot" --login --pin "$PIN" "$@"; }
pt() { LC_ALL=C TZ=UTC p11tool --provider "$MODULE" "$@"; }
unset GNUTLS_PIN GNUTLS_SO_PIN
cd "$WORK" || fail "cd $WORK"

# der_of PEM DER: a PEM certificate as DER.
der_of() { openssl x509 -in "$1" -outform DER -out "$2" || fail "DER of $1"; }
# certtool_self LABEL CN OUT: a self-signed certificate signed by the token key LABEL through GnuTLS.
certtool_self() {
    local out
    printf 'cn = "%s"\nserial = 7\nexpiration_days = 2\nsigning_key\ncert_signing_key\nca\n' "$2" >"$3.tmpl"
    out=$(GNUTLS_PIN="$PIN" timeout 30 certtool --provider "$MODULE" --generate-self-signed \
        --load-privkey "pkcs11:token=$TOKEN;object=$1;type=private" --template "$3.tmpl" --outfile "$3.pem" 2>&1) ||
        fail "certtool --generate-self-signed with $1: $out"
    out=$(openssl verify -CAfile "$3.pem" "$3.pem" 2>&1)
    expect_eq "$out" "$3.pem: OK" "certificate signed by $1 through certtool"
    der_of "$3.pem" "$3.der"
}

# 1. RSA-2048 generated with ID 1a2b; its certificate by certtool, stored with the same ID.
user --keypairgen --key-type rsa:2048 --id 1a2b --label gnu-rsa >/dev/null 2>&1 || fail "generate RSA key"
certtool_self gnu-rsa "GnuTLS RSA" rsa
user --write-object rsa.der --type cert --id 1a2b --label gnu-rsa-cert >/dev/null 2>&1 || fail "store RSA certificate"
# 2. P-384 generated without ID; its certificate by certtool, stored without ID: both get the
#    default ID, SHA-1 of the EC point.
user --keypairgen --key-type EC:secp384r1 --label gnu-p384 >/dev/null 2>&1 || fail "generate P-384 key"
certtool_self gnu-p384 "GnuTLS P-384" p384
user --write-object p384.der --type cert --label gnu-p384-cert >/dev/null 2>&1 || fail "store P-384 certificate"
p384id=$(openssl x509 -inform DER -in p384.der -noout -pubkey | openssl pkey -pubin -outform DER | tail -c 97 | sha1sum | cut -c1-40)
# 3. P-256 key pair from a file (private and public key written by the client) and openssl's
#    self-signed certificate, all with ID 3c4d.
openssl ecparam -name prime256v1 -genkey -noout -out p256.key || fail "P-256 key"
openssl req -x509 -new -key p256.key -subj "/CN=OpenSSL P-256" -days 2 -out p256.pem 2>/dev/null || fail "P-256 certificate"
der_of p256.pem p256.der
user --write-object p256.key --type privkey --id 3c4d --label gnu-p256 >/dev/null 2>&1 || fail "import P-256 key"
openssl pkey -in p256.key -pubout -outform DER -out p256.pub.der || fail "P-256 public key"
user --write-object p256.pub.der --type pubkey --id 3c4d --label gnu-p256 >/dev/null 2>&1 || fail "import the P-256 public key"
user --write-object p256.der --type cert --id 3c4d --label gnu-p256-cert >/dev/null 2>&1 || fail "store P-256 certificate"
# 4. A CA certificate without its key, stored without ID (default: SHA-1 of its EC point).
openssl ecparam -name prime256v1 -genkey -noout -out ca.key || fail "CA key"
openssl req -x509 -new -key ca.key -subj "/CN=Orphan CA" -days 2 -out ca.pem 2>/dev/null || fail "CA certificate"
der_of ca.pem ca.der
user --write-object ca.der --type cert --label gnu-ca-cert >/dev/null 2>&1 || fail "store CA certificate"
caid=$(openssl pkey -in ca.key -pubout -outform DER | tail -c 65 | sha1sum | cut -c1-40)

out=$(pt --list-tokens 2>&1) || fail "p11tool --list-tokens exit $?: $out"
token=$(sed -n 's/^\tURL: \(pkcs11:.*;token='"$TOKEN"'\)$/\1/p' <<<"$out")
[ -n "$token" ] || fail "no URI with token=$TOKEN in: $out"

# p11tool's forms of an ID: "1a:2b" and "%1A%2B".
colons() { sed 's/../&:/g; s/:$//' <<<"$1"; }
pct() { sed 's/../%&/g' <<<"$1" | tr a-f A-F; }
# expires DER: the notAfter of a certificate as p11tool prints it. p11tool formats it with
# strftime("%c") in local time (pt gives it TZ=UTC and the C locale): ctime(3)'s layout, English
# names and the day of the month padded with a space, "Wed Mar  3 00:30:00 2027". A zero-padded
# %d made this test fail whenever the certificates expired on the 1st to the 9th of a month.
expires() { LC_ALL=C TZ=UTC date -d "$(openssl x509 -inform DER -in "$1" -noout -enddate | sed 's/^notAfter=//')" '+%a %b %e %H:%M:%S %Y'; }
# cert_entry ID LABEL TYPE DER: the lines p11tool --list-all-certs prints for one certificate.
cert_entry() {
    printf '\tURL: %s;id=%s;object=%s;type=cert\n\tType: X.509 Certificate (%s)\n\tExpires: %s\n\tLabel: %s\n\tID: %s\n' \
        "$token" "$(pct "$1")" "$2" "$3" "$(expires "$4")" "$2" "$(colons "$1")"
}

# --- --list-all-certs, without login ----------------------------------------------------------
for sel in "pkcs11:token=$TOKEN" "$token" "pkcs11:token=$TOKEN;type=cert"; do
    out=$(pt --list-all-certs "$sel" 2>&1) || fail "p11tool --list-all-certs $sel exit $?: $out"
    expect_eq "$(grep -c '^Object ' <<<"$out")" 4 "certificates listed by $sel"
    expect_contains "$out" "$(cert_entry 1a2b gnu-rsa-cert RSA-2048 rsa.der)" "RSA certificate ($sel)"
    expect_contains "$out" "$(cert_entry "$p384id" gnu-p384-cert EC/ECDSA-SECP384R1 p384.der)" "P-384 certificate ($sel)"
    expect_contains "$out" "$(cert_entry 3c4d gnu-p256-cert EC/ECDSA-SECP256R1 p256.der)" "P-256 certificate ($sel)"
    expect_contains "$out" "$(cert_entry "$caid" gnu-ca-cert EC/ECDSA-SECP256R1 ca.der)" "CA certificate ($sel)"
done
out=$(pt --list-all-certs "pkcs11:token=$TOKEN;object=gnu-p256-cert" 2>&1) || fail "p11tool --list-all-certs by label exit $?: $out"
expect_eq "$(grep -c '^Object ' <<<"$out")" 1 "certificates listed by label"
expect_contains "$out" $'\tLabel: gnu-p256-cert\n' "certificate selected by label"

# --- --export: the stored DER, byte for byte ---------------------------------------------------
for c in rsa:gnu-rsa-cert p384:gnu-p384-cert p256:gnu-p256-cert ca:gnu-ca-cert; do
    name=${c%%:*} label=${c#*:}
    out=$(pt --export "pkcs11:token=$TOKEN;object=$label;type=cert" --outder --outfile "$name.export.der" 2>&1) ||
        fail "p11tool --export $label exit $?: $out"
    cmp -s "$name.export.der" "$name.der" || fail "p11tool --export --outder of $label differs from the stored DER"
    out=$(pt --export "pkcs11:token=$TOKEN;object=$label;type=cert" 2>&1) || fail "p11tool --export (PEM) $label exit $?: $out"
    expect_eq "$(openssl x509 -outform DER <<<"$out" | sha256sum)" "$(sha256sum <"$name.der")" "p11tool --export (PEM) of $label"
done
out=$(pt --export "pkcs11:token=$TOKEN;object=no-such-cert;type=cert" --outder --outfile none.der 2>&1) &&
    fail "p11tool --export of a missing certificate succeeded: $out"

# --- private keys paired by ID -----------------------------------------------------------------
out=$(pt --list-all-privkeys "$token" 2>&1)
expect_eq "$out" "No matching objects found" "--list-all-privkeys without login"
out=$(GNUTLS_PIN="$PIN" pt --batch --login --list-all-privkeys "$token" 2>&1) || fail "p11tool --login --list-all-privkeys exit $?: $out"
expect_eq "$(grep -c '^Object ' <<<"$out")" 3 "private keys listed"
expect_eq "$(sed -n 's/^\tID: //p' <<<"$out" | LC_ALL=C sort | tr '\n' ' ')" \
    "$(printf '%s\n' "$(colons 1a2b)" "$(colons 3c4d)" "$(colons "$p384id")" | LC_ALL=C sort | tr '\n' ' ')" "IDs of the private keys"
expect_contains "$out" $'\tURL: '"$token"';id='"$(pct 1a2b)"$';object=gnu-rsa;type=private\n\tType: Private key (RSA-2048)\n\tLabel: gnu-rsa\n' "RSA private key"
expect_contains "$out" $'\tURL: '"$token"';id='"$(pct "$p384id")"$';object=gnu-p384;type=private\n\tType: Private key (EC/ECDSA-SECP384R1)\n\tLabel: gnu-p384\n' "P-384 private key"
expect_contains "$out" $'\tURL: '"$token"';id='"$(pct 3c4d)"$';object=gnu-p256;type=private\n\tType: Private key (EC/ECDSA-SECP256R1)\n\tLabel: gnu-p256\n' "P-256 private key"
expect_not_contains "$out" "$(colons "$caid")" "private keys (the CA's key is not on the token)"

# Selecting by each certificate's ID gives its key pair and itself, and nothing else.
for p in 1a2b:gnu-rsa:gnu-rsa-cert "$p384id:gnu-p384:gnu-p384-cert" 3c4d:gnu-p256:gnu-p256-cert; do
    IFS=: read -r id key cert <<<"$p"
    out=$(GNUTLS_PIN="$PIN" pt --batch --login --list-all "pkcs11:token=$TOKEN;id=$(pct "$id")" 2>&1) ||
        fail "p11tool --list-all by id $id exit $?: $out"
    expect_eq "$(sed -n 's/^\tURL: .*;object=\([^;]*\);type=\(.*\)$/\1 \2/p' <<<"$out" | LC_ALL=C sort | tr '\n' ';')" \
        "$key private;$key public;$cert cert;" "objects with ID $id"
done
out=$(GNUTLS_PIN="$PIN" pt --batch --login --list-all "pkcs11:token=$TOKEN;id=$(pct "$caid")" 2>&1) || fail "p11tool --list-all by the CA's id exit $?: $out"
expect_eq "$(sed -n 's/^\tURL: .*;object=\([^;]*\);type=\(.*\)$/\1 \2/p' <<<"$out")" "gnu-ca-cert cert" "objects with the CA's ID"
