#!/usr/bin/env bash
# Runs the command blocks of README.md, Docs/user-guide.md and Docs/remote-use.md as a new user
# would (fresh home, the binaries installed under ~/.local, a stand-in ssh server and TLS
# server on 127.0.0.1) and ends with "recipes: N passed, N failed". Every fenced block is a
# recipe to run unless a marker before it says otherwise; runner.py describes the markers.
# Usage: Tests/interop/recipes/run.sh MODULE_PATH KEYCHAINCTL_PATH [DOC...]
# keychaind is taken from beside keychainctl. RECIPES_VERBOSE=1 prints every block's output;
# RECIPES_KEEP=1 keeps the scratch folder after a failure; RECIPES_PIN_ENV=0 leaves
# KEYCHAIN_PKCS11_PIN/_SO_PIN unset (keychainctl then asks, and the typist answers).
# Needs network access to PyPI for the python-pkcs11 recipe (pip install python-pkcs11).
set -u
[ $# -ge 2 ] || { echo "usage: $0 MODULE_PATH KEYCHAINCTL_PATH [DOC...]" >&2; exit 64; }
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../../.." && pwd)
module=$(realpath "$1")
keychainctl=$(realpath "$2")
shift 2
keychaind=$(dirname "$keychainctl")/keychaind
for f in "$module" "$keychainctl" "$keychaind"; do
    [ -f "$f" ] || { echo "recipes: $f is missing"; echo "recipes: 0 passed, 1 failed"; exit 1; }
done
# Debian's interpreter: the runner needs nothing beyond the standard library.
python=/usr/bin/python3
[ -x "$python" ] || python=python3
exec timeout --kill-after=10 400 "$python" "$here/runner.py" "$repo" "$module" "$keychainctl" "$keychaind" "$@"
