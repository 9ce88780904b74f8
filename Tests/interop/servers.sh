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

# ssh_login [SSH-OPTION...]: runs `echo ok` over ssh as $me on the sshd start_sshd started (port
# $port), $WORK/askpass answering ssh's prompts (the PIN for ssh -I); sets out (stdout), err
# (stderr, also in $WORK/ssh.err; ssh ends its messages with CR LF, taken out) and rc.
ssh_login() {
    out=$(SSH_ASKPASS="$WORK/askpass" SSH_ASKPASS_REQUIRE=force DISPLAY=:0 timeout 30 \
        ssh -F /dev/null -p "$port" -o StrictHostKeyChecking=no -o UserKnownHostsFile="$WORK/known_hosts" \
        -o PasswordAuthentication=no -o KbdInteractiveAuthentication=no -o ConnectTimeout=10 \
        -o LogLevel=ERROR "$@" "$me@127.0.0.1" echo ok </dev/null 2>"$WORK/ssh.err")
    rc=$?
    err=$(tr -d '\r' <"$WORK/ssh.err")
}

# ssh_fingerprint PUBLIC-KEY-FILE: "TYPE SHA256:..." as sshd logs an accepted key.
ssh_fingerprint() { ssh-keygen -l -f "$1" | awk '{ t = $NF; gsub(/[()]/, "", t); print t, $2 }'; }

# ssh_accepted [LOG]: the key named by the last "Accepted publickey" line of sshd's log ($WORK/sshd.log
# by default; sshd -e ends lines with CR LF).
ssh_accepted() { grep "Accepted publickey for $me from 127.0.0.1 " "${1:-$WORK/sshd.log}" | tail -n 1 | tr -d '\r' | sed 's/.* ssh2: //'; }

# start_swtpm DIR: a swtpm (TPM 2.0) with fresh state in DIR (made if missing, log in DIR.log) on
# two free consecutive ports of 127.0.0.1, started and initialised; sets swtpm_pid and tcti (the
# TCTI string that reaches it) and adds the PID to swtpm_pids. Stop it by its PID (stop_pid, or
# stop_swtpms for all of them), never by name: other tests and users run swtpm too.
swtpm_pids=()
start_swtpm() {
    local dir=$1 port tries
    mkdir -p "$dir" || fail "mkdir $dir"
    for tries in 1 2 3 4 5; do
        port=$(python3 -c 'import socket
for _ in range(50):
    a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
    b = socket.socket()
    try:
        b.bind(("127.0.0.1", p + 1)); print(p); break
    except OSError: pass
    finally: a.close(); b.close()')
        [ -n "$port" ] || continue
        swtpm socket --tpm2 --server "type=tcp,port=$port,bindaddr=127.0.0.1" --ctrl "type=tcp,port=$((port + 1)),bindaddr=127.0.0.1" \
            --tpmstate "dir=$dir" --flags not-need-init,startup-clear >"$dir.log" 2>&1 &
        swtpm_pid=$!
        for _ in $(seq 100); do
            if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
                swtpm_pids+=("$swtpm_pid")
                tcti="swtpm:host=127.0.0.1,port=$port"
                return 0
            fi
            kill -0 "$swtpm_pid" 2>/dev/null || break
            sleep 0.05
        done
        stop_pid "$swtpm_pid" # lost the port to another process, or did not start: again
    done
    fail "swtpm in $dir did not start (try $tries): $(cat "$dir.log")"
}

# stop_swtpms: stops every swtpm start_swtpm started, by its PID.
stop_swtpms() {
    local pid
    for pid in "${swtpm_pids[@]}"; do stop_pid "$pid"; done
    swtpm_pids=()
}
