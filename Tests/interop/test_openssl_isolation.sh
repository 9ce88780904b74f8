# The module's OpenSSL work stays in its own library context (issue 45; DESIGN §13). A host whose
# OPENSSL_CONF activates pkcs11-provider over this very module, in the default context beside the
# default provider, must not be re-entered: with the module decoding and importing keys in the
# host's default context, pkcs11-provider's key management took our key in C_SignInit and
# imported it into the token with C_CreateObject, signed with the copy, and so on until the
# sessions ran out (openssl crashed after ~900 nested C_SignInit; every nginx handshake failed).
# Three configurations: default provider listed first, pkcs11 first (the one that re-entered),
# and pkcs11 first with pkcs11-module-load-behavior = early.
#   forward:  openssl dgst -sign and openssl pkeyutl -sign with token keys (RSA-2048, EC P-256)
#             through the provider: exit 0, plain openssl verifies, and pkcs11-provider's debug
#             log (PKCS11_PROVIDER_DEBUG=file:...) shows no C_CreateObject, exactly one C_SignInit
#             and one C_Sign/C_SignFinal per signature. Then a TLS 1.3 handshake of an openssl
#             s_server with the P-256 key (what nginx does), default provider first: with pkcs11
#             first the host's own key exchange and handshake hashes go to the token too, which is
#             no server configuration (the handshake copies a digest context, and the module has
#             no C_GetOperationState for digests).
#   reverse:  pkcs11-tool loads the module itself, in a process with the same OPENSSL_CONF, and
#             signs with both keys: exit 0 (with early loading the module's C_Initialize used to
#             load the configuration under its own lock and wait for itself: a hang), plain
#             openssl verifies, and the provider log shows no C_CreateObject.
#   isolated: with an OPENSSL_CONF whose default context holds only the null provider (so any
#             OpenSSL work done there fails), pkcs11-tool logs in, generates EC and Ed25519 keys
#             and signs, and keychainctl imports a PKCS#12 bundle, an encrypted PKCS#8 key and a
#             certificate and exports a PKCS#12 bundle that plain openssl reads; with swtpm, a key
#             made in the TPM signs (tpm2-tss's session cryptography runs in the module's context).
# The token's objects are counted before and after: no object was added by the provider.
# First, statically: the module, keychainctl and keychaind import none of OpenSSL's forms that
# work in the default context (d2i_PrivateKey, EVP_sha256, RAND_bytes, PKCS12_parse…; the module
# calls their _ex forms with its own context, or does the step itself).
. "$HERE/lib.sh"
. "$HERE/servers.sh"

default_context='d2i_PrivateKey|d2i_PUBKEY|d2i_PublicKey|d2i_AutoPrivateKey|EVP_PKEY_new_raw_(private|public)_key|EVP_PKEY_CTX_new(_id)?'
default_context+='|EVP_get_(cipher|digest)by(name|nid|obj)|EVP_(md5|md5_sha1|sha[0-9_]*|shake[0-9]*|aes_[0-9a-z_]*|des_[0-9a-z_]*|chacha20[0-9a-z_]*)'
default_context+='|HMAC|RAND_(bytes|priv_bytes|add|seed)|PKCS5_PBKDF2_HMAC(_SHA1)?|EVP_PBE_scrypt|EVP_PBE_CipherInit|EVP_PKCS82PKEY'
default_context+='|PKCS12_(create|init|parse|SAFEBAG_get1_cert|unpack_p7encdata|decrypt_skey)|PKCS8_(de|en)crypt|PKCS5_pbe2_set(_iv)?'
default_context+='|EC_GROUP_new_by_curve_name|BN_CTX_(secure_)?new|EVP_Digest(Sign|Verify)Init|X509_new|SHA(1|224|256|384|512)|MD5'
for binary in "$MODULE" "$KEYCHAINCTL" "$(dirname "$KEYCHAINCTL")/keychaind"; do
    [ -f "$binary" ] || continue
    found=$(nm -D --undefined-only "$binary" | awk '{ sub(/@.*/, "", $2); print $2 }' | grep -xE "$default_context" | tr '\n' ' ')
    expect_eq "$found" "" "OpenSSL functions of the default context imported by $(basename "$binary")"
done
echo "ok: no OpenSSL function of the default context is imported"

PIN=123456
TOKEN=isolation
new_keychain "$TOKEN" 87654321 "$PIN"
slot=$(slot_of "$TOKEN")
[ -n "$slot" ] || fail "no slot for keychain $TOKEN"
cd "$WORK" || fail "cd $WORK"
modulesdir=$(openssl version -m | sed -n 's/^MODULESDIR: "\(.*\)"$/\1/p')
[ -f "$modulesdir/pkcs11.so" ] ||
    fail "no pkcs11 provider in [$modulesdir] (Debian package pkcs11-provider; scripts/install-deps.sh installs it)"

# Plain openssl and the setup's pkcs11-tool run without any configuration.
plain() { OPENSSL_CONF=/dev/null timeout 30 openssl "$@"; }
user() { OPENSSL_CONF=/dev/null p11 --slot "$slot" --login --pin "$PIN" "$@"; }
# objects: the number of objects the logged-in user sees on the token.
objects() { user -O 2>/dev/null | grep -cE '^(Private Key|Public Key|Secret Key|Certificate|Data) [Oo]bject'; }

user --keypairgen --key-type rsa:2048 --id a1 --label iso-rsa >/dev/null 2>&1 || fail "generate RSA key"
user --keypairgen --key-type EC:prime256v1 --id a2 --label iso-p256 >/dev/null 2>&1 || fail "generate P-256 key"
for k in a1:rsa a2:p256; do
    user --read-object --type pubkey --id "${k%%:*}" -o "${k#*:}.token.pub" >/dev/null 2>&1 || fail "read public key ${k%%:*}"
    plain pkey -pubin -in "${k#*:}.token.pub" -inform DER -out "${k#*:}.pub.pem" || fail "public key ${k%%:*} as PEM"
done
objects_before=$(objects)
expect_eq "$objects_before" "4" "objects on the token after the setup"

printf '%s\n' "$PIN" >pin.txt || fail "write pin.txt"
printf 'signed through pkcs11-provider\n' >data.txt
plain dgst -sha256 -binary -out data.sha256 data.txt || fail "digest of data.txt"
# cnf ORDER [EXTRA-LINE]: an OpenSSL configuration that activates the default and the pkcs11
# providers in the default context, listed in ORDER ("default pkcs11" or "pkcs11 default").
cnf() {
    printf 'openssl_conf = openssl_init\n\n[openssl_init]\nproviders = provider_sect\n\n[provider_sect]\n'
    for name in $1; do printf '%s = %s_sect\n' "$name" "$name"; done
    printf '\n[default_sect]\nactivate = 1\n\n[pkcs11_sect]\nmodule = %s/pkcs11.so\npkcs11-module-path = %s\n' "$modulesdir" "$MODULE"
    printf 'pkcs11-module-token-pin = file:%s/pin.txt\n%s\nactivate = 1\n' "$WORK" "${2:-}"
}
cnf "default pkcs11" >default-first.cnf && cnf "pkcs11 default" >pkcs11-first.cnf &&
    cnf "pkcs11 default" "pkcs11-module-load-behavior = early" >early.cnf || fail "write the configurations"
configs="default-first pkcs11-first early"

# calls LOG FUNCTION: how many times pkcs11-provider's debug log shows it calling FUNCTION (0
# when the provider never started and wrote no log).
calls() { if [ -f "$1" ]; then grep -c "Calling $2\$" "$1"; else echo 0; fi; }
# provider CONFIG LOG ARGS...: openssl with CONFIG, pkcs11-provider logging to LOG.
provider() {
    local config=$1 log=$2
    shift 2
    rm -f "$log"
    OPENSSL_CONF="$WORK/$config.cnf" PKCS11_PROVIDER_DEBUG="file:$WORK/$log,level:1" timeout 60 openssl "$@" </dev/null
}
# one_signature LOG WHAT: the log shows one signature made with no object created.
one_signature() {
    expect_eq "$(calls "$1" C_CreateObject)" "0" "C_CreateObject calls by pkcs11-provider ($2)"
    expect_eq "$(calls "$1" C_SignInit)" "1" "C_SignInit calls by pkcs11-provider ($2)"
    expect_eq "$(($(calls "$1" C_Sign) + $(calls "$1" C_SignFinal)))" "1" "C_Sign and C_SignFinal calls by pkcs11-provider ($2)"
}

# --- forward: openssl signs with token keys through pkcs11-provider -------------------------
for config in $configs; do
    for name in rsa p256; do
        uri="pkcs11:token=$TOKEN;object=iso-$name;type=private"
        what="$config, $name, dgst -sign"
        out=$(provider "$config" "dgst-$config-$name.log" dgst -sha256 -sign "$uri" -out "dgst-$config-$name.sig" data.txt 2>&1) ||
            fail "openssl dgst -sign ($what), exit $?: $(tail -n 5 <<<"$out")"
        out=$(plain dgst -sha256 -verify "$name.pub.pem" -signature "dgst-$config-$name.sig" data.txt 2>&1)
        expect_eq "$out" "Verified OK" "plain openssl verifying ($what)"
        one_signature "dgst-$config-$name.log" "$what"

        what="$config, $name, pkeyutl -sign"
        out=$(provider "$config" "pkeyutl-$config-$name.log" pkeyutl -sign -inkey "$uri" -pkeyopt digest:sha256 -in data.sha256 \
            -out "pkeyutl-$config-$name.sig" 2>&1) || fail "openssl pkeyutl -sign ($what), exit $?: $(tail -n 5 <<<"$out")"
        out=$(plain pkeyutl -verify -pubin -inkey "$name.pub.pem" -pkeyopt digest:sha256 -in data.sha256 \
            -sigfile "pkeyutl-$config-$name.sig" 2>&1)
        expect_eq "$out" "Signature Verified Successfully" "plain openssl verifying ($what)"
        one_signature "pkeyutl-$config-$name.log" "$what"
    done
    echo "ok: openssl signs through pkcs11-provider without re-entering the module ($config)"
done

# A TLS 1.3 server with the P-256 key.
uri="pkcs11:token=$TOKEN;object=iso-p256;type=private"
out=$(provider default-first req.log req -x509 -new -key "$uri" -sha256 -days 2 -subj /CN=isolation \
    -addext "subjectAltName=IP:127.0.0.1" -out server.pem 2>&1) || fail "openssl req -x509 with the token key: $out"
one_signature req.log "req -x509"
server=
trap 'stop_pid "$server"' EXIT
port=$(free_port)
[ -n "$port" ] || fail "no free port"
: >server.out
provider default-first server.log s_server -key "$uri" -cert server.pem -accept "127.0.0.1:$port" -tls1_3 -naccept 1 -www \
    >server.out 2>&1 &
server=$!
wait_for_log server.out ACCEPT "$server" 20
out=$(printf 'GET / HTTP/1.0\r\n\r\n' | plain s_client -connect "127.0.0.1:$port" -tls1_3 -CAfile server.pem \
    -verify_return_error -verify_ip 127.0.0.1 -ign_eof 2>&1) || fail "s_client to the token-key server: $out (server: $(cat server.out))"
stop_pid "$server"
server=
expect_contains "$out" "Peer signature type: ECDSA" "TLS 1.3 signature by the P-256 token key"
expect_contains "$out" "HTTP/1.0 200 ok" "s_server -www page over TLS"
one_signature server.log "s_server handshake"
echo "ok: a TLS 1.3 handshake of s_server with the token key through pkcs11-provider"

# --- reverse: the module loaded by pkcs11-tool in a process with the same configuration --------
# tool_sign CONFIG NAME MECHANISM [FORMAT...]: pkcs11-tool signs data.txt with the NAME key.
tool_sign() {
    local config=$1 name=$2 mechanism=$3 id
    shift 3
    [ "$name" = rsa ] && id=a1 || id=a2
    rm -f "tool-$config.log"
    OPENSSL_CONF="$WORK/$config.cnf" PKCS11_PROVIDER_DEBUG="file:$WORK/tool-$config.log,level:1" timeout 60 \
        pkcs11-tool --module "$MODULE" --slot "$slot" --login --pin "$PIN" --sign --id "$id" -m "$mechanism" "$@" \
        -i data.txt -o "tool-$config-$name.sig" </dev/null
}
for config in $configs null; do
    [ "$config" = null ] &&
        printf 'openssl_conf = openssl_init\n\n[openssl_init]\nproviders = provider_sect\n\n[provider_sect]\nnull = null_sect\n\n[null_sect]\nactivate = 1\n' >null.cnf
    out=$(tool_sign "$config" rsa SHA256-RSA-PKCS 2>&1) || fail "pkcs11-tool --sign with the RSA key ($config), exit $?: $out"
    out=$(plain dgst -sha256 -verify rsa.pub.pem -signature "tool-$config-rsa.sig" data.txt 2>&1)
    expect_eq "$out" "Verified OK" "plain openssl verifying pkcs11-tool's RSA signature ($config)"
    out=$(tool_sign "$config" p256 ECDSA-SHA256 --signature-format openssl 2>&1) || fail "pkcs11-tool --sign with the P-256 key ($config), exit $?: $out"
    out=$(plain dgst -sha256 -verify p256.pub.pem -signature "tool-$config-p256.sig" data.txt 2>&1)
    expect_eq "$out" "Verified OK" "plain openssl verifying pkcs11-tool's P-256 signature ($config)"
    expect_eq "$(calls "tool-$config.log" C_CreateObject)" "0" "C_CreateObject calls by pkcs11-provider inside pkcs11-tool ($config)"
    echo "ok: pkcs11-tool signs with the module in a process with the $config configuration"
done
expect_eq "$(objects)" "$objects_before" "objects on the token after signing through pkcs11-provider"

# --- isolated: nothing of the module's runs in the host's default context ----------------------
isolated() { OPENSSL_CONF="$WORK/null.cnf" timeout 120 "$@" </dev/null; }
out=$(isolated pkcs11-tool --module "$MODULE" --slot "$slot" --login --pin "$PIN" --keypairgen --key-type EC:secp384r1 \
    --id b1 --label iso-p384 2>&1) || fail "pkcs11-tool --keypairgen EC P-384 with only the null provider in the default context: $out"
out=$(isolated pkcs11-tool --module "$MODULE" --slot "$slot" --login --pin "$PIN" --keypairgen --key-type EC:edwards25519 \
    --id b2 --label iso-ed25519 2>&1) || fail "pkcs11-tool --keypairgen Ed25519 with only the null provider: $out"
out=$(isolated pkcs11-tool --module "$MODULE" --slot "$slot" --login --pin "$PIN" --sign --id b2 -m EDDSA -i data.txt -o ed.sig 2>&1) ||
    fail "pkcs11-tool --sign EdDSA with only the null provider: $out"
user --read-object --type pubkey --id b2 -o ed.pub >/dev/null 2>&1 || fail "read the Ed25519 public key"
plain pkey -pubin -in ed.pub -out ed.pub.pem 2>/dev/null || plain pkey -pubin -inform DER -in ed.pub -out ed.pub.pem ||
    fail "the Ed25519 public key as PEM"
out=$(plain pkeyutl -verify -pubin -inkey ed.pub.pem -rawin -in data.txt -sigfile ed.sig 2>&1)
expect_eq "$out" "Signature Verified Successfully" "plain openssl verifying the Ed25519 signature"
echo "ok: pkcs11-tool generates and signs with only the null provider in the default context"

# keychainctl: the files keys travel in, read and written in the module's context only.
printf '%s\n' "$PIN" >user.pin && printf '%s\n' bundle-pass >bundle.pass || fail "write pass files"
plain req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout bundle.key -out bundle.pem -days 2 -subj /CN=bundle \
    >/dev/null 2>&1 || fail "plain bundle key and certificate"
plain pkcs12 -export -inkey bundle.key -in bundle.pem -name bundle -passout pass:bundle-pass -out bundle.p12 || fail "plain pkcs12 -export"
plain genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -aes-256-cbc -pass pass:bundle-pass -out enc.pem 2>/dev/null ||
    fail "plain encrypted PKCS#8"
plain req -x509 -new -key bundle.key -subj /CN=lone -days 2 -out lone.pem || fail "plain certificate"
out=$(isolated "$KEYCHAINCTL" import bundle.p12 -k "$TOKEN" --passphrase-file bundle.pass --pin-file user.pin 2>&1) ||
    fail "keychainctl import of a PKCS#12 bundle with only the null provider: $out"
out=$(isolated "$KEYCHAINCTL" import enc.pem -k "$TOKEN" --label iso-enc --extractable --passphrase-file bundle.pass --pin-file user.pin 2>&1) ||
    fail "keychainctl import of an encrypted PKCS#8 key with only the null provider: $out"
out=$(isolated "$KEYCHAINCTL" import lone.pem -k "$TOKEN" --pin-file user.pin 2>&1) ||
    fail "keychainctl import of a certificate with only the null provider: $out"
out=$(isolated "$KEYCHAINCTL" export "pkcs11:token=$TOKEN;object=iso-enc;type=private" --format pkcs12 -o back.p12 \
    --passphrase-file bundle.pass --pin-file user.pin 2>&1) || fail "keychainctl export as PKCS#12 with only the null provider: $out"
out=$(plain pkcs12 -in back.p12 -passin pass:bundle-pass -nocerts -nodes 2>&1) || fail "plain openssl reading the exported bundle: $out"
expect_contains "$out" "BEGIN PRIVATE KEY" "the key in the exported PKCS#12 bundle"
echo "ok: keychainctl imports and exports key files with only the null provider in the default context"

# The TPM: tpm2-tss 3.2 does its session cryptography (salt, HMACs, parameter encryption) in the
# default context; the module makes its own context the thread's default around each command.
if command -v swtpm >/dev/null 2>&1; then
    start_swtpm "$WORK/tpm"
    trap 'stop_pid "$server"; stop_swtpms' EXIT
    out=$(KEYCHAIN_PKCS11_TCTI=$tcti isolated "$KEYCHAINCTL" generate-key -k "$TOKEN" --type ec --tpm --label iso-tpm --id c1 \
        --pin-file user.pin 2>&1) || fail "keychainctl generate-key --tpm with only the null provider: $out"
    out=$(KEYCHAIN_PKCS11_TCTI=$tcti isolated pkcs11-tool --module "$MODULE" --slot "$slot" --login --pin "$PIN" --sign --id c1 \
        -m ECDSA-SHA256 --signature-format openssl -i data.txt -o tpm.sig 2>&1) || fail "pkcs11-tool --sign with the TPM key, only the null provider: $out"
    KEYCHAIN_PKCS11_TCTI=$tcti user --read-object --type pubkey --id c1 -o tpm.pub >/dev/null 2>&1 || fail "read the TPM key's public key"
    plain pkey -pubin -inform DER -in tpm.pub -out tpm.pub.pem || fail "the TPM key's public key as PEM"
    out=$(plain dgst -sha256 -verify tpm.pub.pem -signature tpm.sig data.txt 2>&1)
    expect_eq "$out" "Verified OK" "plain openssl verifying the TPM key's signature"
    stop_swtpms
    echo "ok: a key made in the TPM and its signature with only the null provider in the default context"
else
    echo "skip: swtpm is missing (scripts/install-deps.sh installs it); the TPM part is untested"
fi
echo "openssl_isolation: all checks passed"
