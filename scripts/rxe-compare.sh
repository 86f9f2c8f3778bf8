#!/usr/bin/env bash
# ferroce beside the kernel's Soft-RoCE (rdma_rxe): the same perftest runs,
# in the same two QEMU guests of the rig ($FERROCE_SHARED/rig, see its
# README.md) and in one run, with
#
#   1. rxe <-> rxe:            ib_* server in guest A, ib_* client in guest B;
#   2. ferroce client -> rxe:  `ferroce perf --perftest` in B, ib_* server in A;
#   3. rxe client -> ferroce:  ib_* client in A, `ferroce perf --perftest --listen` in B;
#   4. ferroce <-> ferroce:    `ferroce perf --perftest` server in A, client in B.
#
# ferroce runs inside the guests (the release binary, brought in through
# the rig's 9p share and copied into the guest's memory; the guest's
# initramfs has the glibc and libgcc_s it links), so both
# ends of every case share the same emulated CPU. The rig runs the guests
# under TCG (1 vCPU each, on a 2-core machine): the figures are relative,
# not what either stack does on real hardware.
#
# The Debian 6.1 kernel's rdma_rxe opens its UDP 4791 sockets when the
# module loads, not per device (`rdma link delete rxe0` leaves them bound),
# so a guest that runs ferroce first unloads the module: B before cases 2
# and 3, A before case 4 (and the next round loads it again in both).
#
# Tests (perftest defaults otherwise, path MTU 1024, the guests' active MTU):
# ib_write_bw, ib_read_bw, ib_send_bw with -s 65536 -n $COMPARE_BW_ITERS;
# ib_write_lat, ib_send_lat with -s 8 -n $COMPARE_LAT_ITERS; and cm_setup,
# rdma_cm connection setups: ucmatose (`ferroce cmatose`) with
# -c $COMPARE_CM_CONNS -C 0, each connection resolved, connected,
# established and disconnected, timed by the client from before it starts
# to its exit (process start included, the same for both stacks; the
# guest's /proc/uptime, 10 ms steps). Each figure is the client's: BW
# average [MB/sec] for bandwidth, t_typical [usec] for latency, the time
# per connection [usec] for cm_setup. The 20 cases run in $COMPARE_ROUNDS rounds (TCG figures move by
# up to 2x from run to run); the table gives each cell's median, its ratio
# to rxe <-> rxe's median, and the lowest and highest round.
#
#   scripts/rxe-compare.sh        # build, boot two guests, 3 rounds of the 20 cases, tear down
#
# Environment: FERROCE_SHARED (default "$repo/../shared"), COMPARE_OUT
# (default /tmp/ferroce-rxe-compare: compare.md and per-case logs),
# COMPARE_BW_ITERS (default 500), COMPARE_LAT_ITERS (default 1000),
# COMPARE_ROUNDS (default 3), COMPARE_CM_CONNS (default 20), COMPARE_TESTS
# (default all six: "write_bw read_bw send_bw write_lat send_lat cm_setup").
# About 7 minutes on the 2-core machine.
# Needs root (the rig). Not part of scripts/test.sh. Exit status 0 only if
# every case ran and reported a figure.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/rig-lib.sh"
out=${COMPARE_OUT:-/tmp/ferroce-rxe-compare}
bw_iters=${COMPARE_BW_ITERS:-500}
lat_iters=${COMPARE_LAT_ITERS:-1000}
rounds=${COMPARE_ROUNDS:-3}
cm_conns=${COMPARE_CM_CONNS:-20}
bw_size=65536
lat_size=8
# Where the guests run ferroce from (see the copy after boot).
guest_ferroce=/tmp/ferroce

rig_check
mkdir -p "$out"
rm -f "$out"/*.log "$out/compare.md"

cleanup() {
    set +e
    timeout 120 "$rig" down >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '[rxe-compare %s] %s\n' "$(date +%T)" "$*"; }

t0=$(date +%s)
build_and_boot 2 "two guests"
for g in A B; do
    install -m 0755 "$repo/target/release/ferroce" "$rig_dir/run/$g/share/ferroce"
done
if ! "$rig" exec B '/rig/ferroce --version' --timeout 60 >"$out/guest-ferroce.log" 2>&1; then
    cat "$out/guest-ferroce.log" >&2
    echo "ferroce does not run in the guest (see above)" >&2
    exit 1
fi
# Each run starts ferroce from the guest's memory, as the rxe side's tools
# start from its initramfs: executed from the 9p share (no cache), every
# start read the 9 MB binary over virtio-9p, which the cm_setup client's
# time counted.
for g in A B; do
    "$rig" exec "$g" "cp /rig/ferroce $guest_ferroce" --timeout 60 >"$out/copy-$g.log" 2>&1 ||
        { cat "$out/copy-$g.log" >&2; echo "could not copy ferroce into guest $g" >&2; exit 1; }
done
t_up=$(date +%s)

# The client's figure from its log: BW average [MB/sec] (4th column) or
# t_typical [usec] (5th) of the line under perftest's '#bytes' header.
figure() {
    local f=$1 kind=$2
    if [ "$kind" = setup ]; then
        sed -n 's/^cm_setup_us_per_connection \([0-9]*\)$/\1/p' "$f" | tail -1
        return
    fi
    { grep -A1 '#bytes' "$f" || true; } | tail -1 |
        awk -v k="$kind" 'k == "bw" && NF >= 4 { print $4 } k == "lat" && NF >= 5 { print $5 }'
}

# The ferroce and perftest command lines, run in a guest. GIDX, RIG_SELF and
# RIG_PEER come from the guest's environment.
size_of() { case $1 in *_bw) echo $bw_size ;; *) echo $lat_size ;; esac; }
iters_of() { case $1 in *_bw) echo "$bw_iters" ;; *) echo "$lat_iters" ;; esac; }
rxe_cmd() {
    [ "$1" = cm_setup ] && { echo "ucmatose -b \$RIG_SELF -c $cm_conns -C 0"; return; }
    echo "ib_$1 -d rxe0 -x \$GIDX -F -n $(iters_of "$1") -s $(size_of "$1")"
}
ferroce_cmd() {
    [ "$1" = cm_setup ] && { echo "$guest_ferroce cmatose -b \$RIG_SELF -c $cm_conns -C 0"; return; }
    local verb=${1%_*} lat=
    [ "${1#*_}" = lat ] && lat=--lat
    echo "$guest_ferroce perf $verb $lat --perftest --quiet -n $(iters_of "$1") -s $(size_of "$1") -m 1024 -L \$RIG_SELF"
}

# A ferroce server: perf with --listen; cmatose serves without -s.
ferroce_server_cmd() {
    if [ "$1" = cm_setup ]; then ferroce_cmd "$1"; else echo "$(ferroce_cmd "$1") --listen"; fi
}

declare -A figs fails
failures=0
# run_case TEST COLUMN SERVER_GUEST SERVER_CMD CLIENT_GUEST CLIENT_CMD
# The server starts first; the client (given the server's address) retries
# while the server is not listening yet (TCG: it takes a moment).
run_case() {
    local test=$1 col=$2 sg=$3 scmd=$4 cg=$5 ccmd=$6
    local name="r$round-$col-$test" id rs=0 rc=0 f
    local log_s=$out/$name.server.log log_c=$out/$name.client.log
    # A cmatose client names its server with -s; its run is timed (see
    # the header) and the time per connection printed for `figure`.
    local start=: stop=: report=:
    if [ "$test" = cm_setup ]; then
        ccmd="$ccmd -s"
        start='read t0 _ </proc/uptime'
        stop='read t1 _ </proc/uptime'
        # /proc/uptime in 10 ms steps: seconds.centiseconds, digits joined.
        report="[ \$r != 0 ] || echo cm_setup_us_per_connection \$(( (\${t1%.*}\${t1#*.} - \${t0%.*}\${t0#*.}) * 10000 / $cm_conns ))"
    fi
    id=$("$rig" exec "$sg" "exec $scmd" --bg --timeout 150)
    sleep 0.5
    # `timeout` per attempt, so the job's own timeout never leaves a
    # busy-polling tool behind in the guest.
    timeout 200 "$rig" exec "$cg" "i=0
        while :; do
            i=\$((i + 1))
            $start; timeout 120 $ccmd \$RIG_PEER >/tmp/client.out 2>&1; r=\$?; $stop
            if [ \$r != 0 ] && [ \$i -lt 40 ] && grep -qiE 'refused|connect to|REJECTED, error: 8' /tmp/client.out; then
                sleep 0.3; continue
            fi
            cat /tmp/client.out; $report; exit \$r
        done" --timeout 170 >"$log_c" 2>&1 || rc=$?
    timeout 200 "$rig" wait "$sg" "$id" 150 >"$log_s" 2>&1 || rs=$?
    [ "$rs" = 0 ] || "$rig" kill "$sg" "$id" || true
    f=$(figure "$log_c" "${test#*_}")
    if [ "$rc" != 0 ] || [ "$rs" != 0 ] || [ -z "$f" ] || grep -q 'invalid data' "$log_s" "$log_c"; then
        failures=$((failures + 1))
        fails[$col,$test]=$((${fails[$col,$test]:-0} + 1))
        step "$name: FAIL (server rc=$rs, client rc=$rc; logs $log_s, $log_c)"
    else
        figs[$col,$test]="${figs[$col,$test]:-} $f"
        step "$name: $f $([ "${test#*_}" = bw ] && echo MB/s || echo us)"
    fi
}

tests=${COMPARE_TESTS:-"write_bw read_bw send_bw write_lat send_lat cm_setup"}

# unload_rxe G: free UDP 4791 in guest G for ferroce.
unload_rxe() {
    "$rig" exec "$1" 'rdma link delete rxe0; rmmod rdma_rxe && ! netstat -uln | grep -q ":4791 "' \
        --timeout 60 >"$out/unload-$1.log" 2>&1 ||
        { cat "$out/unload-$1.log" >&2; echo "could not unload rdma_rxe in guest $1" >&2; exit 1; }
}
# load_rxe G: rdma_rxe and rxe0 back, as the guest's init set them up.
load_rxe() {
    # shellcheck disable=SC2016 # expanded by the guest's shell
    "$rig" exec "$1" 'insmod "$(grep /rdma_rxe.ko /etc/rig-modules)" &&
        rdma link add rxe0 type rxe netdev eth0 && i=0 &&
        while [ -z "$(rig-gid 4)" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done &&
        ibv_devinfo -d rxe0 | grep -q PORT_ACTIVE' --timeout 60 >"$out/load-$1.log" 2>&1 ||
        { cat "$out/load-$1.log" >&2; echo "could not load rdma_rxe in guest $1" >&2; exit 1; }
}

t_cases=$(date +%s)
for round in $(seq "$rounds"); do
    if [ "$round" -gt 1 ]; then
        step "round $round: rdma_rxe back in both guests"
        load_rxe A
        load_rxe B
    fi
    step "round $round: rxe <-> rxe (server A, client B)"
    for t in $tests; do
        run_case "$t" rxe A "$(rxe_cmd "$t")" B "$(rxe_cmd "$t")"
    done
    step "round $round: unloading rdma_rxe in guest B; ferroce runs there"
    unload_rxe B
    for t in $tests; do
        run_case "$t" fc A "$(rxe_cmd "$t")" B "$(ferroce_cmd "$t")"
    done
    for t in $tests; do
        run_case "$t" fs B "$(ferroce_server_cmd "$t")" A "$(rxe_cmd "$t")"
    done
    step "round $round: unloading rdma_rxe in guest A; ferroce <-> ferroce (server A, client B)"
    unload_rxe A
    for t in $tests; do
        run_case "$t" ff A "$(ferroce_server_cmd "$t")" B "$(ferroce_cmd "$t")"
    done
done
t_end=$(date +%s)
timeout 120 "$rig" down >/dev/null 2>&1 || true

# median LIST...: the middle figure (the mean of the two middle ones).
median() {
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END {
        if (NR == 0) exit; m = int((NR + 1) / 2)
        printf "%.2f", NR % 2 ? v[m] : (v[m] + v[m + 1]) / 2 }'
}
# cell COL TEST: the median over the rounds, its ratio to rxe <-> rxe's
# median, the range, and the failed rounds.
cell() {
    local -a v b
    read -ra v <<<"${figs[$1,$2]:-}"
    read -ra b <<<"${figs[rxe,$2]:-}"
    local unit=MB/s nf=${fails[$1,$2]:-0} m base text
    [ "${2#*_}" = lat ] && unit=us
    [ "$2" = cm_setup ] && unit='us/connection'
    if [ ${#v[@]} = 0 ]; then echo "FAIL"; return; fi
    m=$(median "${v[@]}")
    text="$m $unit"
    if [ "$1" != rxe ] && [ ${#b[@]} -gt 0 ]; then
        base=$(median "${b[@]}")
        text="$text ($(awk -v v="$m" -v b="$base" 'BEGIN { printf "%.2fx", v / b }'))"
    fi
    if [ ${#v[@]} -gt 1 ]; then
        text="$text, $(printf '%s\n' "${v[@]}" | sort -g | head -1)-$(printf '%s\n' "${v[@]}" | sort -g | tail -1)"
    fi
    [ "$nf" = 0 ] || text="$text, $nf of $rounds FAILED"
    echo "$text"
}

total=$(($(date +%s) - t0))
{
    echo "| test | rxe <-> rxe | ferroce client -> rxe server | rxe client -> ferroce server | ferroce <-> ferroce |"
    echo "|---|---|---|---|---|"
    for t in $tests; do
        opts="-s $(size_of "$t") -n $(iters_of "$t")" name=ib_$t
        [ "$t" = cm_setup ] && opts="-c $cm_conns -C 0" name=ucmatose
        echo "| $name $opts | $(cell rxe "$t") | $(cell fc "$t") | $(cell fs "$t") | $(cell ff "$t") |"
    done
    echo
    echo "Client-side figures, the median of $rounds rounds, then (N.NNx) its ratio to rxe <-> rxe's"
    echo "median and the lowest-highest of the rounds: BW average (MB/s, higher is better) and"
    echo "t_typical (us, lower is better), and for ucmatose the client's time per rdma_cm"
    echo "connection (us, lower is better). Both guests: QEMU TCG, 1 vCPU each, path MTU 1024."
    echo "Times: build and boot $((t_up - t0)) s, $rounds rounds of the 20 cases $((t_end - t_cases)) s, total $total s."
} >"$out/compare.md"
echo
cat "$out/compare.md"
echo
echo "table: $out/compare.md, logs: $out/"
echo "total: $total s"
[ "$failures" = 0 ]
