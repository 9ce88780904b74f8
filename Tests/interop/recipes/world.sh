# The outside world of the recipes, for the hidden "given" steps of <!-- recipe: given … -->
# markers (sourced by runner-made given.sh files, as the recipe user). RECIPE_WORLD is the
# document's world folder: the stand-in server's authorized_keys lives there.

# world_authorize LABEL: the stand-in ssh server accepts the keychain key labelled LABEL, as
# if its authorized_keys line had been added to ~/.ssh/authorized_keys on the server.
world_authorize() {
    local line
    line=$(ssh-keygen -D "$HOME/.local/lib/pkcs11/libkeychain-pkcs11.so" 2>/dev/null | grep " $1\$") ||
        { echo "world: no key labelled $1 in ssh-keygen -D" >&2; return 1; }
    printf '%s\n' "$line" >>"$RECIPE_WORLD/authorized_keys"
    echo "world: the server now accepts the key $1"
}

# world_p12 FILE: a PKCS#12 bundle (EC P-256 key, self-signed certificate "CN=alice client")
# protected by the passphrase the runner types for "Passphrase of …" prompts.
world_p12() {
    local tmp
    tmp=$(mktemp -d)
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$tmp/key.pem" \
        -subj "/CN=alice client" -days 30 -out "$tmp/cert.pem" 2>/dev/null &&
        openssl pkcs12 -export -inkey "$tmp/key.pem" -in "$tmp/cert.pem" -name client \
            -passout env:RECIPE_PASSPHRASE -out "$1"
    local rc=$?
    rm -rf "$tmp"
    [ "$rc" -eq 0 ] && echo "world: $1 (passphrase: the one the runner types)"
    return "$rc"
}

# world_git_repo DIR: a git repository with the user's identity set and a change staged, made
# the current folder (the recipes say "in a repository of yours").
world_git_repo() {
    git init -q "$1" && cd "$1" && git config user.name Alice && git config user.email alice@example.org &&
        echo "hello" >README && git add README && echo "world: in the git repository $1, README staged"
}
