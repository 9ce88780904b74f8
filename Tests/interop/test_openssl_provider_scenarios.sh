# Everything pkcs11-provider 1.0 routes to a token, run through Debian's openssl commands over the
# module, each result checked exactly: signatures verify with plain openssl (no provider) against
# the public key p11tool (GnuTLS, not the provider) reads from the token, decryptions return the
# very plaintext plain openssl encrypted, derived secrets equal plain openssl's from the other
# side, listings have exact counts. The provider's trace (PKCS11_PROVIDER_DEBUG) shows which
# module functions ran and every CK_RV other than CKR_OK. Scenarios (TLS and fork:
# test_openssl_provider_scenarios_tls.sh):
#  1. what the provider offers over the module: the exact digest, signature, asymmetric cipher,
#     key exchange and KDF algorithms it registers from the module's mechanism list;
#  2. RSA PKCS#1 v1.5 signatures with pkeyutl (a DigestInfo made on the token, a raw hash whose
#     verify-recover is that hash, -rawin with SHA-256/384/512 and SHA3-256) and dgst, byte for
#     byte equal (the scheme is deterministic);
#  3. RSA-PSS: salt length = digest length, maximal, and 48 with SHA-384; plain openssl verifies
#     with that exact salt length and refuses another one; dgst -sigopt;
#  4. ECDSA P-256 (a given SHA-256 hash; -rawin SHA-1, SHA-224/256/384/512, SHA3-256/512; dgst)
#     and P-384 (SHA-384); a changed message fails to verify;
#  5. Ed25519 (pkeyutl -rawin): 64 bytes, the same signature twice, verified by plain openssl;
#  6. RSA decryption of plain openssl's ciphertexts: PKCS#1 v1.5, OAEP SHA-1, SHA-256,
#     SHA-256 with a label, SHA-256 with MGF1-SHA-1, SHA-512; a wrong label fails with C_Decrypt's
#     CKR_ENCRYPTED_DATA_INVALID, another key's ciphertext fails, and OAEP without a digest (the
#     provider then sends hashAlg 0 and mgf 0) fails with C_DecryptInit's
#     CKR_MECHANISM_PARAM_INVALID;
#  7. public-key operations on the token (pkcs11-module-allow-export = 1): C_Verify accepts a good
#     signature, C_VerifyFinal answers CKR_SIGNATURE_INVALID to a signature of another digest;
#     C_Encrypt's ciphertext decrypts on the token to the plaintext;
#  8. ECDH P-256 and P-384: the token's secret equals plain openssl's from the peer's side, also
#     with the token's public-key URI as the peer, and with the provider forced
#     (default_properties = ?provider=pkcs11); a peer on another curve: CKR_MECHANISM_PARAM_INVALID;
#  9. certificates and CSRs: a CA certificate made by the token's RSA key (req -x509), stored on
#     the token and read back from its URI byte for byte; CSRs of every token key (RSA PKCS#1 and
#     PSS, P-256, P-384, Ed25519) that plain openssl verifies and that carry the token's keys;
#     x509 -req -CA <certificate URI> -CAkey <key URI> issues certificates whose chain plain
#     openssl verifies (and refuses under another CA); storeutl -subject / -issuer -serial;
# 10. storeutl listings and URI forms on two tokens: exact counts for token=, object=, id=,
#     type=, serial=, slot-id=, model=/manufacturer= (percent-encoded), a label with a space, ';',
#     '/', '?' and '%' written percent-encoded, and every URI storeutl prints selecting exactly
#     its own object; pin-value= and pin-source= in the URI with no PIN in the config;
# 11. key generation through the provider (genpkey -propquery '?provider=pkcs11' -pkeyopt
#     pkcs11_uri:...): EC P-256, RSA-2048 and Ed25519 pairs on the token with the label and ID
#     asked for, the private key sensitive and never extractable; genpkey -out writes a PKCS#11
#     PROVIDER URI PEM (pkcs11-module-encode-provider-uri-to-pem) naming the new key, which
#     pkeyutl -inkey then signs with;
# 12. digests (early load): SHA-1, SHA-224/256/384/512 and SHA3-224/256/384/512 made by C_Digest*
#     equal plain openssl's; random bytes (random = PKCS11-RAND) come from C_GenerateRandom, and
#     without early load that DRBG cannot be fetched; HKDF through the provider fails today: the
#     provider creates its input key as a session object without CKA_PRIVATE, in a session not
#     logged in, and the module (whose secret keys are private unless the template says otherwise)
#     answers C_CreateObject with CKR_USER_NOT_LOGGED_IN (logged in, HKDF on the token works: the
#     forced server of the TLS test);
# 13. errors: a wrong PIN (one C_Login, CKR_PIN_INCORRECT, the failed try counted and cleared by
#     the right PIN), a URI that matches nothing, a public-key operation given a private-key URI
#     and a private-key operation given a public-key URI, each with openssl's exact message.
# Not covered: X25519 (pkcs11-provider 1.0 has no CKK_EC_MONTGOMERY keys) and EdDSA through
# openssl dgst (OpenSSL 3.0's dgst signs in parts, which EdDSA cannot, even without a provider).
. "$HERE/lib.sh"
. "$HERE/provider.sh"

PIN=123456
TOKEN=scen
OTHER=scen-other
new_keychain "$TOKEN" 87654321 "$PIN"
new_keychain "$OTHER" 87654321 "$PIN"
slot=$(slot_of "$TOKEN")
other_slot=$(slot_of "$OTHER")
[ -n "$slot" ] && [ -n "$other_slot" ] || fail "no slots for keychains $TOKEN and $OTHER"
user() { p11 --slot "$slot" --login --pin "$PIN" "$@"; }
cd "$WORK" || fail "cd $WORK"
serial=$(kc info -k "$TOKEN" 2>/dev/null | sed -n 's/^Serial *//p')
[ -n "$serial" ] || fail "no serial number for $TOKEN"

ODD='web key;2024/a?b%c'
ODD_ENC='web%20key%3B2024%2Fa%3Fb%25c'
user --keypairgen --key-type rsa:2048 --id 01 --label rsa >/dev/null 2>&1 || fail "generate RSA key"
user --keypairgen --key-type EC:prime256v1 --id 02 --label p256 >/dev/null 2>&1 || fail "generate P-256 key"
out=$(KEYCHAIN_PKCS11_PIN=$PIN kc generate-key -k "$TOKEN" --type ed25519 --label ed25519 --id 03 2>&1) ||
    fail "keychainctl generate-key --type ed25519: $out"
user --keypairgen --key-type EC:secp384r1 --id 04 --label p384 >/dev/null 2>&1 || fail "generate P-384 key"
user --keypairgen --key-type EC:prime256v1 --id 0a0b --label "$ODD" >/dev/null 2>&1 || fail "generate the oddly labelled key"
p11 --slot "$other_slot" --login --pin "$PIN" --keypairgen --key-type EC:prime256v1 --id 02 --label p256 >/dev/null 2>&1 ||
    fail "generate P-256 key on $OTHER"

# export_pub NAME URI: the public key at URI as p11tool reads it, in NAME.pub.pem.
export_pub() {
    GNUTLS_PIN=$PIN p11tool --provider "$MODULE" --login --export-pubkey "$2" --outfile "$1.pub.pem" >/dev/null 2>&1 &&
        [ -s "$1.pub.pem" ] || fail "p11tool --export-pubkey $2"
}
for name in rsa p256 ed25519 p384; do export_pub "$name" "pkcs11:token=$TOKEN;object=$name;type=public"; done
key() { echo "pkcs11:token=$TOKEN;object=$1;type=private"; }

# The configs: provider.cnf (the PIN from a file), nopin.cnf, noexport.cnf (allow-export = 1,
# which despite its name keeps public keys on the token, so verification and encryption run
# there), early.cnf (the module loaded at start: digests and random bytes are offered only then),
# uripem.cnf (keys written as PKCS#11 PROVIDER URI PEM), forced.cnf (every algorithm the provider
# has, from the provider), rand.cnf and randlazy.cnf (OpenSSL's random generator is the
# provider's, with and without early load).
printf '%s\n' "$PIN" >pin.txt || fail "write pin.txt"
provider_cnf "pkcs11-module-token-pin = file:$WORK/pin.txt" >provider.cnf || fail "write provider.cnf"
provider_cnf >nopin.cnf || fail "write nopin.cnf"
provider_cnf "pkcs11-module-token-pin = file:$WORK/pin.txt" "pkcs11-module-allow-export = 1" >noexport.cnf || fail "write noexport.cnf"
provider_cnf "pkcs11-module-token-pin = file:$WORK/pin.txt" "pkcs11-module-load-behavior = early" >early.cnf || fail "write early.cnf"
provider_cnf "pkcs11-module-token-pin = file:$WORK/pin.txt" "pkcs11-module-encode-provider-uri-to-pem = true" >uripem.cnf ||
    fail "write uripem.cnf"
{ cat provider.cnf && printf '%s\n' "[openssl_init]" "alg_section = algorithm_sect" "[algorithm_sect]" \
    "default_properties = ?provider=pkcs11"; } >forced.cnf || fail "write forced.cnf"
{ cat early.cnf && printf '%s\n' "[openssl_init]" "random = random_sect" "[random_sect]" "random = PKCS11-RAND"; } >rand.cnf
{ cat provider.cnf && printf '%s\n' "[openssl_init]" "random = random_sect" "[random_sect]" "random = PKCS11-RAND"; } >randlazy.cnf
plain() { OPENSSL_CONF=/dev/null timeout 30 openssl "$@"; }

# traced CONFIG ARGS...: openssl ARGS with the config file CONFIG and the provider's trace in
# trace.log, in a session of its own (setsid: no terminal, so nothing can prompt for a PIN); sets
# out (stdout and stderr), rc, calls (trace_calls) and errors (trace_errors).
traced() {
    local cnf=$1
    shift
    rm -f trace.log
    out=$(OPENSSL_CONF="$WORK/$cnf" PKCS11_PROVIDER_DEBUG="file:$WORK/trace.log" setsid -w timeout 60 openssl "$@" 2>&1 </dev/null)
    rc=$?
    calls=$(trace_calls trace.log)
    errors=$(trace_errors trace.log)
}
# ok CONFIG ARGS...: traced, which must succeed with no error from the module.
ok() {
    traced "$@"
    [ "$rc" = 0 ] || fail "openssl ${*:2} (config $1): exit $rc: $out"
    expect_eq "$errors" "" "module errors under openssl ${*:2}"
}
called() { count_of "$calls" "$1"; }
# verified WHAT ARGS...: plain openssl pkeyutl -verify ARGS must say the signature verifies.
verified() {
    local v
    v=$(plain pkeyutl -verify "${@:2}" 2>&1)
    expect_eq "$v" "Signature Verified Successfully" "$1"
}
# refused WHAT ARGS...: plain openssl pkeyutl -verify ARGS must say the signature does not verify.
refused() {
    local v
    v=$(plain pkeyutl -verify "${@:2}" 2>&1) && fail "$1: verified: $v"
    expect_contains "$v" "Signature Verification Failure" "$1"
}
head -c 1000 /dev/urandom >data.bin
{ cat data.bin && printf x; } >changed.bin
plain dgst -sha256 -binary -out sha256.bin data.bin || fail "sha256 of data.bin"

# --- 1. what the provider offers over the module ------------------------------------------------
# list_pkcs11 KIND: the algorithms the pkcs11 provider registers, one sorted line each.
list_pkcs11() { OPENSSL_CONF="$WORK/early.cnf" timeout 30 openssl list "-$1-algorithms" 2>&1 | sed -n 's/^ *\(.*\) @ pkcs11$/\1/p' | sort; }
expect_eq "$(list_pkcs11 digest)" "{ 1.3.14.3.2.26, SHA-1, SHA1, SSL3-SHA1 }
{ 2.16.840.1.101.3.4.2.1, SHA-256, SHA2-256, SHA256 }
{ 2.16.840.1.101.3.4.2.10, SHA3-512 }
{ 2.16.840.1.101.3.4.2.2, SHA-384, SHA2-384, SHA384 }
{ 2.16.840.1.101.3.4.2.3, SHA-512, SHA2-512, SHA512 }
{ 2.16.840.1.101.3.4.2.4, SHA-224, SHA2-224, SHA224 }
{ 2.16.840.1.101.3.4.2.7, SHA3-224 }
{ 2.16.840.1.101.3.4.2.8, SHA3-256 }
{ 2.16.840.1.101.3.4.2.9, SHA3-384 }" "digests the provider offers"
expect_eq "$(list_pkcs11 signature)" "ECDSA
{ 1.2.840.113549.1.1.1, 2.5.8.1.1, RSA, rsaEncryption }
{ 1.3.101.112, ED25519 }
{ 1.3.101.113, ED448 }" "signature algorithms the provider offers"
expect_eq "$(list_pkcs11 asymcipher)" "{ 1.2.840.113549.1.1.1, 2.5.8.1.1, RSA, rsaEncryption }" "asymmetric ciphers the provider offers"
expect_eq "$(list_pkcs11 key-exchange)" "ECDH
HKDF" "key exchanges the provider offers"
expect_eq "$(list_pkcs11 kdf)" "HKDF
TLS13-KDF" "KDFs the provider offers"

# --- 2. RSA PKCS#1 v1.5 ---------------------------------------------------------------------------
ok provider.cnf pkeyutl -sign -inkey "$(key rsa)" -pkeyopt digest:sha256 -in sha256.bin -out rsa-di.sig
expect_eq "$(called C_Sign)" 1 "C_Sign calls for a given hash"
verified "RSA PKCS#1 signature of a given hash" -pubin -inkey rsa.pub.pem -pkeyopt digest:sha256 -in sha256.bin -sigfile rsa-di.sig
ok provider.cnf pkeyutl -sign -inkey "$(key rsa)" -in sha256.bin -out rsa-raw.sig
plain pkeyutl -verifyrecover -pubin -inkey rsa.pub.pem -in rsa-raw.sig -out recovered.bin || fail "verify-recover"
cmp -s recovered.bin sha256.bin || fail "RSA PKCS#1 signature of raw bytes does not recover them"
for md in sha256 sha384 sha512 sha3-256; do
    ok provider.cnf pkeyutl -sign -inkey "$(key rsa)" -rawin -digest "$md" -in data.bin -out "rsa-$md.sig"
    verified "RSA PKCS#1 $md signature" -pubin -inkey rsa.pub.pem -rawin -digest "$md" -in data.bin -sigfile "rsa-$md.sig"
done
refused "RSA PKCS#1 signature of a changed message" -pubin -inkey rsa.pub.pem -rawin -digest sha256 -in changed.bin -sigfile rsa-sha256.sig
ok provider.cnf dgst -sha256 -sign "$(key rsa)" -out rsa-dgst.sig data.bin
cmp -s rsa-dgst.sig rsa-sha256.sig || fail "dgst -sign and pkeyutl -rawin made different PKCS#1 v1.5 signatures"
cmp -s rsa-sha384.sig rsa-sha256.sig && fail "SHA-384 and SHA-256 signatures are equal"
out=$(plain dgst -sha256 -verify rsa.pub.pem -signature rsa-dgst.sig data.bin 2>&1)
expect_eq "$out" "Verified OK" "plain dgst -verify of the token's dgst -sign"

# --- 3. RSA-PSS -------------------------------------------------------------------------------------
pss() { printf '%s\n' -pkeyopt rsa_padding_mode:pss -pkeyopt "rsa_mgf1_md:$1" -pkeyopt "rsa_pss_saltlen:$2"; }
for case in sha256:digest:32 sha256:max:222 sha384:48:48; do
    IFS=: read -r md salt len <<<"$case"
    mapfile -t opts < <(pss "$md" "$salt")
    ok provider.cnf pkeyutl -sign -inkey "$(key rsa)" -rawin -digest "$md" "${opts[@]}" -in data.bin -out "pss-$salt.sig"
    mapfile -t opts < <(pss "$md" "$len")
    verified "RSA-PSS $md salt $salt" -pubin -inkey rsa.pub.pem -rawin -digest "$md" "${opts[@]}" -in data.bin -sigfile "pss-$salt.sig"
    mapfile -t opts < <(pss "$md" $((len - 1)))
    refused "RSA-PSS $md salt $salt checked with salt length $((len - 1))" -pubin -inkey rsa.pub.pem -rawin -digest "$md" "${opts[@]}" \
        -in data.bin -sigfile "pss-$salt.sig"
done
ok provider.cnf dgst -sha512 -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:64 -sign "$(key rsa)" -out pss-dgst.sig data.bin
out=$(plain dgst -sha512 -sigopt rsa_padding_mode:pss -sigopt rsa_pss_saltlen:64 -verify rsa.pub.pem -signature pss-dgst.sig data.bin 2>&1)
expect_eq "$out" "Verified OK" "plain dgst -verify of an RSA-PSS dgst -sign"

# --- 4. ECDSA ---------------------------------------------------------------------------------------
ok provider.cnf pkeyutl -sign -inkey "$(key p256)" -in sha256.bin -out p256-hash.sig
verified "ECDSA P-256 signature of a given hash" -pubin -inkey p256.pub.pem -in sha256.bin -sigfile p256-hash.sig
for md in sha1 sha224 sha256 sha384 sha512 sha3-256 sha3-512; do
    ok provider.cnf pkeyutl -sign -inkey "$(key p256)" -rawin -digest "$md" -in data.bin -out "p256-$md.sig"
    verified "ECDSA P-256 $md signature" -pubin -inkey p256.pub.pem -rawin -digest "$md" -in data.bin -sigfile "p256-$md.sig"
done
refused "ECDSA signature of a changed message" -pubin -inkey p256.pub.pem -rawin -digest sha256 -in changed.bin -sigfile p256-sha256.sig
refused "ECDSA signature checked with the P-384 key" -pubin -inkey p384.pub.pem -rawin -digest sha256 -in data.bin -sigfile p256-sha256.sig
ok provider.cnf pkeyutl -sign -inkey "$(key p384)" -rawin -digest sha384 -in data.bin -out p384.sig
verified "ECDSA P-384 SHA-384 signature" -pubin -inkey p384.pub.pem -rawin -digest sha384 -in data.bin -sigfile p384.sig
ok provider.cnf dgst -sha384 -sign "$(key p384)" -out p384-dgst.sig data.bin
out=$(plain dgst -sha384 -verify p384.pub.pem -signature p384-dgst.sig data.bin 2>&1)
expect_eq "$out" "Verified OK" "plain dgst -verify of an ECDSA dgst -sign"

# --- 5. Ed25519 -------------------------------------------------------------------------------------
ok provider.cnf pkeyutl -sign -inkey "$(key ed25519)" -rawin -in data.bin -out ed1.sig
expect_eq "$(called C_Sign)" 1 "C_Sign calls for an Ed25519 signature"
ok provider.cnf pkeyutl -sign -inkey "$(key ed25519)" -rawin -in data.bin -out ed2.sig
expect_eq "$(stat -c %s ed1.sig)" 64 "Ed25519 signature length"
cmp -s ed1.sig ed2.sig || fail "two Ed25519 signatures of one message differ"
verified "Ed25519 signature" -pubin -inkey ed25519.pub.pem -rawin -in data.bin -sigfile ed1.sig
refused "Ed25519 signature of a changed message" -pubin -inkey ed25519.pub.pem -rawin -in changed.bin -sigfile ed1.sig

# --- 6. RSA decryption ------------------------------------------------------------------------------
head -c 100 /dev/urandom >secret.bin
oaep() { printf '%s\n' -pkeyopt rsa_padding_mode:oaep -pkeyopt "rsa_oaep_md:$1" -pkeyopt "rsa_mgf1_md:$2" ${3:+-pkeyopt rsa_oaep_label:$3}; }
for case in pkcs1 oaep:sha1:sha1 oaep:sha256:sha256 oaep:sha256:sha256:0a1b2c3d oaep:sha256:sha1 oaep:sha512:sha512; do
    IFS=: read -r pad md mgf label <<<"$case"
    opts=()
    [ "$pad" = pkcs1 ] || mapfile -t opts < <(oaep "$md" "$mgf" "$label")
    plain pkeyutl -encrypt -pubin -inkey rsa.pub.pem "${opts[@]}" -in secret.bin -out "$case.enc" || fail "plain encrypt $case"
    rm -f "$case.dec"
    ok provider.cnf pkeyutl -decrypt -inkey "$(key rsa)" "${opts[@]}" -in "$case.enc" -out "$case.dec"
    expect_eq "$(called C_Decrypt)" 1 "C_Decrypt calls ($case)"
    cmp -s "$case.dec" secret.bin || fail "RSA decryption ($case) does not give the plaintext"
done
mapfile -t opts < <(oaep sha256 sha256 0a1b2c3e)
traced provider.cnf pkeyutl -decrypt -inkey "$(key rsa)" "${opts[@]}" -in oaep:sha256:sha256:0a1b2c3d.enc -out wrong.dec
expect_eq "$rc:$errors" "1:C_Decrypt=64 x1" "OAEP decryption under another label (CKR_ENCRYPTED_DATA_INVALID)"
expect_contains "$out" "Public Key operation error" "OAEP decryption under another label"
traced provider.cnf pkeyutl -decrypt -inkey "$(key rsa)" -pkeyopt rsa_padding_mode:oaep -in oaep:sha1:sha1.enc -out wrong.dec
expect_eq "$rc:$errors" "1:C_DecryptInit=113 x1" "OAEP with no digest named (CKR_MECHANISM_PARAM_INVALID)"
expect_contains "$out" "illegal or unsupported padding mode" "OAEP with no digest named"
plain genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out other-rsa.pem 2>/dev/null || fail "plain RSA key"
plain pkeyutl -encrypt -inkey other-rsa.pem -in secret.bin -out other.enc || fail "encrypt for another key"
traced provider.cnf pkeyutl -decrypt -inkey "$(key rsa)" -in other.enc -out wrong.dec
expect_eq "$rc" 1 "decrypting another key's ciphertext"
expect_contains "$out" "Public Key operation error" "decrypting another key's ciphertext"
[ -s wrong.dec ] && fail "decrypting another key's ciphertext wrote something"

# --- 7. public-key operations on the token --------------------------------------------------------
ok noexport.cnf pkeyutl -verify -pubin -inkey "pkcs11:token=$TOKEN;object=p256;type=public" -in sha256.bin -sigfile p256-hash.sig
expect_eq "$(called C_Verify)" 1 "C_Verify calls"
expect_eq "$out" "Signature Verified Successfully" "C_Verify of a good signature"
traced noexport.cnf pkeyutl -verify -pubin -inkey "pkcs11:token=$TOKEN;object=p256;type=public" -in "$WORK/data.bin" -rawin \
    -digest sha256 -sigfile p256-sha3-256.sig
expect_eq "$rc:$errors" "1:C_VerifyFinal=192 x1" "C_Verify of another digest's signature (CKR_SIGNATURE_INVALID)"
expect_contains "$out" "Signature Verification Failure" "C_Verify of another digest's signature"
ok noexport.cnf pkeyutl -encrypt -pubin -inkey "pkcs11:token=$TOKEN;object=rsa;type=public" -in secret.bin -out token.enc
expect_eq "$(called C_Encrypt)" 1 "C_Encrypt calls"
ok provider.cnf pkeyutl -decrypt -inkey "$(key rsa)" -in token.enc -out token.dec
cmp -s token.dec secret.bin || fail "the token's RSA encryption does not decrypt to the plaintext"

# --- 8. ECDH ----------------------------------------------------------------------------------------
for curve in P-256:p256 P-384:p384; do
    name=${curve#*:}
    plain genpkey -algorithm EC -pkeyopt "ec_paramgen_curve:${curve%%:*}" -out "peer-$name.pem" || fail "peer key $curve"
    plain pkey -in "peer-$name.pem" -pubout -out "peer-$name.pub.pem" || fail "peer public key $curve"
    plain pkeyutl -derive -inkey "peer-$name.pem" -peerkey "$name.pub.pem" -out "ecdh-$name.peer" || fail "plain ECDH $curve"
    ok provider.cnf pkeyutl -derive -inkey "$(key "$name")" -peerkey "peer-$name.pub.pem" -out "ecdh-$name.token"
    expect_eq "$(called C_DeriveKey)" 1 "C_DeriveKey calls ($curve)"
    cmp -s "ecdh-$name.token" "ecdh-$name.peer" || fail "ECDH $curve: the token's secret differs from the peer's"
    ok provider.cnf pkeyutl -derive -inkey "peer-$name.pem" -peerkey "pkcs11:token=$TOKEN;object=$name;type=public" -out "ecdh-$name.uri"
    cmp -s "ecdh-$name.uri" "ecdh-$name.peer" || fail "ECDH $curve with the token's public-key URI as the peer"
    ok forced.cnf pkeyutl -derive -inkey "$(key "$name")" -peerkey "peer-$name.pub.pem" -out "ecdh-$name.forced"
    cmp -s "ecdh-$name.forced" "ecdh-$name.peer" || fail "ECDH $curve with the provider forced"
done
expect_eq "$(stat -c %s ecdh-p256.token):$(stat -c %s ecdh-p384.token)" "32:48" "ECDH secret lengths"
cmp -s ecdh-p256.token ecdh-p384.token && fail "the P-256 and P-384 secrets are equal"
traced provider.cnf pkeyutl -derive -inkey "$(key p256)" -peerkey peer-p384.pub.pem -out wrong.ecdh
expect_eq "$rc:$errors" "1:C_DeriveKey=113 x1" "ECDH with a peer on another curve (CKR_MECHANISM_PARAM_INVALID)"
expect_contains "$out" "Key derivation failed" "ECDH with a peer on another curve"

# --- 9. certificates and CSRs -----------------------------------------------------------------------
ok provider.cnf req -x509 -new -key "$(key rsa)" -sha256 -days 30 -subj "/CN=Scenario CA" -set_serial 0x5ce7 \
    -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign -out ca.pem
expect_eq "$(plain verify -CAfile ca.pem ca.pem 2>&1)" "ca.pem: OK" "the CA certificate"
user --write-object ca.pem --type cert --id 01 --label rsa >/dev/null 2>&1 || fail "store the CA certificate"
CA_CERT="pkcs11:token=$TOKEN;object=rsa;type=cert"
ok provider.cnf x509 -in "$CA_CERT" -outform DER -out ca.token.der
plain x509 -in ca.pem -outform DER | cmp -s - ca.token.der || fail "the certificate read from $CA_CERT is not the one stored"
for csr in rsa rsa-pss p256 p384 ed25519; do
    case $csr in
        rsa | p256) name=$csr opts=(-sha256) ;;
        rsa-pss) name=rsa opts=(-sigopt rsa_padding_mode:pss) ;;
        p384) name=p384 opts=(-sha384) ;;
        ed25519) name=ed25519 opts=() ;;
    esac
    ok provider.cnf req -new -key "$(key "$name")" "${opts[@]}" -subj "/CN=csr-$csr" -out "$csr.csr"
    out=$(plain req -in "$csr.csr" -verify -noout 2>&1) || fail "plain req -verify $csr.csr: $out"
    expect_eq "$out" "Certificate request self-signature verify OK" "plain req -verify of $csr.csr"
    plain req -in "$csr.csr" -pubkey -noout | plain pkey -pubin -outform DER | cmp -s - <(plain pkey -pubin -in "$name.pub.pem" -outform DER) ||
        fail "$csr.csr does not carry the token's $name key"
done
expect_contains "$(plain req -in rsa.csr -noout -text)" "Signature Algorithm: sha256WithRSAEncryption" "rsa.csr's algorithm"
expect_contains "$(plain req -in rsa-pss.csr -noout -text)" "Signature Algorithm: rsassaPss" "rsa-pss.csr's algorithm"
expect_contains "$(plain req -in p384.csr -noout -text)" "Signature Algorithm: ecdsa-with-SHA384" "p384.csr's algorithm"
expect_contains "$(plain req -in ed25519.csr -noout -text)" "Signature Algorithm: ED25519" "ed25519.csr's algorithm"
plain req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout stranger.key -subj "/CN=Scenario CA" -days 2 \
    -out stranger.pem 2>/dev/null || fail "another CA of the same name"
serialno=16
for csr in p256 ed25519 rsa-pss; do
    serialno=$((serialno + 1))
    ok provider.cnf x509 -req -in "$csr.csr" -CA "$CA_CERT" -CAkey "$(key rsa)" -set_serial "$serialno" -days 2 -sha256 -out "$csr.crt"
    expect_eq "$(plain verify -CAfile ca.pem "$csr.crt" 2>&1)" "$csr.crt: OK" "chain of $csr.crt"
    expect_eq "$(plain x509 -in "$csr.crt" -noout -issuer -subject -serial)" "issuer=CN = Scenario CA
subject=CN = csr-$csr
serial=$(printf '%02X' "$serialno")" "issuer, subject and serial of $csr.crt"
    out=$(plain verify -CAfile stranger.pem "$csr.crt" 2>&1) && fail "$csr.crt verified under another CA"
    expect_contains "$out" "error 20 at 0 depth lookup: unable to get local issuer certificate" "$csr.crt under another CA of the same name"
done
storeutl_found() { traced provider.cnf storeutl "$@"; printf '%s\n' "$out" | sed -n 's/^Total found: //p'; }
expect_eq "$(storeutl_found -certs -subject "/CN=Scenario CA" "pkcs11:token=$TOKEN")" 1 "certificates by subject"
expect_eq "$(storeutl_found -certs -subject "/CN=nobody" "pkcs11:token=$TOKEN")" 0 "certificates of another subject"
expect_eq "$(storeutl_found -certs -issuer "/CN=Scenario CA" -serial 0x5ce7 "pkcs11:token=$TOKEN")" 1 "certificates by issuer and serial"
expect_eq "$(storeutl_found -certs -issuer "/CN=Scenario CA" -serial 0x5ce8 "pkcs11:token=$TOKEN")" 0 "certificates by another serial"

# --- 10. storeutl listings and URI forms ------------------------------------------------------------
# scen: 5 key pairs and the CA certificate; scen-other: 1 key pair.
for case in "pkcs11:token=$TOKEN=11" "pkcs11:=13" "pkcs11:token=$TOKEN;type=private=5" "pkcs11:token=$TOKEN;type=public=5" \
    "pkcs11:token=$TOKEN;type=cert=1" "pkcs11:token=$TOKEN;object=rsa=3" "pkcs11:object=p256=4" "pkcs11:token=$OTHER;object=p256=2" \
    "pkcs11:id=%02=4" "pkcs11:token=$TOKEN;id=%02;type=private=1" "pkcs11:id=%0a%0b=2" "pkcs11:object=$ODD_ENC=2" \
    "pkcs11:object=$ODD_ENC;type=public=1" "pkcs11:serial=$serial=11" "pkcs11:serial=0000000000000000=0" \
    "pkcs11:slot-id=$slot=11" "pkcs11:slot-id=$other_slot=2" "pkcs11:model=Keychain;manufacturer=Keychain%20PKCS%2311;token=$OTHER=2" \
    "pkcs11:manufacturer=Keychain;token=$TOKEN=0" "pkcs11:token=nosuch=0" "pkcs11:object=web%20key=0"; do
    expect_eq "$(storeutl_found "${case%=*}")" "${case##*=}" "storeutl ${case%=*}"
done
expect_eq "$(storeutl_found -keys "pkcs11:token=$TOKEN")" 5 "storeutl -keys"
expect_eq "$(storeutl_found -certs "pkcs11:")" 1 "storeutl -certs"
ok provider.cnf storeutl -text "pkcs11:token=$TOKEN;type=private"
uris=$(printf '%s\n' "$out" | sed -n 's/^URI //p' | sort)
base="pkcs11:model=Keychain;manufacturer=Keychain%20PKCS%2311;serial=$serial;token=$TOKEN"
expect_eq "$uris" "$base;id=%01;object=rsa;type=private
$base;id=%02;object=p256;type=private
$base;id=%03;object=ed25519;type=private
$base;id=%04;object=p384;type=private
$base;id=%0A%0B;object=$ODD_ENC;type=private" "URIs storeutl prints"
while read -r uri; do
    ok provider.cnf storeutl -text "$uri"
    expect_eq "$(printf '%s\n' "$out" | sed -n 's/^URI //p;s/^Total found: /found /p')" "$uri
found 1" "storeutl of its own URI"
done <<<"$uris"
ok nopin.cnf pkeyutl -sign -inkey "$(key p256)?pin-value=$PIN" -rawin -digest sha256 -in data.bin -out pinvalue.sig
verified "signature with ?pin-value=" -pubin -inkey p256.pub.pem -rawin -digest sha256 -in data.bin -sigfile pinvalue.sig
ok nopin.cnf pkeyutl -sign -inkey "$(key p256)?pin-source=file:$WORK/pin.txt" -rawin -digest sha256 -in data.bin -out pinsource.sig
verified "signature with ?pin-source=file:" -pubin -inkey p256.pub.pem -rawin -digest sha256 -in data.bin -sigfile pinsource.sig

# --- 11. key generation through the provider ----------------------------------------------------
for name in ec rsa ed; do
    case $name in
        ec) alg=EC id=c1 kind=EC genopts=(-pkeyopt ec_paramgen_curve:P-256) sigopts=(-digest sha256) ;;
        rsa) alg=RSA id=c2 kind=RSA genopts=(-pkeyopt rsa_keygen_bits:2048) sigopts=(-digest sha256) ;;
        ed) alg=ED25519 id=c3 kind=EC_EDWARDS genopts=() sigopts=() ;;
    esac
    ok uripem.cnf genpkey -propquery '?provider=pkcs11' -algorithm "$alg" "${genopts[@]}" -pkeyopt "pkcs11_uri:pkcs11:object=gen-$name;id=%$id" \
        -out "gen-$name.pem"
    expect_eq "$(called C_GenerateKeyPair)" 1 "C_GenerateKeyPair calls for $alg"
    expect_eq "$(head -n 1 "gen-$name.pem")" "-----BEGIN PKCS#11 PROVIDER URI-----" "genpkey's $alg PEM"
    expect_eq "$(plain asn1parse -in "gen-$name.pem" | sed -n 's/.*UTF8STRING *://p')" \
        "$base;id=%$(printf '%s' "$id" | tr a-f A-F);object=gen-$name;type=private" "the URI in genpkey's $alg PEM"
    # pkcs11-tool's lines for the private key: its kind, label, ID, usage and access.
    objects=$(user --list-objects --type privkey 2>/dev/null | awk -v l="gen-$name" '/^Private Key Object/ { k = $0; sub(/ +$/, "", k) }
        $1 == "label:" && $2 == l { print k; for (i = 0; i < 3; i++) { getline; print } }')
    expect_eq "$(printf '%s\n' "$objects" | sed -n '1p;2p;4p')" "Private Key Object; $kind
  ID:         $id
  Access:     sensitive, always sensitive, never extractable, local" "the generated $alg private key"
    export_pub "gen-$name" "pkcs11:token=$TOKEN;object=gen-$name;type=public"
    ok uripem.cnf pkeyutl -sign -inkey "gen-$name.pem" -rawin "${sigopts[@]}" -in data.bin -out "gen-$name.sig"
    verified "signature by the generated $alg key" -pubin -inkey "gen-$name.pub.pem" -rawin "${sigopts[@]}" -in data.bin -sigfile "gen-$name.sig"
done
expect_contains "$(plain pkey -pubin -in gen-rsa.pub.pem -noout -text)" "Public-Key: (2048 bit)" "the generated RSA key's size"
expect_eq "$(storeutl_found "pkcs11:token=$TOKEN")" 17 "objects after three key pairs generated"
expect_eq "$(storeutl_found "pkcs11:id=%c3")" 2 "the generated Ed25519 pair by ID"

# --- 12. digests, random bytes, HKDF -------------------------------------------------------------
for md in sha1 sha224 sha256 sha384 sha512 sha3-224 sha3-256 sha3-384 sha3-512; do
    ok early.cnf dgst "-$md" -propquery provider=pkcs11 -r data.bin
    expect_eq "$(called C_DigestFinal)" 1 "C_DigestFinal calls ($md)"
    expect_eq "$out" "$(plain dgst "-$md" -r data.bin)" "$md digest by the token"
done
ok rand.cnf rand -hex 32
expect_eq "$(printf '%s' "$out" | tr -d '\n' | grep -c -x '[0-9a-f]\{64\}')" 1 "rand -hex 32 through PKCS11-RAND: $out"
# Two calls: the provider tries C_GenerateRandom when it loads, then asks for the 32 bytes.
expect_eq "$(called C_GenerateRandom)" 2 "C_GenerateRandom calls"
first=$out
ok rand.cnf rand -hex 32
[ "$out" != "$first" ] || fail "two runs of rand -hex 32 gave the same bytes"
traced randlazy.cnf rand -hex 32
expect_eq "$rc" 1 "PKCS11-RAND without early load"
expect_contains "$out" "unable to fetch drbg" "PKCS11-RAND without early load"
hkdf=(-kdf HKDF -kdflen 48 -pkeyopt md:SHA256 -pkeyopt mode:EXTRACT_AND_EXPAND -pkeyopt hexkey:000102030405060708090a0b0c
    -pkeyopt hexsalt:f0f1f2f3 -pkeyopt hexinfo:e0e1)
plain pkeyutl -derive "${hkdf[@]}" -out hkdf.plain || fail "plain HKDF"
traced early.cnf pkeyutl -derive "${hkdf[@]}" -propquery provider=pkcs11 -out hkdf.token
expect_eq "$rc:$errors" "1:C_CreateObject=257 x1" "HKDF through the provider, not logged in (CKR_USER_NOT_LOGGED_IN)"

# --- 13. errors -------------------------------------------------------------------------------------
traced nopin.cnf pkeyutl -sign -inkey "$(key p256)?pin-value=654321" -in sha256.bin -out wrongpin.sig
expect_eq "$rc:$errors:$(called C_Login)" "1:C_Login=160 x1:1" "a wrong PIN in the URI (one C_Login, CKR_PIN_INCORRECT)"
expect_contains "$out" "Could not read private key from $(key p256)?pin-value=654321" "a wrong PIN in the URI"
expect_contains "$(kc info -k "$TOKEN" 2>&1)" "User PIN       count low, 1 of 10 failed tries" "the wrong PIN counted"
ok nopin.cnf pkeyutl -sign -inkey "$(key p256)?pin-value=$PIN" -in sha256.bin -out rightpin.sig
expect_contains "$(kc info -k "$TOKEN" 2>&1)" "User PIN       ok, 0 of 10 failed tries" "the right PIN clears the count"
traced provider.cnf pkey -in "pkcs11:token=$TOKEN;object=nosuch" -pubout
expect_eq "$rc:$errors" "1:" "a URI that matches nothing"
expect_contains "$out" "Could not read key from pkcs11:token=$TOKEN;object=nosuch" "a URI that matches nothing"
traced provider.cnf pkeyutl -encrypt -pubin -inkey "$(key rsa)" -in secret.bin -out wrong.enc
expect_eq "$rc" 1 "encryption given a private-key URI"
expect_contains "$out" "Could not read public key from $(key rsa)" "encryption given a private-key URI"
traced provider.cnf pkeyutl -sign -inkey "pkcs11:token=$TOKEN;object=p256;type=public" -in sha256.bin -out wrong.sig
expect_eq "$rc" 1 "signature given a public-key URI"
expect_contains "$out" "Could not read private key from pkcs11:token=$TOKEN;object=p256;type=public" "signature given a public-key URI"
echo "openssl provider scenarios: all passed"
