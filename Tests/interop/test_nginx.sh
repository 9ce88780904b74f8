# Debian's nginx serving TLS with its keys in a keychain, through OpenSSL 3 and Debian's
# pkcs11-provider, configured by `keychainctl tls-config` and started unattended (the PIN as a
# systemd credential sealed with systemd-creds, decrypted as systemd decrypts it for the service).
# A root master, two workers running as www-data (the keychain folder belongs to www-data; the
# master trusts it through KEYCHAIN_PKCS11_SERVICE_USER), an ECDSA P-256 and an RSA-2048 key, each
# at TLS 1.3 and 1.2. A C client (Tests/c-host/tls-load.c) makes full handshakes from several
# threads, verifies the certificate and checks each answer; every step requires zero failed
# handshakes: concurrent load across both workers; `nginx -s reload` under load (new workers, old
# ones draining); a worker killed with SIGKILL and replaced; another key added and the PIN changed
# under the running server; `keychainctl lock` (keychaind's sessions, not the server's login).
# Then the starts that must stop: `keychainctl check-pin` (the drop-in's ExecStartPre) names the
# keychain and the cause for a wrong and for a locked PIN, and nginx itself exits at start with
# no worker left behind; the SO's reset-pin lets it start again.
. "$HERE/lib.sh"
. "$HERE/servers.sh"

case "$MODULE" in
    */debug/*) echo "skipped: the servers run once, with the release module"; exit 0 ;;
esac
command -v nginx >/dev/null || fail "nginx is missing (scripts/install-deps.sh installs Debian's nginx)"
command -v systemd-creds >/dev/null || fail "systemd-creds is missing"
if [ "$(id -u)" != 0 ]; then
    echo "skipped: nginx's master starts as root and its workers run as www-data"
    exit 0
fi
id www-data >/dev/null 2>&1 || fail "no user www-data (Debian's nginx runs its workers as www-data)"

# www-data must reach the keychain folder through the test's scratch folders.
chmod 0711 "$(dirname "$WORK")" "$WORK" || fail "chmod the scratch folders"
cd "$WORK" || fail "cd $WORK"
gcc -Wall -Wextra -Werror -O2 -pthread "$HERE/../c-host/tls-load.c" -o tls-load -lssl -lcrypto || fail "compile tls-load.c"
load() { OPENSSL_CONF=/dev/null ./tls-load "$@"; }

# --- the keychain: made by root, then given to www-data --------------------------------------------
export KEYCHAIN_PKCS11_DIR="$WORK/srv/keychains"
export KEYCHAIN_PKCS11_SERVICE_USER=www-data
mkdir -p "$KEYCHAIN_PKCS11_DIR" && chmod 0700 "$KEYCHAIN_PKCS11_DIR" || fail "keychain folder"
PIN=31415926
printf '%s\n' "$PIN" >pin.txt
printf '87654321\n' >so.txt
KEYCHAIN_PKCS11_PIN_MAX_FAILURES=3 kc create --label web --so-pin-file so.txt --pin-file pin.txt >/dev/null || fail "create the keychain"
kc generate-key -k web --type ec --label www-ec --pin-file pin.txt >/dev/null || fail "generate the EC key"
kc generate-key -k web --type rsa --bits 2048 --label www-rsa --pin-file pin.txt >/dev/null || fail "generate the RSA key"

# --- tls-config, and a certificate made by the token key through the provider ----------------------
for k in ec rsa; do
    out=$(kc tls-config -k web --label "www-$k" --out "$WORK/tls-$k" --pin-path "$WORK/credentials/keychain-pin" \
        --credential "$WORK/web.cred" --pin-file pin.txt) || fail "tls-config www-$k: $out"
    expect_contains "$out" "(no certificate: the keychain has none with this key's ID" "tls-config before the certificate exists"
    expect_eq "$(head -n 1 "tls-$k/www-$k.key.pem")" "-----BEGIN PKCS#11 PROVIDER URI-----" "the key file's PEM label"
    # The URI inside names the token, its serial, the key's ID and label.
    uri=$(sed -n 's/^Key .*: \(pkcs11:.*\)$/\1/p' <<<"$out")
    expect_contains "$uri" ";token=web;id=%" "the key's URI"
    expect_contains "$uri" ";object=www-$k;type=private" "the key's URI"
    expect_eq "$(grep -v '^-----' "tls-$k/www-$k.key.pem" | base64 -d | openssl asn1parse -inform DER | grep -c "UTF8STRING *:$uri\$")" 1 \
        "the URI inside the key file"
    printf '%s\n' "$PIN" >"$WORK/provider-pin"
    sed "s|^pkcs11-module-token-pin = .*|pkcs11-module-token-pin = file:$WORK/provider-pin|" "tls-$k/openssl.cnf" >"$k-setup.cnf"
    OPENSSL_CONF="$WORK/$k-setup.cnf" timeout 60 openssl req -new -x509 -key "tls-$k/www-$k.key.pem" -subj /CN=localhost \
        -addext subjectAltName=DNS:localhost -days 30 -out "$k.crt" 2>req.err || fail "self-signed certificate for www-$k: $(cat req.err)"
    kc import -k web "$k.crt" --pin-file pin.txt >/dev/null || fail "import the certificate of www-$k"
    out=$(kc tls-config -k web --label "www-$k" --out "$WORK/tls-$k" --pin-path "$WORK/credentials/keychain-pin" \
        --credential "$WORK/web.cred" --pin-file pin.txt) || fail "tls-config www-$k again: $out"
    expect_contains "$out" "www-$k.crt.pem   the certificate with the key's ID" "tls-config with the certificate"
    cmp -s <(openssl x509 -in "tls-$k/www-$k.crt.pem" -outform DER) <(openssl x509 -in "$k.crt" -outform DER) ||
        fail "tls-config wrote another certificate than the key's"
done
rm -f "$WORK/provider-pin"
dropin="$WORK/tls-ec/nginx.service.d/keychain-pkcs11.conf"
expect_contains "$(cat "$dropin")" "LoadCredentialEncrypted=keychain-pin:$WORK/web.cred" "the drop-in loads the credential"
expect_contains "$(cat "$dropin")" $'ExecStartPre=\nExecStartPre='"$(dirname "$KEYCHAINCTL")"'/keychainctl check-pin -k web --pin-file %d/keychain-pin' \
    "the drop-in checks the PIN first"
expect_contains "$(cat "$dropin")" "Environment=OPENSSL_CONF=$WORK/tls-ec/openssl.cnf" "the drop-in names the OpenSSL configuration"
expect_contains "$(cat tls-ec/openssl.cnf)" "pkcs11-module-path = $MODULE" "openssl.cnf names the module"
chown -R www-data:www-data "$KEYCHAIN_PKCS11_DIR" || fail "give the keychain to www-data"
as_www() { runuser -u www-data -- env KEYCHAIN_PKCS11_DIR="$KEYCHAIN_PKCS11_DIR" KEYCHAIN_PKCS11_KDF_LOG_N=10 HOME="$WORK" "$KEYCHAINCTL" "$@"; }

# --- the PIN as a systemd credential ---------------------------------------------------------------
printf '%s' "$PIN" | systemd-creds encrypt --name=keychain-pin --with-key=host - "$WORK/web.cred" 2>creds.err ||
    fail "systemd-creds encrypt: $(cat creds.err)"
grep -q "$PIN" "$WORK/web.cred" && fail "the sealed credential holds the PIN in clear"
# What systemd does for LoadCredentialEncrypted=: decrypt into a folder only the service reads.
unseal() {
    rm -rf "$WORK/credentials" && install -d -m 0700 "$WORK/credentials" || fail "credentials folder"
    systemd-creds decrypt --name=keychain-pin "$1" "$WORK/credentials/keychain-pin" 2>creds.err || fail "systemd-creds decrypt: $(cat creds.err)"
    chmod 0400 "$WORK/credentials/keychain-pin"
}
unseal "$WORK/web.cred"
out=$(kc check-pin -k web --pin-file "$WORK/credentials/keychain-pin" 2>&1) || fail "check-pin with the credential: $out"
expect_eq "$out" "keychain 'web': the PIN opens it" "check-pin"

# --- nginx ------------------------------------------------------------------------------------------
ec_port=$(free_port)
rsa_port=$(free_port)
mkdir -p nginx/logs nginx/tmp
cat >nginx/nginx.conf <<EOF || fail "write nginx.conf"
user www-data;
worker_processes 2;
pid $WORK/nginx/nginx.pid;
error_log $WORK/nginx/logs/error.log notice;
include $WORK/tls-ec/nginx.conf;
events { worker_connections 1024; }
http {
    log_format workers '\$pid \$ssl_protocol';
    access_log $WORK/nginx/logs/access.log workers;
    client_body_temp_path $WORK/nginx/tmp/body;
    proxy_temp_path $WORK/nginx/tmp/proxy;
    fastcgi_temp_path $WORK/nginx/tmp/fastcgi;
    uwsgi_temp_path $WORK/nginx/tmp/uwsgi;
    scgi_temp_path $WORK/nginx/tmp/scgi;
    ssl_protocols TLSv1.2 TLSv1.3;
    server {
        listen 127.0.0.1:$ec_port ssl;
        ssl_certificate $WORK/tls-ec/www-ec.crt.pem;
        ssl_certificate_key $WORK/tls-ec/www-ec.key.pem;
        location / { return 200 "hello from the keychain\n"; }
    }
    server {
        listen 127.0.0.1:$rsa_port ssl;
        ssl_certificate $WORK/tls-rsa/www-rsa.crt.pem;
        ssl_certificate_key $WORK/tls-rsa/www-rsa.key.pem;
        location / { return 200 "hello from the keychain\n"; }
    }
}
EOF
# The service's environment, as the drop-in sets it.
ngx() { env OPENSSL_CONF="$WORK/tls-ec/openssl.cnf" timeout 60 nginx -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" "$@"; }
master=
stop_nginx() {
    [ -n "$master" ] || return 0
    kill -QUIT "$master" 2>/dev/null
    for _ in $(seq 100); do kill -0 "$master" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$master" 2>/dev/null
    pkill -9 -P "$master" 2>/dev/null
    master=
}
trap stop_nginx EXIT
workers() { pgrep -P "$master" | sort; }
start_nginx() {
    ngx 2>start.err || fail "nginx start: $(cat start.err; tail -n 5 nginx/logs/error.log)"
    master=$(cat nginx/nginx.pid)
    for _ in $(seq 100); do [ "$(workers | wc -l)" = 2 ] && break; sleep 0.1; done
    expect_eq "$(workers | wc -l)" 2 "nginx workers running"
}

out=$(ngx -t 2>&1) || fail "nginx -t: $out"
start_nginx
for w in $(workers); do expect_eq "$(ps -o user= -p "$w")" "www-data" "worker $w's user"; done
hello="hello from the keychain"

# Many concurrent handshakes, both keys, both versions, across both workers.
# handshakes PORT-KIND VERSION COUNT WHAT: COUNT full handshakes from 8 threads, none may fail.
handshakes() {
    local out
    out=$(load "${1%%:*}" "$WORK/${1#*:}.crt" 8 count "$3" "$2" expect "$hello" 2>&1)
    expect_eq "$(sed -n 's/^handshakes: \([0-9]*\) ok, \([0-9]*\) failed.*/\1 \2/p' <<<"$out")" "$3 0" "$4: ${1#*:} $2 handshakes ($out)"
}
for p in "$ec_port:ec" "$rsa_port:rsa"; do
    for v in tls1.3 tls1.2; do handshakes "$p" "$v" 300 "concurrent"; done
done
expect_eq "$(awk '{ print $1 }' nginx/logs/access.log | sort -u | wc -l)" 2 "both workers served"
expect_eq "$(awk '{ print $2 }' nginx/logs/access.log | sort | uniq -c | awk '{ print $2 "=" $1 }' | tr '\n' ' ')" "TLSv1.2=600 TLSv1.3=600 " \
    "TLS versions served"

# --- nginx -s reload under load: new workers, old ones draining, no failed handshake ---------------
before=$(workers | tr '\n' ' ')
load "$ec_port" "$WORK/ec.crt" 4 seconds 6 tls1.3 expect "$hello" >reload.out 2>&1 &
loader=$!
sleep 2
ngx -s reload 2>reload.err || fail "nginx -s reload: $(cat reload.err)"
wait "$loader"
expect_eq "$(sed -n 's/^handshakes: [0-9]* ok, \([0-9]*\) failed.*/\1/p' reload.out)" 0 "handshakes during the reload ($(cat reload.out))"
[ "$(sed -n 's/^handshakes: \([0-9]*\) ok.*/\1/p' reload.out)" -gt 0 ] || fail "no handshake during the reload: $(cat reload.out)"
for _ in $(seq 100); do [ "$(workers | wc -l)" = 2 ] && break; sleep 0.1; done
after=$(workers | tr '\n' ' ')
echo "figure: during nginx -s reload: $(sed -n 's/^handshakes: //p' reload.out)"
[ "$before" != "$after" ] || fail "the reload left the same workers ($before)"
for p in "$ec_port:ec" "$rsa_port:rsa"; do handshakes "$p" tls1.3 100 "after the reload"; done

# --- a worker killed with SIGKILL is replaced; the next handshakes succeed --------------------------
victim=$(workers | head -n 1)
kill -9 "$victim"
for _ in $(seq 100); do
    [ "$(workers | wc -l)" = 2 ] && ! workers | grep -qx "$victim" && break
    sleep 0.1
done
expect_eq "$(workers | wc -l)" 2 "workers after one was killed"
workers | grep -qx "$victim" && fail "the killed worker $victim is still listed"
for p in "$ec_port:ec" "$rsa_port:rsa"; do
    for v in tls1.3 tls1.2; do handshakes "$p" "$v" 200 "after a worker was killed"; done
done

# --- the keychain changed under the running server --------------------------------------------------
as_www generate-key -k web --type ec --label another --pin-file "$WORK/pin.txt" >/dev/null || fail "another key, added while nginx runs"
handshakes "$ec_port:ec" tls1.3 200 "after another key was added"
NEW_PIN=27182818
printf '%s\n' "$NEW_PIN" >newpin.txt
chmod 0644 pin.txt newpin.txt
as_www change-pin -k web --old-pin-file "$WORK/pin.txt" --new-pin-file "$WORK/newpin.txt" >/dev/null || fail "change the PIN while nginx runs"
for p in "$ec_port:ec" "$rsa_port:rsa"; do handshakes "$p" tls1.3 200 "after the PIN changed"; done
# keychainctl lock ends keychaind's unlock sessions; the server logged in itself and goes on.
as_www lock -k web >lock.out 2>&1
for p in "$ec_port:ec" "$rsa_port:rsa"; do handshakes "$p" tls1.2 100 "after keychainctl lock"; done
stop_nginx
# The one alert expected: the worker this test killed.
alerts=$(grep -E '\[(alert|emerg|crit)\]' nginx/logs/error.log | grep -v "worker process $victim exited on signal 9")
expect_eq "$alerts" "" "nginx's alerts and critical errors"
expect_eq "$(grep -c "worker process $victim exited on signal 9" nginx/logs/error.log)" 1 "nginx saw the killed worker"

# --- starts that must stop: the old PIN, then a locked one -------------------------------------------
# The credential still holds the old PIN: the drop-in's check names the keychain and the cause.
unseal "$WORK/web.cred"
expect_status 3 "check-pin with the old PIN" kc check-pin -k web --pin-file "$WORK/credentials/keychain-pin"
expect_eq "$(cat "$WORK/last.err")" "keychainctl: keychain 'web': the PIN is wrong (1 of 3 failed tries)." "check-pin's message for a wrong PIN"
# Started without that check, nginx itself stops at start: no master, no workers left running.
rm -f nginx/nginx.pid
ngx 2>start.err && fail "nginx started with a wrong PIN"
[ -e nginx/nginx.pid ] && fail "nginx left a pid file after failing to start"
expect_contains "$(cat start.err)" "www-ec.key.pem" "nginx's start error names the key file"
echo "figure: nginx started with a wrong PIN: $(grep -m1 emerg start.err)"
pgrep -u www-data -f "nginx: worker" >/dev/null && fail "a worker runs after the failed start"
# More failed tries lock the user PIN (3 tries for this keychain): the message says so and what to do.
for _ in 1 2 3; do kc check-pin -k web --pin-file "$WORK/credentials/keychain-pin" >/dev/null 2>&1; done
expect_status 3 "check-pin with the PIN locked" kc check-pin -k web --pin-file "$WORK/newpin.txt"
expect_eq "$(cat "$WORK/last.err")" \
    "keychainctl: keychain 'web': the user PIN is locked (3 of 3 failed tries); the SO sets a new one with 'keychainctl reset-pin -k web'." \
    "check-pin's message for a locked PIN"
# The SO sets a new PIN, the credential is sealed again, and the server starts.
as_www reset-pin -k web --so-pin-file "$WORK/so.txt" --new-pin-file "$WORK/newpin.txt" >/dev/null || fail "reset-pin"
printf '%s' "$NEW_PIN" | systemd-creds encrypt --name=keychain-pin --with-key=host - "$WORK/web.cred" 2>creds.err || fail "seal the new PIN"
unseal "$WORK/web.cred"
kc check-pin -k web --pin-file "$WORK/credentials/keychain-pin" >/dev/null || fail "check-pin after reset-pin"
start_nginx
for p in "$ec_port:ec" "$rsa_port:rsa"; do handshakes "$p" tls1.3 100 "after the SO reset the PIN"; done
stop_nginx
