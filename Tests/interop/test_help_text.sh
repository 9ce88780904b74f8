# Help that reads like a manual: no sentence broken by hand in keychainctl's --help texts (the tool,
# every command and nested command, the hidden pam-helper too), keychaind --help, and the manual
# pages generated from the same definitions; and Docs/cli-reference.md is what
# scripts/cli-reference.sh makes from the tool under test.
#
# swift-argument-parser wraps every help text itself, to $COLUMNS (80 here): it cuts each chunk of
# 80 characters at its last space, and keeps every newline of the text. A newline written inside a
# sentence therefore shows as a short line followed by the rest of the sentence ("… a file ('-' for
# standard" / "input), or …"). groff fills the manual pages (text written on several lines is
# joined), but keeps a break before a line that starts with spaces, as examples do.
#
# The rule. Each text is split into blocks: runs of non-blank lines, a section heading (a line of
# capitals at column 0: OPTIONS:, DESCRIPTION) being a block of its own. In a block, a line L
# followed by a line N is a HAND BREAK when all of these hold:
#   1. L ends mid-sentence: its last non-space character is a letter, a digit, a comma, a
#      semicolon, an opening bracket ( [ {, or a quote ' " ‘ “;
#   2. N's first non-space character is a lower-case letter;
#   3. N continues L's text: N is indented exactly to the column where L's text starts. That is
#      L's indentation, except on a row of a help section (OPTIONS:, ARGUMENTS:, SUBCOMMANDS:)
#      whose label is followed, on the same line, by its description at column 26 (the parser's
#      label column): there it is 26;
#   4. L and N are not two entries of a list: not (the block's first line ends with ":", and N is
#      indented as far as L, deeper than that first line) — the lines under "Examples:" stand on
#      their own;
#   5. N's first word would have fitted on L: length(L) + 1 + length(word) <= W, lengths in
#      characters, indentation included, a word ending at the next space. For --help, W = 79
#      (COLUMNS − 1): the parser breaks a line before a word only when the word would reach
#      column 80, so its own breaks never satisfy 5 and a break that does was in the text.
#      For the manual pages, W = 975, the line length of a page rendered with MANWIDTH=1000,
#      where no line is long enough to be filled: every break there is the page's own. (At 80
#      columns a width rule cannot read groff's breaks: it keeps "and >0" together with an
#      unbreakable space that prints as a plain one.)
# And an EXAMPLE WRAPPED by the renderer, in --help and in the manual pages at MANWIDTH=80 (78
# columns): in a block whose first line is "Examples:", a line that is not indented deeper than
# "Examples:" — an example too long for the width, cut by the parser or groff. Write it shorter,
# or continue it on a next, indented line after a shell "\".
#
# Each finding is printed with the command (or manual page) it came from and the two lines.
. "$HERE/lib.sh"

command -v python3 >/dev/null || fail "python3 is missing"
root=$(cd "$HERE/../.." && pwd)
bin=$(dirname "$KEYCHAINCTL")
export COLUMNS=80 LC_ALL=C.UTF-8
texts="$WORK/texts"
mkdir -p "$texts"
: >"$WORK/index" # one line per text: FILE<TAB>W (0: no hand-break check)<TAB>help|man<TAB>where it came from

# help_text ARGS...: keychainctl ARGS --help into a file of the index.
count=0
help_text() {
    local file="$texts/help.$count"
    count=$((count + 1))
    "$KEYCHAINCTL" "$@" --help >"$file" 2>&1 || fail "keychainctl $* --help: exit status $?: $(cat "$file")"
    printf '%s\t79\thelp\tkeychainctl %s--help\n' "$file" "${*:+$* }" >>"$WORK/index"
}

# Every command the SUBCOMMANDS sections name, recursively (as scripts/cli-reference.sh reads them).
walk() {
    local sub
    help_text "$@"
    for sub in $(awk '/^SUBCOMMANDS:/ { on = 1; next } on && /^[^ ]/ { on = 0 } on && /^  [a-z]/ { print $1 }' \
        "$texts/help.$((count - 1))"); do
        [ "$sub" = help ] && continue
        walk "$@" "$sub"
    done
}
walk
commands=$count
[ "$commands" -ge 40 ] || fail "only $commands help texts found (SUBCOMMANDS sections unreadable?)"
# Commands hidden from SUBCOMMANDS (pam-helper) still have a --help: from the parser's own dump.
hidden=$("$KEYCHAINCTL" --experimental-dump-help | python3 -c '
import json, sys
def walk(command, path):
    for sub in command.get("subcommands", []):
        name = path + [sub["commandName"]]
        if not sub.get("shouldDisplay", True):
            print(" ".join(name))
        walk(sub, name)
walk(json.load(sys.stdin)["command"], [])') || fail "keychainctl --experimental-dump-help unreadable"
for command in $hidden; do help_text $command; done
expect_contains " $hidden " " pam-helper " "hidden commands"

keychaind="$bin/keychaind"
if [ -x "$keychaind" ]; then
    "$keychaind" --help >"$texts/keychaind" 2>&1 || fail "keychaind --help: exit status $?"
    printf '%s\t79\thelp\tkeychaind --help\n' "$texts/keychaind" >>"$WORK/index"
else
    echo "note: no keychaind beside keychainctl; its --help not checked"
fi

# The manual pages, made as scripts/build-release.sh makes them, with the generate-manual built
# beside keychainctl (the release build always has it), rendered by man as a reader sees them; and
# keychaind.1, written by hand.
pages=0
if [ -x "$bin/generate-manual" ] && command -v man >/dev/null; then
    mkdir -p "$WORK/man"
    "$bin/generate-manual" "$KEYCHAINCTL" --multi-page --date 2026-01-01 --authors "Keychain PKCS#11 developers" \
        -o "$WORK/man" >"$WORK/man.log" 2>&1 || fail "generate-manual: $(tail -n 20 "$WORK/man.log")"
    "$root/scripts/tidy-man.sh" "$WORK/man"/*.1 || fail "scripts/tidy-man.sh"
    for page in "$WORK/man"/*.1 "$root/packaging/man/keychaind.1"; do
        for width in 80 1000; do
            MANWIDTH=$width man -l "$page" >"$texts/man.$pages.$width" 2>"$WORK/man.err" ||
                fail "man -l $page: $(cat "$WORK/man.err")"
        done
        printf '%s\t0\tman\t%s (MANWIDTH=80)\n' "$texts/man.$pages.80" "$(basename "$page")" >>"$WORK/index"
        printf '%s\t975\tman\t%s (MANWIDTH=1000)\n' "$texts/man.$pages.1000" "$(basename "$page")" >>"$WORK/index"
        pages=$((pages + 1))
    done
    [ "$pages" -gt "$commands" ] || fail "$pages manual pages for $commands commands"
else
    echo "note: no generate-manual beside keychainctl (or no man): manual pages not checked"
fi

python3 - "$WORK/index" <<'EOF' || fail "help texts with hand-broken sentences or wrapped examples (above)"
import re, sys

MID = set(",;([{'\"\u2018\u201c")
HEADING = re.compile(r"^[A-Z][A-Z ]*:?$")

def indent(line):
    return len(line) - len(line.lstrip(" "))

def text_column(line, in_section, layout):
    # A help section row: "  label" padded to column 26, then the description.
    if layout == "help" and in_section and indent(line) == 2 and len(line) > 26 \
            and line[25] == " " and line[26] != " ":
        return 26
    return indent(line)

findings = 0
for entry in open(sys.argv[1], encoding="utf-8"):
    path, width, layout, where = entry.rstrip("\n").split("\t")
    width = int(width)
    raw = open(path, encoding="utf-8", errors="replace").read()
    lines = [re.sub(".\b", "", l).rstrip("\n") for l in raw.split("\n")]
    in_section = False
    block = []  # (number, line) of the current block
    for number, line in enumerate(lines, 1):
        if not line.strip():
            block = []
            continue
        if HEADING.match(line):
            in_section = True
            block = []
            continue
        if block:
            previous_number, previous = block[-1]
            report = None
            if block[0][1].strip() == "Examples:" and indent(line) <= indent(block[0][1]):
                report = "example wrapped by the renderer (longer than the width)"
            last, first = previous.rstrip()[-1], line.lstrip()[0]
            if width and (last.isalpha() or last.isdigit() or last in MID) and first.islower() \
                    and indent(line) == text_column(previous, in_section, layout):
                head = block[0][1]
                listed = head.rstrip().endswith(":") and indent(line) == indent(previous) > indent(head)
                word = line.lstrip(" ").split(" ")[0]
                if not listed and len(previous) + 1 + len(word) <= width:
                    report = "hand break mid-sentence: %r would fit on the line before (%d + 1 + %d <= %d)" % (
                        word, len(previous), len(word), width)
            if report:
                findings += 1
                print("%s, lines %d-%d: %s" % (where, previous_number, number, report))
                print("    |" + previous)
                print("    |" + line)
        block.append((number, line))
print("%d finding(s)" % findings)
sys.exit(1 if findings else 0)
EOF
echo "ok: $commands --help texts, $(grep -c . <<<"$hidden") hidden command(s), keychaind --help and $pages manual pages: no hand-broken sentence, no wrapped example"

# Docs/cli-reference.md is made from these texts: it must be what the tool under test prints.
"$root/scripts/cli-reference.sh" "$KEYCHAINCTL" "$WORK/cli-reference.md" >/dev/null || fail "scripts/cli-reference.sh"
diff -u "$root/Docs/cli-reference.md" "$WORK/cli-reference.md" >"$WORK/reference.diff" ||
    fail "Docs/cli-reference.md differs from the tool's --help (run scripts/cli-reference.sh): $(head -n 40 "$WORK/reference.diff")"
echo "ok: Docs/cli-reference.md matches keychainctl --help"
