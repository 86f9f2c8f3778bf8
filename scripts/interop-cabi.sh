#!/usr/bin/env bash
# The unmodified Debian RDMA tools on ferroce's C ABI against the kernel's
# Soft-RoCE (rdma_rxe): on this machine, inside the rig's network namespace
# (198.18.0.1, fd52:6f43:4500::1), ibverbs-utils 44, perftest 4.5 and
# rdmacm-utils run as `nobody` with ferroce's libibverbs.so.1 (and
# librdmacm.so.1) on LD_LIBRARY_PATH; in guest A (198.18.0.11,
# fd52:6f43:4500::11) the same tools run on rxe. Every case runs both ways:
# the ferroce side as client and as server.
#
#   scripts/interop-cabi.sh       # build, boot, run the matrix, check the capture, tear down
#
# The matrix:
#   * ibv_rc_pingpong (-c: both sides check the data; -e: completion
#     events), ibv_uc_pingpong, ibv_ud_pingpong, ibv_srq_pingpong, IPv4;
#     RC and UD pingpong over IPv6 (the ferroce device on the ULA address,
#     its GID index 0; the guest's -g $GIDX6; the TCP exchange on IPv4,
#     where rdma-core's pingpong server listens);
#   * ib_{write,send,read,atomic}_bw and ib_{write,send,read,atomic}_lat,
#     IPv4 (ib_send_bw also over UC and UD, ib_write_bw over UC and with
#     64-packet messages), and ib_write_bw over IPv6;
#   * under netem on the guest's NIC (as in interop.sh): ibv_rc_pingpong -c,
#     ib_{write,read,send,atomic}_bw, ib_{write,read}_lat;
#   * memory windows: mw_peer, a C program of ours
#     (crates/ferroce-verbs/tests/c/mw_peer.c: type 1 and type 2 windows,
#     READ and WRITE through them, LOCAL_INV, SEND with invalidate), on
#     rdma-core's libibverbs and rxe in the guest, on ferroce's here (none
#     of the Debian tools binds a window);
#   * with librdmacm: rping -v -V -C 10, ucmatose, udaddy,
#     rdma_server/rdma_client, rstream (blocking; nonblocking with rpoll,
#     ferroce as client) and riostream (rsockets against librdmacm's own
#     on rxe), ib_write_bw -R, mckey (UD multicast through
#     rdma_cm's join, IPv4 group; the receiving side with two IDs). These run when the workspace
#     has crates/ferroce-rdmacm (built here) or INTEROP_RDMACM names a
#     librdmacm.so; otherwise each is a row "not run: librdmacm.so not
#     built", counted apart from the passed and failed.
#
# Before the cases, `LD_DEBUG=libs` shows that the tools load the
# libraries from our directory (the matrix says so), not the system's.
#
# Environment: as interop.sh (FERROCE_SHARED, INTEROP_ITERS, INTEROP_NETEM,
# INTEROP_ONLY), and INTEROP_OUT (default /tmp/ferroce-interop-cabi: the
# libraries in lib/, interop.pcap, matrix.md, per-case logs) and
# INTEROP_RDMACM (a librdmacm.so to use instead of the workspace's).
# Exit status 0 only if every case that ran passed and the capture checks
# are clean.
set -euo pipefail

side=interop-cabi
out=${INTEROP_OUT:-/tmp/ferroce-interop-cabi}
# The pingpong and perftest clients say this while the guest's server is
# not listening yet (TCG is slow to start it), the rdma_cm ones the rest;
# perftest's -R client names the REJECTED event by its number (8).
refused_re="Couldn't connect to|Connection refused|RDMA_CM_EVENT_REJECTED|RDMA_CM_EVENT_UNREACHABLE|REJ reason 8|Unexpected CM event .* 8\$"
# A perftest server prints no figure: take the guest's client's.
guest_figures=1
. "$(dirname "${BASH_SOURCE[0]}")/interop-lib.sh"

build_pkgs="-p ferroce-cli -p ferroce-verbs"
rdmacm_so=${INTEROP_RDMACM:-}
if [ -z "$rdmacm_so" ] && [ -f "$repo/crates/ferroce-rdmacm/Cargo.toml" ]; then
    build_pkgs="$build_pkgs -p ferroce-rdmacm"
    rdmacm_so=$repo/target/release/librdmacm.so
fi
interop_start

# The libraries, under the names the tools ask for, in a directory that
# `nobody` can read.
lib=$out/lib
rm -rf "$lib"
mkdir -p "$lib"
cp "$repo/target/release/libibverbs.so" "$lib/libibverbs.so.1"
have_rdmacm=
if [ -n "$rdmacm_so" ] && [ -f "$rdmacm_so" ]; then
    cp "$rdmacm_so" "$lib/librdmacm.so.1"
    have_rdmacm=1
fi
# mw_peer against the system's libibverbs: in the guest that is rdma-core's
# (with rxe), here LD_LIBRARY_PATH puts ferroce's first.
mw_peer=$out/mw_peer
cc -Wall -Werror -o "$mw_peer" "$repo/crates/ferroce-verbs/tests/c/mw_peer.c" -libverbs
mkdir -p "$rig_dir/run/A/share/mw"
cp "$mw_peer" "$rig_dir/run/A/share/mw/"
chmod -R a+rX "$out"

# on_ferroce DEVICES: the prefix of a command on the ferroce side: the user
# nobody (the library needs no privilege), our libraries, ferroce devices
# on DEVICES (comma-separated addresses), no logging.
on_ferroce() {
    echo "setpriv --reuid=65534 --regid=65534 --clear-groups env -u FERROCE_LOG LD_LIBRARY_PATH=$lib FERROCE_DEVICES=$1"
}

# loaded_from PROGRAM LIBRARY: where PROGRAM, run as on_ferroce, takes
# LIBRARY from (LD_DEBUG=libs: the path whose init runs).
loaded_from() {
    "$rig" hostexec "LD_DEBUG=libs $(on_ferroce "$host4") $1" 2>&1 |
        sed -n "s|.*calling init: \(.*/$2\)\$|\1|p" | head -1 || true
}
step "checking that the tools load our libraries"
got=$(loaded_from ibv_devices libibverbs.so.1)
[ "$got" = "$lib/libibverbs.so.1" ] || { echo "ibv_devices loaded libibverbs.so.1 from '${got:-?}', not $lib" >&2; exit 1; }
loaded="libibverbs.so.1"
if [ -n "$have_rdmacm" ]; then
    got=$(loaded_from 'rdma_client -h' librdmacm.so.1)
    [ "$got" = "$lib/librdmacm.so.1" ] || { echo "rdma_client loaded librdmacm.so.1 from '${got:-?}', not $lib" >&2; exit 1; }
    loaded="$loaded and librdmacm.so.1"
fi
"$rig" hostexec "$(on_ferroce "$host4") ibv_devices" | tee "$out/ibv_devices.log"
notes+=("The ferroce side ran as nobody (uid 65534) with LD_LIBRARY_PATH=$lib; LD_DEBUG=libs showed $loaded loaded from there.")

# vpp ROLE TRANSPORT SIZE FLAGS IP NETEM: ibv_TRANSPORT_pingpong on
# ferroce <-> the same on rxe. FLAGS go to both sides (-c, -e).
vpp() {
    local role=$1 t=$2 size=$3 flags=$4 ip=$5 ne=$6 gidx='$GIDX' dev=$host4
    [ "$ip" = IPv6 ] && gidx='$GIDX6' dev=$host6
    local args="-n $iters -s $size${flags:+ $flags}" name
    name="pp-$role-$t-$size${flags//[ -]/}-$ip-$ne"
    run_case "$name" "ibv_${t}_pingpong" "$role" "$t" "$ip" "$ne" "${args#-n $iters }" pingpong \
        "ibv_${t}_pingpong -g $gidx $args" "$(on_ferroce "$dev") ibv_${t}_pingpong -g 0 $args" \
        "$guest4" "$host4" ""
}

# vpt ROLE TOOL SIZE IP NETEM [EXTRA]: ib_TOOL (write_bw, send_lat, ...) on
# ferroce <-> the same on rxe; EXTRA goes to both sides (-A, -c). The TCP
# exchange is on IPv4 (perftest 4.5's), RoCE on the family IP names.
vpt() {
    local role=$1 tool=$2 size=$3 ip=$4 ne=$5 extra=${6:-} gidx='$GIDX' dev=$host4 name
    local kind=${tool#*_} args="-F -n $iters${extra:+ $extra}"
    [ "${tool%_*}" = atomic ] || args="$args -s $size"
    [ "$ip" = IPv6 ] && gidx='$GIDX6' dev=$host6
    local tr=rc
    case $extra in *"-c UC"*) tr=uc ;; *"-c UD"*) tr=ud ;; esac
    name="pt-$role-$tool-$size${extra:+-${extra##* }}-$ip-$ne"
    run_case "$name" "ib_$tool" "$role" "$tr" "$ip" "$ne" "${args#-F -n $iters }" "$kind" \
        "ib_$tool -d rxe0 -x $gidx $args" "$(on_ferroce "$dev") ib_$tool -d ferroce0 -x 0 $args" \
        "$guest4" "$host4" ""
}

# vcm ROLE NAME TOOL KIND TRANSPORT IP OPTIONS SERVER BIND CLIENT: an
# rdma_cm tool on ferroce <-> the same on rxe. The server runs SERVER, with
# BIND ADDRESS appended if BIND is set; the client runs CLIENT ADDRESS.
# The ferroce side has a device on each of its addresses.
vcm() {
    local role=$1 name=cm-$2-$1-$6 tool=$3 kind=$4 tr=$5 ip=$6 opts=$7 srv=$8 bind=$9 cli=${10}
    local gaddr=$guest4 faddr=$host4 pre
    [ "$ip" = IPv6 ] && gaddr=$guest6 faddr=$host6
    if [ -z "$have_rdmacm" ]; then
        if [ -z "$only" ] || [[ $name =~ $only ]]; then
            not_run "$tool" "$role" "$tr" "$ip" - "$opts" "librdmacm.so not built"
            step "$name: not run: librdmacm.so not built"
        fi
        return 0
    fi
    pre=$(on_ferroce "$host4,$host6")
    if [ "$role" = client ]; then
        run_case "$name" "$tool" client "$tr" "$ip" - "$opts" "$kind" \
            "$srv${bind:+ $bind $gaddr}" "$pre $cli" "$gaddr" "$faddr" ""
    else
        run_case "$name" "$tool" server "$tr" "$ip" - "$opts" "$kind" \
            "$cli" "$pre $srv" "$gaddr" "$faddr" "${bind:+$bind $faddr}"
    fi
}

# vmw ROLE: mw_peer on ferroce <-> mw_peer on rxe; the server owns the
# windows, the client reaches the server's memory through them.
vmw() {
    local role=$1
    run_case "mw-$role" "mw_peer (ours)" "$role" rc IPv4 - "types 1 and 2" mw \
        "/rig/mw/mw_peer -g \$GIDX" "$(on_ferroce "$host4") $mw_peer -g 0" "$guest4" "$host4" ""
}

# vmc ROLE GROUP: mckey on ferroce <-> mckey on rxe, UD multicast to the
# IPv4 GROUP; the ferroce side sends as client and receives (two IDs) as
# server. The group goes where run_case puts the peer's address.
vmc() {
    local role=$1 group=$2 name=cm-mckey-$1-IPv4 opts="-c 2 -C 10" pre
    if [ -z "$have_rdmacm" ]; then
        if [ -z "$only" ] || [[ $name =~ $only ]]; then
            not_run mckey "$role" ud IPv4 - "$opts" "librdmacm.so not built"
            step "$name: not run: librdmacm.so not built"
        fi
        return 0
    fi
    pre=$(on_ferroce "$host4")
    if [ "$role" = client ]; then
        run_case "$name" mckey client ud IPv4 - "$opts" mckey \
            "mckey -m $group -b $guest4 -c 2 -C 10" "$pre mckey -s -C 10 -b $host4 -m" \
            "$group" "$host4" ""
    else
        run_case "$name" mckey server ud IPv4 - "$opts" mckey \
            "mckey -s -C 10 -b $guest4 -m" "$pre mckey -c 2 -C 10 -b $host4 -m" \
            "$guest4" "$group" "$group"
    fi
}

t_cases=$(date +%s)
for role in client server; do
    vmw "$role"
done
for role in client server; do
    vpp "$role" rc 4096 "" IPv4 -
    vpp "$role" rc 8193 -c IPv4 -          # 9 packets, 1-byte LAST; data checked on both sides
    vpp "$role" rc 4096 "-e -c" IPv4 -     # completion channel events
    vpp "$role" uc 4096 "" IPv4 -
    vpp "$role" uc 8193 -c IPv4 -
    vpp "$role" ud 1024 "" IPv4 -          # UD is limited to the guest's active MTU (1024)
    vpp "$role" ud 512 -c IPv4 -
    vpp "$role" srq 4096 "" IPv4 -         # 16 RC QPs on one SRQ (the column says srq)
    vpp "$role" srq 4097 -c IPv4 -
    vpp "$role" rc 8193 -c IPv6 -
    vpp "$role" ud 512 -c IPv6 -
done
for role in client server; do
    vpt "$role" write_bw 3000 IPv4 -
    vpt "$role" write_bw 65536 IPv4 -      # 64 packets per message
    vpt "$role" send_bw 3000 IPv4 -
    vpt "$role" send_bw 3000 IPv4 - "-c UC"
    vpt "$role" write_bw 3000 IPv4 - "-c UC"
    vpt "$role" send_bw 1024 IPv4 - "-c UD"  # UD: one packet at the guest's MTU
    vpt "$role" read_bw 3000 IPv4 -
    vpt "$role" atomic_bw 8 IPv4 - "-A FETCH_AND_ADD"
    vpt "$role" atomic_bw 8 IPv4 - "-A CMP_AND_SWAP"
    vpt "$role" write_lat 64 IPv4 -
    vpt "$role" send_lat 64 IPv4 -
    vpt "$role" read_lat 64 IPv4 -
    vpt "$role" atomic_lat 8 IPv4 - "-A FETCH_AND_ADD"
    vpt "$role" write_bw 3000 IPv6 -
done
for role in client server; do
    for ip in IPv4 IPv6; do
        for size in 64 4096; do
            vcm "$role" "rping-$size" rping rping rc "$ip" "-C 10 -S $size -v -V" \
                "rping -s -v -S $size" -a "rping -c -v -V -C 10 -S $size -a"
        done
        vcm "$role" ucmatose ucmatose cmatose rc "$ip" "-c 10 -C 10" \
            "ucmatose -c 10 -C 10" -b "ucmatose -c 10 -C 10 -s"
        vcm "$role" udaddy udaddy udaddy ud "$ip" "-c 10 -C 10" \
            "udaddy -c 10 -C 10" -b "udaddy -c 10 -C 10 -s"
        vcm "$role" rdmaex rdma_server/rdma_client rdmaex rc "$ip" - rdma_server -s "rdma_client -s"
        # rsockets: rdma-core's own stream protocol over RC, data verified.
        vcm "$role" rstream rstream rstream rc "$ip" "-T v -S 100000 -C 20" \
            "rstream -T v -S 100000 -C 20" -b "rstream -T v -S 100000 -C 20 -s"
        # Nonblocking with rpoll: ferroce as the client only. rstream's
        # async client polls before each read, and librdmacm's rpoll says
        # POLLHUP as soon as the peer's disconnect has arrived, data unread
        # or not: against ferroce's server, which closes right after its
        # last send, the slow (TCG) guest's client sees both at once and
        # fails. ferroce's rpoll says POLLHUP once the data is read.
        if [ "$role" = client ]; then
            vcm "$role" rstream-async rstream rstream rc "$ip" "-T van -S 70000 -C 20" \
                "rstream -T v -T a -T n -S 70000 -C 20" -b "rstream -T v -T a -T n -S 70000 -C 20 -s"
        fi
        vcm "$role" riostream riostream rstream rc "$ip" "-T v -S 65536 -C 20" \
            "riostream -T v -S 65536 -C 20" -b "riostream -T v -S 65536 -C 20 -s"
    done
    vmc "$role" 239.255.79.2
done
# perftest 4.5's -R is IPv4 only (see interop.sh), and runs here with
# ferroce's library as the server only: its client connects the data QP
# the moment the exchange over the first connection ends (0.7 ms after, in
# the capture), before the TCG guest's server listens for it, and the guest
# answers REJ reason 8 (no listener), as any CM must; perftest then gives
# up or retries into a broken exchange. Every run lost that race. On
# loopback (crates/ferroce-rdmacm/tests/tools.rs) the client is the same
# binary on the same library and connects.
vcm server write_bw-R "ib_write_bw -R" bw rc IPv4 "-s 3000" \
    "ib_write_bw -F -n $iters -s 3000 -R" "" "ib_write_bw -F -n $iters -s 3000 -R"
t_clean=$(date +%s)
if [ -z "$only" ] || [[ $only == *netem* ]]; then
    step "netem on the guest's NIC, each direction: $netem"
    netem_ran=1
    netem_prepare
    netem_on
    for role in client server; do
        vpp "$role" rc 4096 -c IPv4 netem
        vpp "$role" rc 16385 -c IPv4 netem   # 17 packets per message
        vpt "$role" write_bw 8192 IPv4 netem
        vpt "$role" read_bw 8192 IPv4 netem
        vpt "$role" send_bw 8192 IPv4 netem
        vpt "$role" write_lat 3000 IPv4 netem
        vpt "$role" read_lat 3000 IPv4 netem
        vpt "$role" atomic_bw 8 IPv4 netem "-A FETCH_AND_ADD"
    done
    netem_stats | tee "$out/netem-stats.log"
    netem_off
fi
interop_finish
