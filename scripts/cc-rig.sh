#!/usr/bin/env bash
# DCQCN on a real network (issue 15): ferroce flows through a rate-limited
# bottleneck that marks ECN with RED, in the kernel of the rig's guest
# (this machine's kernel has no sch_red), once with DCQCN on and once off,
# and one table of what changed.
#
#   scripts/cc-rig.sh            # 3 flows, 20 Mbit/s bottleneck, DCQCN on then off
#
# The path: ferroce senders in the rig's namespace (198.18.0.21 .. on
# rigbr0) reach ferroce receivers in a namespace of their own (ferroce-ccrx,
# 198.18.9.11 .. on a veth into rigbr0) through guest A, which routes
# between the two subnets (it holds 198.18.9.1 beside 198.18.0.11 on its
# one NIC, forwards, sends no redirects). Both directions leave guest A
# through eth0, whose root qdisc is the bottleneck: tbf at CC_RATE with
# RED under it (ecn: ECT packets are marked between Kmin and Kmax, and
# above; only a full queue, CC_LIMIT bytes, drops). The flows are `ferroce
# perf write` pairs over the UDP backend (RoCE v2, ECT(0) by default); a
# receiver that sees CE answers with CNPs, and with DCQCN on its sender
# cuts its rate.
#
# Modes (CC_MODES, default "on off"): `on` is `--cc mlx5` with the
# settings in CC_SETTINGS (mlx5's defaults are tuned for microsecond round
# trips at 25-100 Gb/s; through a TCG guest the round trip is a
# millisecond or more and the bottleneck is megabits, so the timers and
# rate steps are scaled to that, as an operator tunes `ecn/roce_rp`);
# `off` is `--cc no-dcqcn`: the same ECT packets, marks and CNPs, but no
# sender reacts.
#
# Reported per mode: each flow's goodput (from the receiver's capture,
# its steady part: the middle 80% of the run) and Jain's fairness index,
# CNPs in the capture, CE marks RED made (tc), drops at the full queue,
# RC retransmissions (the senders' --stats), and the queue (the guest's
# RED backlog, sampled every 100 ms: mean and 99th percentile).
#
# Environment: FERROCE_SHARED (default ../shared), CC_OUT (default
# /tmp/ferroce-cc-rig), CC_FLOWS (2-4, default 3), CC_RATE (tbf rate,
# default 20mbit), CC_LINE (the senders' --line-rate, Mb/s, default 100),
# CC_BYTES (bytes each flow writes, default 12 MiB), CC_KMIN/CC_KMAX
# (bytes, default 15000/45000), CC_PMAX (default 0.1), CC_LIMIT (bytes,
# default 150000), CC_MODES, CC_SETTINGS. Needs root (namespaces, the rig).
set -euo pipefail

side=cc-rig
out=${CC_OUT:-/tmp/ferroce-cc-rig}
step() { printf '[%s %s] %s\n' "$side" "$(date +%T)" "$*"; }
. "$(dirname "${BASH_SOURCE[0]}")/rig-lib.sh"
ferroce=$repo/target/release/ferroce

flows=${CC_FLOWS:-3}
rate=${CC_RATE:-20mbit}
line=${CC_LINE:-100}
bytes=${CC_BYTES:-$((12 * 1024 * 1024))}
kmin=${CC_KMIN:-15000}
kmax=${CC_KMAX:-45000}
pmax=${CC_PMAX:-0.1}
limit=${CC_LIMIT:-150000}
modes=${CC_MODES:-on off}
settings=${CC_SETTINGS:-rpg_time_reset=5000 rpg_byte_reset=0 rpg_threshold=5 rpg_ai_rate=1 rpg_hai_rate=5 rpg_min_rate=1 dce_tcp_g=1020 dce_tcp_rtt=2000 rate_reduce_monitor_period=0 min_time_between_cnps=2000}
size=65536
ns=${RIG_NS:-rxerig}
rx=ferroce-ccrx
gw=198.18.0.11

case $flows in 2 | 3 | 4) ;; *) echo "cc-rig.sh: CC_FLOWS is 2, 3 or 4, not '$flows'" >&2; exit 2 ;; esac

cleanup() {
    set +e
    ip netns pids "$rx" 2>/dev/null | xargs -r kill 2>/dev/null
    ip netns del "$rx" 2>/dev/null
    timeout 120 "$rig" down >/dev/null 2>&1
}

# net_setup: the receivers' namespace, the senders' addresses and guest A
# as the router between them.
net_setup() {
    local i
    ip netns add "$rx"
    ip link add ccbr0 netns "$ns" type veth peer name ccrx0 netns "$rx"
    ip -n "$ns" link set ccbr0 master rigbr0 up
    ip -n "$rx" link set lo up
    ip -n "$rx" link set ccrx0 up
    for i in $(seq "$flows"); do
        ip -n "$ns" addr add "198.18.0.$((20 + i))/24" dev rigbr0
        ip -n "$rx" addr add "198.18.9.$((10 + i))/24" dev ccrx0
    done
    ip -n "$ns" route add 198.18.9.0/24 via "$gw"
    ip -n "$rx" route add default via 198.18.9.1
    for n in "$ns" "$rx"; do
        ip netns exec "$n" sysctl -qw net.ipv4.conf.all.accept_redirects=0
    done
    "$rig" exec A 'ip addr add 198.18.9.1/24 dev eth0 &&
        for f in all default eth0; do
            echo 0 >/proc/sys/net/ipv4/conf/$f/send_redirects
            echo 0 >/proc/sys/net/ipv4/conf/$f/rp_filter
        done && echo 1 >/proc/sys/net/ipv4/ip_forward' --timeout 60 >/dev/null
}

tc_guest() { "$rig" exec A "export LD_LIBRARY_PATH=/rig/tc/lib; T=/rig/tc/tc; $1" --timeout 60; }

bottleneck_on() {
    local burst=$(((2 * kmin + kmax) / 3000 + 1))
    tc_guest "\$T qdisc del dev eth0 root 2>/dev/null;
        \$T qdisc add dev eth0 root handle 1: tbf rate $rate burst 4kb latency 2s &&
        \$T qdisc add dev eth0 parent 1:1 handle 10: red limit $limit min $kmin max $kmax \
            avpkt 1000 burst $burst probability $pmax bandwidth $rate ecn" >/dev/null
}

# queue_sampler_start / _stop MODE: the RED qdisc's backlog in bytes every
# 100 ms, sampled in the guest until /rig/tc/stop appears.
queue_sampler_start() {
    local share=$rig_dir/run/A/share/tc
    rm -f "$share/stop" "$share/queue.txt"
    cat >"$share/sample.sh" <<'SH'
export LD_LIBRARY_PATH=/rig/tc/lib
while [ ! -e /rig/tc/stop ]; do
    /rig/tc/tc -s qdisc show dev eth0 |
        awk '/qdisc red/ { r = 1 } r && /backlog/ { sub(/b$/, "", $2); print $2; exit }' >>/rig/tc/queue.txt
    sleep 0.1
done
SH
    sampler=$("$rig" exec A 'sh /rig/tc/sample.sh' --bg --timeout 900 | tail -1)
}
queue_sampler_stop() {
    touch "$rig_dir/run/A/share/tc/stop"
    "$rig" wait A "$sampler" 30 >/dev/null || true
    cp "$rig_dir/run/A/share/tc/queue.txt" "$out/$1.queue.txt"
}

# run_mode MODE: the flows at once, DCQCN on or off.
run_mode() {
    local mode=$1 cc i pids=() n=$((bytes / size)) cap
    local -a extra=()
    # The settings go to both modes: the notification point's are the
    # same either way, the reaction point's do nothing without DCQCN.
    for s in $settings; do extra+=(--cc-set "$s"); done
    if [ "$mode" = on ]; then cc=mlx5; else cc=no-dcqcn; fi
    bottleneck_on
    tc_guest "\$T -s qdisc show dev eth0" >"$out/$mode.tc-before.txt"
    ip netns exec "$rx" tcpdump -B 65536 -i ccrx0 -n -s 128 -w "$out/$mode.pcap" udp port 4791 \
        >/dev/null 2>"$out/$mode.tcpdump.log" </dev/null &
    cap=$!
    for i in $(seq 100); do grep -q 'listening on' "$out/$mode.tcpdump.log" && break; sleep 0.1; done
    queue_sampler_start
    for i in $(seq "$flows"); do
        ip netns exec "$rx" "$ferroce" perf write --listen -L "198.18.9.$((10 + i))" -p $((18600 + i)) \
            -s $size -m 1024 --quiet --stats --cc "$cc" --line-rate "$line" "${extra[@]}" \
            >"$out/$mode.rx$i.log" 2>&1 &
        pids+=($!)
    done
    sleep 1
    for i in $(seq "$flows"); do
        ip netns exec "$ns" timeout 600 "$ferroce" perf write "198.18.9.$((10 + i))" -L "198.18.0.$((20 + i))" \
            -p $((18600 + i)) -s $size -m 1024 -n "$n" --quiet --stats --cc "$cc" --line-rate "$line" \
            "${extra[@]}" >"$out/$mode.tx$i.log" 2>&1 &
        pids+=($!)
    done
    local failed=0
    for p in "${pids[@]}"; do wait "$p" || failed=1; done
    queue_sampler_stop "$mode"
    tc_guest "\$T -s qdisc show dev eth0" >"$out/$mode.tc.txt"
    kill -INT "$cap"; wait "$cap" || true
    [ "$failed" = 0 ] || step "$mode: a flow failed (see $out/$mode.*.log)"
    return 0
}

main() {
    [ "$(id -u)" = 0 ] || { echo "cc-rig.sh needs root (network namespaces and the rig)" >&2; exit 2; }
    rig_check
    command -v tshark >/dev/null || { echo "cc-rig.sh needs tshark" >&2; exit 2; }
    mkdir -p "$out"
    rm -f "$out"/*
    trap cleanup EXIT
    trap 'exit 130' INT TERM
    local t0; t0=$(date +%s)
    build_and_boot 1 "one guest, the router"
    guest_tc_prepare sch_tbf sch_red
    net_setup
    for m in $modes; do
        step "$flows flows, DCQCN $m, through $rate with RED (Kmin $kmin, Kmax $kmax, Pmax $pmax, limit $limit)"
        run_mode "$m"
    done
    python3 "$repo/scripts/cc-rig-report.py" --out "$out" --flows "$flows" --modes "$modes" \
        --rate "$rate" --red "Kmin $kmin B, Kmax $kmax B, Pmax $pmax, limit $limit B" \
        --settings "$settings" --line "$line" | tee "$out/report.md"
    step "total $(($(date +%s) - t0)) s; logs and captures in $out"
}

main "$@"
