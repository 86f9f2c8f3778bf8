#!/usr/bin/env bash
# Fuzz the ferroce-wire packet parser (cargo-fuzz target `parse`) for SECONDS seconds
# (default 30, at most 3600); exit non-zero if it finds a crash.
#
#   scripts/fuzz.sh [SECONDS]
#
# Installs cargo-fuzz (`cargo install cargo-fuzz --locked`) when `cargo fuzz` is missing.
# Runs on the stable toolchain: cargo-fuzz passes nightly-only flags (-Zsanitizer and
# the like), which RUSTC_BOOTSTRAP=1 lets stable accept. The sanitizer is FUZZ_SANITIZER,
# default `none`: ferroce-wire is forbid(unsafe_code), so its bugs show as panics, which
# libFuzzer catches without a sanitizer, and without one the target runs about ten times
# faster. FUZZ_SANITIZER=address also works on stable (the toolchain ships the ASan
# runtime) and checks the unsafe code of the dependencies (crc32fast) too.
#
# The committed seeds (fuzz/corpus/parse/, from scripts/fuzz-seeds.py) are copied into
# the git-ignored fuzz/corpus-run/parse/, and libFuzzer adds what it finds there only, so
# the committed corpus never grows. That directory is kept between runs; delete it to
# start again from the seeds. Crash inputs go to fuzz/artifacts/parse/ and are printed
# in hex, with the command that replays them.
set -euo pipefail

seconds=${1:-30}
if ! [[ $seconds =~ ^[0-9]+$ ]] || [ "$seconds" -lt 1 ] || [ "$seconds" -gt 3600 ]; then
    echo "usage: $0 [SECONDS]  (1..3600, default 30)" >&2
    exit 2
fi
sanitizer=${FUZZ_SANITIZER:-none}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fuzz=$repo/fuzz
seeds=$fuzz/corpus/parse
corpus=$fuzz/corpus-run/parse
artifacts=$fuzz/artifacts/parse

if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "fuzz: installing cargo-fuzz"
    cargo install cargo-fuzz --locked
fi
cargo fuzz --version

export RUSTC_BOOTSTRAP=1
mkdir -p "$corpus" "$artifacts"
cp -R "$seeds/." "$corpus/"
marker=$(mktemp)
trap 'rm -f "$marker"' EXIT

cd "$fuzz"
start=$(date +%s)
cargo fuzz build --sanitizer "$sanitizer" parse
echo "fuzz: build took $(($(date +%s) - start)) s; fuzzing for $seconds s (sanitizer $sanitizer)"
# Without a sanitizer libFuzzer looks for the sanitizer runtime's hooks and
# warns, once per hook, that it cannot find them ("WARNING: Failed to find
# function __sanitizer_..."): harmless, the fuzzing is the same. Those lines
# are left out; one note says why.
if [ "$sanitizer" = none ]; then
    echo "fuzz: no sanitizer, so libFuzzer's warnings about missing __sanitizer_* hooks are left out"
fi
set +e
cargo fuzz run --sanitizer "$sanitizer" parse "$corpus" -- \
    -max_total_time="$seconds" -timeout=10 -print_final_stats=1 2>&1 |
    grep -v '^WARNING: Failed to find function "\?__sanitizer_'
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
    echo "fuzz: FAILED (exit $status); new inputs in $artifacts:" >&2
    find "$artifacts" -type f -newer "$marker" | while read -r f; do
        echo "== $f" >&2
        od -An -tx1 -v "$f" >&2
        echo "replay: (cd $fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run --sanitizer $sanitizer parse $f)" >&2
    done
    exit "$status"
fi
echo "fuzz: no crash in $seconds s; corpus $(find "$corpus" -type f | wc -l) inputs"
