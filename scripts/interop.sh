#!/usr/bin/env bash
# Interop with the Linux kernel's Soft-RoCE (rdma_rxe) in a QEMU guest and the
# unmodified rdma-core and perftest tools, using the rig in $FERROCE_SHARED/rig
# (see its README.md). ferroce runs on this machine inside the rig's network
# namespace (198.18.0.1, fd52:6f43:4500::1), the tools in guest A
# (198.18.0.11, fd52:6f43:4500::11). Every case runs both ways: ferroce as
# client and as server.
#
#   scripts/interop.sh                  # build, boot, run the matrix, check the capture, tear down
#   scripts/interop.sh --backend raw    # the same with ferroce on the raw-Ethernet backend
#
# The backend (--backend, or FERROCE_INTEROP_BACKEND; default udp): udp is
# ferroce's UDP sockets; raw opens ferroce's devices on the raw-Ethernet
# backend (`--raw`: AF_PACKET rings on rigbr0, the bridge that holds the
# namespace's addresses; ferroce builds every frame), RoCE v2 only, since
# rxe has no RoCE v1, over the GID index of the device's v2 entry for its
# IPv4 or IPv6 address (`-g`, read from `ferroce devinfo -v --raw`, as the
# guest's $GIDX/$GIDX6). The same cases run on both, except those whose
# ferroce command has no --raw: these are rows "not run" with the reason.
#
# The matrix:
#   * ferroce pingpong against ibv_{rc,uc,ud}_pingpong, IPv4;
#   * ferroce perf --perftest against ib_{write,send,read,atomic}_bw and
#     ib_{write,send,read,atomic}_lat, IPv4;
#   * IPv6 (RoCE v2 over the guest's ULA GID, -g/-x $GIDX6): RC and UD
#     pingpong, ib_write_bw, ib_send_lat;
#   * rdma_cm (cases cm-*): ferroce rping against librdmacm's rping (-C 10
#     -v -V, 64 and 4096 bytes, IPv4 and IPv6, a ferroce server without -a),
#     a connect to a port nobody listens on (REJ reason 8, both ways), 200
#     connect/disconnect cycles each way (rping -P on the serving side);
#     ferroce cmatose, udaddy, rdma-server/rdma-client and perf --perftest
#     -R against ucmatose (10 and 32 connections at once), udaddy,
#     rdma_server/rdma_client (IPv4 and IPv6) and ib_{write,send,read}_bw
#     -R, ib_write_lat -R (IPv4: perftest 4.5's -R has no IPv6);
#   * UD multicast (cases cm-mckey-*): ferroce mckey against librdmacm's
#     mckey, ferroce sending to the guest's receiver (two IDs) and
#     receiving the guest's sends (rdma_cm's RoCE v2 join: IPv4 groups only);
#   * loss and reordering: netem on the guest's NIC, both directions (the
#     host kernel of this machine has no sch_netem; the guest's Debian
#     kernel has, and the script hands it the modules and tc through the
#     rig's 9p share): RC SEND (pingpong -c), WRITE, READ and atomics; rping
#     and 30 rping connect/disconnect cycles (lost REQ, REP, RTU, DREQ, DREP
#     resent by the CM), ucmatose with 10 connections.
#
# Data is checked wherever a tool allows: pingpong -c on both sides; ferroce
# checks ib_write_lat's writes (zeros ending in their number), ib_send_lat's
# messages (the same bytes every time), the READs it issues (the same bytes
# every time) and every atomic result (each fetch-and-add returns the value
# before plus 1; compare-and-swap swaps the value it knows for that plus 1),
# and as a server, what the peer's atomics left in its memory. rping -V
# compares every ping's data on the client; both sides must print every ping.
#
# Environment: FERROCE_SHARED (default "$repo/../shared"), INTEROP_OUT (default
# /tmp/ferroce-interop, or /tmp/ferroce-interop-raw on the raw backend:
# interop.pcap, matrix.md, per-case logs), INTEROP_ITERS
# (default 20), INTEROP_NETEM (default "loss 3% delay 1ms reorder 10% 50%",
# each direction), INTEROP_ONLY (a regex on the case names: run only those),
# INTEROP_SKIP (a regex on the case names: leave those out; one that
# matches the word netem leaves out the whole netem part).
# Exit status 0 only if every case passed and the capture checks are clean.
set -euo pipefail

backend=${FERROCE_INTEROP_BACKEND:-udp}
usage="usage: scripts/interop.sh [--backend udp|raw]"
while [ $# -gt 0 ]; do
    case $1 in
        --backend) [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }; backend=$2; shift 2 ;;
        --backend=*) backend=${1#*=}; shift ;;
        -h | --help) echo "$usage (see the comment at the top of $0)"; exit 0 ;;
        *) echo "interop.sh: unknown argument '$1'; $usage" >&2; exit 2 ;;
    esac
done
case $backend in
    udp) raw= default_out=/tmp/ferroce-interop ;;
    # The raw backend's sends skip rigbr0's taps (its packet socket
    # bypasses the qdisc layer, where captures see outgoing frames): the
    # capture is on the guest's tap, which every frame to and from guest A
    # crosses.
    raw) raw=" --raw" default_out=/tmp/ferroce-interop-raw capture_if=rigtapA ;;
    *) echo "interop.sh: unknown backend '$backend' (FERROCE_INTEROP_BACKEND or --backend): udp or raw" >&2
       exit 2 ;;
esac
side=interop-$backend
out=${INTEROP_OUT:-$default_out}
. "$(dirname "${BASH_SOURCE[0]}")/interop-lib.sh"
. "$(dirname "${BASH_SOURCE[0]}")/interop-backend.sh"
interop_start
backend_setup

# pp ROLE TRANSPORT SIZE CHECK IP NETEM: ferroce pingpong <-> ibv_*_pingpong.
pp() {
    local role=$1 t=$2 size=$3 chk=$4 ip=$5 ne=$6
    local gidx='$GIDX' local_addr=$host4 gaddr=$guest4 faddr=$host4
    if [ "$ip" = IPv6 ]; then
        # RoCE over the ULA GID. The rdma-core server listens on IPv4 only, so
        # ferroce as client makes the TCP exchange over IPv4; the GIDs in it
        # are IPv6 all the same.
        gidx='$GIDX6' local_addr=$host6 faddr=$host6
    fi
    # ibv_*_pingpong -m is the path MTU (rc/uc); ferroce's -m defaults to
    # 1024, the guest's active MTU.
    local fargs="-t $t -n $iters -s $size $chk"
    [ "$t" = ud ] || fargs="$fargs -m 1024"
    local opts="-s $size${chk:+ -c}"
    [ "$ip" = IPv6 ] && [ "$role" = client ] && opts="$opts, TCP over IPv4"
    run_case "pp-$role-$t-$size${chk:+-c}-$ip-$ne" "ibv_${t}_pingpong" "$role" "$t" "$ip" "$ne" "$opts" pingpong \
        "ibv_${t}_pingpong -g $gidx -n $iters -s $size $chk" \
        "$ferroce pingpong$(fdev "$ip") $fargs -L $local_addr" "$gaddr" "$faddr" ""
}

# pt ROLE TOOL SIZE IP NETEM [EXTRA]: ferroce perf --perftest <-> ib_TOOL.
# TOOL is write_bw, send_lat, atomic_bw, ...; EXTRA goes to both sides (-A).
pt() {
    local role=$1 tool=$2 size=$3 ip=$4 ne=$5 extra=${6:-}
    local verb=${tool%_*} kind=${tool#*_} gidx='$GIDX' local_addr=$host4
    local fargs="$verb --perftest --quiet -n $iters -m 1024 $extra" gargs="-d rxe0 -F -n $iters $extra"
    [ "$kind" = lat ] && fargs="$fargs --lat"
    if [ "$verb" != atomic ]; then
        fargs="$fargs -s $size"
        gargs="$gargs -s $size"
    fi
    # perftest 4.5 makes its TCP exchange over IPv4 only; with -x $GIDX6 RoCE
    # runs over IPv6 all the same (ferroce listens on every address).
    [ "$ip" = IPv6 ] && gidx='$GIDX6' local_addr=$host6
    local opts="-s $size${extra:+ $extra}"
    [ "$ip" = IPv6 ] && opts="$opts, TCP over IPv4"
    run_case "pt-$role-$tool-$size${extra:+-${extra##* }}-$ip-$ne" "ib_$tool" "$role" rc "$ip" "$ne" "$opts" "$kind" \
        "ib_$tool $gargs -x $gidx" "$ferroce perf$(fdev "$ip") $fargs -L $local_addr" "$guest4" "$host4" "--listen"
}


# rp ROLE IP SIZE NETEM [any|q]: ferroce rping <-> librdmacm's rping, -C 10
# -v -V. With "any" ferroce's server listens on every address (no -a, or
# -a :: for IPv6); with "q" the guest's rping moves its QP itself (-q:
# rdma_init_qp_attr, and on the client CONNECT_RESPONSE then
# rdma_establish, which sends the RTU).
rp() {
    local role=$1 ip=$2 size=$3 ne=$4 variant=${5:-} any= q=
    case $variant in any) any=1 ;; q) q=" -q" ;; esac
    local gaddr=$guest4 faddr=$host4
    [ "$ip" = IPv6 ] && gaddr=$guest6 faddr=$host6
    local ping="-C $rping_count -S $size -v -V" gcmd fcmd flisten="-a $faddr"
    local opts="-C $rping_count -S $size -v -V"
    if [ -n "$any" ]; then
        # The wildcard: rping's server without -a (IPv4), or -a :: (IPv6).
        if [ "$ip" = IPv6 ]; then flisten="-a ::" opts="$opts, server on -a ::"
        else flisten="" opts="$opts, server without -a"; fi
    fi
    [ -n "$q" ] && opts="$opts, guest's rping -q"
    if [ "$role" = client ]; then
        gcmd="rping -s$q -v -S $size -a $gaddr" fcmd="$ferroce rping$raw -c $ping -a"
    else
        gcmd="rping -c$q $ping -a" fcmd="$ferroce rping$raw -s -v -S $size"
    fi
    run_case "cm-rping-$role-$size-$ip-$ne${variant:+-$variant}" rping "$role" rc "$ip" "$ne" "$opts" rping \
        "$gcmd" "$fcmd" "$gaddr" "$faddr" "$flisten"
}

# cm_row NAME ROLE NETEM OPTIONS RESULT FIGURE: one matrix row of a cm case
# that run_case does not fit.
cm_row() {
    local name=$1 role=$2 ne=$3 opts=$4 res=$5 fig=$6
    [ "$res" = PASS ] || failures=$((failures + 1))
    ncases=$((ncases + 1))
    rows+=("| rping | $role | rc | IPv4 | $ne | $opts | $res | $fig |")
    step "$name: $res"
}

# cm_refused: a connect to a port nobody listens on fails at once, naming
# the reason, both ways: ferroce's client against the guest (rxe up,
# nothing listening; the kernel's CM answers REJ reason 8), and the
# guest's rping against a ferroce server listening on another port (then
# a client on that port, which the server serves and exits).
cm_refused() {
    local name=cm-refused-client log_f log_g rf=0 rg=0 res=PASS id fpid
    if wanted "$name"; then
        log_f=$out/$name.ferroce.log
        timeout 60 "$rig" hostexec "$ferroce rping$raw -c -a $guest4 -C 1" >"$log_f" 2>&1 || rf=$?
        { [ "$rf" = 2 ] && grep -q 'no listener on port 7174 (REJ reason 8)' "$log_f"; } || res=FAIL
        cm_row "$name" client - "nothing listens on 7174" "$res" \
            "$(grep -o 'REJ reason [0-9]*' "$log_f" | head -1), exit $rf"
    fi
    name=cm-refused-server res=PASS rf=0 rg=0
    if wanted "$name"; then
        log_f=$out/$name.ferroce.log log_g=$out/$name.guest.log
        timeout 90 "$rig" hostexec "$ferroce rping$raw -s -v -a $host4 -p 7175" >"$log_f" 2>&1 &
        fpid=$!
        sleep 0.3
        id=$("$rig" exec A "rping -c -a $host4 -p 7174 -C 1; echo refused-rc=\$?;
            exec rping -c -V -a $host4 -p 7175 -C 1" --bg --timeout 80)
        timeout 90 "$rig" wait A "$id" 80 >"$log_g" 2>&1 || rg=$?
        wait "$fpid" || rf=$?
        { [ "$rf" = 0 ] && [ "$rg" = 0 ] && grep -q 'RDMA_CM_EVENT_REJECTED, error 8' "$log_g" &&
            ! grep -q 'refused-rc=0' "$log_g"; } || res=FAIL
        cm_row "$name" server - "nothing listens on 7174 (ferroce's server on 7175)" "$res" \
            "guest: $(grep -o 'RDMA_CM_EVENT_REJECTED, error [0-9]*' "$log_g" | head -1)"
    fi
}

# cm_cycles ROLE N NETEM: N connect/disconnect cycles in a row, each one
# ping checked (-C 1 -V), against one persistent server (-P). As server,
# ferroce serves N clients the guest starts one after another
# (--connections N, then exits); as client, N ferroce processes one after
# another against the guest's rping -s -P.
#
# Under netem the kernel's rping client loses some DREQs for good: it
# destroys its ID right after rdma_disconnect, and the kernel's CM then
# cancels the DREQ's retries (cm_destroy_id), so the server never hears
# the end of that connection (a kernel rping server would wait the same
# way). There the ferroce server runs without --connections and is stopped
# after the guest's last cycle; the case passes when every cycle did its
# ping on both sides, and the figure says how many DREQs arrived. If netem
# also drops the server's last "go ahead" SEND (or its ACK), the resends
# find the guest's QP gone, and ferroce's server ends that connection with
# "transport retry counter exceeded" (seen once in 4 raw runs): that counts
# only for a connection whose DREQ did not arrive.
cm_cycles() {
    local role=$1 n=$2 ne=$3 name="cm-cycles-$1-$2-$3" rf=0 rg=0 res=PASS id fpid t0 t1 extra= i
    wanted "$name" || return 0
    local log_f=$out/$name.ferroce.log log_g=$out/$name.guest.log pidf=$out/$name.pid
    t0=$(date +%s%N)
    if [ "$role" = server ]; then
        local limit="--connections $n"
        [ "$ne" = netem ] && limit=
        rm -f "$pidf"
        timeout 600 "$rig" hostexec "echo \$\$ >$pidf; exec $ferroce rping$raw -s -v -P $limit -a $host4" \
            >"$log_f" 2>&1 &
        fpid=$!
        sleep 0.3
        # rping 44's client can exit 255 after a run that passed: its CM
        # thread may call rdma_get_cm_event once more on the channel main is
        # destroying ("rdma_get_cm_event: Bad file descriptor"; fixed in
        # rdma-core by PR 1622, 2025). A cycle that printed its checked ping
        # and failed only that way counts, and the figure says how many.
        id=$("$rig" exec A "i=0; spurious=0; while [ \$i -lt $n ]; do
                rping -c -v -V -C 1 -a $host4 >/tmp/cycle.log 2>&1 || {
                    grep -q '^ping data: rdma-ping-0' /tmp/cycle.log &&
                        grep -q 'rdma_get_cm_event: Bad file descriptor' /tmp/cycle.log &&
                        ! grep -q 'data mismatch' /tmp/cycle.log || {
                            cat /tmp/cycle.log; echo cycle \$i failed; exit 1; }
                    spurious=\$((spurious + 1)); }
                i=\$((i + 1)); done
            echo cycles=\$i spurious=\$spurious" --bg --timeout 580)
        timeout 600 "$rig" wait A "$id" 590 >"$log_g" 2>&1 || rg=$?
        [ "$rg" = 0 ] || "$rig" kill A "$id" || true
        # With --connections the server ends by itself after the last
        # cycle's DREQ; otherwise (or if the guest stopped early) stop it.
        for i in $(seq 50); do kill -0 "$fpid" 2>/dev/null || break; sleep 0.2; done
        local stopped=
        if kill -0 "$fpid" 2>/dev/null; then
            kill -INT "$(cat "$pidf")" 2>/dev/null || true
            stopped=1
        fi
        wait "$fpid" || rf=$?
        if [ -n "$stopped" ] && [ "$rf" = 130 ]; then
            rf=0
            [ -n "$limit" ] && res=FAIL
        fi
        local spurious
        spurious=$(sed -n 's/^cycles=.* spurious=\([0-9]*\)$/\1/p' "$log_g")
        [ "${spurious:-0}" = 0 ] || extra="$extra, $spurious rping exits 255 after a good run (rping's race)"
        grep -q "^cycles=$n " "$log_g" || res=FAIL
        [ "$(grep -c '^server ping data: rdma-ping-0: ' "$log_f")" = "$n" ] || res=FAIL
        local dreqs broken
        dreqs=$(grep -c 'server DISCONNECT EVENT' "$log_f" || true)
        broken=$(grep -c '^ferroce: .*transport retry counter exceeded' "$log_f" || true)
        ! grep '^ferroce:' "$log_f" | grep -qv 'transport retry counter exceeded' || res=FAIL
        if [ -n "$limit" ]; then
            [ "$dreqs" = "$n" ] && [ "$broken" = 0 ] || res=FAIL
        else
            extra="$extra, $dreqs of $n DREQs arrived"
            [ "$broken" = 0 ] || extra="$extra, $broken ended by ferroce's retries (the guest's QP gone)"
            [ "$broken" -le $((n - dreqs)) ] || res=FAIL
        fi
    else
        id=$("$rig" exec A "exec rping -s -P -V -a $guest4" --bg --timeout 600)
        sleep 1
        timeout 600 "$rig" hostexec "i=0; while [ \$i -lt $n ]; do
                for try in 1 2 3 4 5 6 7 8 9 10; do
                    $ferroce rping$raw -c -V -C 1 -a $guest4 >$out/$name.last 2>&1 && break
                    [ \$i = 0 ] && grep -q 'REJ reason 8' $out/$name.last || { cat $out/$name.last; echo cycle \$i failed; exit 1; }
                    sleep 0.5
                done
                i=\$((i + 1)); done; echo cycles=\$i" >"$log_f" 2>&1 || rf=$?
        "$rig" kill A "$id" || true
        timeout 60 "$rig" wait A "$id" 30 >"$log_g" 2>&1 || true
        grep -q "^cycles=$n\$" "$log_f" || res=FAIL
        [ "$(grep -c 'server DISCONNECT EVENT' "$log_g")" = "$n" ] || res=FAIL
    fi
    t1=$(date +%s%N)
    [ "$rf" = 0 ] && [ "$rg" = 0 ] || res=FAIL
    cm_row "$name" "$role" "$ne" "$n x (-C 1 -V), server -P" "$res" \
        "$(((t1 - t0) / n / 1000000)) ms/cycle$extra"
}


# addrs IP: sets gaddr/faddr (and gidx) for IPv4 or IPv6.
addrs() {
    gaddr=$guest4 faddr=$host4 gidx='$GIDX'
    [ "$1" = IPv6 ] && gaddr=$guest6 faddr=$host6 gidx='$GIDX6'
    true
}

# cmt ROLE IP CONNECTIONS COUNT NETEM: ferroce cmatose <-> ucmatose (RC,
# -c connections at once, -C messages of 100 bytes each way on each).
cmt() {
    local role=$1 ip=$2 c=$3 n=$4 ne=$5 gaddr faddr gidx gcmd fcmd
    raw_ok cmatose "cm-cmatose-$role-c$c-C$n-$ip-$ne" ucmatose "$role" rc "$ip" "$ne" "-c $c -C $n" || return 0
    addrs "$ip"
    if [ "$role" = client ]; then
        gcmd="ucmatose -b $gaddr -c $c -C $n" fcmd="$ferroce cmatose$raw -c $c -C $n -s"
    else
        gcmd="ucmatose -c $c -C $n -s" fcmd="$ferroce cmatose$raw -c $c -C $n"
    fi
    run_case "cm-cmatose-$role-c$c-C$n-$ip-$ne" ucmatose "$role" rc "$ip" "$ne" "-c $c -C $n" cmatose \
        "$gcmd" "$fcmd" "$gaddr" "$faddr" "-b $faddr"
}

# uda ROLE IP CONNECTIONS COUNT NETEM: ferroce udaddy <-> udaddy (UD
# through SIDR, -C datagrams each way on each connection).
uda() {
    local role=$1 ip=$2 c=$3 n=$4 ne=$5 gaddr faddr gidx gcmd fcmd
    raw_ok udaddy "cm-udaddy-$role-c$c-C$n-$ip-$ne" udaddy "$role" ud "$ip" "$ne" "-c $c -C $n" || return 0
    addrs "$ip"
    if [ "$role" = client ]; then
        gcmd="udaddy -b $gaddr -c $c -C $n" fcmd="$ferroce udaddy$raw -c $c -C $n -s"
    else
        gcmd="udaddy -c $c -C $n -s" fcmd="$ferroce udaddy$raw -c $c -C $n"
    fi
    run_case "cm-udaddy-$role-c$c-C$n-$ip-$ne" udaddy "$role" ud "$ip" "$ne" "-c $c -C $n" udaddy \
        "$gcmd" "$fcmd" "$gaddr" "$faddr" "-b $faddr"
}

# mck ROLE GROUP CONNECTIONS COUNT: ferroce mckey <-> mckey (UD multicast
# through rdma_cm's join, IPv4 group GROUP). ferroce's client role sends,
# to the guest receiving on CONNECTIONS IDs; as server it receives on as
# many IDs what the guest sends. The group goes where run_case puts the
# peer's address.
mck() {
    local role=$1 group=$2 c=$3 n=$4 gcmd fcmd
    if [ "$role" = client ]; then
        gcmd="mckey -m $group -b $guest4 -c $c -C $n" fcmd="$ferroce mckey$raw -s -C $n -b $host4 -m"
    else
        gcmd="mckey -s -C $n -b $guest4 -m" fcmd="$ferroce mckey$raw -c $c -C $n -b $host4 -m"
    fi
    run_case "cm-mckey-$role-c$c-C$n-IPv4" mckey "$role" ud IPv4 - "-c $c -C $n" mckey \
        "$gcmd" "$fcmd" "$group" "$group" "$group"
}

# ptr ROLE TOOL SIZE IP NETEM: ferroce perf --perftest -R <-> ib_TOOL -R
# (the exchange and the QPs over rdma_cm, to the address of the family).
ptr() {
    local role=$1 tool=$2 size=$3 ip=$4 ne=$5 gaddr faddr gidx
    addrs "$ip"
    local verb=${tool%_*} kind=${tool#*_}
    local fargs="$verb --perftest -R --quiet -n $iters -m 1024 -s $size -L $faddr"
    [ "$kind" = lat ] && fargs="$fargs --lat"
    run_case "cm-perfR-$role-$tool-$size-$ip-$ne" "ib_$tool -R" "$role" rc "$ip" "$ne" "-s $size" "$kind" \
        "ib_$tool -d rxe0 -F -n $iters -s $size -R" "$ferroce perf$raw $fargs" "$gaddr" "$faddr" "--listen"
}

# rdx ROLE IP: ferroce rdma-server/rdma-client <-> librdmacm's rdma_server
# and rdma_client (16 bytes each way).
rdx() {
    local role=$1 ip=$2 gaddr faddr gidx gcmd fcmd cmd=rdma-server
    [ "$role" = client ] && cmd=rdma-client
    raw_ok "$cmd" "cm-rdmaex-$role-$ip" "rdma_server/rdma_client" "$role" rc "$ip" - "-" || return 0
    addrs "$ip"
    if [ "$role" = client ]; then
        gcmd="rdma_server -s $gaddr" fcmd="$ferroce rdma-client$raw -s"
    else
        gcmd="rdma_client -s" fcmd="$ferroce rdma-server$raw"
    fi
    run_case "cm-rdmaex-$role-$ip" "rdma_server/rdma_client" "$role" rc "$ip" - "-" rdmaex \
        "$gcmd" "$fcmd" "$gaddr" "$faddr" "-s $faddr"
}


t_cases=$(date +%s)
for role in client server; do
    pt "$role" write_bw 3000 IPv4 -
    pt "$role" send_bw 3000 IPv4 -
    pt "$role" read_bw 3000 IPv4 -
    pt "$role" atomic_bw 8 IPv4 - "-A FETCH_AND_ADD"
    pt "$role" atomic_bw 8 IPv4 - "-A CMP_AND_SWAP"
    pt "$role" write_lat 64 IPv4 -
    pt "$role" write_lat 3000 IPv4 -     # 3 packets: placed in order before the count shows
    pt "$role" send_lat 64 IPv4 -
    pt "$role" read_lat 64 IPv4 -
    pt "$role" atomic_lat 8 IPv4 - "-A FETCH_AND_ADD"
done
for role in client server; do
    pp "$role" rc 4096 "" IPv4 -          # 4 packets: FIRST/MIDDLE/LAST
    pp "$role" rc 4097 "" IPv4 -          # 5 packets, 1-byte LAST with pad 3
    pp "$role" rc 8193 -c IPv4 -          # 3 pages of data, checked on both sides
    pp "$role" uc 4096 "" IPv4 -
    pp "$role" uc 4097 "" IPv4 -
    pp "$role" uc 8193 -c IPv4 -
    pp "$role" ud 1024 "" IPv4 -          # UD is limited to the guest's active MTU (1024)
    pp "$role" ud 512 -c IPv4 -
done
for role in client server; do
    pp "$role" rc 8193 -c IPv6 -
    pp "$role" ud 512 -c IPv6 -
    pt "$role" write_bw 3000 IPv6 -
    pt "$role" send_lat 64 IPv6 -
done
for role in client server; do
    rp "$role" IPv4 64 -
    rp "$role" IPv4 4096 -
    rp "$role" IPv6 64 -
    rp "$role" IPv6 4096 -
done
rp server IPv4 64 - any
rp server IPv6 64 - any
rp client IPv4 64 - q
rp server IPv4 64 - q
cm_refused
cm_cycles server 200 -
cm_cycles client 200 -
for role in client server; do
    for ip in IPv4 IPv6; do
        cmt "$role" "$ip" 10 10 -
        uda "$role" "$ip" 10 10 -
        rdx "$role" "$ip"
    done
    cmt "$role" IPv4 32 10 -
    cmt "$role" IPv6 32 10 -
    mck "$role" 239.255.79.1 2 10
    # perftest 4.5 resolves -R addresses as IPv4 only ("Address family for
    # hostname not supported"; --ipv6-addr came with perftest PR 218, 2023):
    # no IPv6 case.
    for tool in write_bw send_bw read_bw; do ptr "$role" "$tool" 3000 IPv4 -; done
    ptr "$role" write_lat 64 IPv4 -
done
t_clean=$(date +%s)
if { [ -z "$only" ] || [[ $only == *netem* ]]; } && ! { [ -n "$skip" ] && [[ netem =~ $skip ]]; }; then
    step "netem on the guest's NIC, each direction: $netem"
    netem_ran=1
    netem_prepare
    netem_on
    for role in client server; do
        pp "$role" rc 4096 -c IPv4 netem
        pp "$role" rc 16385 -c IPv4 netem   # 17 packets per message
        pt "$role" write_lat 3000 IPv4 netem
        pt "$role" write_bw 8192 IPv4 netem
        pt "$role" read_lat 3000 IPv4 netem
        pt "$role" read_bw 8192 IPv4 netem
        pt "$role" send_bw 8192 IPv4 netem
        pt "$role" atomic_bw 8 IPv4 netem "-A FETCH_AND_ADD"
        rp "$role" IPv4 64 netem
        rp "$role" IPv4 4096 netem
        cm_cycles "$role" 30 netem
        cmt "$role" IPv4 10 10 netem
    done
    netem_stats | tee "$out/netem-stats.log"
    netem_off
fi
backend_finish
interop_finish
