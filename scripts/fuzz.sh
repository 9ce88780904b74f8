#!/usr/bin/env bash
# Fuzzing with libFuzzer and AddressSanitizer (leaks included).
#
# Usage: scripts/fuzz.sh decoders|module [SECONDS, default 60] [more libFuzzer options]
#   decoders  every decoder of stored or imported bytes (Sources/FuzzDecoders)
#   module    the PKCS#11 C API in process: templates, mechanism parameters, handles, call
#             sequences (Sources/FuzzModule)
#
# Reads the committed corpus Tests/fuzz/TARGET/corpus and the regression inputs in
# Tests/fuzz/TARGET/crashers; new interesting inputs go to a scratch folder, or with
# FUZZ_GROW_CORPUS=1 into the committed corpus; a crash, leak or hang is written to
# Tests/fuzz/TARGET/crashers/ and fails the run. Prints libFuzzer's final statistics.
# Long run (see Docs/reliability.md): scripts/fuzz.sh module 3600 -jobs=2 -workers=2
# FUZZ_SCRATCH=DIR builds in DIR instead of .build-fuzz (a build must not replace the binary of
# a run still going).
set -euo pipefail
cd "$(dirname "$0")/.."
target=${1:?usage: scripts/fuzz.sh decoders|module [SECONDS] [libFuzzer options]}
seconds=${2:-60}
shift $(( $# >= 2 ? 2 : 1 ))
case $target in
    decoders) product=FuzzDecoders ;;
    module) product=FuzzModule ;;
    *) echo "fuzz: unknown target $target (decoders or module)" >&2; exit 2 ;;
esac
# Coverage as today's libFuzzer reads it (inline 8-bit counters and a PC table): Swift's own
# -sanitize=fuzzer still emits trace-pc-guard, which this libFuzzer refuses, so the coverage
# pass is configured directly and libFuzzer (from the toolchain) is linked by hand.
libfuzzer=$(dirname "$(command -v swiftc)")/../lib/swift/clang/lib/linux/libclang_rt.fuzzer_no_main-x86_64.a
flags=(-c release --product "$product" --sanitize=address -Xswiftc -DFUZZING
       -Xswiftc -sanitize-coverage=edge,inline-8bit-counters,pc-table,trace-cmp
       -Xlinker --whole-archive -Xlinker "$libfuzzer" -Xlinker --no-whole-archive -Xlinker -lstdc++
       --scratch-path "${FUZZ_SCRATCH:-.build-fuzz}")
swift build "${flags[@]}" >&2
bin=$(swift build "${flags[@]}" --show-bin-path)
corpus=Tests/fuzz/$target/corpus
crashers=Tests/fuzz/$target/crashers
mkdir -p "$corpus" "$crashers"
# New inputs: a scratch folder removed at exit, or (FUZZ_GROW_CORPUS=1) the committed corpus,
# which the exit trap must then leave alone (it once removed it).
if [ "${FUZZ_GROW_CORPUS:-0}" = 1 ]; then
    scratch=$corpus
else
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' EXIT
fi
# -timeout: an input running 10 s is a hang; -rss_limit_mb: a leak or runaway allocation.
ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 "$bin/$product" \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$crashers/" "$@" "$scratch" "$corpus" "$crashers"
