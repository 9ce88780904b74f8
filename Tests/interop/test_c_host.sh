# A C host program (Tests/c-host/host.c) loads the module with dlopen and checks load/unload
# cycles, fork, the interface lists, C_Initialize arguments, threads and OpenSSL's error queue; the module's exported
# symbols and dynamic flags are checked with readelf.
. "$HERE/lib.sh"

src="$HERE/../c-host/host.c"
host="$WORK/host"
gcc -Wall -Wextra -Werror -O1 -pthread -I"$HERE/../../Include" "$src" -o "$host" -ldl -lcrypto || fail "compile host.c"

# --- exported symbols: exactly the 68 PKCS#11 2.40 functions, 4 of 3.0 and 7 of 3.2 -------------
expected="C_CancelFunction C_CloseAllSessions C_CloseSession C_CopyObject C_CreateObject C_Decrypt
C_DecryptDigestUpdate C_DecryptFinal C_DecryptInit C_DecryptUpdate C_DecryptVerifyUpdate C_DeriveKey
C_DestroyObject C_Digest C_DigestEncryptUpdate C_DigestFinal C_DigestInit C_DigestKey C_DigestUpdate
C_Encrypt C_EncryptFinal C_EncryptInit C_EncryptUpdate C_Finalize C_FindObjects C_FindObjectsFinal
C_FindObjectsInit C_GenerateKey C_GenerateKeyPair C_GenerateRandom C_GetAttributeValue
C_GetFunctionList C_GetFunctionStatus C_GetInfo C_GetMechanismInfo C_GetMechanismList
C_GetObjectSize C_GetOperationState C_GetSessionInfo C_GetSlotInfo C_GetSlotList C_GetTokenInfo
C_InitPIN C_InitToken C_Initialize C_Login C_Logout C_OpenSession C_SeedRandom C_SetAttributeValue
C_SetOperationState C_SetPIN C_Sign C_SignEncryptUpdate C_SignFinal C_SignInit C_SignRecover
C_SignRecoverInit C_SignUpdate C_UnwrapKey C_Verify C_VerifyFinal C_VerifyInit C_VerifyRecover
C_VerifyRecoverInit C_VerifyUpdate C_WaitForSlotEvent C_WrapKey
C_GetInterfaceList C_GetInterface C_LoginUser C_SessionCancel
C_EncapsulateKey C_DecapsulateKey C_VerifySignatureInit C_VerifySignature C_VerifySignatureUpdate
C_VerifySignatureFinal C_GetSessionValidationFlags"
expected_sorted=$(printf '%s\n' $expected | LC_ALL=C sort)
expect_eq "$(printf '%s\n' "$expected_sorted" | wc -l)" "79" "the expected symbol list itself"

syms=$(readelf --dyn-syms -W "$MODULE") || fail "readelf --dyn-syms"
# Columns: Num: Value Size Type Bind Vis Ndx Name; defined = Ndx not UND; drop @version suffixes.
exported=$(printf '%s\n' "$syms" | awk '($5 == "GLOBAL" || $5 == "WEAK") && $7 != "UND" && NF >= 8 { sub(/@.*/, "", $8); print $8 }' | LC_ALL=C sort -u)
not_c=$(printf '%s\n' "$exported" | grep -v '^C_' || true)
expect_eq "$not_c" "" "exported global symbols that do not start with C_"
expect_eq "$(printf '%s\n' "$exported" | wc -l)" "79" "number of exported symbols"
expect_eq "$exported" "$expected_sorted" "exported symbols"
echo "ok: exactly the 79 expected C_ symbols are exported"

dyn=$(readelf -d "$MODULE") || fail "readelf -d"
flags1=$(printf '%s\n' "$dyn" | grep 'FLAGS_1' || true)
expect_contains "$flags1" "NODELETE" "FLAGS_1 of the module"
expect_not_contains "$(printf '%s\n' "$dyn" | grep NEEDED)" "libp11-kit" "NEEDED entries"
echo "ok: FLAGS_1 has NODELETE; no NEEDED libp11-kit"

# --- the host's subcommands ------------------------------------------------------------------
run_host() {
    echo "== host $*"
    "$host" "$MODULE" "$@" || fail "host $* (exit $?)"
}
run_host interfaces
run_host initargs
run_host cycles 50
run_host fork
run_host threads
run_host errqueue
# Again with tokens present: the cycles leave sessions open for C_Finalize to close.
run_host cycles 50
echo "c_host: all subcommands passed"
