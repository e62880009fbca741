#!/usr/bin/env bash
# `make dist`: the module, optimised, for every platform and Lua ABI the
# project supports, built on this Linux machine from Cargo.lock, checked
# (scripts/check-module.sh), and packed into dist/:
#
#   mcp-VERSION-PLATFORM-ABI.so (.dll on Windows)  one per platform and ABI
#   lua-mcp-VERSION-1.PLATFORM.rock                one binary rock per platform
#   manifest.json                                  what each file is
#   SHA256SUMS                                     sha256sum -c checks them
#
#   scripts/dist.sh [PLATFORM...]     default: all of PLATFORMS below
#   ABIS="lua51 lua54" scripts/dist.sh linux-x86_64    only those ABIs
#   PROFILE=dist-check DIST_DIR=target/dist-check-artifacts scripts/dist.sh ...
#       unoptimised, and beside dist/ rather than in it: the install
#       check's (`make dist-check`), which must not pass for a release
#
# PLATFORM is LuaRocks' name for it (the rock's file name carries it, and
# `luarocks install` refuses a rock for another). The same sources and
# Cargo.lock give the same bytes: paths are remapped out of the binaries,
# and the rocks' zip entries carry a fixed time. A platform's rock holds
# the ABIs built for it in this run, and the manifest lists every
# artifact in dist/.
set -euo pipefail
cd "$(dirname "$0")/.."

ALL_PLATFORMS=(linux-x86_64 linux-aarch64 macosx-aarch64 macosx-x86_64 freebsd-x86_64 win32-x86_64)
read -r -a ABIS <<<"${ABIS:-lua51 lua52 lua53 lua54 luajit}"
PROFILE=${PROFILE:-dist}
export DIST_DIR=${DIST_DIR:-dist}
PLATFORMS=("$@")
[ ${#PLATFORMS[@]} -gt 0 ] || PLATFORMS=("${ALL_PLATFORMS[@]}")

VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
ROCK_VERSION=$VERSION-1
[ -f "lua-mcp-$ROCK_VERSION.rockspec" ] || { echo "dist: lua-mcp-$ROCK_VERSION.rockspec is missing" >&2; exit 1; }

# Rust's target for each platform; the Linux ones name the glibc they link
# against (cargo-zigbuild's suffix), the baseline in scripts/check-module.sh.
triple() {
  case "$1" in
  linux-x86_64) echo x86_64-unknown-linux-gnu ;;
  linux-aarch64) echo aarch64-unknown-linux-gnu ;;
  macosx-aarch64) echo aarch64-apple-darwin ;;
  macosx-x86_64) echo x86_64-apple-darwin ;;
  freebsd-x86_64) echo x86_64-unknown-freebsd ;;
  win32-x86_64) echo x86_64-pc-windows-gnu ;;
  *) echo "dist: unknown platform $1 (one of: ${ALL_PLATFORMS[*]})" >&2; exit 2 ;;
  esac
}

triples=()
for platform in "${PLATFORMS[@]}"; do triples+=("$(triple "$platform")"); done
. scripts/zig-toolchain.sh "${triples[@]}"
. scripts/check-module.sh
GLIBC_SUFFIX=.$GLIBC_BASELINE

# What cargo writes for a target, and the extension the module keeps
# there (Lua's cpath asks for ?.so on every Unix, macOS included).
built_file() {
  case "$1" in
  win32-*) echo "target/$2/$PROFILE/mcp.dll" ;;
  macosx-*) echo "target/$2/$PROFILE/libmcp.dylib" ;;
  *) echo "target/$2/$PROFILE/libmcp.so" ;;
  esac
}
extension() { case "$1" in win32-*) echo dll ;; *) echo so ;; esac; }

build() {
  local platform=$1 abi=$2 triple
  triple=$(triple "$platform")
  # The checkout's and the registry's paths would otherwise be written into
  # panic locations, making the bytes depend on where they were built.
  # (Passed with --config, so that they join .cargo/config.toml's flags.)
  local remap="target.$triple.rustflags=['--remap-path-prefix=$PWD=/lua-mcp', '--remap-path-prefix=${CARGO_HOME:-$HOME/.cargo}=/cargo']"
  # LLVM inlines less than opt-level 3 would (its threshold for -Os is
  # 50, -O2's 225, -O3's 250), across the whole module, which under fat
  # LTO a crate's own opt-level no longer reaches: 5.46 -> 5.14 MB on
  # Linux x86_64 (50 saved 12 KB more, 25 another 16). What it costs, in
  # callgrind's instructions for bench/codec.lua's 1 MB cases (median of
  # five runs; two runs of one build differ by up to 4%): a result +0.4%,
  # arguments +2.3%, a tool list +3.4%.
  local inlining="target.$triple.rustflags=['-C', 'llvm-args=-inline-threshold=75']"
  # Symbols go too (exports stay): a quarter of the Windows DLL, a seventh
  # of the macOS one.
  local args=(--quiet --profile "$PROFILE" --locked --no-default-features --features "$abi,module" --config "$remap" --config "$inlining"
    --config "profile.$PROFILE.strip=\"symbols\"")
  case "$platform" in
  win32-*) nice cargo build --target "$triple" "${args[@]}" ;; # mingw-w64 links it
  linux-*) nice cargo zigbuild --target "$triple$GLIBC_SUFFIX" "${args[@]}" ;;
  *)
    link_args "$triple"
    nice cargo zigbuild --target "$triple" "${args[@]}" "${LINK_ARGS[@]}" 2> >(grep -v -e xcrun -e 'SDK is needed' -e 'DEVELOPER_DIR' -e '^  |$' -e '^$' -e 'generated 1 warning' >&2) ;;
  esac
  local artifact="$DIST_DIR/mcp-$VERSION-$platform-$abi.$(extension "$platform")"
  sh scripts/install-module.sh "$(built_file "$platform" "$triple")" "$artifact"
  check_module "$platform" "$abi" "$artifact"
}

mkdir -p "$DIST_DIR"
for platform in "${PLATFORMS[@]}"; do
  started=$SECONDS
  for abi in "${ABIS[@]}"; do build "$platform" "$abi"; done
  bash scripts/pack-rock.sh "$platform" "$VERSION" "${ABIS[@]}"
  echo "dist: $platform built, checked and packed in $((SECONDS - started)) s"
done
bash scripts/dist-manifest.sh "$VERSION"
