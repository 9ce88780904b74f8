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
