# The Debian package as a user gets it (issue 35): built with dpkg-buildpackage from a clean
# clone of the committed tree (packaging the release build under test instead of building it
# again: KEYCHAIN_PKCS11_PREBUILT=1), lintian with no errors or warnings, installed with apt-get,
# and then, with only the installed files (a fresh user, PATH=/usr/bin:/bin, nothing of the build
# tree in the environment):
#   - /usr/share/doc/keychain-pkcs11/copyright is debian/copyright: machine-readable, Apache-2.0;
#   - keychainctl module-path names the installed module; a keychain made with keychainctl is read
#     through p11-kit-proxy.so by pkcs11-tool (no registration step) and its SSH key listed by
#     ssh-keygen -D;
#   - keychaind.socket is enabled for user sessions;
#   - after 'keychainctl secret-service enable', secret-tool on a fresh session bus activates the
#     installed keychaind (while gnome-keyring's activation file is installed beside it);
#   - the pam-auth-update profile is off until enabled, and enabled, pamtester's login through
#     the common-* stacks unlocks the user's login keychain;
#   - a newer build installed over it keeps the keychain readable and the settings;
#   - purge removes every file of the package and the PAM lines, and leaves the user's keychains,
#     device key and configuration as they were.
# Needs root (apt-get, useradd, /etc/pam.d); the release build only.
. "$HERE/lib.sh"

case "$MODULE" in
    */release/*) ;;
    *) echo "skip: the package is built from the release build"; exit 0 ;;
esac
if [ "$(id -u)" != 0 ]; then
    echo "figure: (needs root: apt-get install, useradd, /etc/pam.d; not run)"
    exit 0
fi
for tool in dpkg-buildpackage lintian apt-get pamtester pkcs11-tool ssh-keygen secret-tool dbus-run-session p11-kit pam-auth-update systemd-socket-activate p11tool; do
    command -v "$tool" >/dev/null || fail "$tool is missing (scripts/install-deps.sh installs it)"
done
if dpkg-query -W -f='${Status}' keychain-pkcs11 2>/dev/null | grep -q "installed"; then
    fail "keychain-pkcs11 is already installed on this machine: this test installs and purges it, so it does not run here"
fi
root=$(cd "$HERE/../.." && pwd)
bin=$(dirname "$MODULE")
[ -f "$root/.build/man/keychainctl.1" ] || fail "no manual pages in $root/.build/man (scripts/build-release.sh makes them)"
cd "$WORK" || fail "cd $WORK"
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
installed_module=/usr/lib/$multiarch/pkcs11/libkeychain-pkcs11.so

user="kcdeb$$"
home="/home/$user"
service="keychain-pkcs11-pkgtest-$$"
password='Package login 1!'
mkdir -p pam-backup && cp -a /etc/pam.d/common-* pam-backup/ || fail "back up /etc/pam.d/common-*"
runtime=""
cleanup() {
    if dpkg-query -W -f='${Status}' keychain-pkcs11 2>/dev/null | grep -q "installed"; then
        apt-get purge -y -q keychain-pkcs11 >>"$WORK/cleanup.log" 2>&1 || echo "cleanup: purge failed" >&2
    fi
    cp -a "$WORK"/pam-backup/common-* /etc/pam.d/ 2>/dev/null
    rm -f "/etc/pam.d/$service"
    if [ -n "$runtime" ]; then
        for socket in "$runtime/keychain-pkcs11/agent.sock"; do
            [ -S "$socket" ] && stop_detached "$(socket_pid "$socket")"
        done
        # keychaind started by the bus for the Secret Service, if it outlived its bus.
        for pid in $(pgrep -u "$user" -x keychaind 2>/dev/null); do stop_detached "$pid"; done
    fi
    id "$user" >/dev/null 2>&1 && userdel -r "$user" >/dev/null 2>&1
    [ -n "$runtime" ] && rm -rf "$runtime"
}
trap cleanup EXIT
trap 'exit 1' TERM INT

# ---- Build from a clean clone, with the release build under test ----------------------------
git clone -q "$root" src || fail "git clone"
mkdir -p src/.build && echo "$bin" >src/.build/release-path && cp -r "$root/.build/man" src/.build/man
start=$(date +%s)
(cd src && KEYCHAIN_PKCS11_PREBUILT=1 dpkg-buildpackage -b -us -uc) >build.log 2>&1 || fail "dpkg-buildpackage: $(tail -n 30 build.log)"
echo "figure: dpkg-buildpackage (packaging the release build) took $(($(date +%s) - start)) s"
deb=$(ls "$WORK"/keychain-pkcs11_*_amd64.deb) || fail "no package built"
[ "$(ls "$WORK"/*.deb | wc -l)" = 1 ] || fail "expected one package, got: $(ls "$WORK"/*.deb)"
version=$(dpkg-deb -f "$deb" Version)
expect_eq "$version" "$("$KEYCHAINCTL" --version | awk 'NR == 1 {print $2}')" "the package's version is keychainctl's"
depends=$(dpkg-deb -f "$deb" Depends)
# libstdc++6: the Swift runtime's C++ and BoringSSL's (swift-crypto) need it, linked dynamically.
for library in libc6 libssl3 libsqlite3-0 libgcrypt20 libsystemd0 libpam0g libstdc++6; do
    expect_contains "$depends" "$library" "Depends (from \${shlibs:Depends})"
done
expect_not_contains "$depends" "swift" "Depends: no Swift runtime"

# ---- lintian: no errors and no warnings ------------------------------------------------------
lintian --fail-on error,warning "$WORK"/keychain-pkcs11_*_amd64.changes >lintian.log 2>&1 ||
    fail "lintian reports errors or warnings: $(grep -E '^(E|W):' lintian.log)"
expect_eq "$(grep -c '^E:' lintian.log)" "0" "lintian errors"
expect_eq "$(grep -c '^W:' lintian.log)" "0" "lintian warnings"
echo "figure: lintian: $(grep -c '^E:' lintian.log) errors, $(grep -c '^W:' lintian.log) warnings"

# ---- Install ---------------------------------------------------------------------------------
apt-get install -y -q "$deb" >install.log 2>&1 || fail "apt-get install: $(tail -n 20 install.log)"
dpkg-query -L keychain-pkcs11 | sort >files.list
for file in "$installed_module" /usr/share/p11-kit/modules/keychain-pkcs11.module /usr/bin/keychainctl /usr/bin/keychaind \
    "/usr/lib/$multiarch/security/pam_keychain.so" /usr/share/pam-configs/keychain-pkcs11 \
    /usr/lib/systemd/user/keychaind.socket /usr/lib/systemd/user/keychaind.service /usr/include/keychain-pkcs11.h \
    /usr/share/man/man1/keychainctl.1.gz /usr/share/man/man1/keychaind.1.gz /usr/share/bash-completion/completions/keychainctl \
    /usr/share/doc/keychain-pkcs11/copyright /usr/share/doc/keychain-pkcs11/README.md /usr/share/doc/keychain-pkcs11/Docs/user-guide.md; do
    [ -f "$file" ] || fail "not installed: $file"
    grep -qxF "$file" files.list || fail "$file is not listed as the package's"
done
expect_contains "$(cat /usr/share/p11-kit/modules/keychain-pkcs11.module)" "module: $installed_module" "the p11-kit module file"
# The licence: debian/copyright as the package's copyright file, machine-readable (DEP-5) with the
# project under Apache-2.0, and no other licence file beside it.
copyright=/usr/share/doc/keychain-pkcs11/copyright
cmp -s "$copyright" src/debian/copyright || fail "$copyright is not debian/copyright"
expect_eq "$(head -n 1 "$copyright")" "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/" "first line of $copyright"
expect_eq "$(sed -n '/^Files: \*$/,/^$/p' "$copyright" | grep '^License:')" "License: Apache-2.0" "the licence of Files: * in $copyright"
expect_contains "$(cat "$copyright")" "/usr/share/common-licenses/Apache-2.0" "$copyright"
[ -e /usr/share/doc/keychain-pkcs11/LICENSE ] && fail "a LICENSE file beside $copyright (Debian wants the copyright file only)"
expect_eq "$(systemctl --global is-enabled keychaind.socket 2>&1)" "enabled" "keychaind.socket enabled for user sessions"
[ -L /etc/systemd/user/sockets.target.wants/keychaind.socket ] || fail "no /etc/systemd/user/sockets.target.wants/keychaind.socket"
expect_contains "$(man -w keychaind 2>&1)" "/usr/share/man/man1/keychaind.1.gz" "man keychaind"
grep -q pam_keychain /etc/pam.d/common-auth /etc/pam.d/common-session /etc/pam.d/common-password &&
    fail "the PAM profile is on after install (it must stay off until pam-auth-update --enable)"
echo "figure: installed $(grep -c . files.list) paths"

# ---- A fresh user, with only the installed files ---------------------------------------------
useradd -m -d "$home" -s /bin/sh "$user" || fail "useradd"
printf '%s:%s\n' "$user" "$password" | chpasswd || fail "chpasswd"
uid=$(id -u "$user")
runtime="/run/user/$uid"
[ -e "$runtime" ] && fail "$runtime exists already"
mkdir -p "$runtime" && chown "$user:$user" "$runtime" && chmod 700 "$runtime"
user_session=(setpriv --reuid="$uid" --regid="$uid" --init-groups
    env -i HOME="$home" USER="$user" LOGNAME="$user" PATH=/usr/bin:/bin XDG_RUNTIME_DIR="$runtime" LANG=C.UTF-8)
as_user() { "${user_session[@]}" "$@"; }
# The same, replacing the calling (sub)shell: its PID becomes the program's.
exec_as_user() { exec "${user_session[@]}" "$@"; }
printf 'so-secret-1\n' | as_user tee "$home/so.pin" >/dev/null
printf '%s\n' "$password" | as_user tee "$home/user.pin" >/dev/null
# The module is now loaded by every program that lists p11-kit's modules, for every user: a user
# with no keychain gets an empty slot and nothing written to the home folder.
touch "$WORK/before-listing"
expect_contains "$(as_user p11-kit list-modules 2>&1)" "keychain-pkcs11" "p11-kit list-modules for a user with no keychain"
expect_contains "$(as_user pkcs11-tool --module "/usr/lib/$multiarch/p11-kit-proxy.so" -L 2>&1)" "token state:   uninitialized" "the empty slot through p11-kit-proxy.so"
# (Only this module's files: other modules registered with p11-kit may write their own.)
expect_eq "$(find "$home" -newer "$WORK/before-listing" -path "*keychain-pkcs11*")" "" "files written to the home folder by loading the module"
expect_eq "$(as_user keychainctl module-path)" "$installed_module" "keychainctl module-path"
as_user keychainctl create --label login --so-pin-file "$home/so.pin" --pin-file "$home/user.pin" >/dev/null || fail "keychainctl create"
printf 'pkg-secret' | as_user keychainctl add-generic-password -a alice -s pkg.example --pin-file "$home/user.pin" --password-file - >/dev/null ||
    fail "add-generic-password"
out=$(as_user keychainctl generate-key --type ec --label pkg-ssh --pin-file "$home/user.pin" 2>&1) || fail "generate-key: $out"
ssh_line=$(sed -n 's/^SSH: *//p' <<<"$out" | grep '^ecdsa-sha2-nistp256 ') || fail "generate-key printed no authorized_keys line: $out"

# p11-kit sees the module with no registration step; pkcs11-tool reads through p11-kit-proxy.so.
expect_contains "$(as_user p11-kit list-modules 2>&1)" "keychain-pkcs11" "p11-kit list-modules"
proxy=/usr/lib/$multiarch/p11-kit-proxy.so
[ -f "$proxy" ] || fail "no $proxy (p11-kit-modules)"
expect_contains "$(as_user pkcs11-tool --module "$proxy" -L 2>&1)" "token label        : login" "pkcs11-tool -L through p11-kit-proxy.so"
as_user pkcs11-tool --module "$proxy" --token-label login --login --pin "$password" \
    --read-object --type data --application-label pkg.example --output-file "$home/read.out" >pkcs11-tool.log 2>&1 ||
    fail "pkcs11-tool --read-object through p11-kit-proxy.so: $(cat pkcs11-tool.log)"
expect_eq "$(cat "$home/read.out")" "pkg-secret" "the password read through p11-kit-proxy.so"
# GnuTLS's p11tool finds the token through p11-kit's module list, with no --provider.
expect_contains "$(as_user p11tool --list-tokens 2>&1)" "token=login" "p11tool --list-tokens (GnuTLS through p11-kit)"
out=$(as_user ssh-keygen -D "$installed_module" </dev/null 2>/dev/null) || fail "ssh-keygen -D $installed_module"
expect_contains "$out" "$(awk '{print $2}' <<<"$ssh_line")" "ssh-keygen -D lists the keychain's SSH key"

# keychaind.socket as the installed units describe it (ListenStream=, ExecStart=), with systemd's
# own socket-activation tool standing in for the user manager (CI has none): the first client
# starts the installed keychaind, nothing is started by hand.
listen=$(sed -n 's/^ListenStream=//p' /usr/lib/systemd/user/keychaind.socket)
exec_start=$(sed -n 's/^ExecStart=//p' /usr/lib/systemd/user/keychaind.service)
expect_eq "$listen" "%t/keychain-pkcs11/agent.sock" "the socket unit's ListenStream"
expect_eq "$exec_start" "/usr/bin/keychaind --foreground" "the service unit's ExecStart"
socket="$runtime/keychain-pkcs11/agent.sock"
as_user mkdir -m 700 "$runtime/keychain-pkcs11" || fail "the socket's folder"
# shellcheck disable=SC2086
(exec_as_user systemd-socket-activate -l "$socket" $exec_start 2>"$WORK/activate.log") &
activated=$!
for _ in $(seq 1 50); do [ -S "$socket" ] && break; sleep 0.1; done
[ -S "$socket" ] || fail "systemd-socket-activate did not listen on $socket: $(cat "$WORK/activate.log")"
out=$(as_user keychainctl unlock --pin-file "$home/user.pin" 2>&1) || fail "keychainctl unlock through the activated socket: $out"
expect_eq "$(readlink "/proc/$activated/exe")" "/usr/bin/keychaind" "the process behind the socket after the first client"
expect_contains "$(as_user keychainctl status 2>&1)" "login: unlocked" "unlocked through the socket-activated keychaind"
as_user keychainctl lock --all >/dev/null || fail "lock --all"

# The Secret Service: enabled by the user, activated by a fresh session bus, gnome-keyring's
# activation file installed beside it.
gnome_file=/usr/share/dbus-1/services/org.freedesktop.secrets.service
[ -f "$gnome_file" ] || fail "no $gnome_file: gnome-keyring is not installed (scripts/install-deps.sh installs it)"
expect_not_contains "$(cat "$gnome_file")" "keychaind" "the system's activation file is gnome-keyring's"
as_user keychainctl secret-service enable >enable.log 2>&1 || fail "secret-service enable: $(cat enable.log)"
expect_contains "$(cat "$home/.local/share/dbus-1/services/org.freedesktop.secrets.service")" "Exec=/usr/bin/keychaind" "the user's activation file"
cat >"$home/session.sh" <<'EOF'
set -u
keychainctl unlock --pin-file "$HOME/user.pin" >/dev/null || { echo "unlock failed"; exit 1; }
printf 'from-secret-tool' | secret-tool store --label='Package test' service ss.example account bob || { echo "secret-tool store failed"; exit 1; }
echo "lookup=$(secret-tool lookup service pkg.example account alice)"
owner=$(dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus org.freedesktop.DBus.GetConnectionUnixProcessID string:org.freedesktop.secrets | awk '/uint32/ {print $2}')
echo "exe=$(readlink "/proc/$owner/exe")"
EOF
chown "$user:$user" "$home/session.sh"
out=$(as_user timeout 60 dbus-run-session -- bash "$home/session.sh" 2>&1) || fail "Secret Service session: $out"
expect_contains "$out" "lookup=pkg-secret" "secret-tool finds the keychainctl password"
expect_contains "$out" "exe=/usr/bin/keychaind" "the bus activated the installed keychaind"
out=$(as_user keychainctl find-generic-password -a bob -s ss.example -w </dev/null 2>&1) || fail "the secret-tool item is not in the keychain: $out"
expect_eq "$out" "from-secret-tool" "secret-tool's item, read with keychainctl"
as_user keychainctl lock --all >/dev/null || fail "lock --all"

# PAM: the profile, enabled with one command, drives pamtester's login through the common stacks.
pam-auth-update --enable keychain-pkcs11 >pam.log 2>&1 || fail "pam-auth-update --enable: $(cat pam.log)"
for stack in common-auth common-session common-password; do
    grep -q "pam_keychain.so" "/etc/pam.d/$stack" || fail "pam_keychain.so not in /etc/pam.d/$stack after pam-auth-update --enable"
done
printf '@include common-auth\n@include common-account\n@include common-session\n@include common-password\n' >"/etc/pam.d/$service"
out=$(printf '%s\n' 'wrong password' | pamtester "$service" "$user" authenticate 2>&1) && fail "a wrong password logged in: $out"
out=$(printf '%s\n' "$password" | pamtester "$service" "$user" authenticate open_session close_session 2>&1) || fail "pamtester: $out"
expect_contains "$(as_user keychainctl status 2>&1)" "login: unlocked" "the installed PAM module unlocked the login keychain"
out=$(as_user keychainctl find-generic-password -a alice -s pkg.example -w </dev/null 2>&1) || fail "no PIN-less read after the PAM login: $out"
expect_eq "$out" "pkg-secret" "read with no PIN after the PAM login"
as_user keychainctl lock --all >/dev/null || fail "lock --all"

# ---- Upgrade: a newer build over this one ----------------------------------------------------
sed -i "1s/($version)/($version+pkgtest1)/" src/debian/changelog
(cd src && KEYCHAIN_PKCS11_PREBUILT=1 dpkg-buildpackage -b -us -uc) >build2.log 2>&1 || fail "second dpkg-buildpackage: $(tail -n 20 build2.log)"
apt-get install -y -q "$WORK/keychain-pkcs11_${version}+pkgtest1_amd64.deb" >upgrade.log 2>&1 || fail "upgrade: $(tail -n 20 upgrade.log)"
expect_eq "$(dpkg-query -W -f='${Version}' keychain-pkcs11)" "$version+pkgtest1" "the installed version after the upgrade"
out=$(as_user keychainctl find-generic-password -a alice -s pkg.example -w --pin-file "$home/user.pin" </dev/null 2>&1) || fail "keychain unreadable after the upgrade: $out"
expect_eq "$out" "pkg-secret" "the keychain after the upgrade"
expect_eq "$(systemctl --global is-enabled keychaind.socket 2>&1)" "enabled" "keychaind.socket still enabled after the upgrade"
grep -q "pam_keychain.so" /etc/pam.d/common-auth || fail "the upgrade turned the PAM profile off"

# ---- Purge -----------------------------------------------------------------------------------
stop_detached "$(socket_pid "$runtime/keychain-pkcs11/agent.sock")" 2>/dev/null
user_files() { find "$home" -type f ! -path "*/read.out" -print0 | sort -z | xargs -0 sha256sum; }
user_files >before.sums
apt-get purge -y -q keychain-pkcs11 >purge.log 2>&1 || fail "apt-get purge: $(tail -n 20 purge.log)"
dpkg-query -W -f='${Status}' keychain-pkcs11 2>/dev/null | grep -q "installed" && fail "still installed after purge"
left=""
while read -r path; do
    [ -d "$path" ] && continue          # shared folders (/usr/bin, /usr/share/man/man1, …) stay
    [ -e "$path" ] || [ -L "$path" ] && left="$left $path"
done <files.list
expect_eq "$left" "" "files of the package left after purge"
[ -e /usr/share/doc/keychain-pkcs11 ] && fail "/usr/share/doc/keychain-pkcs11 left after purge"
[ -e /etc/systemd/user/sockets.target.wants/keychaind.socket ] && fail "the socket's enablement link is left after purge"
grep -l "pam_keychain" /etc/pam.d/common-* && fail "pam_keychain.so left in the PAM stacks after purge"
[ -e /var/lib/dpkg/info/keychain-pkcs11.list ] && fail "dpkg still lists the package's files"
expect_not_contains "$(p11-kit list-modules 2>&1)" "keychain-pkcs11" "p11-kit list-modules after purge"
user_files >after.sums
cmp -s before.sums after.sums || fail "purge changed the user's files: $(diff before.sums after.sums)"
grep -q "/.local/share/keychain-pkcs11/" before.sums || fail "the user's keychain files were not among those compared: $(cat before.sums)"
grep -q "/.local/state/keychain-pkcs11/device-key" before.sums || fail "the user's device key was not among those compared: $(cat before.sums)"
grep -q "/.local/share/dbus-1/services/org.freedesktop.secrets.service" before.sums || fail "the user's activation file was not among those compared"
echo "figure: purge left none of $(grep -c . files.list) paths; the user's $(grep -c . before.sums) files unchanged"
