# Sourced by scripts/interop.sh (not run): the backend ferroce's side runs
# on. The caller sets `backend` (udp or raw) and `raw` ("" or " --raw")
# and sources interop-lib.sh first; it calls backend_setup after
# interop_start, puts `$(fdev IP)` after the ferroce command of the tools
# that take `-g` (pingpong, perf), `$raw` after the rdma_cm ones, guards a
# case whose command may lack --raw with raw_ok, and calls backend_finish
# before interop_finish.
#
# On the raw backend ferroce's devices are AF_PACKET sockets on rigbr0:
# the rig's namespace end is the bridge itself (it holds 198.18.0.1 and
# fd52:6f43:4500::1; the guests' taps are its ports, without addresses),
# and the raw backend binds the interface that owns the device's address.
# Frames it sends go through the bridge to the tap, so the capture on
# rigbr0 sees both directions, as on the UDP backend.

gid4= gid6=
counters_before=

# v2_index TABLE ADDRESS: the index of ADDRESS's RoCE v2 entry in `ferroce
# devinfo -v` output.
v2_index() {
    printf '%s\n' "$1" | sed -n "s/^[[:space:]]*GID\[ *\([0-9]*\)\]:[[:space:]]*$2, RoCE v2\$/\1/p" | head -1
}

# backend_setup: on raw, finds the GID indexes of the devices' RoCE v2
# entries (its IPv4 and its IPv6 address) and lists RoCE v1 as not run;
# on both, reads the namespace's counters of what the kernel's own stack
# did with RoCE packets (backend_finish reports the difference).
backend_setup() {
    counters_before=$(kernel_counters)
    [ -n "$raw" ] || return 0
    local t4 t6
    t4=$("$rig" hostexec "$ferroce devinfo -v --raw -L $host4")
    t6=$("$rig" hostexec "$ferroce devinfo -v --raw -L $host6")
    gid4=$(v2_index "$t4" "::ffff:$host4")
    gid6=$(v2_index "$t6" "$host6")
    if [ -z "$gid4" ] || [ -z "$gid6" ]; then
        printf '%s\n%s\n' "$t4" "$t6" >&2
        echo "interop.sh: no RoCE v2 GID for $host4 or $host6 in the raw device's table above" >&2
        exit 1
    fi
    step "raw backend on rigbr0: RoCE v2 GID index $gid4 (::ffff:$host4), $gid6 ($host6)"
    notes+=("Backend: raw (\`--raw\`: AF_PACKET rings on rigbr0, RoCE v2 over GID index $gid4 for IPv4 and $gid6 for IPv6, \`-g\` of pingpong and perf; rdma_cm picks its own).")
    if [ -z "$only" ]; then
        not_run "any (a RoCE v1 GID: -g $((gid4 - 1)))" both any "IPv4, IPv6" - - \
            "rxe has no RoCE v1 (its GID table holds v2 entries only); v1 is tested ferroce to ferroce (crates/ferroce-cli/tests/raw_backend.rs)"
    fi
}

# fdev IP: the device options of pingpong and perf for IP (IPv4 or IPv6).
fdev() {
    [ -n "$raw" ] || return 0
    if [ "$1" = IPv6 ]; then echo "$raw -g $gid6"; else echo "$raw -g $gid4"; fi
}

# raw_ok COMMAND NAME TOOL ROLE TRANSPORT IP NETEM OPTIONS: true on the UDP
# backend, or when `ferroce COMMAND` takes --raw; otherwise the case NAME
# is a row "not run" with that reason, and false.
raw_ok() {
    local cmd=$1 name=$2
    shift 2
    [ -n "$raw" ] || return 0
    "$ferroce" "$cmd" --help 2>/dev/null | grep -q -- '--raw' && return 0
    if wanted "$name"; then
        not_run "$@" "\`ferroce $cmd\` has no --raw (its devices are UDP only)"
        step "$name: not run (ferroce $cmd has no --raw)"
    fi
    return 1
}

# kernel_counters: the rig namespace's counters of RoCE v2 packets the
# kernel's own stack received beside the backend (every one reaches it):
# ICMP port unreachable sent, UDP to no socket, UDP dropped as errors
# (InErrors + InCsumErrors), IPv4 then IPv6.
kernel_counters() {
    ip netns exec "${RIG_NS:-rxerig}" awk '
        $1 == "Icmp:" || $1 == "Udp:" {
            if (!($1 in head)) { for (i = 2; i <= NF; i++) head[$1, i] = $i; head[$1] = 1; next }
            for (i = 2; i <= NF; i++) v[$1 head[$1, i]] = $i
        }
        $1 ~ /^(Icmp6OutDestUnreachs|Udp6NoPorts|Udp6InErrors|Udp6InCsumErrors)$/ { v[$1] = $2 }
        END {
            print v["Icmp:OutDestUnreachs"] + 0, v["Udp:NoPorts"] + 0, v["Udp:InErrors"] + v["Udp:InCsumErrors"],
                v["Icmp6OutDestUnreachs"] + 0, v["Udp6NoPorts"] + 0, v["Udp6InErrors"] + v["Udp6InCsumErrors"]
        }' /proc/net/snmp /proc/net/snmp6
}

# backend_finish: a line under the matrix with what the kernel's stack
# did in the namespace during the run.
backend_finish() {
    local a b
    read -ra a <<<"$counters_before"
    read -ra b <<<"$(kernel_counters)"
    notes+=("The namespace's kernel during the run, IPv4 and IPv6 (it receives every RoCE v2 packet too; the process holding UDP 4791 keeps it from answering): ICMP port unreachable sent $((b[0] - a[0])) and $((b[3] - a[3])), UDP to no socket $((b[1] - a[1])) and $((b[4] - a[4])), UDP dropped as errors $((b[2] - a[2])) and $((b[5] - a[5])). The last are expected and harmless: the raw backend holds UDP 4791 with a socket whose filter drops every datagram (so that the kernel sends no ICMP port unreachable), and the kernel counts each such drop as a UDP receive error, one per RoCE v2 packet it also received.")
}
