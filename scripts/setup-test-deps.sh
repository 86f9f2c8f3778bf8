#!/usr/bin/env bash
# Install what scripts/test.sh needs, when it is missing. Idempotent.
# Meant for a fresh Debian machine, run as root with no terminal (CI); elsewhere it only
# checks, and says what to install if something is missing.
#
#   tshark, editcap, mergecap  Debian packages tshark + wireshark-common: the capture tests
#                              of ferroce-cli cross-check against Wireshark
#   python3 with venv          Debian python3-venv: peercheck's virtualenv
#   peercheck's .venv (Scapy)  "$FERROCE_SHARED/peercheck/setup.sh"
#   gcc                        compiles the C layout tests and C programs of the C ABI crates
#   libibverbs-dev             <infiniband/verbs.h>: libibverbs.so.1's C layout test and C programs
#   ibverbs-utils, perftest    ibv_devinfo, ibv_*_pingpong, ib_*_bw/lat: the unmodified tools that
#                              crates/ferroce-verbs/tests run on ferroce's libibverbs.so.1
#   librdmacm-dev              <rdma/rdma_cma.h>: librdmacm.so.1's C layout test and C program
#   rdmacm-utils               rping, ucmatose, udaddy, rdma_server/rdma_client: the tools that
#                              crates/ferroce-rdmacm/tests run on ferroce's librdmacm.so.1
#   qperf                      qperf 0.4.11 -cm1: crates/ferroce-rdmacm/tests/qperf.rs (skipped without)
#                              (also rstream, riostream, rcopy; librdmacm1 brings librspreload.so)
#   fonts-dejavu-core          a TrueType font for ferroce sim's plots (ferroce-sim's tests draw them)
#   ucx-utils                  ucx_info, ucx_perftest (UCX 1.13): the middleware tests of ferroce-verbs
#   libfabric-bin              fi_info, fi_pingpong (libfabric 1.17, verbs provider): likewise
#   iperf3                     iperf3 under librspreload.so (rsockets): likewise
#
# Cargo tools, installed with `cargo install --locked` when missing:
#   mdbook 0.4                 builds the book in docs/ (test.sh checks that it builds)
#   cargo-deny                 the dependency audit (deny.toml: licenses, duplicate versions, sources)
#
# Not here: cargo-fuzz (the fuzzing script installs its own tools).
#
# FERROCE_SHARED: the shared/ directory (vectors, peercheck); default: ../shared beside
# the repository.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
shared=${FERROCE_SHARED:-$repo/../shared}
if [ ! -d "$shared/peercheck" ]; then
    echo "setup-test-deps: no peercheck/ in '$shared'; set FERROCE_SHARED to the shared/ directory" >&2
    exit 1
fi
shared=$(cd "$shared" && pwd)

# Debian packages, installed only when a command they provide is missing.
missing=()
command -v tshark >/dev/null 2>&1 || missing+=(tshark)
if ! command -v editcap >/dev/null 2>&1 || ! command -v mergecap >/dev/null 2>&1; then
    missing+=(wireshark-common)
fi
command -v python3 >/dev/null 2>&1 || missing+=(python3)
# `python3 -m venv` needs ensurepip, which Debian ships separately.
if ! command -v python3 >/dev/null 2>&1 || ! python3 -c 'import ensurepip' >/dev/null 2>&1; then
    missing+=(python3-venv)
fi
command -v gcc >/dev/null 2>&1 || missing+=(gcc)
[ -f /usr/include/infiniband/verbs.h ] || missing+=(libibverbs-dev)
command -v ibv_rc_pingpong >/dev/null 2>&1 || missing+=(ibverbs-utils)
command -v ib_write_bw >/dev/null 2>&1 || missing+=(perftest)
[ -f /usr/include/rdma/rdma_cma.h ] || missing+=(librdmacm-dev)
command -v rping >/dev/null 2>&1 || missing+=(rdmacm-utils)
command -v qperf >/dev/null 2>&1 || missing+=(qperf)
[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)
command -v ucx_perftest >/dev/null 2>&1 || missing+=(ucx-utils)
command -v fi_pingpong >/dev/null 2>&1 || missing+=(libfabric-bin)
command -v iperf3 >/dev/null 2>&1 || missing+=(iperf3)
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup-test-deps: missing Debian packages: ${missing[*]}; run this script as root" >&2
        exit 1
    fi
    echo "setup-test-deps: installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q "${missing[@]}" </dev/null
fi

if ! cargo deny --version >/dev/null 2>&1; then
    echo "setup-test-deps: installing cargo-deny (cargo install, several minutes)"
    cargo install --locked cargo-deny --quiet
fi
if ! command -v mdbook >/dev/null 2>&1; then
    echo "setup-test-deps: installing mdbook (cargo install, a few minutes)"
    cargo install --locked mdbook --version '^0.4' --quiet
fi

# tshark, editcap and mergecap come from the same Wireshark release; print it once.
editcap -v | sed -n 1p

# Scapy in peercheck's own virtualenv (its setup.sh is idempotent, and also checks tshark).
"$shared/peercheck/setup.sh" </dev/null
