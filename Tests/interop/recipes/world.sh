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

# world_softhsm_token LABEL PIN: a SoftHSMv2 token (Debian softhsm2) under ~/softhsm, as someone
# leaving SoftHSM has: ~/softhsm/softhsm2.conf, the user PIN in ~/softhsm/LABEL.pin (0600), an
# extractable EC key pair, a key imported by softhsm2-util (non-extractable) with its
# certificate, and a private data object.
world_softhsm_token() {
    local dir="$HOME/softhsm" module=/usr/lib/softhsm/libsofthsm2.so
    mkdir -p "$dir/tokens" && echo "directories.tokendir = $dir/tokens" >"$dir/softhsm2.conf" || return 1
    (umask 077 && printf '%s\n' "$2" >"$dir/$1.pin")
    export SOFTHSM2_CONF="$dir/softhsm2.conf"
    softhsm2-util --init-token --free --label "$1" --so-pin 12345678 --pin "$2" >/dev/null || return 1
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/old-key.pem" 2>/dev/null &&
        softhsm2-util --import "$dir/old-key.pem" --token "$1" --label old-key --id 0a --pin "$2" >/dev/null || return 1
    openssl req -x509 -new -key "$dir/old-key.pem" -subj /CN=old -days 30 -outform DER -out "$dir/old-cert.der" 2>/dev/null || return 1
    local p11=(pkcs11-tool --module "$module" --token-label "$1" --login --pin "$2")
    "${p11[@]}" --write-object "$dir/old-cert.der" --type cert --id 0a --label old-key >/dev/null 2>&1 &&
        "${p11[@]}" --keypairgen --key-type EC:prime256v1 --id 0b --label movable --extractable >/dev/null 2>&1 &&
        printf 'old secret' >"$dir/note" && "${p11[@]}" --write-object "$dir/note" --type data --label old-note --private >/dev/null 2>&1 ||
        return 1
    unset SOFTHSM2_CONF
    echo "world: SoftHSM token $1 in $dir (user PIN in $dir/$1.pin)"
}
