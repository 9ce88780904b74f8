#!/usr/bin/env bash
# Runs two Secret Service clients' own test suites, as their authors ship them, against
# keychaind --secret-service on a private session bus:
#   SecretStorage 3.5.0   its sdist's tests/ (every test; the mock-service-only classes skip
#                         themselves when the bus name is the real org.freedesktop.secrets)
#   keyring 25.7.0        its sdist's tests/backends/test_SecretService.py (through SecretStorage,
#                         in the collection /org/freedesktop/secrets/collection/session) and
#                         tests/backends/test_libsecret.py (through libsecret's GObject bindings,
#                         in the collection with the alias 'session')
# Both sdists are fetched from PyPI at test time (pinned versions and sha256 hashes, source
# distributions only), never kept in this repository. Prints a pass/fail/skip table and ends
# with "secret-service-suites: N passed, N failed, N skipped" (the runs against keychaind);
# exits 0 only when no test failed, and no test was skipped, other than those listed below.
#
# Usage: scripts/secret-service-suites.sh BIN_FOLDER [--against gnome-keyring]
#   BIN_FOLDER   holds keychaind and keychainctl (a release or debug build folder)
#   --against gnome-keyring
#                also runs the same suites against gnome-keyring-daemon --unlock
#                --components=secrets (its own private bus and HOME), for comparison: a second
#                column in the table; its failures count too (the reference must pass).
# The sdists and a venv are cached in $SECRET_SERVICE_SUITES_CACHE (default
# /tmp/secret-service-suites-3.5.0-25.7.0); needs PyPI on the first run, and the Debian packages
# of scripts/install-deps.sh: python3-venv, python3-gi and gir1.2-secret-1 (keyring's libsecret
# backend imports gi.repository.Secret: the venv sees Debian's PyGObject through
# --system-site-packages), dbus-daemon (dbus-run-session), gnome-keyring for the comparison.
# Each run's pytest logs and junit files, the provider's log, a dbus-monitor log of the whole bus
# and the prompts the prompt program was asked are kept in $SECRET_SERVICE_SUITES_RESULTS
# (default $cache/results/PROVIDER); when a run has failures the table is followed by the errors
# the provider answered on the bus, grouped by call.
# Every process this script starts is stopped by its PID.
set -euo pipefail
secretstorage_version=3.5.0
secretstorage_sha256=f04b8e4689cbce351744d5537bf6b1329c6fc68f91fa666f60a380edddcd11be
keyring_version=25.7.0
keyring_sha256=fe01bd85eb3f8fb3dd0405defdeac9a5b4f6f0439edbb3149577f244a2e8245b
here=$(cd "$(dirname "$0")" && pwd)
self="$here/$(basename "$0")"
cache=${SECRET_SERVICE_SUITES_CACHE:-/tmp/secret-service-suites-$secretstorage_version-$keyring_version}

# Failures that are known and accepted: one line each, PROVIDER|JUNIT CLASSNAME|TEST NAME|TEXT
# (a piece of the failure's message or traceback that must be there)|REASON. Matched exactly on
# provider, class and name: the same test failing with another message is a failure. Empty: every
# test must pass.
expected_failures=$(cat <<'EXPECTED'
EXPECTED
)
# Tests that may skip, PROVIDER|CLASSNAME|REASON: any other skip counts as a failure (a suite
# whose backend is not viable skips itself whole, which must not read as a pass).
expected_skips=$(cat <<'SKIPS'
*|tests.test_collection.MockCollectionTest|SecretStorage's own mock service only: skipped when the bus name is org.freedesktop.secrets
*|tests.test_unlocking.LockingUnlockingTest|SecretStorage's own mock service only: skipped when the bus name is org.freedesktop.secrets
SKIPS
)

# ---------------------------------------------------------------------------------------------
# Inside a private session bus (the script runs itself under dbus-run-session): start the
# provider, run the two suites, stop the provider.
# ---------------------------------------------------------------------------------------------
if [ -n "${SECRET_SERVICE_SUITES_INNER:-}" ]; then
    provider=$SECRET_SERVICE_SUITES_INNER
    out=$SECRET_SERVICE_SUITES_OUT
    python="$cache/venv/bin/python"
    provider_pid=
    stop_provider() {
        [ -n "$provider_pid" ] || return 0
        kill "$provider_pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$provider_pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$provider_pid" 2>/dev/null || true
        wait "$provider_pid" 2>/dev/null || true
        provider_pid=
    }
    name_owned() {
        dbus-send --session --print-reply --dest=org.freedesktop.DBus /org/freedesktop/DBus \
            org.freedesktop.DBus.NameHasOwner string:org.freedesktop.secrets 2>/dev/null | grep -q 'boolean true'
    }
    # Every call and reply on this private bus, for the summary of the errors the provider
    # answered (which call, which error name and message).
    dbus-monitor --session >"$out/bus.log" 2>&1 &
    monitor_pid=$!
    stop_monitor() { kill "$monitor_pid" 2>/dev/null || true; wait "$monitor_pid" 2>/dev/null || true; }
    trap 'stop_provider; stop_monitor' EXIT
    sleep 0.2
    case "$provider" in
        keychaind)
            "$BIN/keychaind" --foreground --secret-service --socket "$KEYCHAIN_PKCS11_AGENT" 2>"$out/provider.log" &
            provider_pid=$!
            for _ in $(seq 100); do
                grep -qF "serving the Secret Service" "$out/provider.log" 2>/dev/null && break
                kill -0 "$provider_pid" 2>/dev/null || { echo "keychaind exited: $(cat "$out/provider.log")" >&2; exit 1; }
                sleep 0.1
            done
            grep -qF "serving the Secret Service" "$out/provider.log" || { echo "keychaind did not serve: $(cat "$out/provider.log")" >&2; exit 1; }
            "$BIN/keychainctl" unlock --pin-file "$WORK/pin" >/dev/null || { echo "keychainctl unlock failed" >&2; exit 1; }
            ;;
        gnome-keyring)
            # --foreground keeps it our child (its PID is $!); --unlock reads the login
            # keyring's password from standard input and makes that keyring on first use.
            gnome-keyring-daemon --foreground --unlock --components=secrets <"$WORK/pin" >"$out/provider.log" 2>&1 &
            provider_pid=$!
            ;;
    esac
    for _ in $(seq 100); do name_owned && break; kill -0 "$provider_pid" 2>/dev/null || break; sleep 0.1; done
    name_owned || { echo "$provider does not own org.freedesktop.secrets: $(cat "$out/provider.log")" >&2; exit 1; }

    # suite_pytest from suite-common.sh: pytest with a per-test and an outer timeout, a junit file.
    # shellcheck source=suite-common.sh
    . "$here/suite-common.sh"
    pytest_status=0
    suite_pytest "secretstorage ($provider)" "$cache/secretstorage" tests "$python" "$out/secretstorage.log" "$out/secretstorage.xml"
    echo "$pytest_status" >"$out/secretstorage.status"
    for backend in SecretService libsecret; do
        suite_pytest "keyring $backend ($provider)" "$cache/keyring" "tests/backends/test_$backend.py" \
            "$python" "$out/keyring-$backend.log" "$out/keyring-$backend.xml"
        echo "$pytest_status" >"$out/keyring-$backend.status"
    done
    stop_provider
    stop_monitor
    exit 0
fi

# ---------------------------------------------------------------------------------------------
# Outside: arguments, the cached venv, one private bus per provider, the table.
# ---------------------------------------------------------------------------------------------
usage() { echo "usage: $0 BIN_FOLDER [--against gnome-keyring]" >&2; exit 64; }
[ $# -ge 1 ] || usage
BIN=$(realpath "$1")
shift
providers=(keychaind)
while [ $# -gt 0 ]; do
    case "$1" in
        --against) [ "${2:-}" = gnome-keyring ] || usage; providers+=(gnome-keyring); shift 2 ;;
        *) usage ;;
    esac
done
for tool in "$BIN/keychaind" "$BIN/keychainctl"; do
    [ -x "$tool" ] || { echo "secret-service-suites: no $tool" >&2; exit 64; }
done
command -v dbus-run-session >/dev/null || { echo "secret-service-suites: dbus-run-session is missing (scripts/install-deps.sh installs dbus-daemon)" >&2; exit 1; }
if [ "${#providers[@]}" -gt 1 ]; then
    command -v gnome-keyring-daemon >/dev/null || { echo "secret-service-suites: gnome-keyring is missing (scripts/install-deps.sh installs it)" >&2; exit 1; }
fi
# Debian's interpreter: its PyGObject (python3-gi) is built for it.
python=/usr/bin/python3
[ -x "$python" ] || { echo "secret-service-suites: no $python (Debian's python3)" >&2; exit 1; }
"$python" -c 'import gi; gi.require_version("Secret", "1"); from gi.repository import Secret' 2>/dev/null ||
    { echo "secret-service-suites: libsecret's Python bindings are missing (python3-gi and gir1.2-secret-1; scripts/install-deps.sh installs them)" >&2; exit 1; }

# The venv, built once: both sdists downloaded by hash, installed from source, their test
# folders copied away from the source trees (pytest would otherwise import the packages from
# beside the tests rather than the installed builds), keyring's with its pytest.ini and conftest.py.
if [ ! -f "$cache/ready" ]; then
    echo "secret-service-suites: preparing $cache (PyPI download and install, once)"
    rm -rf "$cache" && mkdir -p "$cache/sdist" "$cache/secretstorage" "$cache/keyring"
    printf '%s\n' "secretstorage==$secretstorage_version --hash=sha256:$secretstorage_sha256" \
        "keyring==$keyring_version --hash=sha256:$keyring_sha256" >"$cache/sdists.txt"
    pip_log="$cache/setup.log"
    {
        "$python" -m venv --system-site-packages "$cache/venv"
        "$cache/venv/bin/pip" download --no-binary :all: --no-deps --require-hashes -r "$cache/sdists.txt" -d "$cache/sdist"
        tar -xzf "$cache/sdist/secretstorage-$secretstorage_version.tar.gz" -C "$cache/sdist"
        tar -xzf "$cache/sdist/keyring-$keyring_version.tar.gz" -C "$cache/sdist"
        "$cache/venv/bin/pip" install "$cache/sdist/secretstorage-$secretstorage_version" "$cache/sdist/keyring-$keyring_version" \
            pytest pytest-timeout pyfakefs
    } >"$pip_log" 2>&1 || { tail -n 30 "$pip_log" >&2; echo "secret-service-suites: setup failed, see $pip_log" >&2; exit 1; }
    cp -r "$cache/sdist/secretstorage-$secretstorage_version/tests" "$cache/secretstorage/"
    cp -r "$cache/sdist/keyring-$keyring_version/tests" "$cache/keyring/"
    cp "$cache/sdist/keyring-$keyring_version/pytest.ini" "$cache/sdist/keyring-$keyring_version/conftest.py" "$cache/keyring/"
    touch "$cache/ready"
fi
"$cache/venv/bin/python" -c 'import secretstorage, keyring, gi; gi.require_version("Secret", "1"); from gi.repository import Secret' ||
    { echo "secret-service-suites: the venv in $cache cannot import secretstorage, keyring and gi.repository.Secret" >&2; exit 1; }

WORK=$(mktemp -d /tmp/secret-service-suites.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
results=${SECRET_SERVICE_SUITES_RESULTS:-$cache/results}
mkdir -p "$results"
printf 'suite-pin-1\n' >"$WORK/pin"

# dbus-daemon's notes that it cannot raise its file limit and that dbus-monitor came and went: not news.
quiet_bus() { grep -v --line-buffered -e 'Failed to set fd limit' -e 'became a monitor' -e 'Monitoring connection' || true; }

run_provider() {
    local provider=$1 out="$results/$1" status=0
    rm -rf "$out" && mkdir -p "$out"
    case "$provider" in
        keychaind)
            # A fresh keychain folder with one keychain, 'login' (the default collection), its
            # PINs in a file; the prompt program answers every Secret Service prompt (unlock, a
            # new collection's PINs, a deletion's SO PIN) with that PIN and notes what it was asked.
            mkdir -p "$WORK/kc/run" && chmod 700 "$WORK/kc/run"
            cat >"$WORK/kc/askpass" <<EOF
#!/bin/sh
printf '%s\n' "\$1" >>"$out/prompts.txt"
cat "$WORK/pin"
EOF
            chmod 700 "$WORK/kc/askpass"
            (
                export KEYCHAIN_PKCS11_DIR="$WORK/kc/keychains" KEYCHAIN_PKCS11_DEVICE_KEY="$WORK/kc/device-key" \
                    KEYCHAIN_PKCS11_KDF_LOG_N=10 KEYCHAIN_PKCS11_AGENT="$WORK/kc/run/agent.sock" \
                    KEYCHAIN_PKCS11_PROMPT="$WORK/kc/askpass" XDG_RUNTIME_DIR="$WORK/kc/run"
                "$BIN/keychainctl" create --label login --so-pin-file "$WORK/pin" --pin-file "$WORK/pin" >/dev/null
                SECRET_SERVICE_SUITES_INNER=keychaind SECRET_SERVICE_SUITES_OUT="$out" BIN="$BIN" WORK="$WORK" \
                    timeout --kill-after=30 1800 dbus-run-session -- "$self" 2> >(quiet_bus >&2)
            ) || status=$?
            ;;
        gnome-keyring)
            mkdir -p "$WORK/gk/home" "$WORK/gk/run" && chmod 700 "$WORK/gk/run"
            (
                export HOME="$WORK/gk/home" XDG_DATA_HOME="$WORK/gk/home/.local/share" XDG_CONFIG_HOME="$WORK/gk/home/.config" \
                    XDG_RUNTIME_DIR="$WORK/gk/run"
                SECRET_SERVICE_SUITES_INNER=gnome-keyring SECRET_SERVICE_SUITES_OUT="$out" BIN="$BIN" WORK="$WORK" \
                    timeout --kill-after=30 1800 dbus-run-session -- "$self" 2> >(quiet_bus >&2)
            ) || status=$?
            ;;
    esac
    [ "$status" -eq 0 ] || echo "secret-service-suites: the $provider run ended with status $status" >&2
    return 0
}

for provider in "${providers[@]}"; do
    echo "== $provider"
    run_provider "$provider"
done

# Counts per provider and suite from the junit files, one outcome per test (pytest writes a second
# testcase element when a test's teardown fails too; an error in setup or teardown is a failure),
# each failure and skip matched against the lists above; then the errors the provider answered on
# the bus (from dbus-monitor), grouped by call.
EXPECTED="$expected_failures" SKIPS="$expected_skips" "$cache/venv/bin/python" - "$results" "${providers[@]}" <<'EOF'
import collections, fnmatch, os, re, sys, xml.etree.ElementTree as ET
results, providers = sys.argv[1], sys.argv[2:]
expected = [l.split("|", 4) for l in os.environ["EXPECTED"].splitlines() if l.strip()]
skips = [l.split("|", 2) for l in os.environ["SKIPS"].splitlines() if l.strip()]
suites = [
    ("secretstorage", "SecretStorage 3.5.0 tests/"),
    ("keyring-SecretService", "keyring 25.7.0 tests/backends/test_SecretService.py"),
    ("keyring-libsecret", "keyring 25.7.0 tests/backends/test_libsecret.py"),
]

def first_line(text):
    lines = [l for l in (text or "").splitlines() if l.strip()]
    return lines[0].strip() if lines else ""

table, problems, totals = {}, {}, {}
for provider in providers:
    problems[provider] = []
    for run, title in suites:
        folder = os.path.join(results, provider)
        path = os.path.join(folder, run + ".xml")
        if not os.path.exists(path):
            table[(provider, title)] = "no results"
            problems[provider].append("%s: no results (see %s)" % (title, folder))
            continue
        tests = collections.OrderedDict()
        for case in ET.parse(path).getroot().iter("testcase"):
            tests.setdefault((case.get("classname"), case.get("name")), []).extend(
                c for c in case if c.tag in ("failure", "error", "skipped"))
        if not tests:
            problems[provider].append("%s: no test ran" % title)
        passed = failed = skipped = known = 0
        for (cls, name), outcome in tests.items():
            bad = [c for c in outcome if c.tag != "skipped"]
            if not outcome:
                passed += 1
            elif not bad:
                if any(fnmatch.fnmatch(provider, s[0]) and s[1] == cls for s in skips):
                    skipped += 1
                else:
                    failed += 1
                    problems[provider].append("%s::%s skipped, not expected to: %s" % (cls, name, outcome[0].get("message")))
            else:
                text = "".join((c.get("message") or "") + (c.text or "") for c in bad)
                match = [e for e in expected if e[0] == provider and e[1] == cls and e[2] == name and e[3] in text]
                if match:
                    known += 1
                    print("expected failure (%s): %s::%s: %s" % (provider, cls, name, match[0][4]))
                else:
                    failed += 1
                    problems[provider].append("%s::%s %s: %s" % (cls, name, "+".join(
                        "teardown" if "teardown" in (c.get("message") or "") else c.tag for c in bad), first_line(bad[0].get("message"))))
        table[(provider, title)] = "%d passed, %d failed, %d skipped" % (passed, failed, skipped) + (
            ", %d expected failures" % known if known else "")
        t = totals.setdefault(provider, [0, 0, 0, 0])
        t[0] += passed; t[1] += failed; t[2] += skipped; t[3] += known
        status_path = os.path.join(folder, run + ".status")
        status = open(status_path).read().strip() if os.path.exists(status_path) else ""
        if status not in ("0", "1"):
            problems[provider].append("%s: pytest ended with status %s" % (title, status or "unknown"))

# dbus-monitor's text: a call's header line names sender, serial, path, interface and member, an
# error's header line destination, error_name and reply_serial, with the message on the next line.
def bus_errors(path):
    calls, errors, pending, last = {}, collections.Counter(), None, None
    header = re.compile(r"^(method call|error|method return|signal) .*?sender=(\S+) -> destination=(\S+) (.*)$")
    for line in open(path, errors="replace"):
        m = header.match(line)
        if m:
            kind, sender, dest, rest = m.groups()
            fields = dict(re.findall(r"(\w+)=([^ ;]+)", rest))
            last = None
            if kind == "method call":
                last = calls[(sender, fields.get("serial"))] = [fields.get("interface", ""), fields.get("member", ""), fields.get("path", ""), []]
            elif kind == "error":
                pending = (calls.get((dest, fields.get("reply_serial"))), fields.get("error_name", ""))
            continue
        s = re.match(r'^\s+string "(.*)"$', line)
        if s and pending:
            call, name = pending
            what = "%s.%s(%s) on %s" % (call[0], call[1], ", ".join(call[3]), call[2]) if call else "an unknown call"
            errors[(what, name, s.group(1))] += 1
            pending = None
        elif s and last is not None and last[1] in ("Get", "Set", "GetAll") and len(last[3]) < 2:
            last[3].append(s.group(1))
    return errors

width = max(len(t) for _, t in suites) + 2
column = 52
print()
print("suite".ljust(width) + "".join(p.ljust(column) for p in providers))
for _, title in suites:
    print(title.ljust(width) + "".join(table.get((p, title), "").ljust(column) for p in providers))
print()
failed_any = False
for provider in providers:
    for problem in problems[provider]:
        failed_any = True
        print("%s: %s" % (provider, problem))
    log = os.path.join(results, provider, "bus.log")
    if problems[provider] and os.path.exists(log):
        print("%s: the errors it answered on the bus (count, call, error; some are what a passing test asks for):" % provider)
        for (what, name, message), n in sorted(bus_errors(log).items(), key=lambda kv: -kv[1]):
            print("  %4d  %s\n        -> %s: %s" % (n, what, name, message))
    prompts = os.path.join(results, provider, "prompts.txt")
    if os.path.exists(prompts):
        asked = collections.Counter(l.strip() for l in open(prompts) if l.strip())
        print("%s: the prompt program was asked: %s" % (provider, "; ".join("%d x %s" % (n, t) for t, n in asked.items())))
    elif provider == "keychaind":
        print("keychaind: no Secret Service prompt ran")
print()
for provider in providers[1:]:
    t = totals.get(provider, [0, 0, 0, 0])
    print("secret-service-suites (%s, for comparison): %d passed, %d failed, %d skipped, %d expected failures" % (provider, *t))
t = totals.get("keychaind", [0, 0, 0, 0])
if t[3]:
    print("secret-service-suites: %d expected failures against keychaind (listed above), not counted below" % t[3])
if problems["keychaind"] and t[1] == 0:
    t[1] = 1   # a run with no results, or a pytest that ended abnormally, is a failure
print("secret-service-suites: %d passed, %d failed, %d skipped" % tuple(t[:3]))
sys.exit(1 if failed_any else 0)
EOF
