#!/usr/bin/env bash
# Long runs that CI does not do, with bounded defaults:
#  * a 1 GiB RC WRITE through 5% loss plus duplication and reordering on the
#    simulated network, checked byte for byte (FERROCE_SOAK_BYTES, default 1G);
#  * the random mix of SEND/WRITE/READ/atomics under random loss, reordering,
#    duplication and ECN marking, FERROCE_SOAK_CASES cases (default 20000).
#
#   scripts/soak.sh [BYTES] [CASES]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export FERROCE_SOAK_BYTES=${1:-1G}
export FERROCE_SOAK_CASES=${2:-20000}
time cargo test --release -p ferroce-core -- --nocapture soak random_mix
