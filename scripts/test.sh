#!/usr/bin/env bash
# Run every test of the workspace; exit non-zero on the first failure.
#
# FERROCE_SHARED: the shared/ directory (vectors, peercheck); default: ../shared beside
# the repository. Exported for the tests that read the shared vectors.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
FERROCE_SHARED=$(cd "${FERROCE_SHARED:-$repo/../shared}" && pwd)
export FERROCE_SHARED

step() { printf '\n== %s\n' "$*"; }

step "test dependencies"
scripts/setup-test-deps.sh

step "formatting (cargo fmt --check)"
cargo fmt --all --check

step "cargo test"
cargo test --workspace --all-targets --all-features

step "doc tests"
cargo test --workspace --doc --all-features

step "lints (cargo clippy, warnings denied)"
cargo clippy --workspace --all-targets --all-features -- -D warnings

step "rustdoc (warnings denied)"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --all-features

step "the book and the README: links, anchors, no development history"
python3 scripts/check-docs.py
mdbook build docs

step "man pages"
cargo run --quiet --release -p ferroce-cli -- manpages target/man >/dev/null

fuzz_seconds=${FERROCE_FUZZ_SECONDS:-30}
if [ "$fuzz_seconds" -gt 0 ]; then
    step "fuzz the parser for $fuzz_seconds s (FERROCE_FUZZ_SECONDS=0 skips)"
    scripts/fuzz.sh "$fuzz_seconds"
else
    step "fuzzing skipped (FERROCE_FUZZ_SECONDS=0)"
fi

if [ "${FERROCE_INTEROP:-1}" != 0 ]; then
    step "interop with the kernel's rxe in a QEMU guest (FERROCE_INTEROP=0 skips)"
    scripts/interop.sh
    if [ "${FERROCE_INTEROP_RAW:-1}" != 0 ]; then
        # The cases where the backend matters; loss recovery and the CM's
        # connect cycles are the engine's, run above on the UDP backend.
        step "the same on the raw-Ethernet backend, RoCE v2, without netem and the connect cycles (FERROCE_INTEROP_RAW=0 skips)"
        INTEROP_SKIP='netem|cm-cycles' scripts/interop.sh --backend raw
    fi
    step "the unmodified Debian tools on ferroce's libibverbs.so.1 against the kernel's rxe (FERROCE_INTEROP=0 skips)"
    scripts/interop-cabi.sh
else
    step "interop skipped (FERROCE_INTEROP=0)"
fi

step "all tests passed"
