# OpenSSH ssh-keygen -D lists the token's RSA-2048, EC P-256 and EC P-384 public keys, each equal to
# ssh-keygen -i -m PKCS8 of the key's openssl public key and commented with its label. The keys are
# an imported RSA key and an imported P-384 key (each written as its private and its public key,
# as clients import pairs: the module invents no public-key object) and a generated P-256 pair. ssh-keygen -D reads only public keys and does not
# log in, so no PIN is given (stdin is /dev/null). OpenSSH 9.2 skips Ed25519 over PKCS#11: an
# Ed25519 key on the token must not be listed, only reported as unsupported on stderr.
. "$HERE/lib.sh"

PIN=123456
new_keychain sshkeys 87654321 "$PIN"
slot=$(slot_of sshkeys)
[ -n "$slot" ] || fail "no slot for keychain sshkeys"
user() { p11 --slot "$slot" --login --pin "$PIN" "$@"; }
cd "$WORK" || fail "cd $WORK"

# ssh_of PUBLIC-KEY-FILE: "type base64" of an openssl public key (PEM).
ssh_of() { ssh-keygen -i -m PKCS8 -f "$1" | awk '{ print $1, $2 }'; }

# No keys: nothing listed.
out=$(ssh-keygen -D "$MODULE" </dev/null 2>/dev/null)
expect_eq "$out" "" "ssh-keygen -D on a token without keys"

openssl genrsa -out rsa.pem 2048 2>/dev/null || fail "genrsa"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-384 -out p384.pem || fail "genpkey P-384"
user --write-object rsa.pem --type privkey --id c1 --label ssh-rsa-key >/dev/null 2>&1 || fail "import RSA key"
openssl pkey -in rsa.pem -pubout -outform DER -out rsa.pub.der || fail "public key of rsa"
user --write-object rsa.pub.der --type pubkey --id c1 --label ssh-rsa-key >/dev/null 2>&1 || fail "import the public key of rsa"
user --write-object p384.pem --type privkey --id c3 --label ssh-p384-key >/dev/null 2>&1 || fail "import P-384 key"
openssl pkey -in p384.pem -pubout -outform DER -out p384.pub.der || fail "public key of p384"
user --write-object p384.pub.der --type pubkey --id c3 --label ssh-p384-key >/dev/null 2>&1 || fail "import the public key of p384"
user --keypairgen --key-type EC:prime256v1 --id c2 --label ssh-p256-key >/dev/null 2>&1 || fail "generate P-256 key"
user --keypairgen --key-type EC:edwards25519 --id c4 --label ssh-ed25519-key >/dev/null 2>&1 || fail "generate Ed25519 key"

openssl pkey -in rsa.pem -pubout -out rsa.pub.pem || fail "RSA public key"
openssl pkey -in p384.pem -pubout -out p384.pub.pem || fail "P-384 public key"
user --read-object --type pubkey --id c2 -o p256.pub.der >/dev/null 2>&1 || fail "read P-256 public key"
openssl pkey -pubin -inform DER -in p256.pub.der -out p256.pub.pem || fail "P-256 public key"

expected=$(printf '%s\n' "$(ssh_of rsa.pub.pem) ssh-rsa-key" "$(ssh_of p256.pub.pem) ssh-p256-key" \
    "$(ssh_of p384.pub.pem) ssh-p384-key" | LC_ALL=C sort)
expect_eq "$(awk '{ print $1 }' <<<"$expected" | tr '\n' ' ')" "ecdsa-sha2-nistp256 ecdsa-sha2-nistp384 ssh-rsa " "expected key types"

out=$(ssh-keygen -D "$MODULE" </dev/null 2>"$WORK/stderr") || fail "ssh-keygen -D exit $?: $out $(cat "$WORK/stderr")"
expect_eq "$(LC_ALL=C sort <<<"$out")" "$expected" "keys listed by ssh-keygen -D"
expect_eq "$(wc -l <<<"$out")" 3 "number of keys listed by ssh-keygen -D"
expect_contains "$(cat "$WORK/stderr")" "skipping unsupported key type" "Ed25519 key reported by ssh-keygen -D"

# The listing does not change after a logged-in session has used one of the keys.
user --sign --id c2 -m ECDSA-SHA256 -i rsa.pem -o /dev/null >/dev/null 2>&1 || fail "sign with the P-256 key"
out=$(ssh-keygen -D "$MODULE" </dev/null 2>/dev/null) || fail "second ssh-keygen -D exit $?"
expect_eq "$(LC_ALL=C sort <<<"$out")" "$expected" "keys listed by the second ssh-keygen -D"
