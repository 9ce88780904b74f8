#!/usr/bin/env python3
"""Runs the command blocks of README.md, Docs/user-guide.md and Docs/remote-use.md as a new user
would, and prints "recipes: N passed, N failed" as its last line.

Usage (through run.sh): runner.py REPO MODULE KEYCHAINCTL KEYCHAIND [DOC...]

What a document's fenced blocks mean to the runner:

  ```sh          run, in document order, in one terminal session per document (see below)
  anything else  needs a marker, else the block FAILS: new blocks cannot go untested silently

Markers are HTML comments on the lines right before a block's opening fence (blank lines allowed
between them), invisible in the rendered document:

  <!-- recipe: skip — REASON -->   not run (counted and listed as skipped, with REASON)
  <!-- recipe: file PATH -->       the block's text is written to PATH (~ is the home; relative
                                   paths are relative to the session's current folder)
  <!-- recipe: expect TEXT -->     the block's output must contain TEXT (may repeat)
  <!-- recipe: reject TEXT -->     the block's output must not contain TEXT (may repeat), for
                                   example a prompt the prose says does not come
  <!-- recipe: given COMMAND -->   a hidden step run before the block, standing for a state the
                                   prose describes or the outside world (world.sh has helpers
                                   such as world_authorize LABEL); may repeat
  <!-- recipe: timeout SECONDS --> the block's time limit (default 60 s)

The session: each document gets a fresh home and keychain folder, an unprivileged user (a
temporary account when the runner is root, since p11-kit ignores per-user configuration for
root), the binaries under test installed as `make install PREFIX="$HOME/.local"` would, PATH
starting with ~/.local/bin, KEYCHAIN_PKCS11_PIN/_SO_PIN and a cheap KDF in the environment, and
a private XDG_RUNTIME_DIR as a login session has. Blocks run on a pseudo-terminal, one bash per
block with errexit (state - variables, functions, current folder - carried from block to block
by step.sh); a typist answers the prompts that appear on the terminal (PINs, the password to
store, passphrases, "continue connecting (yes/no)"). Stand-ins for the outside world:
`user@server` and `user@host` are a throwaway sshd on 127.0.0.1 running as the user (it accepts
the keys that world_authorize named and ends each session with a line saying which key logged
in), and `mtls.example.org` is an openssl s_server on 127.0.0.1 that requires a client
certificate; the textual substitutions this needs are printed with each block that had them.
The typist answers "Password to store" with "correct horse battery staple", which the documents'
expect markers look for after reading the password back.

Environment: RECIPES_VERBOSE=1 prints every block's output, RECIPES_KEEP=1 keeps the scratch
folder after a failure, RECIPES_PIN_ENV=0 leaves KEYCHAIN_PKCS11_PIN/_SO_PIN unset (keychainctl
then asks too, and the typist answers).
"""
import os
import pwd
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import termios
import fcntl
import struct
import time
import ctypes

USER_PIN = "recipe user PIN 1"
SO_PIN = "recipe SO PIN 1"
SECRET = "correct horse battery staple"
PASSPHRASE = "recipe passphrase 1"
DEFAULT_TIMEOUT = 60
DOCS = ["README.md", "Docs/user-guide.md", "Docs/remote-use.md"]

MARKER = re.compile(r"^<!--\s*recipe:\s*(\w+)\s*(.*?)\s*-->\s*$")
# Any fence (indented, ~~~, with more words after the language) counts, so that none escapes.
FENCE = re.compile(r"^ {0,3}(```+|~~~+)\s*([^\s`]*)")


# --- documents ----------------------------------------------------------------------------------

class Block:
    def __init__(self, doc, line, info, text, markers):
        self.doc, self.line, self.info, self.text, self.markers = doc, line, info, text, markers
        self.skip = None      # reason
        self.file = None      # path
        self.expect = []
        self.reject = []
        self.given = []
        self.timeout = DEFAULT_TIMEOUT
        self.error = None     # a problem with the block's markers
        for kind, arg in markers:
            if kind == "skip":
                reason = re.sub(r"^[—:–-]+\s*", "", arg)
                if not reason:
                    self.error = "skip marker without a reason"
                self.skip = reason
            elif kind == "file":
                self.file = arg
            elif kind == "expect":
                self.expect.append(arg)
            elif kind == "reject":
                self.reject.append(arg)
            elif kind == "given":
                self.given.append(arg)
            elif kind == "timeout":
                self.timeout = int(arg)
            else:
                self.error = f"unknown marker '{kind}'"
        if not self.error and self.skip is None and self.file is None and info != "sh":
            self.error = (f"a ```{info} block with no recipe marker: mark it "
                          "<!-- recipe: skip — reason --> or <!-- recipe: file PATH -->, or make it a ```sh block")

    @property
    def where(self):
        return f"{self.doc}:{self.line}"


def parse(doc, path):
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        fence, info = m.group(1), m.group(2)
        indent = len(lines[i]) - len(lines[i].lstrip(" "))
        j = i + 1
        while j < len(lines) and not (lines[j].strip().startswith(fence[0] * len(fence))
                                      and lines[j].strip().strip(fence[0]) == ""):
            j += 1
        text = "\n".join(l[indent:] if l[:indent].strip() == "" else l for l in lines[start + 1:j]) + "\n"
        markers, k = [], start - 1
        while k >= 0 and (lines[k].strip() == "" or MARKER.match(lines[k].strip())):
            mm = MARKER.match(lines[k].strip())
            if mm:
                markers.insert(0, (mm.group(1), mm.group(2)))
            k -= 1
        blocks.append(Block(doc, start + 1, info, text, markers))
        i = j + 1
    return blocks


# --- processes ------------------------------------------------------------------------------------

def become_subreaper():
    """Daemons the recipes start (ssh-agent, keychaind, p11-kit server) become our children, so
    that they can be found and ended by pid afterwards."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except OSError:
        pass


def descendants(root):
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def end_processes(pids):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = []
        for pid in pids:
            try:
                os.kill(pid, sig)
                alive.append(pid)
            except ProcessLookupError:
                pass
        deadline = time.time() + 2
        while alive and time.time() < deadline:
            still = []
            for pid in alive:
                try:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                    if done == 0:
                        still.append(pid)
                except ChildProcessError:
                    if os.path.exists(f"/proc/{pid}") and not _zombie(pid):
                        still.append(pid)
            alive = still
            if alive:
                time.sleep(0.05)
        pids = alive
        if not pids:
            return


def _zombie(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
        return stat[stat.rindex(")") + 2] == "Z"
    except OSError:
        return True


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                return
        except ChildProcessError:
            return


# --- the typist -------------------------------------------------------------------------------------

# (pattern on the last, unfinished output line; what to type; how the transcript names it).
ANSWERS = [
    (re.compile(r"continue connecting \(yes/no"), "yes", "yes"),
    (re.compile(r"^Again: ?$"), None, None),
    (re.compile(r"SO PIN"), SO_PIN, "the SO PIN"),
    (re.compile(r"(?i)\bnew (user )?PIN\b"), USER_PIN, "the (new) user PIN"),
    (re.compile(r"(?i)backup passphrase|passphrase of "), PASSPHRASE, "the passphrase"),
    (re.compile(r"\bPIN\b|\bPin\b|passphrase for PKCS#11"), USER_PIN, "the user PIN"),
    (re.compile(r"(?i)password to store"), SECRET, "the password"),
]
PROMPT_END = re.compile(r"[:?]\s*$")


class Session:
    """One document's terminal: controller.sh on a pseudo-terminal, fed block folders."""

    def __init__(self, ctx, env):
        self.ctx = ctx
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        if ctx.uid is not None:
            os.fchown(slave, ctx.uid, ctx.gid)
        self.ctl = os.path.join(ctx.world, "control")
        self.res = os.path.join(ctx.world, "result")
        for fifo in (self.ctl, self.res):
            os.mkfifo(fifo, 0o600)
            if ctx.uid is not None:
                os.chown(fifo, ctx.uid, ctx.gid)
        self.resfd = os.open(self.res, os.O_RDONLY | os.O_NONBLOCK)

        def make_ctty():
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(
            ["/bin/bash", os.path.join(ctx.here, "controller.sh"), self.ctl, self.res,
             os.path.join(ctx.here, "step.sh")],
            stdin=slave, stdout=slave, stderr=slave, env=env, cwd=ctx.home,
            start_new_session=True, preexec_fn=make_ctty, **ctx.popen_user())
        os.close(slave)
        deadline = time.time() + 10
        self.ctlfd = None
        while self.ctlfd is None:
            try:
                self.ctlfd = os.open(self.ctl, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                if time.time() > deadline or self.proc.poll() is not None:
                    raise RuntimeError("the terminal session did not start")
                time.sleep(0.02)
        self.resbuf = b""

    def run(self, folder, timeout):
        """Runs one block folder; returns (status or None on timeout, transcript)."""
        try:
            os.write(self.ctlfd, (folder + "\n").encode())
        except OSError:
            return None, "«the terminal session has ended»"
        out = bytearray()
        answered = 0
        last_answer = None
        last_output = time.time()
        deadline = time.time() + timeout
        step_pid = None
        status = None
        while True:
            ready, _, _ = select.select([self.master, self.resfd], [], [], 0.05)
            now = time.time()
            if not ready and self.proc.poll() is not None and status is None:
                return None, out.decode(errors="replace").replace("\r", "") + "«the terminal session has ended»"
            if self.master in ready:
                try:
                    data = os.read(self.master, 65536)
                except OSError:
                    data = b""
                if data:
                    out += data
                    last_output = now
            if self.resfd in ready:
                self.resbuf += os.read(self.resfd, 4096)
                while b"\n" in self.resbuf:
                    line, self.resbuf = self.resbuf.split(b"\n", 1)
                    word, _, value = line.decode().partition(" ")
                    if word == "start":
                        step_pid = int(value)
                    elif word == "end":
                        status = int(value)
            if status is not None:
                # What is still on its way to the terminal.
                quiet_until = time.time() + 0.2
                while time.time() < quiet_until:
                    if select.select([self.master], [], [], 0.05)[0]:
                        try:
                            data = os.read(self.master, 65536)
                        except OSError:
                            break
                        if not data:
                            break
                        out += data
                return status, out.decode(errors="replace").replace("\r", "")
            # A prompt: the unfinished last line, after a moment of quiet. A secret is typed once
            # the program has turned echo off (it may flush what was typed before that), or after
            # 2 s of quiet if it never does.
            tail = out[answered:].decode(errors="replace").replace("\r", "").rsplit("\n", 1)[-1]
            quiet = now - last_output
            if tail and PROMPT_END.search(tail) and quiet >= 0.1:
                try:
                    echo_off = not termios.tcgetattr(self.master)[3] & termios.ECHO
                except termios.error:
                    echo_off = True
                for pattern, answer, name in ANSWERS:
                    if pattern.search(tail):
                        secret = name != "yes"
                        if not ((secret and (echo_off or quiet >= 2.0)) or (not secret and quiet >= 0.3)):
                            break
                        if answer is None:
                            answer, name = last_answer or ("", "nothing")
                        os.write(self.master, (answer + "\r").encode())
                        last_answer = (answer, name)
                        out += f"«typed {name}»".encode()
                        answered = len(out)
                        break
                else:
                    if quiet >= 2.0:  # not a prompt we know: leave it (the block will time out)
                        out += "«unknown prompt: not answered»".encode()
                        answered = len(out)
            if now > deadline:
                pids = ([step_pid] + descendants(step_pid)) if step_pid else []
                end_processes(pids)
                # The controller reports the end of the killed step (and bash says "Terminated").
                end = time.time() + 3
                while time.time() < end:
                    ready = select.select([self.resfd, self.master], [], [], 0.1)[0]
                    if self.master in ready:
                        try:
                            out += os.read(self.master, 65536)
                        except OSError:
                            pass
                    if self.resfd in ready:
                        self.resbuf += os.read(self.resfd, 4096)
                        if b"end " in self.resbuf:
                            self.resbuf = b""
                            end = min(end, time.time() + 0.2)
                return None, out.decode(errors="replace").replace("\r", "")

    def close(self):
        try:
            os.close(self.ctlfd)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.master, self.resfd):
            try:
                os.close(fd)
            except OSError:
                pass


# --- the world ------------------------------------------------------------------------------------

def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_for(path, text, proc, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            if text in open(path, errors="replace").read():
                return True
        except OSError:
            pass
        if proc.poll() is not None:
            return False
        time.sleep(0.05)
    return False


class Context:
    def __init__(self, repo, module, keychainctl, keychaind, scratch):
        self.repo, self.module, self.keychainctl, self.keychaind = repo, module, keychainctl, keychaind
        self.here = os.path.dirname(os.path.abspath(__file__))
        self.scratch = scratch
        self.user = None
        self.uid = self.gid = None
        if os.getuid() == 0:
            # An ordinary account for the recipes: p11-kit ignores per-user files for root. Accounts
            # an earlier run left behind (killed before its cleanup) go first.
            for entry in pwd.getpwall():
                m = re.fullmatch(r"kcrcp(\d+)", entry.pw_name)
                if m and not os.path.exists(f"/proc/{m.group(1)}"):
                    subprocess.run(["userdel", entry.pw_name], check=False, capture_output=True)
            self.user = f"kcrcp{os.getpid()}"
            self.home = os.path.join(scratch, "home")
            subprocess.run(["useradd", "-M", "-d", self.home, "-s", "/bin/bash", self.user], check=True)
            pw = pwd.getpwnam(self.user)
            self.uid, self.gid = pw.pw_uid, pw.pw_gid
        else:
            pw = pwd.getpwuid(os.getuid())
            self.user = pw.pw_name
            self.home = os.path.join(scratch, "home")
        self.shared = os.path.join(scratch, "shared")
        os.makedirs(self.shared)
        os.chmod(scratch, 0o755)
        os.chmod(self.shared, 0o755)
        # The scripts, readable by the recipe user wherever the checkout is.
        for name in ("controller.sh", "step.sh", "world.sh"):
            shutil.copy(os.path.join(self.here, name), self.shared)
        self.here = self.shared
        self.make_tls_world()

    def popen_user(self):
        if self.uid is None:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}

    def chown(self, path):
        if self.uid is not None:
            os.chown(path, self.uid, self.gid)

    def make_tls_world(self):
        """A CA and mtls.example.org's certificate, for the stand-in TLS server."""
        d = self.shared
        cmds = [
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", f"{d}/ca.key", "-subj", "/CN=Recipe stand-in CA", "-days", "2", "-out", f"{d}/ca.pem",
             "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"],
            ["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
             "-keyout", f"{d}/server.key", "-subj", "/CN=mtls.example.org", "-out", f"{d}/server.csr"],
            ["openssl", "x509", "-req", "-in", f"{d}/server.csr", "-CA", f"{d}/ca.pem", "-CAkey", f"{d}/ca.key",
             "-CAcreateserial", "-days", "2", "-out", f"{d}/server.pem",
             "-extfile", "/dev/stdin"],
        ]
        for cmd in cmds:
            ext = b"subjectAltName=DNS:mtls.example.org,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
            subprocess.run(cmd, check=True, capture_output=True, input=ext if cmd[1] == "x509" else None)
        for name in os.listdir(d):
            os.chmod(os.path.join(d, name), 0o644 if not name.endswith(".sh") else 0o755)


class World:
    """One document's stand-ins: sshd for user@server, s_server for mtls.example.org."""

    def __init__(self, ctx, env, text):
        self.ctx = ctx
        self.procs = []
        self.ssh_port = self.tls_port = None
        w = ctx.world
        if re.search(r"\buser@(server|host)\b", text):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "stand-in-server",
                            "-f", f"{w}/host_key"], check=True)
            open(f"{w}/authorized_keys", "a").close()
            self.ssh_port = free_port()
            with open(f"{w}/sshd_config", "w") as f:
                f.write("\n".join([
                    f"ListenAddress 127.0.0.1:{self.ssh_port}", f"HostKey {w}/host_key", f"PidFile {w}/sshd.pid",
                    f"AuthorizedKeysFile {w}/authorized_keys", "PubkeyAuthentication yes",
                    "PasswordAuthentication no", "KbdInteractiveAuthentication no", "UsePAM no",
                    "StrictModes no", "ExposeAuthInfo yes", "LogLevel VERBOSE",
                    # Not root: no terminal for sessions (sshd could not record the login).
                    "PermitTTY no",
                    # The stand-in server's session: one line naming the key that logged in.
                    f"ForceCommand /bin/sh {w}/session.sh",
                    ""]))
            with open(f"{w}/session.sh", "w") as f:
                f.write('key=$(head -n 1 "$SSH_USER_AUTH" | cut -d" " -f3)\n'
                        f'label=$(grep -F "$key" {w}/authorized_keys | head -n 1 | awk \'{{print $NF}}\')\n'
                        'echo "stand-in server: logged in as $USER with the key $label"\n')
            for name in ("host_key", "host_key.pub", "authorized_keys", "sshd_config", "session.sh"):
                ctx.chown(f"{w}/{name}")
            log = open(f"{w}/sshd.log", "w")
            self.sshd = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", f"{w}/sshd_config"],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                         **ctx.popen_user())
            self.procs.append(self.sshd)
            if not wait_for(f"{w}/sshd.log", f"Server listening on 127.0.0.1 port {self.ssh_port}.", self.sshd, 20):
                raise RuntimeError("the stand-in sshd did not start: " + open(f"{w}/sshd.log").read())
        if "mtls.example.org" in text:
            self.tls_port = free_port()
            log = open(f"{w}/s_server.log", "w")
            d = ctx.shared
            self.s_server = subprocess.Popen(
                ["openssl", "s_server", "-accept", f"127.0.0.1:{self.tls_port}", "-cert", f"{d}/server.pem",
                 "-key", f"{d}/server.key", "-Verify", "1", "-www"],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, **ctx.popen_user())
            self.procs.append(self.s_server)
            if not wait_for(f"{w}/s_server.log", "ACCEPT", self.s_server, 20):
                raise RuntimeError("the stand-in TLS server did not start: " + open(f"{w}/s_server.log").read())

    def substitute(self, text):
        """The block as run, and the substitutions made (one pass: no replacement is rewritten)."""
        rules = []  # (pattern, replacement, shown as)
        if self.ssh_port:
            extra = ""
            if self.ctx.uid is None:
                # Not a separate account: keep ssh away from the real ~/.ssh (it reads the passwd home).
                extra = f' -o UserKnownHostsFile="$HOME/.ssh/known_hosts" $([ -f "$HOME/.ssh/config" ] && echo -F "$HOME/.ssh/config")'
            for host in ("server", "host"):
                rules.append((rf"\buser@{host}\b",
                              f"-o HostName=127.0.0.1 -p {self.ssh_port}{extra} {self.ctx.user}@{host}", f"user@{host}"))
        if self.tls_port:
            ca = f"{self.ctx.shared}/ca.pem"
            rules.append((r"https://mtls\.example\.org/",
                          f"--connect-to mtls.example.org:443:127.0.0.1:{self.tls_port} --cacert {ca} https://mtls.example.org/",
                          "https://mtls.example.org/ (curl)"))
            rules.append((r"(?<![\w./-])mtls\.example\.org(?![\w.-])",
                          f"--port {self.tls_port} --x509cafile {ca} --verify-hostname mtls.example.org 127.0.0.1",
                          "mtls.example.org (gnutls-cli)"))
        rules.append((r"/home/alice\b", self.ctx.home, "/home/alice"))
        combined = re.compile("|".join(f"(?P<r{i}>{p})" for i, (p, _, _) in enumerate(rules)))
        made = []

        def replace(m):
            i = int(m.lastgroup[1:])
            if (rules[i][2], rules[i][1]) not in made:
                made.append((rules[i][2], rules[i][1]))
            return rules[i][1]

        return combined.sub(replace, text), made

    def log_tail(self):
        out = []
        for name in ("sshd.log", "s_server.log"):
            p = os.path.join(self.ctx.world, name)
            if os.path.exists(p):
                lines = open(p, errors="replace").read().replace("\r", "").splitlines()[-15:]
                out.append(f"--- stand-in {name} (last lines)")
                out += lines
        return out

    def stop(self):
        end_processes([p.pid for p in self.procs if p.poll() is None])


# --- running ------------------------------------------------------------------------------------

def install(ctx):
    """`make install PREFIX="$HOME/.local"` as far as the recipes need it."""
    home = ctx.home
    for sub, name, src, mode in (("bin", "keychainctl", ctx.keychainctl, 0o755),
                                 ("bin", "keychaind", ctx.keychaind, 0o755),
                                 ("lib/pkcs11", "libkeychain-pkcs11.so", ctx.module, 0o644)):
        d = os.path.join(home, ".local", sub)
        os.makedirs(d, exist_ok=True)
        shutil.copy(src, os.path.join(d, name))
        os.chmod(os.path.join(d, name), mode)
    for root, dirs, files in os.walk(home):
        for n in dirs + files:
            ctx.chown(os.path.join(root, n))
    ctx.chown(home)


def session_env(ctx):
    env = {
        "HOME": ctx.home, "USER": ctx.user, "LOGNAME": ctx.user, "SHELL": "/bin/bash",
        "PATH": f"{ctx.home}/.local/bin:/usr/local/bin:/usr/bin:/bin",
        "TERM": "dumb", "LANG": "C.UTF-8",
        "XDG_RUNTIME_DIR": ctx.runtime,
        "TMPDIR": ctx.tmp,  # what the recipes make with mktemp goes with the scratch folder
        "KEYCHAIN_PKCS11_PIN": USER_PIN, "KEYCHAIN_PKCS11_SO_PIN": SO_PIN,
        "KEYCHAIN_PKCS11_KDF_LOG_N": "10",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "RECIPE_WORLD": ctx.world, "RECIPE_STATE": os.path.join(ctx.world, "state.sh"),
        "RECIPE_PASSPHRASE": PASSPHRASE,
    }
    # The machine's network settings, as a user's login has them (pip reaches PyPI through them).
    for name in ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
                 "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_CERT", "PIP_DEFAULT_TIMEOUT"):
        if name in os.environ:
            env[name] = os.environ[name]
    if os.environ.get("RECIPES_PIN_ENV") == "0":
        del env["KEYCHAIN_PKCS11_PIN"], env["KEYCHAIN_PKCS11_SO_PIN"]
    return env


def doc_lines(block, text):
    return "\n".join(f"      {block.line + i + 1:4d}| {l}" for i, l in enumerate(text.rstrip("\n").split("\n")))


def run_document(ctx, doc, blocks, results):
    # A fresh home, runtime folder and world for each document.
    for d in (ctx.home, ctx.runtime, ctx.world, ctx.tmp):
        if os.path.exists(d):
            shutil.rmtree(d)
        os.makedirs(d, mode=0o700)
        ctx.chown(d)
    install(ctx)
    env = session_env(ctx)
    out = subprocess.run(["keychainctl", "module-path"], env=env, capture_output=True, text=True,
                         **ctx.popen_user())
    expected = os.path.join(ctx.home, ".local/lib/pkcs11/libkeychain-pkcs11.so")
    if out.stdout.strip() != expected:
        print(f"FAIL  {doc}: keychainctl module-path printed [{out.stdout.strip()}{out.stderr.strip()}], not {expected}")
        results["failed"] += 1
        return
    world = World(ctx, env, "".join(b.text for b in blocks) + "".join(" ".join(a for _, a in b.markers) for b in blocks))
    session = Session(ctx, env)
    print(f"== {doc}: user {ctx.user}, fresh home {ctx.home}"
          + (f", stand-in server on 127.0.0.1:{world.ssh_port}" if world.ssh_port else "")
          + (f", stand-in mtls.example.org on 127.0.0.1:{world.tls_port}" if world.tls_port else ""))
    try:
        for n, block in enumerate(blocks):
            if block.error:
                results["failed"] += 1
                print(f"FAIL  {block.where}: {block.error}")
                continue
            if block.skip is not None:
                results["skipped"] += 1
                results["skips"].append((block.where, block.skip))
                print(f"skip  {block.where}  ({block.skip})")
                continue
            folder = os.path.join(ctx.world, f"block{n:03d}")
            os.makedirs(folder)
            text, made = world.substitute(block.text)
            given = ""
            if block.given:
                given = f"source {ctx.shared}/world.sh\n" + "\n".join(block.given) + "\n"
            if block.file is not None:
                path = block.file
                target = path if path.startswith("~/") or path.startswith("/") else f"./{path}"
                text = (f"mkdir -p \"$(dirname {target})\"\n"
                        f"cat >{target} <<'RECIPE_FILE_END'\n{text}RECIPE_FILE_END\n"
                        f"echo \"(recipe: wrote {path})\"\n")
            with open(os.path.join(folder, "block.sh"), "w") as f:
                f.write(text)
            with open(os.path.join(folder, "given.sh"), "w") as f:
                f.write(given)
            for name in ("", "block.sh", "given.sh"):
                ctx.chown(os.path.join(folder, name))
            started = time.time()
            status, transcript = session.run(folder, block.timeout)
            seconds = time.time() - started
            problems = []
            if status is None:
                problems.append(f"timed out after {block.timeout} s")
            elif status != 0:
                problems.append(f"exit status {status}")
                m = re.search(r"recipe: exit status \d+ at (block|given)\.sh line (\d+): (.*)", transcript)
                if m and m.group(1) == "block" and block.file is None:
                    problems.append(f"failed at {block.doc}:{block.line + int(m.group(2))}: {m.group(3)}")
            for want in block.expect:
                if want not in transcript:
                    problems.append(f"output lacks [{want}]")
            for unwanted in block.reject:
                if unwanted in transcript:
                    problems.append(f"output has [{unwanted}]")
            kind = "file" if block.file is not None else block.info
            if problems:
                results["failed"] += 1
                print(f"FAIL  {block.where}  {kind}  ({seconds:.1f} s): " + "; ".join(problems))
                if made:
                    print("      substituted: " + "; ".join(f"{a} -> {b}" for a, b in made))
                if block.given:
                    print("      given: " + "; ".join(block.given))
                print(doc_lines(block, block.text))
                print("      --- output")
                for line in transcript.rstrip("\n").split("\n")[-60:]:
                    print("      " + line)
                for line in world.log_tail():
                    print("      " + line)
            else:
                results["passed"] += 1
                print(f"ok    {block.where}  {kind}  ({seconds:.1f} s)"
                      + ("  [substituted: " + "; ".join(f"{a} -> {b}" for a, b in made) + "]" if made else ""))
                if os.environ.get("RECIPES_VERBOSE"):
                    for line in transcript.rstrip("\n").split("\n"):
                        print("      | " + line)
    finally:
        session.close()
        world.stop()
        # What the recipes left running (ssh-agent, keychaind, p11-kit server): ours, by pid.
        left = descendants(os.getpid())
        if left:
            end_processes(left)
        reap()


def main():
    repo, module, keychainctl, keychaind = sys.argv[1:5]
    docs = sys.argv[5:] or DOCS
    become_subreaper()
    # An outer timeout's SIGTERM still removes the account and ends what the recipes started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    started = time.time()
    scratch = tempfile.mkdtemp(prefix="kc-recipes.")
    results = {"passed": 0, "failed": 0, "skipped": 0, "skips": []}
    ctx = None
    try:
        ctx = Context(repo, module, keychainctl, keychaind, scratch)
        ctx.runtime = os.path.join(scratch, "run")
        ctx.world = os.path.join(scratch, "world")
        ctx.tmp = os.path.join(scratch, "tmp")
        for doc in docs:
            blocks = parse(doc, os.path.join(repo, doc))
            run_document(ctx, doc, blocks, results)
    finally:
        left = descendants(os.getpid())
        if left:
            end_processes(left)
        reap()
        if ctx is not None and ctx.uid is not None:
            subprocess.run(["userdel", ctx.user], check=False, capture_output=True)
        if results["failed"] == 0 or not os.environ.get("RECIPES_KEEP"):
            shutil.rmtree(scratch, ignore_errors=True)
        else:
            print(f"(scratch kept in {scratch})")
    print(f"recipes: {results['skipped']} blocks skipped (marked), run time {time.time() - started:.0f} s")
    print(f"recipes: {results['passed']} passed, {results['failed']} failed")
    sys.exit(0 if results["failed"] == 0 else 1)


if __name__ == "__main__":
    main()
