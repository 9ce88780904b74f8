#!/bin/bash
# One recipe block, run by controller.sh: restores the document's shell state (variables,
# exported or not, functions, current folder) saved by the previous block, runs the hidden
# "given" steps of the block's markers (if any) and then the block itself with errexit, and saves
# the state again, whatever the outcome. Usage: step.sh BLOCK_FOLDER (holding given.sh, block.sh).
echo "start $$" >&4
exec 4>&-
_recipe_dir=$1
_recipe_state=$RECIPE_STATE

# Names never saved: bash's own and this script's.
_recipe_special() {
    case $1 in
        BASH* | SHELLOPTS | EUID | PPID | UID | FUNCNAME | GROUPS | DIRSTACK | PIPESTATUS | RANDOM | SRANDOM | SECONDS | \
            LINENO | HISTCMD | EPOCHREALTIME | EPOCHSECONDS | OPTIND | OPTARG | OPTERR | SHLVL | PWD | OLDPWD | _ | \
            COLUMNS | LINES | HOSTNAME | HOSTTYPE | MACHTYPE | OSTYPE | PS4 | COMP_WORDBREAKS | IFS | _recipe_*) return 0 ;;
    esac
    return 1
}

_recipe_save() {
    local rc=$? name decl flags exported=""
    set +e
    trap - ERR
    {
        for name in $(compgen -v); do
            _recipe_special "$name" && continue
            decl=$(declare -p "$name" 2>/dev/null) || continue
            flags=${decl#declare -}
            flags=${flags%% *}
            [[ $flags == *r* ]] && continue
            [[ $flags == *x* ]] && exported+=" $name"
            printf '%s\n' "$decl"
        done
        printf '_recipe_exported=%q\n' "$exported "
        for name in $(compgen -A function); do
            [[ $name == _recipe_* ]] || declare -f "$name"
        done
        printf 'cd %q 2>/dev/null\n' "$PWD"
    } >"$_recipe_state.new" && mv "$_recipe_state.new" "$_recipe_state"
    exit "$rc"
}

if [ -f "$_recipe_state" ]; then
    # shellcheck disable=SC1090
    source "$_recipe_state"
    # Variables the previous block unset (exported ones only: they come back from the environment).
    for _recipe_name in $(compgen -e); do
        _recipe_special "$_recipe_name" && continue
        case " $_recipe_exported " in *" $_recipe_name "*) ;; *) unset "$_recipe_name" ;; esac
    done
fi
trap _recipe_save EXIT
trap 'echo "recipe: exit status $? at ${BASH_SOURCE[0]##*/} line $LINENO: $BASH_COMMAND" >&2' ERR
set -e
if [ -s "$_recipe_dir/given.sh" ]; then
    # shellcheck disable=SC1091
    source "$_recipe_dir/given.sh"
fi
# shellcheck disable=SC1091
source "$_recipe_dir/block.sh"
