# The unlock session: keychaind started in the foreground on a private socket; `keychainctl
# unlock` with a PIN file; then new processes use the keychain with no PIN: pkcs11-tool logs in
# with a NULL PIN (CKF_PROTECTED_AUTHENTICATION_PATH), keychainctl prints a password without
# asking. `keychainctl lock` and the idle timeout lock it again; a wrong PIN is refused and
# counted; a peer of another uid gets nothing; killing the daemon loses nothing stored; SIGTERM
# locks everything and removes the socket; logind's sleep and session-lock signals lock what the
# keychain's session policy says. The figure: C_Login through the session against a
# PIN login (scrypt at the test's cost and at the default cost).
. "$HERE/lib.sh"
cd "$WORK" || fail "cd $WORK"
keychaind=$(dirname "$KEYCHAINCTL")/keychaind
[ -x "$keychaind" ] || fail "no keychaind beside keychainctl ($keychaind)"
mkdir -m 700 agent || fail "agent folder"
export KEYCHAIN_PKCS11_AGENT="$WORK/agent/agent.sock"
unset KEYCHAIN_PKCS11_PIN KEYCHAIN_PKCS11_PROMPT
printf '%s\n' so-secret-1 >so.pin
printf '%s\n' user-pin-1 >user.pin
printf '%s\n' wrong-pin >wrong.pin

kc create --label login --so-pin-file so.pin --pin-file user.pin >/dev/null || fail "create login"
printf 'hunter2' | kc add-generic-password -a alice -s github.com --pin-file user.pin --password-file - >/dev/null || fail "add a password"
printf 'after' | kc add-generic-password -a bob -s afu.example --accessible after-first-unlock --pin-file user.pin --password-file - >/dev/null ||
    fail "add an AfterFirstUnlock password"
slot=$(slot_of login)
[ -n "$slot" ] || fail "no slot for login"
flags() { p11 --slot "$slot" -T 2>/dev/null | sed -n 's/^  token flags        : //p'; }

# Without the daemon: locked, and nothing changes for any door.
out=$(kc status); expect_contains "$out" "keychaind: not running" "status without a daemon"
expect_not_contains "$(flags)" "PIN pad present" "flags without a session"

"$keychaind" --foreground --socket "$KEYCHAIN_PKCS11_AGENT" 2>daemon.log &
daemon=$!
# A failing step must not leave the daemon running.
trap 'kill "$daemon" 2>/dev/null' EXIT
for _ in $(seq 1 50); do [ -S "$KEYCHAIN_PKCS11_AGENT" ] && break; sleep 0.1; done
[ -S "$KEYCHAIN_PKCS11_AGENT" ] || fail "keychaind did not listen: $(cat daemon.log)"
expect_eq "$(stat -c %a agent)" "700" "socket folder mode"
out=$(kc status); expect_contains "$out" "login: locked" "status before unlock"

# A wrong PIN is refused (and counted), then the right one unlocks.
expect_status 3 "unlock with a wrong PIN" kc unlock --pin-file wrong.pin
out=$(kc info 2>&1); expect_contains "$out" "1 of 10 failed tries" "the wrong PIN was counted"
out=$(kc unlock --pin-file user.pin) || fail "unlock: $out"
expect_contains "$out" "is unlocked for this session" "unlock message"
out=$(kc status --json); expect_contains "$out" '"unlocked":true' "status --json after unlock"
expect_contains "$(flags)" "PIN pad present" "flags while the session holds the keychain"

# New processes, no PIN anywhere: keychainctl, and pkcs11-tool with a NULL PIN.
out=$(kc find-generic-password -a alice -s github.com -w </dev/null 2>&1) || fail "find without a PIN: $out"
expect_eq "$out" "hunter2" "keychainctl reads the password with no PIN"
out=$(p11 --slot "$slot" --login -O --type data </dev/null 2>&1) || fail "pkcs11-tool NULL-PIN login: $out"
expect_contains "$out" "github.com" "pkcs11-tool lists the private password object"
# OpenSSH lists the key; OpenSSL's pkcs11 engine (libp11) signs with it, no PIN in the URI: it
# sees the protected authentication path and logs in with a NULL PIN.
kc generate-key --type ec --label session-key --pin-file user.pin >/dev/null || fail "generate a key"
out=$(ssh-keygen -D "$MODULE" 2>/dev/null) || fail "ssh-keygen -D"
expect_contains "$out" "ecdsa-sha2-nistp256" "ssh-keygen -D lists the token key"
enginesdir=$(openssl version -e | sed -n 's/^ENGINESDIR: "\(.*\)"$/\1/p')
if [ -f "$enginesdir/pkcs11.so" ]; then
    printf 'openssl_conf = init\n[init]\nengines = engines\n[engines]\npkcs11 = pkcs11\n[pkcs11]\nengine_id = pkcs11\ndynamic_path = %s\nMODULE_PATH = %s\ninit = 0\n' \
        "$enginesdir/pkcs11.so" "$MODULE" >engine.cnf
    printf 'signed with no PIN' >data
    out=$(OPENSSL_CONF="$WORK/engine.cnf" timeout 30 openssl pkeyutl -engine pkcs11 -keyform engine -sign \
        -inkey "pkcs11:token=login;object=session-key;type=private" -in data -out data.sig </dev/null 2>&1) ||
        fail "OpenSSL engine signature with no PIN: $out"
    OPENSSL_CONF="$WORK/engine.cnf" timeout 30 openssl pkey -engine pkcs11 -inform engine -pubin \
        -in "pkcs11:token=login;object=session-key;type=public" -out session-key.pub 2>/dev/null || fail "public key through the engine"
    : >plain.cnf
    OPENSSL_CONF="$WORK/plain.cnf" openssl pkeyutl -verify -pubin -inkey session-key.pub -in data -sigfile data.sig >/dev/null 2>&1 ||
        fail "the signature made with no PIN does not verify"
fi

# The cost of C_Login: through the session against the PIN (scrypt).
cat >login.c <<'C'
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "keychain-pkcs11.h"
int main(int argc, char **argv) {
    void *lib = dlopen(argv[1], RTLD_NOW);
    CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(lib, "C_GetFunctionList");
    CK_FUNCTION_LIST_PTR f; get(&f);
    if (f->C_Initialize(NULL) != CKR_OK) return 2;
    CK_SLOT_ID slot = strtoul(argv[2], NULL, 10);
    const char *pin = argc > 3 ? argv[3] : NULL;
    int rounds = 20; double total = 0;
    for (int i = 0; i < rounds; i++) {
        CK_SESSION_HANDLE s;
        if (f->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &s) != CKR_OK) return 3;
        struct timespec a, b; clock_gettime(CLOCK_MONOTONIC, &a);
        CK_RV rv = f->C_Login(s, CKU_USER, (CK_UTF8CHAR_PTR)pin, pin ? strlen(pin) : 0);
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (rv != CKR_OK) { printf("rv 0x%lx\n", rv); return 4; }
        total += (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6;
        f->C_Logout(s); f->C_CloseSession(s);
    }
    printf("%.3f\n", total / rounds);
    f->C_Finalize(NULL);
    return 0;
}
C
gcc -O2 -I"$HERE/../../Include" login.c -o login -ldl || fail "compile login.c"
session_ms=$(./login "$MODULE" "$slot") || fail "C_Login through the session: $session_ms"
pin_ms=$(./login "$MODULE" "$slot" user-pin-1) || fail "C_Login with the PIN: $pin_ms"
echo "figure: C_Login through keychaind ${session_ms} ms; with the PIN ${pin_ms} ms (scrypt 2^10, this test's cost)"
# The same with the default cost (scrypt 2^15) on a second keychain.
env -u KEYCHAIN_PKCS11_KDF_LOG_N "$KEYCHAINCTL" create --label costly --so-pin-file so.pin --pin-file user.pin >/dev/null || fail "create costly"
kc unlock -k costly --pin-file user.pin >/dev/null || fail "unlock costly"
costly=$(slot_of costly)
session_ms=$(./login "$MODULE" "$costly") || fail "C_Login through the session (costly): $session_ms"
pin_ms=$(./login "$MODULE" "$costly" user-pin-1) || fail "C_Login with the PIN (costly): $pin_ms"
echo "figure: default cost: C_Login through keychaind ${session_ms} ms; with the PIN ${pin_ms} ms (scrypt 2^15)"
kc lock -k costly >/dev/null || fail "lock costly"

# Locked again: every door asks again.
kc lock >/dev/null || fail "lock"
out=$(kc status); expect_contains "$out" "login: locked" "status after lock"
out=$(kc find-generic-password -a alice -s github.com -w </dev/null 2>&1) && fail "find after lock needed no PIN: $out"
out=$(p11 --slot "$slot" --login -O </dev/null 2>&1) && fail "NULL-PIN login after lock succeeded: $out"

# The idle timeout locks by itself.
kc unlock --pin-file user.pin --timeout 2s >/dev/null || fail "unlock with a timeout"
out=$(kc status --json); expect_contains "$out" '"idleTimeout":2' "status shows the timeout"
sleep 4
out=$(kc status); expect_contains "$out" "login: locked" "locked by the idle timeout"

# AfterFirstUnlock: readable without a login from the first unlock until keychaind stops;
# WhenUnlocked items are not. (A public pkcs11-tool session, no login.)
out=$(p11 --slot "$slot" -O --type data 2>&1)
expect_contains "$out" "afu.example" "AfterFirstUnlock item after the session's first unlock"
expect_not_contains "$out" "github.com" "WhenUnlocked item while locked"

# A peer of another uid gets no answer (as root only: another uid is needed).
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && [ -x /usr/bin/python3 ]; then
    # Open the way to the socket for the other uid: only SO_PEERCRED is left to refuse it.
    chmod 755 "$(dirname "$WORK")" "$WORK" agent && chmod 777 "$KEYCHAIN_PKCS11_AGENT"
    out=$(setpriv --reuid=65534 --regid=65534 --clear-groups /usr/bin/python3 - "$KEYCHAIN_PKCS11_AGENT" <<'PY' 2>&1
import socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
s.connect(sys.argv[1])
try:
    s.sendall(struct.pack(">I", 1) + bytes([5]))
    data = s.recv(16)
except (BrokenPipeError, ConnectionResetError):
    data = b""
print("answered" if data else "no answer")
PY
)
    expect_eq "$out" "no answer" "a peer of another uid"
    chmod 700 agent "$(dirname "$WORK")"
else
    echo "figure: (not root: the other-uid peer check needs root to switch uid)"
fi

# Killing the daemon loses nothing stored; SIGTERM locks everything and removes the socket.
kc unlock --pin-file user.pin >/dev/null || fail "unlock again"
kill -KILL "$daemon"; wait "$daemon" 2>/dev/null
out=$(kc find-generic-password -a alice -s github.com -w --pin-file user.pin) || fail "find after the daemon was killed"
expect_eq "$out" "hunter2" "nothing lost with the daemon"
"$keychaind" --foreground --socket "$KEYCHAIN_PKCS11_AGENT" 2>daemon2.log &
daemon=$!
for _ in $(seq 1 50); do kc status 2>/dev/null | grep -q "keychaind: running" && break; sleep 0.1; done
out=$(kc status); expect_contains "$out" "login: locked" "a new daemon starts with everything locked"
kc unlock --pin-file user.pin >/dev/null || fail "unlock on the new daemon"
kill -TERM "$daemon"; wait "$daemon"
[ -e "$KEYCHAIN_PKCS11_AGENT" ] && fail "the socket stayed after SIGTERM"
out=$(p11 --slot "$slot" -O --type data 2>&1)
expect_not_contains "$out" "afu.example" "AfterFirstUnlock item once keychaind stopped"
out=$(kc find-generic-password -a alice -s github.com -w </dev/null 2>&1) && fail "find after SIGTERM needed no PIN"

# Sleep and session lock: logind's signals on a stand-in system bus (dbus-daemon), sent with
# dbus-send. "costly" is set not to lock on sleep; "login" keeps the default (lock).
kc session-policy -k costly --lock-on-sleep no --pin-file user.pin >/dev/null || fail "session-policy"
out=$(kc session-policy -k costly); expect_contains "$out" "lock on sleep and session lock: no" "policy shown"
dbus-daemon --session --fork --print-address=3 --print-pid=4 3>bus.addr 4>bus.pid || fail "start a bus"
bus=$(head -n 1 bus.addr)
trap 'kill "$daemon" "$(cat "$WORK/bus.pid")" 2>/dev/null' EXIT
DBUS_SYSTEM_BUS_ADDRESS="$bus" XDG_SESSION_ID=1 "$keychaind" --foreground --socket "$KEYCHAIN_PKCS11_AGENT" 2>daemon3.log &
daemon=$!
for _ in $(seq 1 50); do kc status 2>/dev/null | grep -q "keychaind: running" && break; sleep 0.1; done
kc unlock --pin-file user.pin >/dev/null || fail "unlock login"
kc unlock -k costly --pin-file user.pin >/dev/null || fail "unlock costly"
dbus-send --bus="$bus" --type=signal /org/freedesktop/login1 org.freedesktop.login1.Manager.PrepareForSleep boolean:false || fail "send PrepareForSleep(false)"
sleep 1
out=$(kc status); expect_contains "$out" "login: unlocked" "waking up locks nothing"
dbus-send --bus="$bus" --type=signal /org/freedesktop/login1 org.freedesktop.login1.Manager.PrepareForSleep boolean:true || fail "send PrepareForSleep(true)"
sleep 1
out=$(kc status)
expect_contains "$out" "login: locked" "locked before sleep"
expect_contains "$out" "costly: unlocked" "a keychain set not to lock on sleep"
kc unlock --pin-file user.pin >/dev/null || fail "unlock login again"
dbus-send --bus="$bus" --type=signal /org/freedesktop/login1/session/_32 org.freedesktop.login1.Session.Lock || fail "send another session's Lock"
sleep 1
out=$(kc status); expect_contains "$out" "login: unlocked" "another session's lock locks nothing"
dbus-send --bus="$bus" --type=signal /org/freedesktop/login1/session/_31 org.freedesktop.login1.Session.Lock || fail "send Lock"
sleep 1
out=$(kc status); expect_contains "$out" "login: locked" "locked with the session"
expect_contains "$(cat daemon3.log)" "session lock: locked 1 keychain(s)" "the daemon says why"
kill -TERM "$daemon"; wait "$daemon"

# Socket activation, as keychaind.socket does it (systemd's own tool passes the socket as fd 3):
# the daemon answers on it, and leaves it in place when it stops.
if command -v systemd-socket-activate >/dev/null; then
    rm -f "$KEYCHAIN_PKCS11_AGENT"
    systemd-socket-activate -l "$KEYCHAIN_PKCS11_AGENT" "$keychaind" --foreground 2>daemon4.log &
    daemon=$!
    for _ in $(seq 1 50); do [ -S "$KEYCHAIN_PKCS11_AGENT" ] && break; sleep 0.1; done
    out=$(kc status); expect_contains "$out" "keychaind: running" "socket-activated keychaind answers"
    kc unlock --pin-file user.pin >/dev/null || fail "unlock through the activated daemon"
    kill -TERM "$daemon"; wait "$daemon"
    expect_contains "$(cat daemon4.log)" "every keychain locked" "activated daemon stopped cleanly"
fi
true
