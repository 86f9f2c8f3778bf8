# Shared by scripts/interop.sh and scripts/interop-cabi.sh (sourced, not
# run): the rig's addresses, booting it with a capture on its bridge,
# running one case both ways (run_case), netem on the guest's NIC, and at
# the end the capture checks and the matrix.
#
# The caller sets `side` (its name in the log lines) and `out` (its log
# directory), sources this, calls interop_start, runs its cases through
# run_case (or not_run), and ends with interop_finish, whose status is the
# script's. It may set `refused_re` (what a client's log says while the
# guest's server is not listening yet: the client is then started again),
# `build_pkgs` (the cargo packages to build), `capture_if` (the interface
# the capture is taken on, default rigbr0) and `guest_figures` (a case
# whose ferroce side prints no figure shows the guest's), and append to
# `notes` (lines under the matrix).

. "$(dirname "${BASH_SOURCE[0]}")/rig-lib.sh"
peercheck=$shared/peercheck/peercheck.py
ferroce=$repo/target/release/ferroce
iters=${INTEROP_ITERS:-20}
netem=${INTEROP_NETEM:-loss 3% delay 1ms reorder 10% 50%}
only=${INTEROP_ONLY:-}
skip=${INTEROP_SKIP:-}
host4=198.18.0.1
guest4=198.18.0.11
host6=fd52:6f43:4500::1
guest6=fd52:6f43:4500::11
refused_re=${refused_re:-Connection refused|REJ reason 8|no listener}
guest_figures=${guest_figures:-}

rows=()
notes=()
failures=0
ncases=0
notrun=0
reruns=0
racy_runs=0
cap_pid=

step() { printf '[%s %s] %s\n' "$side" "$(date +%T)" "$*"; }

# wanted NAME: whether the case NAME runs (INTEROP_ONLY, a regex, matches
# it, if set, and INTEROP_SKIP, another, does not).
wanted() {
    { [ -z "$only" ] || [[ $1 =~ $only ]]; } && { [ -z "$skip" ] || ! [[ $1 =~ $skip ]]; }
}

interop_cleanup() {
    set +e
    [ -n "$cap_pid" ] && kill -INT "$cap_pid" 2>/dev/null && wait "$cap_pid"
    timeout 120 "$rig" down >/dev/null 2>&1
}

# interop_start: builds, boots guest A and starts the capture (tearing
# both down at exit).
interop_start() {
    rig_check
    mkdir -p "$out"
    rm -f "$out"/*.log "$out"/*.log.1 "$out/matrix.md"
    trap interop_cleanup EXIT
    trap 'exit 130' INT TERM
    t0=$(date +%s)
    build_and_boot 1 "one guest"
    t_up=$(date +%s)
    # Our own capture on the bridge (or `capture_if`) rather than the rig's
    # pcap-start: the same tcpdump options plus a 64 MiB buffer, without
    # which it drops packets of the faster cases (2,000 of 13,000 in a run).
    rm -f "$out/interop.pcap"
    ip netns exec "${RIG_NS:-rxerig}" tcpdump -B 65536 -i "${capture_if:-rigbr0}" --immediate-mode -U -n -s 0 \
        -w "$out/interop.pcap" >/dev/null 2>"$out/tcpdump.log" </dev/null &
    cap_pid=$!
    local i
    for i in $(seq 100); do grep -q 'listening on' "$out/tcpdump.log" && break; sleep 0.1; done
}


# ferroce's own figure from its log: pingpong usec/iter, bandwidth MB/s
# (average), latency t_typical in usec.
figure() {
    local f=$1 kind=$2
    case $kind in
        pingpong) sed -n 's/.* = \([0-9.]*\) usec\/iter.*/\1 us\/iter/p' "$f" | tail -1 ;;
        bw) { grep -A1 '#bytes' "$f" || true; } | tail -1 | awk 'NF >= 4 { print $4 " MB/s" }' ;;
        lat) { grep -A1 '#bytes' "$f" || true; } | tail -1 | awk 'NF >= 5 { print $5 " us" }' ;;
    esac
    true
}

# run_case NAME TOOL ROLE TRANSPORT IP NETEM OPTIONS KIND GUEST_CMD FERROCE_CMD
#   GUEST_ADDR FERROCE_ADDR FERROCE_LISTEN
# ROLE is ferroce's. As client, ferroce runs FERROCE_CMD GUEST_ADDR against the
# tool listening in the guest; as server, FERROCE_CMD FERROCE_LISTEN, and the
# guest runs GUEST_CMD FERROCE_ADDR. One matrix row.
failures=0
ncases=0
reruns=0
racy_runs=0
#   GUEST_ADDR FERROCE_ADDR FERROCE_LISTEN
# ROLE is ferroce's. As client, ferroce runs FERROCE_CMD GUEST_ADDR against the
# tool listening in the guest; as server, FERROCE_CMD FERROCE_LISTEN, and the
# guest runs GUEST_CMD FERROCE_ADDR. One matrix row.
run_case() {
    local name=$1 tool=$2 role=$3 tr=$4 ip=$5 ne=$6 opts=$7 kind=$8
    local gcmd=$9 fcmd=${10} gaddr=${11} faddr=${12} flisten=${13}
    wanted "$name" || return 0
    local log_f=$out/$name.ferroce.log log_g=$out/$name.guest.log id rf rg i attempt res
    for attempt in 1 2; do
        rf=0 rg=0
        # `exec` so the guest's job timeout signals the tool itself, not only
        # the job shell (a stuck tool busy-polls the one vCPU).
        if [ "$role" = client ]; then
            id=$("$rig" exec A "exec $gcmd" --bg --timeout 90)
            # The guest needs a moment (TCG) to listen; retry while refused.
            for i in 1 2 3 4 5 6 7 8 9 10 11 12; do
                sleep 0.5
                rf=0
                timeout 90 "$rig" hostexec "$fcmd $gaddr" >"$log_f" 2>&1 || rf=$?
                # rdma_cm tools: REJ reason 8 (SIDR: no listener) while the
                # guest's server starts.
                grep -qE "$refused_re" "$log_f" || break
            done
            timeout 110 "$rig" wait A "$id" 80 >"$log_g" 2>&1 || rg=$?
        else
            timeout 90 "$rig" hostexec "$fcmd $flisten" >"$log_f" 2>&1 &
            local fpid=$!
            sleep 0.3
            id=$("$rig" exec A "exec $gcmd $faddr" --bg --timeout 90)
            timeout 110 "$rig" wait A "$id" 80 >"$log_g" 2>&1 || rg=$?
            wait "$fpid" || rf=$?
        fi
        [ "$rg" = 0 ] || "$rig" kill A "$id" || true
        res=PASS
        # rping 44 can exit 255 after a good run (see cm_cycles in interop.sh): the
        # guest's status is then the pings it printed and checked.
        # The same holds for rping 44 on the ferroce side (interop-cabi.sh).
        local racy=
        if [ "$kind" = rping ] && [ "$rg" = 255 ] && rping_ok "$role" "$log_f" "$log_g" &&
            grep -q 'rdma_get_cm_event: Bad file descriptor' "$log_g"; then
            rg=0 racy=1
        fi
        if [ "$kind" = rping ] && [ "$rf" = 255 ] && rping_ok "$role" "$log_f" "$log_g" &&
            grep -q 'rdma_get_cm_event: Bad file descriptor' "$log_f"; then
            rf=0 racy=1
        fi
        if [ "$rf" != 0 ] || [ "$rg" != 0 ] || grep -q 'invalid data' "$log_g" "$log_f"; then
            res=FAIL
        fi
        if [ "$kind" = rping ] && ! rping_ok "$role" "$log_f" "$log_g"; then res=FAIL; fi
        if ! tools_ok "$kind" "$log_f" "$log_g"; then res=FAIL; fi
        # Under loss, pingpong (rdma-core's as well as ours) can lose the ACK
        # of the last message after the side that sent it has exited: nothing
        # ends the run on the wire, so the other side's last send fails with
        # RETRY_EXC_ERR although the peer got it (it reports every iteration
        # done). Only that case runs once more, and the matrix says so.
        if [ "$res" = FAIL ] && [ "$attempt" = 1 ] && [ "$ne" = netem ] && [ "$kind" = pingpong ] &&
            { { [ "$rf" != 0 ] && [ "$rg" = 0 ] && grep -q 'iters in' "$log_g"; } ||
              { [ "$rg" != 0 ] && [ "$rf" = 0 ] && grep -q 'iters in' "$log_f"; }; }; then
            step "$name: the last ACK was lost after the peer had exited (ferroce rc=$rf, guest rc=$rg); once more"
            cp "$log_f" "$log_f.1"
            cp "$log_g" "$log_g.1"
            reruns=$((reruns + 1))
            continue
        fi
        # Likewise the kernel's rping client: it destroys its ID right after
        # rdma_disconnect, which cancels the DREQ's retries, so a lost DREQ
        # leaves the server waiting for the next ping for good (a kernel
        # server too). Only a run where the guest did every ping and
        # ferroce's server, every ping printed, timed out waiting runs again.
        if [ "$res" = FAIL ] && [ "$attempt" = 1 ] && [ "$ne" = netem ] && [ "$kind" = rping ] &&
            [ "$role" = server ] && [ "$rg" = 0 ] && [ "$rf" = 124 ] && rping_ok server "$log_f" "$log_g" &&
            ! grep -q 'DISCONNECT EVENT' "$log_f"; then
            step "$name: the guest's DREQ was lost, and its rping never resends it; once more"
            cp "$log_f" "$log_f.1"
            cp "$log_g" "$log_g.1"
            reruns=$((reruns + 1))
            continue
        fi
        break
    done
    [ "$res" = PASS ] || failures=$((failures + 1))
    [ "$res" = PASS ] && [ "$attempt" = 2 ] && res='PASS (2nd run)'
    if [ "$res" = PASS ] && [ -n "$racy" ]; then
        res="PASS (rping's exit race)"
        racy_runs=$((racy_runs + 1))
    fi
    ncases=$((ncases + 1))
    local fig
    fig=$(figure "$log_f" "$kind")
    if [ -z "$fig" ] && [ -n "$guest_figures" ]; then
        fig=$(figure "$log_g" "$kind")
        [ -z "$fig" ] || fig="$fig (guest's)"
    fi
    rows+=("| $tool | $role | $tr | $ip | $ne | $opts | $res | ${fig:--} |")
    step "$name: $res (ferroce rc=$rf, guest rc=$rg)"
}

# not_run TOOL ROLE TRANSPORT IP NETEM OPTIONS REASON: a row for a case
# that cannot run here, counted apart (neither passed nor failed).
not_run() {
    rows+=("| $1 | $2 | $3 | $4 | $5 | $6 | not run: $7 | - |")
    notrun=$((notrun + 1))
}

# rping's checks beyond the exit status: the client printed every ping
# ("ping data: ", after -V compared it), the server every ping it read
# ("server ping data: "), and nobody saw a mismatch.
rping_count=10
rping_ok() {
    local role=$1 log_f=$2 log_g=$3 clog slog
    if [ "$role" = client ]; then clog=$log_f slog=$log_g; else clog=$log_g slog=$log_f; fi
    [ "$(grep -c '^ping data: rdma-ping-' "$clog")" = "$rping_count" ] &&
        [ "$(grep -c '^server ping data: rdma-ping-' "$slog")" = "$rping_count" ] &&
        ! grep -q 'data mismatch' "$clog"
}

# Beyond the exit status: the rdma_cm tools and the pingpongs pass when
# both sides say they finished as the tools do.
tools_ok() {
    local kind=$1 log_f=$2 log_g=$3
    case $kind in
        cmatose | udaddy | mckey) grep -q 'data transfers complete' "$log_f" && grep -q 'data transfers complete' "$log_g" &&
            grep -q '^test complete' "$log_f" && grep -q '^test complete' "$log_g" ;;
        rdmaex) grep -q ': end 0$' "$log_f" && grep -q ': end 0$' "$log_g" ;;
        pingpong) grep -q ' iters in ' "$log_f" && grep -q ' iters in ' "$log_g" ;;
        mw) grep -q 'all checks passed' "$log_f" && grep -q 'all checks passed' "$log_g" ;;
        rstream) grep -q '^custom ' "$log_f" && grep -q '^custom ' "$log_g" ;;
        *) true ;;
    esac
}

# netem_on / netem_off: loss and reordering on the guest's eth0, both ways
# (egress directly, ingress through ifb0).
netem_prepare() {
    guest_tc_prepare sch_netem ifb act_mirred cls_matchall sch_ingress
    "$rig" exec A 'ip link set ifb0 up' --timeout 60 >/dev/null
}
netem_on() {
    netem_off
    "$rig" exec A "export LD_LIBRARY_PATH=/rig/tc/lib; T=/rig/tc/tc
        \$T qdisc add dev eth0 root netem $netem &&
        \$T qdisc add dev eth0 handle ffff: ingress &&
        \$T filter add dev eth0 parent ffff: matchall action mirred egress redirect dev ifb0 &&
        \$T qdisc add dev ifb0 root netem $netem && \$T qdisc show | grep netem" --timeout 60
}
netem_stats() {
    "$rig" exec A 'export LD_LIBRARY_PATH=/rig/tc/lib; T=/rig/tc/tc
        for d in eth0 ifb0; do printf "%s: " $d; $T -s qdisc show dev $d | grep -m1 Sent; done' --timeout 60
}
netem_off() {
    "$rig" exec A 'export LD_LIBRARY_PATH=/rig/tc/lib; T=/rig/tc/tc
        $T qdisc del dev eth0 root; $T qdisc del dev eth0 ingress; $T qdisc del dev ifb0 root; true' --timeout 60 >/dev/null 2>&1
}

# interop_finish: stops the capture, checks it (ferroce dump --check,
# peercheck), writes $out/matrix.md and prints it. Its status is 0 only if
# every case that ran passed and the capture checks are clean.
interop_finish() {
    t_end=$(date +%s)
    kill -INT "$cap_pid"
    wait "$cap_pid" || true
    cap_pid=
    local cap_drop cap_ok=PASS pc_ok=PASS cap_frames total passed
    cap_drop=$(sed -n 's/^\([0-9]*\) packets dropped by kernel.*/\1/p' "$out/tcpdump.log")

    step "checking the capture"
    timeout 300 "$ferroce" dump --check "$out/interop.pcap" >"$out/dump.log" 2>&1 || cap_ok=FAIL
    tail -1 "$out/dump.log"
    if [ -x "$peercheck" ]; then
        timeout 900 "$peercheck" --summary "$out/interop.pcap" >"$out/peercheck.log" 2>&1 || pc_ok=FAIL
        grep -E '^(frames|bad ICRC|decode failures|tshark disagreements|result)' "$out/peercheck.log" || true
    else
        pc_ok=SKIP
    fi

    cap_frames=$(sed -n 's/.*: \([0-9]* frames, [0-9]* RoCE\).*/\1/p' "$out/dump.log" | tail -1)
    total=$(($(date +%s) - t0))
    passed=$((ncases - failures))
    {
        echo "| tool | ferroce's role | transport | IP | netem | options | result | ferroce's figure |"
        echo "|---|---|---|---|---|---|---|---|"
        printf '%s\n' "${rows[@]}"
        echo
        if [ -n "${netem_ran:-}" ]; then
            echo "$passed of $ncases cases pass (-n $iters; netem, on the guest's NIC in each direction: \`$netem\`)."
        else
            echo "$passed of $ncases cases pass (-n $iters; the netem cases were not run)."
        fi
        [ "$notrun" = 0 ] || echo "$notrun not run (see their rows)."
        [ "${#notes[@]}" = 0 ] || printf '%s\n' "${notes[@]}"
        [ "$reruns" = 0 ] || echo "$reruns ran twice: the first run lost the ACK of the last message after the peer had exited, or the guest rping's DREQ, which it never resends (see run_case)."
        [ "$racy_runs" = 0 ] || echo "$racy_runs: rping (the guest's, or on the ferroce side interop-cabi.sh's) exited 255 after printing and checking every ping (its CM thread's race at exit, \`rdma_get_cm_event: Bad file descriptor\`, fixed in rdma-core by PR 1622)."
        echo "Capture of the whole run ($cap_frames, ${cap_drop:-?} dropped by tcpdump): \`ferroce dump --check\` $cap_ok, \`peercheck --summary\` $pc_ok."
        if [ -n "${netem_ran:-}" ]; then
            echo "Times: build and boot $((t_up - t0)) s, cases without netem $((t_clean - t_cases)) s, with netem $((t_end - t_clean)) s, total $total s."
        else
            echo "Times: build and boot $((t_up - t0)) s, cases $((t_end - t_cases)) s, total $total s."
        fi
    } >"$out/matrix.md"
    echo
    cat "$out/matrix.md"
    echo
    echo "matrix: $out/matrix.md, capture: $out/interop.pcap"
    echo "total: $total s"
    [ "$failures" = 0 ] && [ "$cap_ok" = PASS ] && [ "$pc_ok" != FAIL ]
}
