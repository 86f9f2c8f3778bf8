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

step "dependency audit (cargo deny: licenses, bans, sources; offline once fetched)"
cargo fetch --locked --quiet
cargo deny --offline check licenses bans sources

step "cargo test"
# Tests that cannot run here (not root, a tool missing) pass after one line
# each in this file (FERROCE_SKIP_LOG, see crates/ferroce-verbs/tests/shared/skip.rs).
skip_log=$(mktemp "${TMPDIR:-/tmp}/ferroce-skips.XXXXXX")
trap 'rm -f "$skip_log"' EXIT
export FERROCE_SKIP_LOG=$skip_log
cargo test --workspace --all-targets --all-features
unset FERROCE_SKIP_LOG
skips=$(wc -l <"$skip_log")
if ((skips == 0)); then
    echo "0 tests skipped (not root / tool missing)"
else
    echo "$skips tests skipped (not root / tool missing):"
    # Each line is `<test>: <reason>`; grouped by reason, with a count.
    awk '{ i = index($0, ": "); print substr($0, i + 2) "\t" substr($0, 1, i - 1) }' \
        "$skip_log" | sort | awk -F'\t' '
        { n[$1]++; tests[$1] = tests[$1] "\n    " $2 }
        END { for (why in n) printf "  %s (%d):%s\n", why, n[why], tests[why] }'
fi

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
