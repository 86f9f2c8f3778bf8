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
