# TLS and fork() with keys on the token through pkcs11-provider 1.0 (the other scenarios:
# test_openssl_provider_scenarios.sh). An openssl s_server holds the token key; a plain s_client
# (no provider) trusts only the server's certificate and prints what was negotiated; the
# provider's trace of the server (PKCS11_PROVIDER_DEBUG) shows the token made the signature, or
# the decryption, and that the module returned no error. Scenarios:
#  1. TLS 1.2, ECDSA P-256 (ECDHE-ECDSA): "Peer signature type: ECDSA", SHA256;
#  2. TLS 1.2, RSA PKCS#1 v1.5 (the client offers RSA+SHA256 only): "Peer signature type: RSA";
#  3. TLS 1.2, RSA-PSS (the client offers rsa_pss_rsae_sha384 only): RSA-PSS, SHA384;
#  4. TLS 1.2, RSA key exchange (AES128-GCM-SHA256): the token decrypts the client's premaster
#     secret (one C_Decrypt, no signature);
#  5. TLS 1.3, RSA-PSS, the server's certificate read from the token by its URI (-cert pkcs11:);
#  6. TLS 1.3, ECDSA (ecdsa_secp256r1_sha256) and 7. TLS 1.3, Ed25519;
#  8. TLS 1.3 with a client that offers RSA PKCS#1 only: no handshake ("no suitable signature
#     algorithm"), the token not asked to sign;
#  9. client authentication at TLS 1.2: s_client with the token's ECDSA key, then its RSA key
#     with the server asking for RSA+SHA256, accepted by a plain s_server that verifies them;
# 10. a server that does everything on the token (s_server -propquery '?provider=pkcs11',
#     digests left to OpenSSL): the ephemeral P-256 key made by C_GenerateKeyPair, ECDH and the
#     TLS 1.3 key schedule (HKDF) by C_DeriveKey;
# 11. fork (Tests/c-host/provider-fork.c): a key loaded once by the parent, through OSSL_STORE
#     from its URI (ECDSA, RSA, Ed25519) or from a PKCS#11 PROVIDER URI PEM file read by
#     PEM_read_bio_PrivateKey; children forked in a loop sign with it and the parent verifies
#     their signatures with OpenSSL's default provider, the parent signing between forks; a
#     signature begun before fork cannot be finished by the child and is by the parent; again
#     with pkcs11-module-cache-keys = false.
. "$HERE/lib.sh"
. "$HERE/servers.sh"
. "$HERE/provider.sh"

PIN=123456
TOKEN=scentls
new_keychain "$TOKEN" 87654321 "$PIN"
slot=$(slot_of "$TOKEN")
[ -n "$slot" ] || fail "no slot for keychain $TOKEN"
user() { p11 --slot "$slot" --login --pin "$PIN" "$@"; }
cd "$WORK" || fail "cd $WORK"

user --keypairgen --key-type rsa:2048 --id 01 --label rsa >/dev/null 2>&1 || fail "generate RSA key"
user --keypairgen --key-type EC:prime256v1 --id 02 --label p256 >/dev/null 2>&1 || fail "generate P-256 key"
out=$(KEYCHAIN_PKCS11_PIN=$PIN kc generate-key -k "$TOKEN" --type ed25519 --label ed25519 --id 03 2>&1) ||
    fail "keychainctl generate-key --type ed25519: $out"
key() { echo "pkcs11:token=$TOKEN;object=$1;type=private"; }

printf '%s\n' "$PIN" >pin.txt || fail "write pin.txt"
provider_cnf "pkcs11-module-token-pin = file:$WORK/pin.txt" >provider.cnf || fail "write provider.cnf"
provider_cnf "pkcs11-module-token-pin = file:$WORK/pin.txt" "pkcs11-module-block-operations = digest" >ontoken.cnf ||
    fail "write ontoken.cnf"
provider_cnf "pkcs11-module-token-pin = file:$WORK/pin.txt" "pkcs11-module-encode-provider-uri-to-pem = true" >uripem.cnf ||
    fail "write uripem.cnf"
provider_cnf "pkcs11-module-token-pin = file:$WORK/pin.txt" "pkcs11-module-cache-keys = false" >nocache.cnf || fail "write nocache.cnf"
prov() { OPENSSL_CONF="$WORK/provider.cnf" timeout 30 openssl "$@"; }
plain() { OPENSSL_CONF=/dev/null timeout 30 openssl "$@"; }

for name in rsa p256 ed25519; do
    GNUTLS_PIN=$PIN p11tool --provider "$MODULE" --login --export-pubkey "pkcs11:token=$TOKEN;object=$name;type=public" \
        --outfile "$name.pub.pem" >/dev/null 2>&1 && [ -s "$name.pub.pem" ] || fail "p11tool --export-pubkey $name"
    out=$(prov req -x509 -new -key "$(key "$name")" -days 2 -subj "/CN=tls-$name" -addext "subjectAltName=IP:127.0.0.1" \
        -out "$name.pem" 2>&1) || fail "openssl req -x509 with the $name key: $out"
done
user --write-object rsa.pem --type cert --id 01 --label rsa >/dev/null 2>&1 || fail "store rsa.pem on the token"

server=
trap 'stop_pid "$server"' EXIT
# handshake CONFIG KEY CERT CAFILE: an s_server (config CONFIG, the token's KEY, the certificate
# CERT, file or URI, and the server options in the array sopts) answers one plain s_client
# (options in copts) that trusts CAFILE; sets out (s_client's output and exit status), slog (the
# server's output), calls and errors (trace_calls, trace_errors of the server's provider trace)
# and signs (the token's C_Sign and C_SignFinal calls).
handshake() {
    local port rc
    port=$(free_port)
    [ -n "$port" ] || fail "no free port"
    rm -f server.trace
    : >server.log
    OPENSSL_CONF="$WORK/$1" PKCS11_PROVIDER_DEBUG="file:$WORK/server.trace" timeout 60 openssl s_server -key "$2" -cert "$3" \
        -accept "127.0.0.1:$port" -naccept 1 -www "${sopts[@]}" </dev/null >server.log 2>&1 &
    server=$!
    wait_for_log server.log ACCEPT "$server" 20
    out=$(printf 'GET / HTTP/1.0\r\n\r\n' | plain s_client -connect "127.0.0.1:$port" -CAfile "$4" -verify_return_error \
        -verify_ip 127.0.0.1 -ign_eof "${copts[@]}" 2>&1)
    rc=$?
    wait "$server" 2>/dev/null
    server=
    slog=$(cat server.log)
    out="$out
s_client exit $rc"
    calls=$(trace_calls server.trace)
    errors=$(trace_errors server.trace)
    signs=$(($(count_of "$calls" C_Sign) + $(count_of "$calls" C_SignFinal)))
}
# expect_session WHAT PROTOCOL CIPHER [SIGNATURE-TYPE DIGEST]: the last handshake succeeded with
# these, and the token made exactly one signature (none without SIGNATURE-TYPE) with no error.
expect_session() {
    expect_contains "$out" "s_client exit 0" "$1: s_client (server log: $slog)"
    expect_contains "$out" "Verify return code: 0 (ok)" "$1: certificate verified by s_client"
    expect_contains "$out" "HTTP/1.0 200 ok" "$1: s_server -www page"
    expect_contains "$out" "Protocol  : $2" "$1: protocol"
    expect_contains "$out" "Cipher is $3" "$1: cipher"
    expect_eq "$errors" "" "$1: module errors in the server"
    if [ -n "${4:-}" ]; then
        expect_contains "$out" $'\n'"Peer signature type: $4"$'\n' "$1: signature type"
        [ -z "${5:-}" ] || expect_contains "$out" $'\n'"Peer signing digest: $5"$'\n' "$1: signature digest"
        expect_eq "$signs" 1 "$1: signatures by the token"
    else
        expect_not_contains "$out" "Peer signature type" "$1: signature type"
        expect_eq "$signs" 0 "$1: signatures by the token"
    fi
}

# --- 1.-4. TLS 1.2 ----------------------------------------------------------------------------------
sopts=() copts=(-tls1_2)
handshake provider.cnf "$(key p256)" p256.pem p256.pem
expect_session "TLS 1.2 ECDSA" TLSv1.2 ECDHE-ECDSA-AES256-GCM-SHA384 ECDSA SHA256
copts=(-tls1_2 -sigalgs RSA+SHA256)
handshake provider.cnf "$(key rsa)" rsa.pem rsa.pem
expect_session "TLS 1.2 RSA PKCS#1" TLSv1.2 ECDHE-RSA-AES256-GCM-SHA384 RSA SHA256
expect_not_contains "$out" "RSA-PSS" "TLS 1.2 RSA PKCS#1: signature type"
copts=(-tls1_2 -sigalgs rsa_pss_rsae_sha384)
handshake provider.cnf "$(key rsa)" rsa.pem rsa.pem
expect_session "TLS 1.2 RSA-PSS" TLSv1.2 ECDHE-RSA-AES256-GCM-SHA384 RSA-PSS SHA384
copts=(-tls1_2 -cipher AES128-GCM-SHA256)
handshake provider.cnf "$(key rsa)" rsa.pem rsa.pem
expect_session "TLS 1.2 RSA key exchange" TLSv1.2 AES128-GCM-SHA256
expect_eq "$(count_of "$calls" C_DecryptInit):$(count_of "$calls" C_Decrypt)" "1:1" "TLS 1.2 RSA key exchange: decryptions by the token"

# --- 5.-8. TLS 1.3 ----------------------------------------------------------------------------------
copts=(-tls1_3)
handshake provider.cnf "$(key rsa)" "pkcs11:token=$TOKEN;object=rsa;type=cert" rsa.pem
expect_session "TLS 1.3 RSA-PSS, certificate from the token" TLSv1.3 TLS_AES_256_GCM_SHA384 RSA-PSS SHA256
expect_contains "$out" "subject=CN = tls-rsa" "TLS 1.3 RSA-PSS: the certificate sent"
copts=(-tls1_3 -sigalgs ecdsa_secp256r1_sha256)
handshake provider.cnf "$(key p256)" p256.pem p256.pem
expect_session "TLS 1.3 ECDSA" TLSv1.3 TLS_AES_256_GCM_SHA384 ECDSA SHA256
copts=(-tls1_3 -sigalgs ed25519)
handshake provider.cnf "$(key ed25519)" ed25519.pem ed25519.pem
expect_session "TLS 1.3 Ed25519" TLSv1.3 TLS_AES_256_GCM_SHA384 ed25519
copts=(-tls1_3 -sigalgs rsa_pkcs1_sha256)
handshake provider.cnf "$(key rsa)" rsa.pem rsa.pem
expect_not_contains "$out" "s_client exit 0" "TLS 1.3 with RSA PKCS#1 only"
expect_contains "$out" "alert handshake failure" "TLS 1.3 with RSA PKCS#1 only: the client's alert"
expect_contains "$slog" "no suitable signature algorithm" "TLS 1.3 with RSA PKCS#1 only: the server's error"
expect_contains "$slog" "0 server accepts that finished" "TLS 1.3 with RSA PKCS#1 only"
expect_eq "$signs" 0 "TLS 1.3 with RSA PKCS#1 only: signatures by the token"

# --- 9. client authentication at TLS 1.2 --------------------------------------------------------
plain req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout server.key -out server.pem -days 2 \
    -subj /CN=plain-server -addext "subjectAltName=IP:127.0.0.1" >/dev/null 2>&1 || fail "plain server certificate"
for case in p256:ECDSA rsa:RSA; do
    name=${case%%:*} kind=${case#*:}
    port=$(free_port)
    [ -n "$port" ] || fail "no free port"
    sigalgs=()
    [ "$name" = rsa ] && sigalgs=(-client_sigalgs RSA+SHA256)
    : >client.log
    plain s_server -rev -key server.key -cert server.pem -accept "127.0.0.1:$port" -tls1_2 -naccept 1 -Verify 1 \
        -CAfile "$name.pem" -verify_return_error "${sigalgs[@]}" </dev/null >client.log 2>&1 &
    server=$!
    wait_for_log client.log ACCEPT "$server" 20
    out=$(printf 'token key\nCLOSE\n' | prov s_client -connect "127.0.0.1:$port" -tls1_2 -key "$(key "$name")" -cert "$name.pem" \
        -CAfile server.pem -verify_return_error -verify_ip 127.0.0.1 -ign_eof 2>&1) || fail "s_client with the $name key: $out"
    wait "$server" 2>/dev/null
    server=
    slog=$(cat client.log)
    expect_contains "$out" "yek nekot" "echo over the TLS 1.2 connection authenticated by the $name key"
    expect_contains "$slog" "Protocol version: TLSv1.2" "TLS 1.2 client authentication ($name)"
    expect_contains "$slog" "Peer certificate: CN = tls-$name" "client certificate ($name)"
    expect_contains "$slog" $'\nSignature type: '"$kind"$'\n' "client signature type ($name)"
    expect_contains "$slog" "Verification: OK" "client certificate verified ($name)"
done

# --- 10. everything on the token --------------------------------------------------------------------
sopts=(-propquery '?provider=pkcs11') copts=(-tls1_3 -groups P-256)
handshake ontoken.cnf "$(key p256)" p256.pem p256.pem
expect_session "TLS 1.3 all on the token" TLSv1.3 TLS_AES_256_GCM_SHA384 ECDSA SHA256
expect_contains "$out" "Server Temp Key: ECDH, prime256v1, 256 bits" "TLS 1.3 all on the token: the ephemeral key"
expect_eq "$(count_of "$calls" C_GenerateKeyPair)" 1 "TLS 1.3 all on the token: ephemeral keys made by the token"
derives=$(count_of "$calls" C_DeriveKey)
[ "$derives" -ge 2 ] || fail "TLS 1.3 all on the token: $derives C_DeriveKey calls (ECDH and HKDF expected): $calls"
sopts=()

# --- 11. fork ---------------------------------------------------------------------------------------
gcc -Wall -Wextra -Werror -O1 "$HERE/../c-host/provider-fork.c" -o provider-fork -lcrypto || fail "compile provider-fork.c"
OPENSSL_CONF="$WORK/uripem.cnf" timeout 30 openssl pkey -in "$(key p256)" -out p256-uri.pem || fail "PKCS#11 PROVIDER URI PEM"
expect_eq "$(head -n 1 p256-uri.pem)" "-----BEGIN PKCS#11 PROVIDER URI-----" "the p256 key's URI PEM"
# forked KEY PUBLIC ROUNDS [CONFIG]: provider-fork's output, which must end with "done".
forked() {
    out=$(OPENSSL_CONF="$WORK/${4:-provider.cnf}" timeout 120 ./provider-fork "$1" "$2" "$3" 2>&1) ||
        fail "provider-fork $1 $3: $out"
}
# rounds_out ROUNDS: what provider-fork prints for ROUNDS forks after its first line.
rounds_out() {
    echo "parent 0: signed and verified"
    for i in $(seq "$1"); do
        echo "child $i: signature from the child verified by the parent"
        echo "parent $i: signed and verified"
    done
}
mid="begun before fork: the child could not finish it, the parent's verified"
forked "$(key p256)" p256.pub.pem 3
expect_eq "$out" "key: EC held by pkcs11
$(rounds_out 3)
$mid
done" "provider-fork with the P-256 key"
forked "$(key rsa)" rsa.pub.pem 2
expect_eq "$out" "key: RSA held by pkcs11
$(rounds_out 2)
$mid
done" "provider-fork with the RSA key"
forked "$(key ed25519)" ed25519.pub.pem 2
expect_eq "$out" "key: ED25519 held by pkcs11
$(rounds_out 2)
done" "provider-fork with the Ed25519 key"
forked p256-uri.pem p256.pub.pem 2 uripem.cnf
expect_eq "$out" "key: EC held by pkcs11
$(rounds_out 2)
$mid
done" "provider-fork with the P-256 key's URI PEM"
# Again with pkcs11-module-cache-keys = false: no copy of the key in a session (C_CopyObject).
# With the copy each child above waits 1 s: pkcs11-provider 1.0, refreshing the key after fork
# while it holds the login session, asks for that session again and waits out a 1 s timeout.
forked "$(key p256)" p256.pub.pem 5 nocache.cnf
expect_eq "$out" "key: EC held by pkcs11
$(rounds_out 5)
$mid
done" "provider-fork with the P-256 key, keys not cached"
# The verification is real: the P-256 key's signatures do not verify as the RSA key's.
out=$(OPENSSL_CONF="$WORK/provider.cnf" timeout 60 ./provider-fork "$(key p256)" rsa.pub.pem 1 2>&1) &&
    fail "provider-fork verified P-256 signatures with the RSA public key: $out"
expect_contains "$out" "FAIL: a parent's signature does not verify" "provider-fork with the wrong public key"
echo "openssl provider TLS and fork scenarios: all passed"
