# OpenSSH logins with the token's keys against a throwaway sshd on 127.0.0.1 (own host key, own
# config, AuthorizedKeysFile in $WORK, run as the current user): `ssh -I module` logs in with each
# of the RSA-2048, ECDSA P-256 and P-384 keys (authorized one at a time; sshd's log names the key
# it accepted), the PIN coming from SSH_ASKPASS; `ssh-add -s module` loads the same keys into a
# throwaway ssh-agent, and ssh logs in through the agent with each key; keys that are not in
# authorized_keys are refused ("Permission denied (publickey)", exit 255) both ways, while a file
# key that is authorized logs in.
# Client quirks (OpenSSH 9.2): BatchMode=yes suppresses the PKCS#11 PIN prompt ("pin required"), so
# ssh -I runs with BatchMode=no and SSH_ASKPASS_REQUIRE=force; IdentitiesOnly=yes drops the
# provider's keys unless an IdentityFile names their public key, so the token's public keys are
# given as IdentityFile (which also keeps ~/.ssh keys out); ssh-agent only loads providers
# matching its -P list, compared with the module's real path (symlinks resolved).
. "$HERE/lib.sh"
. "$HERE/servers.sh"

PIN=123456
TOKEN=sshlogin
new_keychain "$TOKEN" 87654321 "$PIN"
slot=$(slot_of "$TOKEN")
[ -n "$slot" ] || fail "no slot for keychain $TOKEN"
user() { p11 --slot "$slot" --login --pin "$PIN" "$@"; }
cd "$WORK" || fail "cd $WORK"
me=$(id -un)

user --keypairgen --key-type rsa:2048 --id f1 --label login-rsa >/dev/null 2>&1 || fail "generate RSA key"
user --keypairgen --key-type EC:prime256v1 --id f2 --label login-p256 >/dev/null 2>&1 || fail "generate P-256 key"
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-384 -out p384.pem 2>/dev/null || fail "genpkey P-384"
user --write-object p384.pem --type privkey --id f3 --label login-p384 >/dev/null 2>&1 || fail "import P-384 key"
openssl pkey -in p384.pem -pubout -outform DER -out p384.pub.der || fail "public key of p384"
user --write-object p384.pub.der --type pubkey --id f3 --label login-p384 >/dev/null 2>&1 || fail "import the public key of p384"

# The token's public keys as OpenSSH lists them, one file each.
ssh-keygen -D "$MODULE" </dev/null >token.pub 2>/dev/null || fail "ssh-keygen -D exit $?"
expect_eq "$(awk '{ print $1, $3 }' token.pub | LC_ALL=C sort | tr '\n' ';')" \
    "ecdsa-sha2-nistp256 login-p256;ecdsa-sha2-nistp384 login-p384;ssh-rsa login-rsa;" "keys listed by ssh-keygen -D"
for name in rsa p256 p384; do
    grep " login-$name\$" token.pub >"$name.pub" || fail "no login-$name in ssh-keygen -D"
done
# The imported P-384 key's OpenSSH public key is the one from the file it came from.
expect_eq "$(awk '{ print $2 }' p384.pub)" \
    "$(openssl pkey -in p384.pem -pubout | ssh-keygen -i -m PKCS8 -f /dev/stdin | awk '{ print $2 }')" "P-384 public key"

ssh-keygen -q -t ed25519 -N '' -C file-key -f filekey || fail "file key"

# --- sshd -------------------------------------------------------------------------------------
: >authorized_keys
sshd_pid=
agent_pid=
trap 'stop_pid "$sshd_pid"; stop_pid "$agent_pid"' EXIT
start_sshd "MaxAuthTries 10"

# The askpass helper prints the PIN and records each prompt it was shown.
cat >askpass <<EOF || fail "write askpass"
#!/bin/sh
printf '%s\n' "\$1" >>"$WORK/askpass.log"
echo $PIN
EOF
chmod +x askpass

accepted_count() { grep -c "Accepted publickey for $me from 127.0.0.1 " sshd.log; }
expect_login() { # WHAT EXPECTED-KEY-NAME
    expect_eq "$rc" 0 "ssh exit status ($1): $err"
    expect_eq "$out" ok "ssh output ($1)"
    expect_eq "$(ssh_accepted)" "$(ssh_fingerprint "$2.pub")" "key accepted by sshd ($1)"
}
expect_refused() { # WHAT
    expect_eq "$rc" 255 "ssh exit status ($1): $out"
    expect_eq "$out" "" "ssh output ($1)"
    expect_eq "$err" "$me@127.0.0.1: Permission denied (publickey)." "ssh error ($1)"
}

# --- ssh -I module, one authorized key at a time ----------------------------------------------
token_ids=(-o IdentitiesOnly=yes -o IdentityFile="$WORK/rsa.pub" -o IdentityFile="$WORK/p256.pub" -o IdentityFile="$WORK/p384.pub")
for name in rsa p256 p384; do
    cp "$name.pub" authorized_keys || fail "authorized_keys"
    : >askpass.log
    n=$(accepted_count)
    ssh_login -I "$MODULE" "${token_ids[@]}" -o IdentityAgent=none -o BatchMode=no
    expect_login "ssh -I with login-$name authorized" "$name"
    expect_eq "$(accepted_count)" $((n + 1)) "logins accepted by sshd after login-$name"
    expect_eq "$(sort -u askpass.log)" "Enter PIN for '$TOKEN': " "PIN prompt shown by ssh -I"
done

# --- ssh-agent with ssh-add -s ----------------------------------------------------------------
cat rsa.pub p256.pub p384.pub >authorized_keys || fail "authorized_keys"
export SSH_AUTH_SOCK="$WORK/agent.sock"
ssh-agent -D -a "$SSH_AUTH_SOCK" -P "$(realpath "$MODULE")" >agent.log 2>&1 &
agent_pid=$!
wait_for_log agent.log "SSH_AUTH_SOCK=" "$agent_pid" 10
: >askpass.log
res=$(SSH_ASKPASS="$WORK/askpass" SSH_ASKPASS_REQUIRE=force DISPLAY=:0 timeout 30 ssh-add -s "$MODULE" </dev/null 2>&1) ||
    fail "ssh-add -s exit $?: $res"
expect_eq "$res" "Card added: $MODULE" "ssh-add -s"
expect_eq "$(cat askpass.log)" "Enter passphrase for PKCS#11: " "PIN prompt shown by ssh-add -s"
res=$(timeout 10 ssh-add -L) || fail "ssh-add -L exit $?"
expect_eq "$(LC_ALL=C sort <<<"$res")" "$(LC_ALL=C sort token.pub)" "keys in the agent"
# With IdentitiesOnly and the public key file as IdentityFile, ssh uses that agent key only; the
# agent holds the PIN, so nothing asks for it.
: >askpass.log
for name in rsa p256 p384; do
    ssh_login -o IdentityAgent="$SSH_AUTH_SOCK" -o IdentitiesOnly=yes -o IdentityFile="$WORK/$name.pub" -o BatchMode=yes
    expect_login "ssh through the agent with login-$name" "$name"
done
expect_eq "$(cat askpass.log)" "" "PIN prompts during logins through the agent"

# --- keys that are not authorized --------------------------------------------------------------
cp filekey.pub authorized_keys || fail "authorized_keys"
ssh_login -I "$MODULE" "${token_ids[@]}" -o IdentityAgent=none -o BatchMode=no
expect_refused "ssh -I with no token key authorized"
ssh_login -o IdentityAgent="$SSH_AUTH_SOCK" "${token_ids[@]}" -o BatchMode=yes
expect_refused "ssh through the agent with no token key authorized"
# ... while the authorized file key logs in, so the refusals above are the keys'.
ssh_login -i "$WORK/filekey" -o IdentitiesOnly=yes -o IdentityAgent=none -o BatchMode=yes
expect_eq "$rc" 0 "ssh exit status (file key): $err"
expect_eq "$out" ok "ssh output (file key)"
expect_eq "$(ssh_accepted | awk '{ print $1 }')" ED25519 "key accepted by sshd (file key)"

# --- a CKA_ALWAYS_AUTHENTICATE key --------------------------------------------------------------
user --keypairgen --key-type EC:prime256v1 --id f4 --label login-always --always-auth >/dev/null 2>&1 || fail "generate always-auth key"
expect_contains "$(user --list-objects --type privkey 2>/dev/null)" "Access:     always authenticate" "pkcs11-tool shows the always-auth key"
ssh-keygen -D "$MODULE" </dev/null 2>/dev/null | grep ' login-always$' >always.pub || fail "no login-always in ssh-keygen -D"
cp always.pub authorized_keys || fail "authorized_keys"

# ssh -I logs in (one prompt) and signs right away: OpenSSH skips the context-specific login for
# the signature that follows its own C_Login, and the token counts that fresh PIN for it.
: >askpass.log
ssh_login -I "$MODULE" -o IdentitiesOnly=yes -o IdentityFile="$WORK/always.pub" -o IdentityAgent=none -o BatchMode=no
expect_login "ssh -I with the always-authenticate key" always
expect_eq "$(cat askpass.log)" "Enter PIN for '$TOKEN': " "PIN prompts of ssh -I with the always-authenticate key"

# OpenSSH answers C_Login(CKU_CONTEXT_SPECIFIC) when it is already logged in: a server that asks
# for two keys (AuthenticationMethods publickey,publickey) makes ssh -I sign with login-p256 first
# (C_Login(CKU_USER), one prompt) and then with login-always (the per-use prompt). The agent
# cannot serve such a key: its helper is not interactive ("need pin entry").
port2=$(free_port)
[ -n "$port2" ] || fail "no second free port"
sed -e "s/^ListenAddress .*/ListenAddress 127.0.0.1:$port2/" -e "s|^PidFile .*|PidFile $WORK/sshd2.pid|" sshd_config >sshd2_config ||
    fail "write sshd2_config"
echo "AuthenticationMethods publickey,publickey" >>sshd2_config
cat p256.pub always.pub >authorized_keys || fail "authorized_keys"
/usr/sbin/sshd -D -e -f "$WORK/sshd2_config" >sshd2.log 2>&1 &
sshd2_pid=$!
trap 'stop_pid "$sshd_pid"; stop_pid "$agent_pid"; stop_pid "$sshd2_pid"' EXIT
wait_for_log sshd2.log "Server listening on 127.0.0.1 port $port2." "$sshd2_pid" 20
two_keys=(-o IdentitiesOnly=yes -o IdentityFile="$WORK/p256.pub" -o IdentityFile="$WORK/always.pub" -o IdentityAgent=none -o BatchMode=no)
port_saved=$port
port=$port2
: >askpass.log
ssh_login -I "$MODULE" "${two_keys[@]}"
expect_eq "$rc" 0 "ssh exit status (two keys, the second always-authenticate): $err"
expect_eq "$out" ok "ssh output (two keys)"
expect_eq "$(grep -c "Partial publickey for $me from 127.0.0.1 " sshd2.log)" 1 "first key accepted as partial by sshd"
expect_eq "$(ssh_accepted "$WORK/sshd2.log")" "$(ssh_fingerprint always.pub)" "second key accepted by sshd"
expect_eq "$(cat askpass.log)" "Enter PIN for '$TOKEN': 
Enter PIN for '$TOKEN': " "user PIN prompt, then the context-specific one"

# A wrong PIN at the context-specific prompt: no signature with the key, no login, and the token
# counts the failure.
cat >askpass <<EOF2 || fail "write askpass"
#!/bin/sh
printf '%s\n' "\$1" >>"$WORK/askpass.log"
if [ "\$(wc -l <"$WORK/askpass.log")" -le 1 ]; then echo $PIN; else echo 000000; fi
EOF2
: >askpass.log
n=$(grep -c "Accepted publickey for $me from 127.0.0.1 " sshd2.log)
ssh_login -I "$MODULE" "${two_keys[@]}"
expect_eq "$rc" 255 "ssh exit status with a wrong per-use PIN: $err"
expect_eq "$(grep -c "Accepted publickey for $me from 127.0.0.1 " sshd2.log)" "$n" "logins accepted with a wrong per-use PIN"
expect_eq "$(wc -l <askpass.log)" 2 "prompts with a wrong per-use PIN"
expect_contains "$(p11 --slot "$slot" -T 2>/dev/null)" "user PIN count low" "token flags after a wrong per-use PIN"
port=$port_saved
echo "ok: ssh -I signs with a CKA_ALWAYS_AUTHENTICATE key, answering the context-specific login"

# --- the protected authentication path with OpenSSH ---------------------------------------------
# With a prompt program configured the token reports CKF_PROTECTED_AUTHENTICATION_PATH; ssh -I then
# asks nothing itself ("Deferring PIN entry to reader keypad") and calls C_Login with a NULL PIN,
# which runs the program.
cat >pinpad <<EOF2 || fail "write pinpad"
#!/bin/sh
printf '%s\n' "\$1" >>"$WORK/pinpad.log"
echo $PIN
EOF2
chmod +x pinpad
: >askpass.log
: >pinpad.log
cp p256.pub authorized_keys || fail "authorized_keys"
KEYCHAIN_PKCS11_PROMPT="$WORK/pinpad" ssh_login -I "$MODULE" -o IdentitiesOnly=yes -o IdentityFile="$WORK/p256.pub" -o IdentityAgent=none -o BatchMode=no
expect_login "ssh -I through the prompt program" p256
expect_eq "$(cat askpass.log)" "" "ssh's own PIN prompts with a protected authentication path"
expect_eq "$(cat pinpad.log)" "Enter the PIN of keychain '$TOKEN':" "prompt program questions during ssh -I"
echo "ok: ssh -I logs in through the protected authentication path"
