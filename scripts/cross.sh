#!/usr/bin/env bash
# Builds the loadable module for macOS (Apple silicon and Intel), FreeBSD
# and Windows from this Linux machine, unoptimised, and checks that each is
# what Lua there can load (scripts/check-module.sh). The Windows module is
# then run under Wine by scripts/windows-pass.sh; `make dist` builds the
# optimised modules users download, for every platform and Lua ABI.
#
# The toolchain installs itself the first time and is kept
# (scripts/zig-toolchain.sh). `make cross` runs this; `make test` too.
set -euo pipefail
cd "$(dirname "$0")/.."

# CROSS_TARGETS chooses some (make test builds Windows apart, to run its
# pass the sooner).
read -r -a TARGETS <<<"${CROSS_TARGETS:-aarch64-apple-darwin x86_64-apple-darwin x86_64-unknown-freebsd x86_64-pc-windows-gnu}"
. scripts/zig-toolchain.sh "${TARGETS[@]}"
. scripts/check-module.sh
. scripts/linted.sh

for t in "${TARGETS[@]}"; do
  started=$SECONDS
  if [ "$t" = x86_64-pc-windows-gnu ]; then
    # mingw-w64 links it; no zig needed.
    linted nice cargo build --quiet --profile cross-check --locked --target "$t" \
      --no-default-features --features lua54,module
    check_module win32-x86_64 lua54 "target/$t/cross-check/mcp.dll"
    echo "cross: $t built and checked in $((SECONDS - started)) s"
    continue
  fi
  # Linted as it is built (scripts/linted.sh), for what only that system
  # compiles (the kqueue bell, the exit hook).
  link_args "$t"
  linted nice cargo zigbuild --quiet --profile cross-check --locked --target "$t" --no-default-features --features lua54,module \
    "${LINK_ARGS[@]}" 2> >(grep -v -e xcrun -e 'SDK is needed' -e 'DEVELOPER_DIR' -e '^  |$' -e '^$' -e 'generated 1 warning' >&2)
  case "$t" in
  aarch64-apple-darwin) check_module macosx-aarch64 lua54 "target/$t/cross-check/libmcp.dylib" ;;
  x86_64-apple-darwin) check_module macosx-x86_64 lua54 "target/$t/cross-check/libmcp.dylib" ;;
  x86_64-unknown-freebsd) check_module freebsd-x86_64 lua54 "target/$t/cross-check/libmcp.so" ;;
  esac
  echo "cross: $t built and checked in $((SECONDS - started)) s"
done
