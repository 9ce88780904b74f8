# pkcs11-tool --keypairgen (RSA 2048, EC P-256, EC P-384, Ed25519); signatures made through the
# token verify with plain openssl and through the token; tampered signatures fail; pkcs11-tool --test.
# Client quirks: OpenSC 0.23 cannot export a P-384 public key with --read-object (that key is
# exported by p11tool and cross-checked against the CKA_EC_POINT listed by -O) and writes the
# Ed25519 public key as PEM; p11tool --export-pubkey writes PEM even with --outder; pkcs11-tool
# --verify prints "Invalid signature" but exits 0, so that message is what is asserted.
. "$HERE/lib.sh"

PIN=123456
new_keychain keygen 87654321 "$PIN"
slot=$(slot_of keygen)
[ -n "$slot" ] || fail "no slot for keychain keygen"
serial=$(p11 --slot "$slot" -T 2>/dev/null | sed -n "/token label        : keygen$/,/serial num/s/^  serial num         : //p")
[[ "$serial" =~ ^[0-9a-f]{16}$ ]] || fail "serial from pkcs11-tool: [$serial]"
user() { p11 --slot "$slot" --login --pin "$PIN" "$@"; }
pt() { GNUTLS_PIN="$PIN" p11tool --batch --provider "$MODULE" "$@"; }
cd "$WORK" || fail "cd $WORK"

# tamper IN OUT: OUT is IN with the lowest bit of its last byte flipped (for a DER ECDSA signature
# that is inside s, so the encoding stays valid).
tamper() {
    { head -c -1 "$1"; printf '%b' "\\x$(printf %02x $((0x$(tail -c 1 "$1" | xxd -p) ^ 1)))"; } >"$2" || fail "tamper $1"
}

head -c 3001 /dev/urandom >data.bin

# --- key pair generation ----------------------------------------------------------------------
# gen KEYTYPE ID LABEL PUBLIC-HEADER [EC_PARAMS]: generate and check pkcs11-tool's report.
gen() {
    local out priv pub
    out=$(user --keypairgen --key-type "$1" --id "$2" --label "$3" 2>&1) || fail "keypairgen $1: $out"
    expect_contains "$out" "Key pair generated:" "keypairgen $1"
    priv=$(sed -n '/^Private Key Object/,/^Public Key Object/p' <<<"$out")
    pub=$(sed -n '/^Public Key Object/,$p' <<<"$out")
    expect_contains "$priv" $'\n  label:      '"$3"$'\n  ID:         '"$2"$'\n' "private key label/ID ($1)"
    expect_contains "$priv" $'\n  Access:     sensitive, always sensitive, never extractable, local\n' "private key access ($1)"
    expect_contains "$pub" "$4" "public key header ($1)"
    expect_contains "$pub" $'\n  label:      '"$3"$'\n  ID:         '"$2"$'\n' "public key label/ID ($1)"
    expect_contains "$pub" $'\n  Access:     local\n' "public key access ($1)"
    [ $# -lt 5 ] || expect_contains "$pub" $'\n  EC_PARAMS:  '"$5" "EC_PARAMS ($1)"
}
gen rsa:2048 a1 gen-rsa "Public Key Object; RSA 2048 bits"
gen EC:prime256v1 a2 gen-p256 "Public Key Object; EC  EC_POINT 256 bits" 06082a8648ce3d030107
gen EC:secp384r1 a3 gen-p384 "Public Key Object; EC  EC_POINT 384 bits" 06052b81040022
gen EC:edwards25519 a4 gen-ed25519 "Public Key Object; EC_EDWARDS  EC_POINT 255 bits" 06032b6570

out=$(user -O 2>&1) || fail "-O exit $?: $out"
expect_eq "$(grep -c '^Private Key Object' <<<"$out")" 4 "private keys listed"
expect_eq "$(grep -c '^Public Key Object' <<<"$out")" 4 "public keys listed"

# --- public keys out of the token -------------------------------------------------------------
# to_der IN OUT: any SubjectPublicKeyInfo (PEM or DER) as DER.
to_der() { openssl pkey -pubin -in "$1" -outform DER -out "$2" 2>/dev/null || fail "not a public key: $1 ($(head -c 60 "$1" | od -c | head -2))"; }
for k in a1:gen-rsa a2:gen-p256 a3:gen-p384 a4:gen-ed25519; do
    id=${k%%:*} label=${k#*:}
    out=$(pt --export-pubkey "pkcs11:token=keygen;serial=$serial;object=$label;type=public" --outfile "p11tool-$id.out" 2>&1) ||
        fail "p11tool --export-pubkey $label: $out"
    to_der "p11tool-$id.out" "$id.der"
    openssl pkey -pubin -inform DER -in "$id.der" -out "$id.pem" || fail "PEM of $id"
done
for id in a1 a2 a4; do
    user --read-object --type pubkey --id "$id" -o "pkcs11-tool-$id.out" >/dev/null 2>&1 || fail "pkcs11-tool --read-object pubkey $id"
    to_der "pkcs11-tool-$id.out" "pkcs11-tool-$id.der"
    cmp -s "pkcs11-tool-$id.der" "$id.der" || fail "public key $id differs between pkcs11-tool and p11tool"
done
expect_contains "$(openssl pkey -pubin -in a1.pem -noout -text)" "Public-Key: (2048 bit)" "RSA public key size"
expect_contains "$(openssl pkey -pubin -in a2.pem -noout -text)" "ASN1 OID: prime256v1" "P-256 public key curve"
expect_contains "$(openssl pkey -pubin -in a3.pem -noout -text)" "ASN1 OID: secp384r1" "P-384 public key curve"
expect_contains "$(openssl pkey -pubin -in a4.pem -noout -text)" "ED25519 Public-Key:" "Ed25519 public key type"
# P-384: the SubjectPublicKeyInfo from p11tool equals one built from the CKA_EC_POINT -O lists.
point=$(user -O --type pubkey 2>/dev/null | awk '/^  EC_POINT:/ { p = $2 } /^  label: +gen-p384$/ { print p }')
[[ "$point" =~ ^046104[0-9a-f]{192}$ ]] || fail "P-384 CKA_EC_POINT: [$point]"
printf '3076301006072a8648ce3d020106052b81040022036200%s' "${point#0461}" | xxd -r -p >a3-from-point.der
cmp -s a3-from-point.der a3.der || fail "P-384 public key from p11tool differs from CKA_EC_POINT"

# --- signatures -------------------------------------------------------------------------------
# DigestInfo(SHA-256(data)) for CKM_RSA_PKCS.
{ printf '3031300d060960864801650304020105000420' | xxd -r -p; openssl dgst -sha256 -binary data.bin; } >digestinfo.bin
user --sign --id a1 -m SHA256-RSA-PKCS -i data.bin -o rsa-pkcs.sig >/dev/null 2>&1 || fail "sign SHA256-RSA-PKCS"
user --sign --id a1 -m SHA256-RSA-PKCS-PSS -i data.bin -o rsa-pss.sig >/dev/null 2>&1 || fail "sign SHA256-RSA-PKCS-PSS"
user --sign --id a1 -m SHA256-RSA-PKCS-PSS -i data.bin -o rsa-pss2.sig >/dev/null 2>&1 || fail "sign SHA256-RSA-PKCS-PSS again"
user --sign --id a1 -m RSA-PKCS -i digestinfo.bin -o rsa-raw.sig >/dev/null 2>&1 || fail "sign RSA-PKCS"
user --sign --id a2 -m ECDSA-SHA256 --signature-format openssl -i data.bin -o p256.sig >/dev/null 2>&1 || fail "sign ECDSA-SHA256"
user --sign --id a3 -m ECDSA-SHA384 --signature-format openssl -i data.bin -o p384.sig >/dev/null 2>&1 || fail "sign ECDSA-SHA384"
user --sign --id a4 -m EDDSA -i data.bin -o ed25519.sig >/dev/null 2>&1 || fail "sign EDDSA"
user --sign --id a4 -m EDDSA -i data.bin -o ed25519-2.sig >/dev/null 2>&1 || fail "sign EDDSA again"

for s in rsa-pkcs rsa-pss rsa-raw; do expect_eq "$(stat -c %s $s.sig)" 256 "length of $s signature"; done
expect_eq "$(stat -c %s ed25519.sig)" 64 "length of the Ed25519 signature"
cmp -s rsa-pkcs.sig rsa-raw.sig || fail "RSA-PKCS over the DigestInfo differs from SHA256-RSA-PKCS"
cmp -s rsa-pss.sig rsa-pss2.sig && fail "two PSS signatures are identical (no random salt)"
cmp -s ed25519.sig ed25519-2.sig || fail "two Ed25519 signatures of the same data differ"

# Plain openssl, with the exported public keys.
ossl_verify() {
    local what=$1
    shift
    out=$(openssl "$@" 2>&1) || fail "openssl does not verify $what: $out"
}
ossl_refuse() {
    local what=$1
    shift
    out=$(openssl "$@" 2>&1) && fail "openssl verifies tampered $what: $out"
}
ossl_verify SHA256-RSA-PKCS dgst -sha256 -verify a1.pem -signature rsa-pkcs.sig data.bin
expect_eq "$out" "Verified OK" "openssl SHA256-RSA-PKCS"
ossl_verify SHA256-RSA-PKCS-PSS dgst -sha256 -verify a1.pem -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:32 -signature rsa-pss.sig data.bin
expect_eq "$out" "Verified OK" "openssl SHA256-RSA-PKCS-PSS"
openssl pkeyutl -verifyrecover -pubin -inkey a1.pem -in rsa-raw.sig -out recovered.bin 2>/dev/null || fail "openssl -verifyrecover RSA-PKCS"
cmp -s recovered.bin digestinfo.bin || fail "RSA-PKCS signature does not recover the DigestInfo"
ossl_verify ECDSA-SHA256 dgst -sha256 -verify a2.pem -signature p256.sig data.bin
expect_eq "$out" "Verified OK" "openssl ECDSA-SHA256"
ossl_verify ECDSA-SHA384 dgst -sha384 -verify a3.pem -signature p384.sig data.bin
expect_eq "$out" "Verified OK" "openssl ECDSA-SHA384"
ossl_verify EDDSA pkeyutl -verify -rawin -pubin -inkey a4.pem -in data.bin -sigfile ed25519.sig
expect_eq "$out" "Signature Verified Successfully" "openssl EDDSA"

for s in rsa-pkcs rsa-pss rsa-raw p256 p384 ed25519; do tamper $s.sig $s.bad; done
ossl_refuse SHA256-RSA-PKCS dgst -sha256 -verify a1.pem -signature rsa-pkcs.bad data.bin
ossl_refuse SHA256-RSA-PKCS-PSS dgst -sha256 -verify a1.pem -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:32 -signature rsa-pss.bad data.bin
ossl_refuse RSA-PKCS pkeyutl -verify -pubin -inkey a1.pem -pkeyopt digest:sha256 -in <(openssl dgst -sha256 -binary data.bin) -sigfile rsa-raw.bad
ossl_refuse ECDSA-SHA256 dgst -sha256 -verify a2.pem -signature p256.bad data.bin
ossl_refuse ECDSA-SHA384 dgst -sha384 -verify a3.pem -signature p384.bad data.bin
ossl_refuse EDDSA pkeyutl -verify -rawin -pubin -inkey a4.pem -in data.bin -sigfile ed25519.bad
# ... and a signature over other data does not verify either.
printf 'other' >other.bin
ossl_refuse "ECDSA-SHA256 (other data)" dgst -sha256 -verify a2.pem -signature p256.sig other.bin

# Through the token: the good signatures verify, the tampered ones do not.
for v in "a1 SHA256-RSA-PKCS rsa-pkcs data.bin" "a1 SHA256-RSA-PKCS-PSS rsa-pss data.bin" \
    "a1 RSA-PKCS rsa-raw digestinfo.bin" "a2 ECDSA-SHA256 p256 data.bin" "a3 ECDSA-SHA384 p384 data.bin" \
    "a4 EDDSA ed25519 data.bin"; do
    read -r id mech sig input <<<"$v"
    out=$(user --verify --id "$id" -m "$mech" --signature-format openssl -i "$input" --signature-file "$sig.sig" 2>/dev/null) ||
        fail "pkcs11-tool --verify $mech exit $?: $out"
    expect_eq "$out" "Signature is valid" "pkcs11-tool --verify $mech"
    out=$(user --verify --id "$id" -m "$mech" --signature-format openssl -i "$input" --signature-file "$sig.bad" 2>/dev/null)
    expect_eq "$out" "Invalid signature" "pkcs11-tool --verify of a tampered $mech signature"
done
out=$(user --verify --id a2 -m ECDSA-SHA256 --signature-format openssl -i other.bin --signature-file p256.sig 2>/dev/null)
expect_eq "$out" "Invalid signature" "pkcs11-tool --verify ECDSA-SHA256 over other data"

# --- pkcs11-tool --test -----------------------------------------------------------------------
out=$(user --test 2>&1) || fail "pkcs11-tool --test exit $?: $out"
expect_eq "$(tail -n 1 <<<"$out")" "No errors" "last line of pkcs11-tool --test"
expect_contains "$out" "all 4 signature functions seem to work" "pkcs11-tool --test signatures"
expect_contains "$out" $'    SHA256-RSA-PKCS: OK\n' "pkcs11-tool --test SHA256-RSA-PKCS"
expect_not_contains "$out" "ERR" "pkcs11-tool --test"

# --- CKA_ALWAYS_AUTHENTICATE: pkcs11-tool presents the PIN again after C_SignInit ----------------
out=$(user --keypairgen --key-type EC:prime256v1 --id a9 --label always --always-auth 2>&1) || fail "keypairgen --always-auth: $out"
expect_contains "$out" "Access:     always authenticate" "pkcs11-tool report of the always-auth key"
user --sign --id a9 -m ECDSA-SHA256 --signature-format openssl -i data.bin -o always.sig >/dev/null 2>&1 || fail "sign with the always-auth key"
user --read-object --type pubkey --id a9 -o always.der >/dev/null 2>&1 || fail "export the always-auth public key"
out=$(openssl dgst -sha256 -verify always.der -keyform DER -signature always.sig data.bin 2>&1)
expect_eq "$out" "Verified OK" "openssl verifies the always-auth key's signature"
echo "ok: pkcs11-tool signs with a CKA_ALWAYS_AUTHENTICATE key"
