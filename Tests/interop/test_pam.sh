# pam_keychain.so through pamtester, with a temporary user and a throwaway PAM service: the login
# password unlocks the user's login keychain in keychaind at session start (auth keeps it,
# session hands it over); a wrong password unlocks nothing and is refused by pam_unix as usual;
# a helper that cannot run never fails the login; a password change re-PINs the login keychain.
# Needs root (useradd, /etc/pam.d); as another user it says so and checks only the build.
. "$HERE/lib.sh"
cd "$WORK" || fail "cd $WORK"
root=$(cd "$HERE/../.." && pwd)
gcc -Wall -Wextra -Werror -O2 -shared -fPIC "$root/pam/pam_keychain.c" -o pam_keychain.so -lpam || fail "compile pam_keychain.c"
nm -D --defined-only pam_keychain.so | grep -q " T pam_sm_open_session" || fail "pam_sm_open_session not exported"
if [ "$(id -u)" != 0 ] || ! command -v pamtester >/dev/null; then
    echo "figure: (needs root and pamtester for the login flow; only the build was checked)"
    exit 0
fi
user="kcpam$$"
service="keychain-pkcs11-test-$$"
password='Login pass 1!'
newpassword='Login pass 2!'
home="/home/$user"
agent="$home/agent/agent.sock"
cleanup() {
    rm -f "/etc/pam.d/$service"
    # The user's keychaind (the PAM session started it): the one listening on the test's socket.
    stop_detached "$(socket_pid "$agent")" || echo "keychaind of $user did not stop" >&2
    userdel -r "$user" >/dev/null 2>&1
}
trap cleanup EXIT
useradd -m -d "$home" -s /bin/sh "$user" || fail "useradd"
printf '%s:%s\n' "$user" "$password" | chpasswd || fail "chpasswd"
uid=$(id -u "$user")
cp pam_keychain.so "/tmp/pam_keychain_$$.so" && chmod 644 "/tmp/pam_keychain_$$.so"
module="/tmp/pam_keychain_$$.so"
trap 'cleanup; rm -f "$module"' EXIT
as_user() { setpriv --reuid="$uid" --regid="$uid" --init-groups env -i HOME="$home" PATH=/usr/bin:/bin KEYCHAIN_PKCS11_AGENT="$agent" KEYCHAIN_PKCS11_KDF_LOG_N=10 "$@"; }
as_user mkdir -m 700 "$home/agent" || fail "agent folder"
printf '%s\n' so-secret-1 | as_user tee "$home/so.pin" >/dev/null
printf '%s\n' "$password" | as_user tee "$home/user.pin" >/dev/null
as_user "$KEYCHAINCTL" create --label login --so-pin-file "$home/so.pin" --pin-file "$home/user.pin" >/dev/null || fail "create the user's login keychain"
printf 'pw' | as_user "$KEYCHAINCTL" add-generic-password -a me -s pam.example --pin-file "$home/user.pin" --password-file - >/dev/null || fail "add a password"
rm -f "$home/user.pin"

options="keychainctl=$KEYCHAINCTL agent=$agent"
cat >"/etc/pam.d/$service" <<PAM
auth     required  pam_unix.so
auth     optional  $module $options
account  required  pam_permit.so
session  optional  $module $options
password required  pam_unix.so
password optional  $module $options ask_old
PAM

# A wrong password: pam_unix refuses, nothing is unlocked.
out=$(printf '%s\n' 'wrong' | pamtester "$service" "$user" authenticate open_session 2>&1) && fail "a wrong password logged in: $out"
out=$(as_user "$KEYCHAINCTL" status 2>&1); expect_not_contains "$out" "login: unlocked" "nothing unlocked after a refused login"

# The right one: the session starts with the login keychain unlocked in keychaind.
out=$(printf '%s\n' "$password" | pamtester "$service" "$user" authenticate open_session close_session 2>&1) || fail "pamtester login: $out"
out=$(as_user "$KEYCHAINCTL" status 2>&1); expect_contains "$out" "login: unlocked" "login keychain unlocked by the PAM session"
out=$(as_user "$KEYCHAINCTL" find-generic-password -a me -s pam.example -w </dev/null 2>&1) || fail "find with no PIN after the PAM login: $out"
expect_eq "$out" "pw" "password read with no PIN after the PAM login"
as_user "$KEYCHAINCTL" lock --all >/dev/null || fail "lock"

# A helper that cannot run never fails the login.
sed -i "s|keychainctl=$KEYCHAINCTL|keychainctl=/nonexistent/keychainctl|" "/etc/pam.d/$service"
out=$(printf '%s\n' "$password" | pamtester "$service" "$user" authenticate open_session 2>&1) || fail "login failed because of the module: $out"
sed -i "s|keychainctl=/nonexistent/keychainctl|keychainctl=$KEYCHAINCTL|" "/etc/pam.d/$service"

# A password change (root's passwd asks no old password: ask_old makes the module ask for it).
out=$(printf '%s\n%s\n%s\n' "$password" "$newpassword" "$newpassword" | pamtester "$service" "$user" chauthtok 2>&1) || fail "pamtester chauthtok: $out"
printf '%s\n' "$newpassword" | as_user tee "$home/new.pin" >/dev/null
out=$(as_user "$KEYCHAINCTL" find-generic-password -a me -s pam.example -w --pin-file "$home/new.pin" </dev/null 2>&1) ||
    fail "the keychain's PIN did not follow the password change: $out"
expect_eq "$out" "pw" "the new login password opens the keychain"
out=$(printf '%s\n' "$newpassword" | pamtester "$service" "$user" authenticate open_session 2>&1) || fail "login with the new password: $out"
out=$(as_user "$KEYCHAINCTL" status 2>&1); expect_contains "$out" "login: unlocked" "unlocked with the new password"
