# Docs/architecture.md's "Layers" list says it holds "every target of Package.swift": it names each
# target SwiftPM reads from Package.swift (`swift package dump-package`, every kind: .target,
# .executableTarget, .testTarget, .systemLibrary, and plugins or macros should any come), and
# names nothing that is not one, so a target added or renamed without the doc fails here.
#
# What "named" means: the list is the code block under "## Layers". Its entry lines are indented
# two spaces; an entry's name part is what comes before the description (two or more spaces, or
# the end of the line) with any "(…)" removed, and it holds one name or several joined by ", "
# ("Security, LocalAuthentication, CryptoKit"). A name part that is a path ("pam/",
# "Tests/interop") is something that is not a SwiftPM target and is skipped; anything else that is
# not a plain name fails, so a change of the list's layout cannot make this check pass unread.
#
# The doc is checked once, with the debug module (the release pass skips it).
. "$HERE/lib.sh"

case "$KEYCHAINCTL" in
    */release/*) echo "skipped: the documentation is checked once, with the debug module"; exit 0 ;;
esac
command -v swift >/dev/null || fail "swift is missing"
root=$(cd "$HERE/../.." && pwd)
doc="$root/Docs/architecture.md"

# The targets as SwiftPM reads them: dump-package is the authority, not a pattern over the manifest.
swift package --package-path "$root" dump-package >"$WORK/package.json" 2>"$WORK/dump.err" ||
    fail "swift package dump-package: $(tail -n 20 "$WORK/dump.err")"
python3 -c 'import json, sys; print("\n".join(t["name"] for t in json.load(open(sys.argv[1]))["targets"]))' \
    "$WORK/package.json" | sort >"$WORK/targets" || fail "cannot read the targets from dump-package's JSON"
[ "$(wc -l <"$WORK/targets")" -ge 10 ] || fail "dump-package listed only: $(cat "$WORK/targets")"

# The entries of the Layers block: the name part of each line indented two spaces.
awk '/^## Layers/ { layers = 1; next }
     layers && /^## / { exit }
     layers && /^```/ { if (block) exit; block = 1; next }
     block && /^  [^ ]/ { print substr($0, 3) }' "$doc" >"$WORK/entries"
[ -s "$WORK/entries" ] || fail "no target list (a code block under '## Layers') in $doc"
: >"$WORK/named"
while IFS= read -r entry; do
    # Remove "(…)" (repeatedly: no nesting today, but cheap), then cut the description off.
    heads=$(sed -E ':a; s/\([^()]*\)//; ta; s/ {2,}.*//' <<<"$entry")
    IFS=, read -ra names <<<"$heads"
    for name in "${names[@]}"; do
        name=$(sed -E 's/^ +//; s/ +$//' <<<"$name")
        if [ -z "$name" ]; then
            continue
        elif [[ "$name" =~ ^[A-Za-z_][A-Za-z0-9_-]*$ ]]; then
            echo "$name" >>"$WORK/named"
        elif [[ "${name%% *}" == */* ]]; then
            continue    # a path: pam/, Tests/interop, Tests/c-host (not SwiftPM targets)
        else
            fail "Docs/architecture.md's target list: cannot read [$name] in the entry [$entry] (names joined by ', ', then two spaces and the description)"
        fi
    done
done <"$WORK/entries"
twice=$(sort "$WORK/named" | uniq -d | tr '\n' ' ')
sort -u -o "$WORK/named" "$WORK/named"

missing=$(comm -23 "$WORK/targets" "$WORK/named" | tr '\n' ' ')
stale=$(comm -13 "$WORK/targets" "$WORK/named" | tr '\n' ' ')
[ -z "$missing" ] || fail "Docs/architecture.md's target list (## Layers) does not name these targets of Package.swift: $missing"
[ -z "$stale" ] || fail "Docs/architecture.md's target list names what is not a target of Package.swift: $stale"
[ -z "$twice" ] || fail "Docs/architecture.md's target list names these targets more than once: $twice"
echo "ok: Docs/architecture.md names each of the $(wc -l <"$WORK/targets") targets of Package.swift once, and nothing else"
