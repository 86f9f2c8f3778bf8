#!/usr/bin/env bash
# DCQCN on a real network: ferroce flows through a rate-limited
# bottleneck that marks ECN with RED, in the kernel of the rig's guest
# (this machine's kernel has no sch_red), once with DCQCN on and once off,
# and one table of what changed.
#
#   scripts/cc-rig.sh            # 3 flows through 50 Mbit/s, DCQCN on then off (~2 min)
#   CC_FLOWS=4 scripts/cc-rig.sh
#
# The path: ferroce senders in the rig's namespace (198.18.0.21 .. on
# rigbr0) reach ferroce receivers in a namespace of their own (ferroce-ccrx,
# 198.18.9.11 .. on a veth into rigbr0) through guest A, which routes
# between the two subnets (it holds 198.18.9.1 beside 198.18.0.11 on its
# one NIC, forwards, sends no redirects). Both directions leave guest A
# through eth0, whose qdisc is the switch port (see bottleneck_on). The
# flows are `ferroce perf write` pairs over the UDP backend (RoCE v2,
# ECT(0) by default, MTU 1024, 128 PSNs in flight per QP); a receiver that
# sees CE answers with CNPs, and with DCQCN on its sender cuts its rate.
# The ACK timeout is 537 ms (--qp-timeout 17): the queue can hold more
# than the default 67 ms, and a timeout that fires while the ACK waits in
# it is a retransmission no loss caused.
#
# Modes (CC_MODES, default "on off"): `on` is `--cc mlx5`, `off` is `--cc
# no-dcqcn` (the same ECT packets, marks and CNPs; no sender reacts), both
# with the settings of CC_SETTINGS. mlx5's defaults are made for round
# trips of microseconds at 25-100 Gb/s; through this router a packet's
# round trip is milliseconds (the TCG guest forwards, and the queue adds
# up to 65 ms) and the bottleneck is 50 Mbit/s. So, as an operator tunes
# `ecn/roce_np` and `ecn/roce_rp` for a fabric: at most one CNP per QP and
# one alpha update per 20 ms (about one round trip through a queue between
# Kmin and Kmax), the rate timer 20 ms, no byte counter, steps of 1 Mb/s
# (the smallest mlx5 takes) and no hyper increase beyond it. With the
# timers at 5 ms the cuts pile up while the marks are in flight and the
# queue swings between empty and full (mean 26 ms, 165 KB).
#
# Reported per mode, from a capture on guest A's tap (every packet crosses
# it into the router and out again) and the tools' counters: each flow's
# rate out of the bottleneck in its steady part (the middle 80% of the
# time all flows run) and Jain's fairness index, CNPs, CE marks RED made
# and drops at the full queue (tc), RC retransmissions (--stats), and
# each data packet's time in the router (out minus in: the queue, plus
# well under a millisecond of forwarding), mean and 99th percentile, also
# as bytes of queue at the bottleneck rate. The senders run without UDP
# segmentation offload (FERROCE_GSO=0) so that each packet is one frame.
#
# Environment: FERROCE_SHARED (default ../shared), CC_OUT (default
# /tmp/ferroce-cc-rig), CC_FLOWS (2-4, default 3), CC_RATE (tbf rate,
# default 50mbit: the guest forwards about 190 Mbit/s), CC_LINE (the
# senders' --line-rate, Mb/s, default 100), CC_BYTES (bytes each flow
# writes, default 24 MiB), CC_KMIN/CC_KMAX (bytes, default 20000/80000),
# CC_PMAX (default 0.1), CC_LIMIT (bytes, default 600000: more than four
# flows' windows, so that only DCQCN's absence shows as a standing queue),
# CC_MODES, CC_SETTINGS. Needs root (namespaces, the rig) and tshark.
set -euo pipefail

side=cc-rig
out=${CC_OUT:-/tmp/ferroce-cc-rig}
step() { printf '[%s %s] %s\n' "$side" "$(date +%T)" "$*"; }
. "$(dirname "${BASH_SOURCE[0]}")/rig-lib.sh"
ferroce=$repo/target/release/ferroce

flows=${CC_FLOWS:-3}
rate=${CC_RATE:-50mbit}
line=${CC_LINE:-100}
bytes=${CC_BYTES:-$((24 * 1024 * 1024))}
kmin=${CC_KMIN:-20000}
kmax=${CC_KMAX:-80000}
pmax=${CC_PMAX:-0.1}
limit=${CC_LIMIT:-600000}
modes=${CC_MODES:-on off}
settings=${CC_SETTINGS:-rpg_time_reset=20000 rpg_byte_reset=0 rpg_threshold=5 rpg_ai_rate=1 rpg_hai_rate=1 dce_tcp_g=960 dce_tcp_rtt=20000 rate_reduce_monitor_period=0 min_time_between_cnps=20000}
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

# bottleneck_on: guest A's eth0 as a switch port: RoCE v2 packets to the
# receivers (198.18.9.0/24, UDP 4791) through tbf at CC_RATE and RED
# under it; everything else in a band of its own: ACKs and CNPs back to
# the senders, as on a fabric where the reverse path is another queue;
# perf's TCP exchange, as a lossless RoCE class is kept apart from other
# traffic; ARP (RED drops what it cannot mark).
bottleneck_on() {
    local burst=$(((2 * kmin + kmax) / 3000 + 1))
    tc_guest "\$T qdisc del dev eth0 root 2>/dev/null;
        \$T qdisc add dev eth0 root handle 1: prio bands 2 priomap 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 &&
        \$T filter add dev eth0 parent 1: protocol ip u32 match ip dst 198.18.9.0/24 \
            match ip protocol 17 0xff match ip dport 4791 0xffff flowid 1:2 &&
        \$T qdisc add dev eth0 parent 1:2 handle 20: tbf rate $rate burst 32kb latency 2s &&
        \$T qdisc add dev eth0 parent 20:1 handle 30: red limit $limit min $kmin max $kmax \
            avpkt 1000 burst $burst probability $pmax bandwidth $rate ecn" >/dev/null
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
    # On guest A's tap: every packet crosses it twice, into the router
    # and out of it, so its time in the queue is the difference.
    ip netns exec "$ns" tcpdump -B 65536 -i rigtapA -n -s 96 -w "$out/$mode.pcap" udp port 4791 \
        >/dev/null 2>"$out/$mode.tcpdump.log" </dev/null &
    cap=$!
    for i in $(seq 100); do grep -q 'listening on' "$out/$mode.tcpdump.log" && break; sleep 0.1; done
    for i in $(seq "$flows"); do
        ip netns exec "$rx" timeout 300 "$ferroce" perf write --listen -L "198.18.9.$((10 + i))" -p $((18600 + i)) \
            -s $size -m 1024 --quiet --stats --cc "$cc" --line-rate "$line" "${extra[@]}" \
            >"$out/$mode.rx$i.log" 2>&1 &
        pids+=($!)
    done
    sleep 1
    for i in $(seq "$flows"); do
        # One frame per packet (no UDP segmentation offload), so that the
        # capture can follow each packet through the router.
        ip netns exec "$ns" env FERROCE_GSO=0 timeout 300 "$ferroce" perf write "198.18.9.$((10 + i))" -L "198.18.0.$((20 + i))" \
            -p $((18600 + i)) -s $size -m 1024 -n "$n" --qp-timeout 17 --quiet --stats --cc "$cc" --line-rate "$line" \
            "${extra[@]}" >"$out/$mode.tx$i.log" 2>&1 &
        pids+=($!)
    done
    local failed=0
    for p in "${pids[@]}"; do wait "$p" || failed=1; done
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
    guest_tc_prepare sch_prio cls_u32 sch_tbf sch_red
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
