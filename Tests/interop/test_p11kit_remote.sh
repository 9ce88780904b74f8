# Remote use: a keychain served by `p11-kit server` on a Unix socket and used by another process
# through p11-kit-client.so (P11_KIT_SERVER_ADDRESS): listing, signing, reading a password, a wrong
# PIN — with pkcs11-tool, p11tool and ssh-keygen as the clients; then the socket forwarded with
# `ssh -R` to a throwaway sshd on 127.0.0.1 (standing for another machine), where pkcs11-tool reads
# the password and `ssh -I p11-kit-client.so` logs in with the keychain's key. Docs/remote-use.md
# describes it.
#
# p11-kit's RPC (0.24 on Debian 12) forwards only the mechanisms whose parameters it can
# serialise: CKM_ECDSA is among them, CKM_ECDSA_SHA256 is not. The signature is therefore made
# with CKM_ECDSA over a SHA-256 digest (as OpenSSH and the OpenSSL engine do); CKM_ECDSA_SHA256
# is used as well when the client offers it, and must be refused cleanly when it does not.
. "$HERE/lib.sh"
. "$HERE/servers.sh"

PIN=user-pin-01
new_keychain remote so-pin-0001 "$PIN"
cd "$WORK" || fail "cd $WORK"

# Set up directly on the module: an EC P-256 key pair, and a private data object standing for a
# generic password.
p11 --token-label remote --login --pin "$PIN" --keypairgen --key-type EC:prime256v1 --label remote-key --id 01 >/dev/null 2>&1 ||
    fail "generate the P-256 key pair"
printf 'correct horse battery staple\n' >password.bin
p11 --token-label remote --login --pin "$PIN" --write-object password.bin --type data --label github.com \
    --application-label github.com --private >/dev/null 2>&1 || fail "write the password data object"
p11 --token-label remote --read-object --type pubkey --id 01 -o pub.der >/dev/null 2>&1 || fail "read the public key"
openssl pkey -pubin -inform DER -in pub.der -out pub.pem || fail "public key to PEM"
serial=$(p11 -L 2>/dev/null | awk '/token label *: remote$/ { found = 1 } found && /serial num/ { print $NF; exit }')
[ -n "$serial" ] || fail "no serial number for token remote"

# The server, on a socket in $WORK, serving only this token.
client=$(ls /usr/lib/*/pkcs11/p11-kit-client.so 2>/dev/null | head -1)
[ -n "$client" ] || fail "p11-kit-client.so not installed"
socket="$WORK/p11-kit.sock"
p11-kit server -f --provider "$MODULE" -n "$socket" "pkcs11:token=remote" >server.log 2>&1 &
server=$!
sshd_pid=
trap 'stop_pid "$server"; stop_pid "$sshd_pid"' EXIT
# The socket appears before the server has written its address line: wait for both (a loaded
# machine showed the gap).
for _ in $(seq 100); do [ -S "$socket" ] && grep -q P11_KIT_SERVER_ADDRESS server.log && break; sleep 0.1; done
[ -S "$socket" ] || fail "p11-kit server did not start: $(cat server.log)"
expect_contains "$(cat server.log)" "P11_KIT_SERVER_ADDRESS=unix:path=$socket; export P11_KIT_SERVER_ADDRESS;" "address printed by p11-kit server"
# Only the owner may connect: p11-kit creates the socket with umask 066 (mode 0711, no write for
# others, and connect(2) needs write permission).
expect_eq "$(stat -c %a "$socket")" 711 "mode of the server socket"

export P11_KIT_SERVER_ADDRESS="unix:path=$socket"
remote() { pkcs11-tool --module "$client" "$@"; }

# Listing: the token, with its label and serial, is the only slot.
out=$(remote -L 2>&1) || fail "pkcs11-tool -L through the client: $out"
expect_contains "$out" "token label        : remote" "pkcs11-tool -L through the client"
expect_contains "$out" "serial num         : $serial" "pkcs11-tool -L through the client"
expect_eq "$(grep -c '^Slot ' <<<"$out")" 1 "slots offered through the client (only the served token)"

# Objects: without login only the public key; with login the private key and the data object too.
out=$(remote -O 2>/dev/null) || fail "pkcs11-tool -O through the client"
expect_eq "$(grep -E '^(Private Key|Public Key|Data) [Oo]bject' <<<"$out" | sed 's/ *EC_POINT.*//')" "Public Key Object; EC" \
    "objects listed through the client without login"
out=$(remote -O --login --pin "$PIN" 2>/dev/null) || fail "pkcs11-tool -O --login through the client"
expect_eq "$(grep -E '^(Private Key|Public Key|Data) [Oo]bject' <<<"$out" | sed 's/ *EC_POINT.*//; s/ [0-9]*$//')" \
    "$(printf '%s\n' "Private Key Object; EC" "Public Key Object; EC" "Data object")" "objects listed through the client after login"
expect_eq "$(grep -c "label: *remote-key$" <<<"$out")" 2 "remote-key labels listed through the client"
expect_contains "$out" "label:          'github.com'" "data object listed through the client"
expect_contains "$out" "flags:           modifiable private" "data object flags through the client"
echo "ok: listing through p11-kit-client.so"

# Signing: CKM_ECDSA over the SHA-256 digest, verified by plain openssl against the public key
# exported locally (pkcs11-tool turns the raw r||s into DER with --signature-format openssl).
head -c 4096 /dev/urandom >message.bin
openssl dgst -sha256 -binary message.bin >digest.bin
remote --login --pin "$PIN" --sign -m ECDSA --id 01 --signature-format openssl -i digest.bin -o sig.der >sign.log 2>&1 ||
    fail "sign with CKM_ECDSA through the client: $(cat sign.log)"
out=$(openssl dgst -sha256 -verify pub.pem -signature sig.der message.bin 2>&1)
expect_eq "$out" "Verified OK" "openssl verifies the signature made through the client"
printf 'x' >>message.bin
out=$(openssl dgst -sha256 -verify pub.pem -signature sig.der message.bin 2>&1)
expect_eq "$(head -n 1 <<<"$out")" "Verification failure" "openssl on a changed message"
# The raw form: exactly 64 bytes (r||s), verified by the token through the client.
remote --login --pin "$PIN" --sign -m ECDSA --id 01 -i digest.bin -o sig.raw >/dev/null 2>&1 || fail "raw CKM_ECDSA signature"
expect_eq "$(stat -c %s sig.raw)" 64 "size of the raw P-256 signature"
out=$(remote --verify -m ECDSA --id 01 -i digest.bin --signature-file sig.raw 2>&1) || fail "pkcs11-tool --verify through the client: $out"
expect_contains "$out" "Signature is valid" "pkcs11-tool --verify through the client"
# CKM_ECDSA_SHA256 through the RPC: used when the client lists it, else a clean CKR_MECHANISM_INVALID.
if remote -M 2>/dev/null | grep -q '^ *ECDSA-SHA256,'; then
    remote --login --pin "$PIN" --sign -m ECDSA-SHA256 --id 01 --signature-format openssl -i message.bin -o sig256.der >/dev/null 2>&1 ||
        fail "sign with CKM_ECDSA_SHA256 through the client"
    expect_eq "$(openssl dgst -sha256 -verify pub.pem -signature sig256.der message.bin 2>&1)" "Verified OK" "ECDSA-SHA256 through the client"
    echo "ok: signing through the client (CKM_ECDSA and CKM_ECDSA_SHA256), verified by openssl"
else
    out=$(remote --login --pin "$PIN" --sign -m ECDSA-SHA256 --id 01 -i message.bin -o sig256.der 2>&1)
    expect_eq "$?" 1 "exit status of an ECDSA-SHA256 signature through the client"
    expect_contains "$out" "C_SignInit failed: rv = CKR_MECHANISM_INVALID" "ECDSA-SHA256 through a p11-kit that does not forward it"
    echo "ok: signing through the client (CKM_ECDSA), verified by openssl; this p11-kit does not forward CKM_ECDSA_SHA256"
fi

# Reading the password: exactly the bytes written, and only after login.
rm -f got.bin
remote --login --pin "$PIN" --read-object --type data --label github.com -o got.bin >read.log 2>&1 ||
    fail "read the data object through the client: $(cat read.log)"
cmp -s got.bin password.bin || fail "the data object read through the client differs: $(od -c got.bin | head -n 3)"
out=$(remote --read-object --type data --label github.com 2>&1)
expect_eq "$?" 1 "exit status of reading the private data object without login"
expect_not_contains "$out" "correct horse" "private data object without login"
echo "ok: the password read through the client is exactly the bytes written"

# A wrong PIN through the client.
out=$(remote --login --pin wrong-pin-99 -O 2>&1)
expect_eq "$?" 1 "exit status of a wrong PIN through the client"
expect_contains "$out" "C_Login failed: rv = CKR_PIN_INCORRECT" "wrong PIN through the client"
echo "ok: a wrong PIN through the client gives CKR_PIN_INCORRECT"

# p11tool (GnuTLS) through the client: the token, then the objects before and after login.
out=$(p11tool --provider "$client" --list-tokens 2>&1) || fail "p11tool --list-tokens through the client: $out"
expect_contains "$out" "URL: pkcs11:model=Keychain;manufacturer=Keychain%20PKCS%2311;serial=$serial;token=remote" "p11tool --list-tokens"
out=$(p11tool --provider "$client" --list-all "pkcs11:token=remote" 2>&1) || fail "p11tool --list-all through the client: $out"
expect_eq "$(grep -o 'object=[^;]*;type=[a-z]*' <<<"$out")" "object=remote-key;type=public" "p11tool --list-all without login"
out=$(GNUTLS_PIN="$PIN" p11tool --provider "$client" --login --list-all "pkcs11:token=remote" 2>&1) ||
    fail "p11tool --login --list-all through the client: $out"
expect_eq "$(grep -o 'object=[^;]*;type=[a-z]*' <<<"$out" | LC_ALL=C sort)" \
    "$(printf '%s\n' "object=github.com;type=data" "object=remote-key;type=private" "object=remote-key;type=public")" \
    "p11tool --login --list-all"
echo "ok: p11tool lists the token and its objects through the client"

# OpenSSH through the client: ssh-keygen -D gives the same key as the local public key.
out=$(ssh-keygen -D "$client" </dev/null 2>/dev/null) || fail "ssh-keygen -D through the client: exit $?"
expect_eq "$out" "$(ssh-keygen -i -m PKCS8 -f pub.pem) remote-key" "ssh-keygen -D through the client"
echo "ok: ssh-keygen -D through the client lists remote-key"

# Over ssh: the socket forwarded with ssh -R to the "remote" side (a throwaway sshd on 127.0.0.1,
# run as the current user with its own host key and authorized_keys), where it is
# $XDG_RUNTIME_DIR/p11-kit/pkcs11, p11-kit-client.so's default address (no P11_KIT_SERVER_ADDRESS).
# There pkcs11-tool lists the token and reads the password, and ssh -I p11-kit-client.so logs in
# back to the sshd with remote-key (the PIN from SSH_ASKPASS).
ssh-keygen -q -t ed25519 -N '' -C forward-key -f forward_key || fail "forwarding login key"
ssh-keygen -D "$MODULE" </dev/null 2>/dev/null >token.pub || fail "ssh-keygen -D for token.pub"
cat forward_key.pub token.pub >authorized_keys
start_sshd "StreamLocalBindUnlink yes"
printf '#!/bin/sh\necho %s\n' "$PIN" >askpass && chmod +x askpass || fail "write askpass"
remote_rt="$WORK/remote-runtime"
mkdir -p -m 0700 "$remote_rt/p11-kit" || fail "mkdir $remote_rt/p11-kit"
me=$(id -un)
sshopts="-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o IdentitiesOnly=yes -p $port"
# What runs on the "remote" side, in sshd's environment (not this shell's).
on_remote="export XDG_RUNTIME_DIR='$remote_rt'; unset P11_KIT_SERVER_ADDRESS
stat -c 'socket %a' \"\$XDG_RUNTIME_DIR/p11-kit/pkcs11\"
pkcs11-tool --module '$client' -L 2>/dev/null | grep 'token label'
pkcs11-tool --module '$client' --login --pin '$PIN' --read-object --type data --label github.com 2>/dev/null
SSH_ASKPASS='$WORK/askpass' SSH_ASKPASS_REQUIRE=force DISPLAY=:0 ssh $sshopts -o BatchMode=no \
    -o IdentityFile='$WORK/token.pub' -I '$client' '$me@127.0.0.1' 'echo logged in with remote-key' </dev/null"
# shellcheck disable=SC2086 # $sshopts is a list of options
out=$(ssh $sshopts -o BatchMode=yes -i forward_key -R "$remote_rt/p11-kit/pkcs11:$socket" "$me@127.0.0.1" "$on_remote" </dev/null 2>ssh.err) ||
    fail "ssh -R session (exit $?): $out $(cat ssh.err) $(tail -n 20 sshd.log)"
expect_eq "$out" "$(printf '%s\n' "socket 600" "  token label        : remote" "correct horse battery staple" "logged in with remote-key")" \
    "the forwarded keychain on the remote side"
token_fp=$(ssh-keygen -l -f token.pub | awk '{ print $2 }')
expect_contains "$(grep 'Accepted publickey' sshd.log | tail -n 1)" "for $me from 127.0.0.1" "sshd log"
expect_contains "$(grep 'Accepted publickey' sshd.log | tail -n 1)" "ECDSA $token_fp" "key of the login through the forwarded keychain"
echo "ok: over ssh -R: listing, the password, and an ssh -I login with remote-key on the remote side"

# The server is still there and the token still usable locally.
kill -0 "$server" 2>/dev/null || fail "p11-kit server exited: $(cat server.log)"
p11 --token-label remote -O >/dev/null 2>&1 || fail "the token directly after remote use"
