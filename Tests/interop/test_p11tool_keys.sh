# GnuTLS p11tool with keys: --list-privkeys lists the private keys by URI only after login
# (GNUTLS_PIN); --test-sign signs through the token and verifies against the key's parameters and
# against the token's public key, for RSA (PKCS#1 v1.5 and PSS), EC P-256, EC P-384 and Ed25519.
# Client quirk: p11tool --test-sign hashes with SHA-256 by default, which GnuTLS refuses for
# Ed25519 ("No supported signature algorithm"); the Ed25519 key is tested with --hash SHA512.
. "$HERE/lib.sh"

PIN=123456
new_keychain gnukeys 87654321 "$PIN"
slot=$(slot_of gnukeys)
[ -n "$slot" ] || fail "no slot for keychain gnukeys"
user() { p11 --slot "$slot" --login --pin "$PIN" "$@"; }
pt() { p11tool --provider "$MODULE" "$@"; }
unset GNUTLS_PIN GNUTLS_SO_PIN
cd "$WORK" || fail "cd $WORK"

user --keypairgen --key-type rsa:2048 --id d1 --label gnu-rsa >/dev/null 2>&1 || fail "generate RSA key"
openssl ecparam -name prime256v1 -genkey -noout -out p256.pem || fail "ecparam P-256"
user --write-object p256.pem --type privkey --id d2 --label gnu-p256 >/dev/null 2>&1 || fail "import P-256 key"
openssl pkey -in p256.pem -pubout -outform DER -out p256.pub.der || fail "P-256 public key"
user --write-object p256.pub.der --type pubkey --id d2 --label gnu-p256 >/dev/null 2>&1 || fail "import the P-256 public key"
user --keypairgen --key-type EC:secp384r1 --id d3 --label gnu-p384 >/dev/null 2>&1 || fail "generate P-384 key"
user --keypairgen --key-type EC:edwards25519 --id d4 --label gnu-ed25519 >/dev/null 2>&1 || fail "generate Ed25519 key"

out=$(pt --list-tokens 2>&1) || fail "p11tool --list-tokens exit $?: $out"
token=$(sed -n 's/^\tURL: \(pkcs11:.*;token=gnukeys\)$/\1/p' <<<"$out")
[ -n "$token" ] || fail "no URI with token=gnukeys in: $out"

# Without login no private key is listed.
out=$(pt --list-privkeys "$token" 2>&1)
expect_eq "$out" "No matching objects found" "--list-privkeys without login"

# With login: the four private keys, each by its URI.
out=$(GNUTLS_PIN="$PIN" pt --batch --login --list-privkeys "$token" 2>&1) || fail "p11tool --login --list-privkeys exit $?: $out"
expect_eq "$(grep -c '^Object ' <<<"$out")" 4 "private keys listed after login"
expect_eq "$(grep -c 'type=private$' <<<"$out")" 4 "private key URIs"
expect_not_contains "$out" "type=public" "--list-privkeys"
expect_contains "$out" $'\tURL: '"$token"$';id=%D1;object=gnu-rsa;type=private\n\tType: Private key (RSA-2048)\n\tLabel: gnu-rsa\n\tFlags: CKA_PRIVATE; CKA_NEVER_EXTRACTABLE; CKA_SENSITIVE; \n\tID: d1\n' "RSA private key"
expect_contains "$out" $'\tURL: '"$token"$';id=%D2;object=gnu-p256;type=private\n\tType: Private key (EC/ECDSA-SECP256R1)\n\tLabel: gnu-p256\n' "P-256 private key"
expect_contains "$out" $'\tURL: '"$token"$';id=%D3;object=gnu-p384;type=private\n\tType: Private key (EC/ECDSA-SECP384R1)\n\tLabel: gnu-p384\n\tFlags: CKA_PRIVATE; CKA_NEVER_EXTRACTABLE; CKA_SENSITIVE; \n\tID: d3\n' "P-384 private key"
expect_contains "$out" $'\tURL: '"$token"$';id=%D4;object=gnu-ed25519;type=private\n\tType: Private key (EdDSA (Ed25519))\n\tLabel: gnu-ed25519\n' "Ed25519 private key"
p256flags=$(sed -n '/object=gnu-p256;type=private$/,/^\tID:/s/^\tFlags: //p' <<<"$out")
expect_contains "$p256flags" "CKA_PRIVATE; " "flags of the imported P-256 key"
expect_contains "$p256flags" "CKA_SENSITIVE; " "flags of the imported P-256 key"
expect_not_contains "$p256flags" "CKA_EXTRACTABLE" "flags of the imported P-256 key"

# --test-sign by the URIs from the listing.
uri() { sed -n 's/^\tURL: \(.*;object='"$1"';type=private\)$/\1/p' <<<"$out"; }
test_sign() { # LABEL EXPECTED-ALGORITHM [p11tool options]
    local u res
    u=$(uri "$1")
    [ -n "$u" ] || fail "no URI for $1"
    res=$(GNUTLS_PIN="$PIN" pt --batch --login --test-sign "${@:3}" "$u" 2>&1) || fail "p11tool --test-sign $1 exit $?: $res"
    expect_eq "$res" "Signing using $2... ok
Verifying against private key parameters... ok
Verifying against public key in the token... ok" "p11tool --test-sign $1 ${*:3}"
}
test_sign gnu-rsa RSA-SHA256
test_sign gnu-rsa RSA-PSS-SHA256 --sign-params RSA-PSS
test_sign gnu-rsa RSA-SHA384 --hash SHA384
test_sign gnu-p256 ECDSA-SHA256
test_sign gnu-p384 ECDSA-SHA384 --hash SHA384
test_sign gnu-ed25519 EdDSA-Ed25519 --hash SHA512

# A wrong PIN signs nothing. The right PIN works again; p11tool warns once, because the token
# then reports CKF_USER_PIN_COUNT_LOW (a wrong PIN since the last successful login), and the
# successful login clears the flag, so the next run prints no warning.
res=$(GNUTLS_PIN=000000 pt --batch --login --test-sign "$(uri gnu-p256)" 2>&1) && fail "--test-sign with a wrong PIN succeeded: $res"
expect_contains "$res" "Wrong PIN" "--test-sign with a wrong PIN"
expect_not_contains "$res" "Signing using" "--test-sign with a wrong PIN"
# (p11tool writes the warning to stdout and the --test-sign report to stderr.)
res=$(GNUTLS_PIN="$PIN" pt --batch --login --test-sign "$(uri gnu-p256)" 2>&1 >"$WORK/stdout") || fail "--test-sign after a wrong PIN exit $?: $res"
expect_eq "$res" "Signing using ECDSA-SHA256... ok
Verifying against private key parameters... ok
Verifying against public key in the token... ok" "--test-sign after a wrong PIN"
expect_eq "$(cat "$WORK/stdout")" "*** Only few tries left before locking!" "p11tool warning after a wrong PIN"
test_sign gnu-p256 ECDSA-SHA256
