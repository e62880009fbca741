#!/bin/sh
# The Lua side of `make test`, on two cores: the types check, each
# runtime's module, and the busted passes, in lanes side by side.
#
#   scripts/test-lua.sh "5.4 luajit" "5.1 5.3"
#
# Each argument is a lane: runtimes whose passes run one after the other.
# With DIST_CHECK=1 (as `make test` runs it) the install check, `make
# dist-check`, runs beside the lanes under `nice` once each lane's first
# module is built: it builds the Linux release artifacts and installs
# them, which leaves the CPU to the specs whenever they want it. CROSS=1
# does the same for `make cross` and `make windows` (see below).
# "5.4+portable" is 5.4 with the module built with the `portable` feature,
# running the specs that exercise what it changes (PORTABLE_SPECS).
# The first lane's first runtime is built first, alone, and its pass
# starts at once; the other lanes start then too, each pass waiting for
# its module; the other modules are built meanwhile (cargo builds one at a
# time), each lane's first before the rest, and only then, beside the
# rest, the install check and the types checker (built from crates.io the
# first time): what the lanes wait for gets the CPU first.
# Builds run under `nice`, so that the specs' own processes, some of which
# bound a stall, keep their CPU.
#
# A pass runs in a copy of the checkout of its own (scripts/suite.sh) with
# its runtime's module, target/test-module/mcp-RUNTIME.so. Its output goes
# to target/suite/RUNTIME.log, shown whole if it failed, its summary if
# not. The #peer specs (real servers, the official conformance suites) run
# under 5.4 only: what differs between runtimes is values, strings and the
# Lua API, which the differential, fuzz and surface specs cover under
# every one. ./mcp.so is left the 5.4 build.
set -u
cd "$(dirname "$0")/.."
out=target/suite
mkdir -p "$out" target/test-module
rm -f "$out"/*.failed "$out"/*.log target/test-module/mcp-*.so

PORTABLE_SPECS="spec/stdio_spec.lua spec/async_spec.lua spec/host_survives_spec.lua"

# The module for runtime $1, kept as target/test-module/mcp-$1.so (put in
# place by rename: a lane may be waiting for it).
build() {
  portable=
  case "$1" in *+portable) portable=1 ;; esac
  if nice sh scripts/phase.sh "module-$1" make --no-print-directory test-module LUA="${1%+portable}" PORTABLE=$portable \
      >> "$out/build.log" 2>&1 &&
     cp target/test-module/libmcp.so "target/test-module/mcp-$1.so.part"; then
    mv "target/test-module/mcp-$1.so.part" "target/test-module/mcp-$1.so"
  else
    echo "== the module for $1 did not build:"
    cat "$out/build.log"
    touch "$out/$1.failed" "$out/build.failed"
    return 1
  fi
}

# Waits for runtime $1's module (or for the builds to have failed).
module_for() {
  while [ ! -f "target/test-module/mcp-$1.so" ]; do
    [ -f "$out/build.failed" ] && return 1
    sleep 1
  done
}

pass() {
  module_for "$1" || return
  skip=--exclude-tags=peer specs=
  case "$1" in 5.4*) skip= ;; esac
  case "$1" in *+portable) specs=$PORTABLE_SPECS ;; esac
  if sh scripts/phase.sh "busted-$1" sh scripts/suite.sh "$1" "target/test-module/mcp-$1.so" -o utfTerminal $skip $specs \
      > "$out/$1.log" 2>&1; then
    echo "== busted on $1: $(grep -E 'successes' "$out/$1.log" | tail -1)"
  else
    touch "$out/$1.failed"
    echo "== busted on $1 FAILED:"
    cat "$out/$1.log"
  fi
}

lane() {
  for runtime in $1; do pass "$runtime"; done
}

first=$(echo "$1" | cut -d' ' -f1)
build "$first" || exit 1
lane "$1" &
jobs=$!
# Every other lane starts now, its passes waiting for their modules;
# each lane's first module is built before the rest, so that no lane
# waits for modules another lane needs later. The first lane's later
# modules come last: its first pass is the longest. (The luarocks spec in
# the 5.4 pass installs the 5.1 module this builds, when it is there.)
firsts= rest= first_lane_rest=
for runtimes in "$@"; do
  lead=$(echo "$runtimes" | cut -d' ' -f1)
  [ "$runtimes" = "$1" ] || { lane "$runtimes" & jobs="$jobs $!"; firsts="$firsts $lead"; }
  for runtime in $runtimes; do
    if [ "$runtimes" = "$1" ]; then
      [ "$runtime" = "$first" ] || first_lane_rest="$first_lane_rest $runtime"
    elif [ "$runtime" != "$lead" ]; then
      rest="$rest $runtime"
    fi
  done
done
rest="$rest $first_lane_rest"
for runtime in $firsts; do build "$runtime"; done
(nice sh scripts/phase.sh types make --no-print-directory test-types > "$out/types.log" 2>&1 || touch "$out/types.failed") &
jobs="$jobs $!"
if [ -n "${DIST_CHECK:-}" ]; then
  (nice sh scripts/phase.sh dist-check make --no-print-directory dist-check > "$out/dist-check.log" 2>&1 ||
    touch "$out/dist-check.failed") &
  jobs="$jobs $!"
fi
# With CROSS=1 (as `make test` runs it) the other platforms' modules are
# built and checked, and the Windows one run under Wine, beside the lanes
# too: the busted passes leave a core idle much of the time (they wait on
# servers), and these builds fill it. Alone before the lanes they made
# `make test` 350 s longer on a fresh clone.
if [ -n "${CROSS:-}" ]; then
  # Windows apart, so that its pass (Wine, mostly waiting) runs while the
  # lanes do rather than after the other platforms' builds.
  (CROSS_TARGETS=x86_64-pc-windows-gnu nice sh scripts/phase.sh cross-windows make --no-print-directory cross \
    > "$out/cross-windows.log" 2>&1 &&
    nice sh scripts/phase.sh windows make --no-print-directory windows >> "$out/cross-windows.log" 2>&1 ||
    touch "$out/cross-windows.failed") &
  jobs="$jobs $!"
  (CROSS_TARGETS="aarch64-apple-darwin x86_64-apple-darwin x86_64-unknown-freebsd" \
    nice sh scripts/phase.sh cross make --no-print-directory cross > "$out/cross.log" 2>&1 ||
    touch "$out/cross.failed") &
  jobs="$jobs $!"
fi
for runtime in $rest; do build "$runtime"; done
for job in $jobs; do wait "$job"; done

echo "== types:"
cat "$out/types.log"
for part in cross-windows cross; do
  if [ -f "$out/$part.failed" ]; then
    echo "== $part FAILED:"
    cat "$out/$part.log"
  elif [ -n "${CROSS:-}" ]; then
    echo "== $part:"
    grep -a '^cross: \|^== busted on Windows\|^== phase' "$out/$part.log"
  fi
done
if [ -f "$out/dist-check.failed" ]; then
  echo "== the install check FAILED:"
  cat "$out/dist-check.log"
elif [ -n "${DIST_CHECK:-}" ]; then
  echo "== the install check:"
  grep '^dist-check\|^dist: \|^pack: ' "$out/dist-check.log"
fi
if [ -f target/test-module/mcp-5.4.so ]; then
  sh scripts/install-module.sh target/test-module/mcp-5.4.so mcp.so
fi
if ls "$out"/*.failed >/dev/null 2>&1; then exit 1; fi
