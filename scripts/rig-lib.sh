# Shared by scripts/interop.sh, interop-cabi.sh (through interop-lib.sh)
# and rxe-compare.sh (sourced, not run): where the rig is, and building
# ferroce and booting the rig's guests. The caller sets `out` (its log
# directory), defines `step`, and may set `build_pkgs` (the cargo
# packages to build, default the ferroce command).

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
shared=${FERROCE_SHARED:-$repo/../shared}
rig=$shared/rig/rxe-rig.sh
rig_dir=${RIG_DIR:-/tmp/rxe-rig}

rig_check() {
    [ -x "$rig" ] || { echo "no rig at $rig (set FERROCE_SHARED)" >&2; exit 2; }
}

# guest_tc_prepare MODULE...: puts the guest kernel's MODULEs (qdiscs,
# actions: this machine's kernel lacks some, the guest's has them), this
# machine's tc and its libraries in guest A's share (/rig/tc in the guest:
# run tc as `LD_LIBRARY_PATH=/rig/tc/lib /rig/tc/tc`) and loads them in
# the guest (ifb with one device).
guest_tc_prepare() {
    local k share=$rig_dir/run/A/share/tc m f l
    k=$("$rig" exec A 'uname -r' --timeout 30 | tail -1)
    rm -rf "$share"; mkdir -p "$share/lib"
    for m in "$@"; do
        f=$(modprobe -S "$k" --show-depends "$m" | awk '/^insmod/ { print $2 }' | tail -1)
        case $f in
            *.xz) xz -dc "$f" >"$share/$m.ko" ;;
            *.zst) zstd -qdc "$f" >"$share/$m.ko" ;;
            *) cp "$f" "$share/$m.ko" ;;
        esac
    done
    cp "$(command -v tc)" "$share/tc"
    for l in $(ldd "$(command -v tc)" | awk '$2 == "=>" { print $3 }'); do cp -L "$l" "$share/lib/"; done
    "$rig" exec A "for m in $*; do
            [ \$m = ifb ] && a=numifbs=1 || a=; insmod /rig/tc/\$m.ko \$a 2>/dev/null; done; true" \
        --timeout 60 >/dev/null
}

# build_and_boot N WHAT: builds ferroce (release) and the rig, and boots N
# guests (WHAT says which, for the log).
build_and_boot() {
    step "building ferroce (${build_pkgs:=-p ferroce-cli})"
    # shellcheck disable=SC2086 # a list of options
    (cd "$repo" && timeout 900 cargo build --release $build_pkgs)
    step "building and booting the rig ($2)"
    timeout 600 "$rig" build >"$out/rig-build.log" 2>&1 || { tail -20 "$out/rig-build.log" >&2; exit 1; }
    timeout 300 "$rig" up "$1"
}
