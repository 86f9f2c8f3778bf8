#!/usr/bin/env bash
# What a garbage flood at UDP 4791 costs a legitimate run.
#
# Runs `ferroce perf write -s SIZE -n ITERS` (server 127.0.0.1, client
# 127.0.0.2) three ways, inside a network namespace this script creates and
# deletes (so the flood never leaves its loopback):
#   none     no flood;
#   control  the flood aimed at a port nobody listens on (127.0.0.1:4799):
#            what the flood costs in CPU alone;
#   flood    the same flood at the server's 127.0.0.1:4791.
# and prints each time and the ratio flood/control (goal: at most 2).
#
# Usage (root): scripts/flood.sh [--fixed N] [--rounds R]
#   FLOOD_SIZE (65536), FLOOD_ITERS (30000), FLOOD_NETNS (ferroce-flood).
# Each perf run is bounded by `timeout 300`; the flood by --seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

size=${FLOOD_SIZE:-65536}
iters=${FLOOD_ITERS:-30000}
ns=${FLOOD_NETNS:-ferroce-flood}
rounds=1
flood_args=()
while [ $# -gt 0 ]; do
    case $1 in
        --fixed) flood_args+=(--fixed "$2"); shift 2 ;;
        --rounds) rounds=$2; shift 2 ;;
        *) echo "flood.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
    esac
done
[ "$(id -u)" = 0 ] || { echo "flood.sh: needs root (ip netns)" >&2; exit 1; }

cargo build --release -q -p ferroce-cli
cargo build --release -q -p ferroce-io --example flood
target=${CARGO_TARGET_DIR:-target}/release
ferroce=$target/ferroce
flood_bin=$target/examples/flood

ip netns add "$ns"
trap 'ip netns del "$ns"' EXIT
ip netns exec "$ns" ip link set lo up
run() { ip netns exec "$ns" "$@"; }

# One timed perf run (seconds on stdout), with a flood at $1 ("" for none).
timed() {
    local to=$1 pid=
    if [ -n "$to" ]; then
        # Not through `run`: $! must be the flood itself (ip netns exec
        # execs it), not a subshell, for the kill below to reach it.
        ip netns exec "$ns" "$flood_bin" "$to" --seconds 300 "${flood_args[@]}" >/dev/null &
        pid=$!
        sleep 1
    fi
    local t0 t1
    t0=$(date +%s.%N)
    # A failed run (RETRY_EXC_ERR under the flood, or the timeout) is
    # reported, timed to its failure, and the flood still stopped.
    if ! run timeout 300 "$ferroce" perf write -s "$size" -n "$iters" >/dev/null; then
        echo "flood.sh: the perf run ${to:+with a flood at $to }failed" >&2
    fi
    t1=$(date +%s.%N)
    if [ -n "$pid" ]; then
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    fi
    echo "$t1 - $t0" | bc
}

# The flood's own rate (alone, 5 s), to report what this machine reaches.
run "$flood_bin" 127.0.0.1:4799 --seconds 5 "${flood_args[@]}"

for r in $(seq "$rounds"); do
    t_none=$(timed "")
    t_control=$(timed 127.0.0.1:4799)
    t_flood=$(timed 127.0.0.1:4791)
    printf 'round %s: none %.2f s, control %.2f s, flood %.2f s, flood/control %.2f, flood/none %.2f\n' \
        "$r" "$t_none" "$t_control" "$t_flood" \
        "$(echo "$t_flood / $t_control" | bc -l)" "$(echo "$t_flood / $t_none" | bc -l)"
done
