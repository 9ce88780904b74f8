# OpenSSL through the pkcs11 engine (Debian libengine-pkcs11-openssl, libp11 0.4.12), loaded by an
# OpenSSL config file with MODULE_PATH set to the module; the PIN is given in the key URI
# (pin-value). With an RSA-2048 and an EC P-256 key generated on the token by pkcs11-tool: a CSR
# and a self-signed certificate signed by each key, both carrying the token's public key and
# verified by plain openssl (without the engine); an openssl s_server whose key is the token key
# completes a TLS 1.3 handshake with an openssl s_client that trusts only the self-signed
# certificate, and refuses a client that trusts the other key's certificate.
# Client quirk: libp11 0.4.12 crashes enumerating a token that holds an Ed25519 key, so this
# token has none.
. "$HERE/lib.sh"
. "$HERE/servers.sh"

PIN=123456
TOKEN=osslkeys
new_keychain "$TOKEN" 87654321 "$PIN"
slot=$(slot_of "$TOKEN")
[ -n "$slot" ] || fail "no slot for keychain $TOKEN"
user() { p11 --slot "$slot" --login --pin "$PIN" "$@"; }
cd "$WORK" || fail "cd $WORK"

user --keypairgen --key-type rsa:2048 --id e1 --label ossl-rsa >/dev/null 2>&1 || fail "generate RSA key"
user --keypairgen --key-type EC:prime256v1 --id e2 --label ossl-p256 >/dev/null 2>&1 || fail "generate P-256 key"
for k in e1:rsa e2:p256; do
    user --read-object --type pubkey --id "${k%%:*}" -o "${k#*:}.token.der" >/dev/null 2>&1 || fail "read public key ${k%%:*}"
    openssl pkey -pubin -inform DER -in "${k#*:}.token.der" -outform DER -out "${k#*:}.pub.der" || fail "public key ${k%%:*}"
done

enginesdir=$(openssl version -e | sed -n 's/^ENGINESDIR: "\(.*\)"$/\1/p')
[ -f "$enginesdir/pkcs11.so" ] || fail "no pkcs11 engine in [$enginesdir]"
cat >engine.cnf <<EOF || fail "write engine.cnf"
openssl_conf = openssl_init

[openssl_init]
engines = engine_section

[engine_section]
pkcs11 = pkcs11_section

[pkcs11_section]
engine_id = pkcs11
dynamic_path = $enginesdir/pkcs11.so
MODULE_PATH = $MODULE
init = 0

[req]
distinguished_name = req_dn
prompt = no

[req_dn]
CN = unused
EOF
# Plain openssl (verification, the TLS client) runs with an empty config: no engine loaded.
: >plain.cnf
eng() { OPENSSL_CONF="$WORK/engine.cnf" timeout 30 openssl "$@"; }
plain() { OPENSSL_CONF="$WORK/plain.cnf" timeout 30 openssl "$@"; }
key_uri() { echo "pkcs11:token=$TOKEN;object=$1;type=private;pin-value=$PIN"; }

# pubkey_of KIND FILE: the DER SubjectPublicKeyInfo of a CSR (req) or certificate (x509).
pubkey_of() { plain "$1" -in "$2" -noout -pubkey | plain pkey -pubin -outform DER; }

for k in rsa:ossl-rsa p256:ossl-p256; do
    name=${k%%:*} label=${k#*:}
    # --- CSR ----------------------------------------------------------------------------------
    out=$(eng req -new -engine pkcs11 -keyform engine -key "$(key_uri "$label")" -sha256 \
        -subj "/CN=$label csr" -out "$name.csr" 2>&1) || fail "openssl req -new with $label: $out"
    out=$(plain req -in "$name.csr" -noout -verify 2>&1) || fail "openssl req -verify $name.csr: $out"
    expect_eq "$out" "Certificate request self-signature verify OK" "CSR signed by $label"
    expect_eq "$(plain req -in "$name.csr" -noout -subject)" "subject=CN = $label csr" "CSR subject ($label)"
    pubkey_of req "$name.csr" >"$name.csr.pub.der" || fail "public key of $name.csr"
    cmp -s "$name.csr.pub.der" "$name.pub.der" || fail "the CSR's public key is not the token's $label public key"

    # --- self-signed certificate --------------------------------------------------------------
    out=$(eng req -x509 -new -engine pkcs11 -keyform engine -key "$(key_uri "$label")" -sha256 -days 2 \
        -subj "/CN=$label" -addext "subjectAltName=IP:127.0.0.1" -out "$name.pem" 2>&1) ||
        fail "openssl req -x509 with $label: $out"
    out=$(plain verify -CAfile "$name.pem" "$name.pem" 2>&1) || fail "openssl verify $name.pem: $out"
    expect_eq "$out" "$name.pem: OK" "self-signed certificate from $label"
    out=$(plain x509 -in "$name.pem" -noout -subject -issuer)
    expect_eq "$out" "subject=CN = $label
issuer=CN = $label" "subject and issuer of the $label certificate"
    pubkey_of x509 "$name.pem" >"$name.pem.pub.der" || fail "public key of $name.pem"
    cmp -s "$name.pem.pub.der" "$name.pub.der" || fail "the certificate's public key is not the token's $label public key"
done
expect_contains "$(plain x509 -in rsa.pem -noout -text)" "Signature Algorithm: sha256WithRSAEncryption" "RSA certificate signature algorithm"
expect_contains "$(plain x509 -in p256.pem -noout -text)" "Signature Algorithm: ecdsa-with-SHA256" "P-256 certificate signature algorithm"

# Plain openssl does not accept a certificate against the other key's certificate, nor a CSR whose
# signature was altered (last byte of the DER, inside the signature).
out=$(plain verify -CAfile p256.pem rsa.pem 2>&1) && fail "rsa.pem verifies against p256.pem: $out"
plain req -in rsa.csr -outform DER -out rsa.csr.der || fail "CSR to DER"
{ head -c -1 rsa.csr.der; printf '%b' "\\x$(printf %02x $((0x$(tail -c 1 rsa.csr.der | xxd -p) ^ 1)))"; } >rsa.bad.csr.der
# (openssl 3.0 req -verify exits 0 even when the signature does not verify: the message is asserted.)
out=$(plain req -inform DER -in rsa.bad.csr.der -noout -verify 2>&1)
expect_eq "$out" "Certificate request self-signature verify failure" "openssl req -verify of a tampered CSR"

# --- TLS 1.3: s_server with the token key, plain s_client --------------------------------------
server=
trap 'stop_pid "$server"' EXIT
# tls NAME LABEL CAFILE: one handshake with a fresh s_server (key LABEL, certificate NAME.pem)
# and a plain s_client trusting CAFILE; sets out to the s_client output and its exit status.
tls() {
    local port rc
    port=$(free_port)
    [ -n "$port" ] || fail "no free port"
    : >"server-$1.log"
    eng s_server -engine pkcs11 -keyform engine -key "$(key_uri "$2")" -cert "$1.pem" \
        -accept "127.0.0.1:$port" -tls1_3 -naccept 1 -www </dev/null >"server-$1.log" 2>&1 &
    server=$!
    wait_for_log "server-$1.log" ACCEPT "$server" 20
    out=$(printf 'GET / HTTP/1.0\r\n\r\n' | plain s_client -connect "127.0.0.1:$port" -tls1_3 \
        -CAfile "$3" -verify_return_error -verify_ip 127.0.0.1 -ign_eof 2>&1)
    rc=$?
    stop_pid "$server"
    server=
    out="$out
s_client exit $rc"
}
for k in rsa:ossl-rsa p256:ossl-p256; do
    name=${k%%:*} label=${k#*:}
    tls "$name" "$label" "$name.pem"
    expect_contains "$out" "s_client exit 0" "s_client to the $label server (server log: $(cat "server-$name.log"))"
    expect_contains "$out" $'\nVerify return code: 0 (ok)\n' "certificate verification by s_client ($label)"
    expect_contains "$out" "New, TLSv1.3, Cipher is " "TLS 1.3 with $label"
    expect_contains "$out" "Protocol  : TLSv1.3" "TLS 1.3 session with $label"
    # The server proved possession of the token key in CertificateVerify; -www answers over it.
    expect_contains "$out" "HTTP/1.0 200 ok" "s_server -www page over TLS with $label"
    case $name in
        rsa)
            expect_contains "$out" "Peer signature type: RSA-PSS" "TLS 1.3 signature by the RSA key"
            expect_contains "$out" "Server public key is 2048 bit" "server key size (RSA)"
            ;;
        p256)
            expect_contains "$out" "Peer signature type: ECDSA" "TLS 1.3 signature by the P-256 key"
            expect_contains "$out" "Server public key is 256 bit" "server key size (P-256)"
            ;;
    esac
done
# A client that trusts only the other key's certificate refuses the RSA server.
tls rsa ossl-rsa p256.pem
expect_not_contains "$out" "s_client exit 0" "s_client trusting p256.pem accepted the RSA server"
expect_contains "$out" "Verify return code: 18 (self-signed certificate)" "s_client trusting the other certificate"
