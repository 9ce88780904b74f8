# Helpers for interop tests that start a throwaway server on 127.0.0.1 (sourced after lib.sh).

# free_port: a TCP port on 127.0.0.1 that was free a moment ago (chosen by the kernel among the
# ephemeral, high ports).
free_port() {
    python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

# wait_for_log FILE TEXT PID SECONDS: waits until FILE contains TEXT; fails when PID exits first
# or after SECONDS.
wait_for_log() {
    local deadline=$((SECONDS + $4))
    until grep -qF -- "$2" "$1" 2>/dev/null; do
        kill -0 "$3" 2>/dev/null || fail "server exited before [$2]: $(cat "$1" 2>/dev/null)"
        [ "$SECONDS" -lt "$deadline" ] || fail "no [$2] after $4 s: $(cat "$1" 2>/dev/null)"
        sleep 0.05
    done
}

# stop_pid PID: terminates PID (a process this test started) and reaps it.
stop_pid() {
    [ -n "${1:-}" ] || return 0
    kill "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    return 0
}

# start_sshd [EXTRA-CONFIG-LINE...]: a throwaway sshd on 127.0.0.1 in the background, with host
# key $WORK/host_key (made if missing), keys from $WORK/authorized_keys, no passwords, a verbose
# log in $WORK/sshd.log; sets port and sshd_pid and returns once it listens.
start_sshd() {
    [ -f "$WORK/host_key" ] || ssh-keygen -q -t ed25519 -N '' -C host-key -f "$WORK/host_key" || fail "host key"
    port=$(free_port)
    [ -n "$port" ] || fail "no free port"
    printf '%s\n' "ListenAddress 127.0.0.1:$port" "HostKey $WORK/host_key" "PidFile $WORK/sshd.pid" \
        "AuthorizedKeysFile $WORK/authorized_keys" "PubkeyAuthentication yes" "PasswordAuthentication no" \
        "KbdInteractiveAuthentication no" "UsePAM no" "StrictModes no" "PermitRootLogin prohibit-password" "LogLevel VERBOSE" \
        "$@" >"$WORK/sshd_config" || fail "write sshd_config"
    # sshd started as root needs its privilege separation directory.
    if [ "$(id -u)" -eq 0 ] && [ ! -d /run/sshd ]; then mkdir -p -m 0755 /run/sshd || fail "mkdir /run/sshd"; fi
    /usr/sbin/sshd -D -e -f "$WORK/sshd_config" >"$WORK/sshd.log" 2>&1 &
    sshd_pid=$!
    wait_for_log "$WORK/sshd.log" "Server listening on 127.0.0.1 port $port." "$sshd_pid" 20
}
