#!/usr/bin/env bash
# Tidies the manual pages that swift-argument-parser's generator writes (mdoc), in place, so that
# man-db and lintian read them cleanly:
#   - NAME gives the page's own name (keychainctl.unlock for keychainctl.unlock.1): whatis and
#     apropos cannot parse a quoted name with a space in it; the synopsis and the rest of the
#     page keep the command as it is typed ("keychainctl unlock");
#   - the one-line description loses its quotes (whatis would show them);
#   - blank lines, which groff warns about in mdoc, become paragraph breaks (.Pp).
set -euo pipefail
for page in "$@"; do
    name=$(basename "$page" .1)
    awk -v page="$name" '
        BEGIN { named = 0 }
        /^\.Nm "/ && !named {
            command = substr($0, 6, length($0) - 6)
            print ".Nm " page
            named = 1
            next
        }
        /^\.Nm$/ && command != "" { print ".Nm \"" command "\""; next }
        /^\.Nd "/ { sub(/^\.Nd "/, ".Nd "); sub(/"$/, ""); print; next }
        /^[ \t]*$/ { print ".Pp"; next }
        /^\.Nm / && !named { named = 1 }
        { print }
    ' "$page" > "$page.tidy"
    mv "$page.tidy" "$page"
done
