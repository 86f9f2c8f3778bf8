#!/usr/bin/env bash
# Interop slice: `ferroce pingpong` against rdma-core's ibv_{rc,uc,ud}_pingpong
# on the Linux kernel's Soft-RoCE (rdma_rxe) in a QEMU guest, using the rig in
# $FERROCE_SHARED/rig (see its README.md). ferroce runs on this machine inside
# the rig's network namespace (198.18.0.1), the rdma-core tools in guest A
# (198.18.0.11). Every case runs both ways: ferroce as client and as server.
#
#   scripts/interop.sh            # build, boot, run the matrix, check the capture, tear down
#
# Environment: FERROCE_SHARED (default "$repo/../shared"), INTEROP_OUT (default
# /tmp/ferroce-interop: interop.pcap, per-case logs), INTEROP_ITERS (default 20).
# Exit status 0 only if every case passed and the capture checks are clean.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
shared=${FERROCE_SHARED:-$repo/../shared}
rig=$shared/rig/rxe-rig.sh
peercheck=$shared/peercheck/peercheck.py
ferroce=$repo/target/release/ferroce
out=${INTEROP_OUT:-/tmp/ferroce-interop}
iters=${INTEROP_ITERS:-20}
host_ip=198.18.0.1
guest_ip=198.18.0.11

[ -x "$rig" ] || { echo "no rig at $rig (set FERROCE_SHARED)" >&2; exit 2; }
mkdir -p "$out"
rm -f "$out"/*.log

cleanup() {
    set +e
    timeout 30 "$rig" pcap-stop >/dev/null 2>&1
    timeout 120 "$rig" down >/dev/null 2>&1
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { printf '[interop %s] %s\n' "$(date +%T)" "$*"; }

t0=$(date +%s)
step "building ferroce"
(cd "$repo" && timeout 900 cargo build --release -p ferroce-cli)
step "building and booting the rig (one guest)"
timeout 600 "$rig" build >"$out/rig-build.log" 2>&1 || { tail -20 "$out/rig-build.log" >&2; exit 1; }
timeout 300 "$rig" up 1
t_up=$(date +%s)
timeout 30 "$rig" pcap-start "$out/interop.pcap"

# usec/iter from a pingpong report ("20 iters in 0.20 seconds = 10014.85 usec/iter").
usec() { sed -n 's/.* = \([0-9.]*\) usec\/iter.*/\1/p' "$1" | tail -1; }

# run_case DIRECTION TRANSPORT SIZE [CHECK]: one ferroce <-> ibv_*_pingpong run.
# DIRECTION is the role ferroce plays (client or server). Prints one matrix row.
results=()
failures=0
run_case() {
    local dir=$1 t=$2 size=$3 chk=${4:-} name log_f log_g id rf=0 rg=0 i
    name=${dir}-${t}-${size}${chk:+-c}
    log_f=$out/$name.ferroce.log
    log_g=$out/$name.guest.log
    # ibv_*_pingpong -m is the path MTU (rc/uc); ferroce's -m defaults to 1024,
    # the guest's active MTU. `exec` so the guest's job timeout signals the tool
    # itself, not only the job shell (a stuck pingpong busy-polls the one vCPU).
    local gargs="-g \$GIDX -n $iters -s $size $chk" fargs="-t $t -n $iters -s $size -m 1024 $chk"
    [ "$t" = ud ] && fargs="-t $t -n $iters -s $size $chk"
    if [ "$dir" = client ]; then
        id=$("$rig" exec A "exec ibv_${t}_pingpong $gargs" --bg --timeout 60)
        # The guest needs a moment (TCG) to listen on TCP 18515; retry while refused.
        for i in 1 2 3 4 5 6 7 8; do
            sleep 1
            rf=0
            timeout 60 "$rig" hostexec "$ferroce pingpong $fargs -L $host_ip $guest_ip" >"$log_f" 2>&1 || rf=$?
            grep -q 'Connection refused' "$log_f" || break
        done
        timeout 80 "$rig" wait A "$id" 50 >"$log_g" 2>&1 || rg=$?
    else
        timeout 60 "$rig" hostexec "$ferroce pingpong $fargs -L $host_ip" >"$log_f" 2>&1 &
        local fpid=$!
        sleep 1
        id=$("$rig" exec A "exec ibv_${t}_pingpong $gargs $host_ip" --bg --timeout 60)
        timeout 80 "$rig" wait A "$id" 50 >"$log_g" 2>&1 || rg=$?
        wait "$fpid" || rf=$?
    fi
    [ "$rg" = 0 ] || "$rig" kill A "$id" || true
    local res=PASS
    if [ "$rf" != 0 ] || [ "$rg" != 0 ] || grep -q 'invalid data' "$log_g"; then
        res=FAIL
        failures=$((failures + 1))
    fi
    results+=("$(printf '| ibv_%s_pingpong | ferroce %-6s | %-2s | %5s | %-2s | %-4s | %10s | %10s |' \
        "$t" "$dir" "$t" "$size" "${chk:--}" "$res" "$(usec "$log_f")" "$(usec "$log_g")")")
    step "$name: $res (ferroce rc=$rf, guest rc=$rg)"
}

# run_perf DIRECTION TEST SIZE: one `ferroce perf --perftest` <-> ib_TEST_bw run.
run_perf() {
    local dir=$1 t=$2 size=$3 name log_f log_g id rf=0 rg=0 i
    name=perf-${dir}-${t}-${size}
    log_f=$out/$name.ferroce.log
    log_g=$out/$name.guest.log
    local gargs="-d rxe0 -x \$GIDX -F -n $iters -s $size" fargs="$t --perftest --quiet -n $iters -s $size -m 1024"
    if [ "$dir" = client ]; then
        id=$("$rig" exec A "exec ib_${t}_bw $gargs" --bg --timeout 90)
        for i in 1 2 3 4 5 6 7 8; do
            sleep 1
            rf=0
            timeout 90 "$rig" hostexec "$ferroce perf $fargs -L $host_ip $guest_ip" >"$log_f" 2>&1 || rf=$?
            grep -q 'Connection refused\|connecting to' "$log_f" || break
        done
        timeout 100 "$rig" wait A "$id" 80 >"$log_g" 2>&1 || rg=$?
    else
        timeout 90 "$rig" hostexec "$ferroce perf $fargs --listen -L $host_ip" >"$log_f" 2>&1 &
        local fpid=$!
        sleep 1
        id=$("$rig" exec A "exec ib_${t}_bw $gargs $host_ip" --bg --timeout 90)
        timeout 100 "$rig" wait A "$id" 80 >"$log_g" 2>&1 || rg=$?
        wait "$fpid" || rf=$?
    fi
    [ "$rg" = 0 ] || "$rig" kill A "$id" || true
    local res=PASS
    if [ "$rf" != 0 ] || [ "$rg" != 0 ]; then
        res=FAIL
        failures=$((failures + 1))
    fi
    results+=("$(printf '| ib_%s_bw | ferroce %-6s | rc | %5s | -  | %-4s | %10s | %10s |' \
        "$t" "$dir" "$size" "$res" "-" "-")")
    step "$name: $res (ferroce rc=$rf, guest rc=$rg)"
}

t_cases=$(date +%s)
for dir in client server; do
    run_perf "$dir" write 3000
    run_perf "$dir" send 3000
    run_perf "$dir" read 3000
done
for dir in client server; do
    run_case "$dir" rc 4096           # 4 packets: FIRST/MIDDLE/LAST
    run_case "$dir" rc 4097           # 5 packets, 1-byte LAST with pad 3
    run_case "$dir" rc 8193 -c        # 3 pages of data, checked on both sides
    run_case "$dir" uc 4096
    run_case "$dir" uc 4097
    run_case "$dir" uc 8193 -c
    run_case "$dir" ud 1024           # UD is limited to the guest's active MTU (1024)
    run_case "$dir" ud 512 -c
done
t_end=$(date +%s)
timeout 30 "$rig" pcap-stop

step "checking the capture"
cap_ok=PASS
timeout 120 "$ferroce" dump --check "$out/interop.pcap" >"$out/dump.log" 2>&1 || cap_ok=FAIL
tail -1 "$out/dump.log"
pc_ok=PASS
if [ -x "$peercheck" ]; then
    timeout 600 "$peercheck" --summary "$out/interop.pcap" >"$out/peercheck.log" 2>&1 || pc_ok=FAIL
    grep -E '^(frames|bad ICRC|decode failures|tshark disagreements|result)' "$out/peercheck.log" || true
else
    pc_ok=SKIP
fi

echo
echo "| tool | direction | transport | size | -c | result | ferroce usec/iter | guest usec/iter |"
echo "|---|---|---|---|---|---|---|---|"
printf '%s\n' "${results[@]}"
echo
echo "capture $out/interop.pcap: ferroce dump --check $cap_ok, peercheck --summary $pc_ok"
echo "timings: build+boot $((t_up - t0)) s, $(( ${#results[@]} )) cases $((t_end - t_cases)) s, total $(( $(date +%s) - t0 )) s"
[ "$failures" = 0 ] && [ "$cap_ok" = PASS ] && [ "$pc_ok" != FAIL ]
