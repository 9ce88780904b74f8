# The protected authentication path: with a prompt program configured (KEYCHAIN_PKCS11_PROMPT),
# tokens report CKF_PROTECTED_AUTHENTICATION_PATH and C_Login with a NULL PIN runs the program,
# which prints the PIN as an SSH_ASKPASS program does. pkcs11-tool then logs in without --pin
# (user, SO, and the per-use login of an always-authenticate key). A program that fails is
# CKR_FUNCTION_CANCELED; a wrong PIN from it counts like any wrong PIN. Off by default.
. "$HERE/lib.sh"

SO=87654321
PIN=123456
new_keychain pinpad "$SO" "$PIN"
slot=$(slot_of pinpad)
[ -n "$slot" ] || fail "no slot for keychain pinpad"
cd "$WORK" || fail "cd $WORK"
flags() { p11 --slot "$slot" -T 2>/dev/null | sed -n 's/^  token flags        : //p'; }
expect_not_contains "$(flags)" "PIN pad present" "token flags without a prompt program"
out=$(p11 --slot "$slot" --login -O </dev/null 2>&1) && fail "login without a PIN nor a prompt program succeeded"

cat >prompt <<EOF2 || fail "write prompt"
#!/bin/sh
printf '%s\n' "\$1" >>"$WORK/prompt.log"
[ -s "$WORK/answer" ] || exit 1
cat "$WORK/answer"
EOF2
chmod +x prompt
export KEYCHAIN_PKCS11_PROMPT="$WORK/prompt"
expect_eq "$(flags)" "login required, PIN pad present, rng, token initialized, PIN initialized" "token flags with a prompt program"

p11 --slot "$slot" --login --pin "$PIN" --write-object /dev/null --type data --label hidden --private >/dev/null 2>&1 || fail "write a private object"
printf '%s\n' "$PIN" >answer
: >prompt.log
out=$(p11 --slot "$slot" --login -O --type data 2>&1) || fail "login through the prompt program: $out"
expect_contains "$out" "label:          'hidden'" "private object listed after a prompted login"
expect_eq "$(cat prompt.log)" "Enter the PIN of keychain 'pinpad':" "prompt shown for the user login"

# A wrong answer counts; a program that gives nothing cancels and counts nothing.
printf '000000\n' >answer
out=$(p11 --slot "$slot" --login -O 2>&1) && fail "login with a wrong prompted PIN succeeded"
expect_contains "$out" "CKR_PIN_INCORRECT" "wrong prompted PIN"
expect_contains "$(flags)" "user PIN count low" "flags after a wrong prompted PIN"
: >answer
out=$(p11 --slot "$slot" --login -O 2>&1) && fail "login with a cancelled prompt succeeded"
expect_contains "$out" "CKR_FUNCTION_CANCELED" "cancelled prompt"

# The SO logs in the same way.
printf '%s\n' "$SO" >answer
: >prompt.log
out=$(p11 --slot "$slot" --session-rw --login --login-type so -O 2>&1) || fail "SO login through the prompt program: $out"
expect_eq "$(cat prompt.log)" "Enter the SO PIN of keychain 'pinpad':" "prompt shown for the SO login"

# An always-authenticate key: pkcs11-tool asks the token for the per-use PIN with NULL too.
p11 --slot "$slot" --login --pin "$PIN" --keypairgen --key-type EC:prime256v1 --id 77 --label pad-key --always-auth >/dev/null 2>&1 ||
    fail "generate always-auth key"
head -c 100 /dev/urandom >data.bin
printf '%s\n' "$PIN" >answer
: >prompt.log
out=$(p11 --slot "$slot" --login --sign --id 77 -m ECDSA-SHA256 -i data.bin -o sig.bin 2>&1) || fail "sign through the prompt program: $out"
expect_eq "$(cat prompt.log)" "Enter the PIN of keychain 'pinpad':
Confirm the use of a protected key of keychain 'pinpad': enter its PIN:" "prompts for the login and the per-use PIN"
expect_eq "$(stat -c %s sig.bin)" 64 "ECDSA P-256 signature size"
echo "ok: protected authentication path for user, SO and per-use logins"
