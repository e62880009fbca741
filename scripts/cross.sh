#!/usr/bin/env bash
# Builds the loadable module for macOS (Apple silicon and Intel), FreeBSD
# and Windows from this Linux machine, and checks that each is what Lua
# there can load: a shared library of the right format and architecture
# that exports luaopen_mcp, whose other undefined symbols are the Lua C
# API (the host's) and the system's C library; on Windows, a DLL that
# imports the Lua DLL by name (lua54.dll) and otherwise only system DLLs.
# The Windows module is then run under Wine by scripts/windows-pass.sh.
#
# The toolchain installs itself the first time and is kept: rustup's
# targets, and zig (the cross linker, with the systems' C library stubs)
# with cargo-zigbuild, pinned, in a Python virtual environment under
# target/tools. `make cross` runs this; `make test` too.
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(aarch64-apple-darwin x86_64-apple-darwin x86_64-unknown-freebsd x86_64-pc-windows-gnu)
TOOLS=target/tools/zig
ZIGLANG=0.17.1
CARGO_ZIGBUILD=0.24.1

installed=$(rustup target list --installed)
for t in "${TARGETS[@]}"; do
  grep -qx "$t" <<<"$installed" || rustup target add "$t"
done
if [ ! -x "$TOOLS/bin/cargo-zigbuild" ] || [ "$(cat "$TOOLS/pins" 2>/dev/null)" != "$ZIGLANG $CARGO_ZIGBUILD" ]; then
  rm -rf "$TOOLS"
  python3 -m venv "$TOOLS"
  "$TOOLS/bin/pip" install --quiet --disable-pip-version-check "ziglang==$ZIGLANG" "cargo-zigbuild==$CARGO_ZIGBUILD"
  echo "$ZIGLANG $CARGO_ZIGBUILD" >"$TOOLS/pins"
fi
export PATH="$PWD/$TOOLS/bin:$PATH"
ZIG_LIBC="$("$TOOLS/bin/python" -c 'import ziglang, os; print(os.path.dirname(ziglang.__file__))')/lib/libc"

fail() {
  echo "cross: $*" >&2
  exit 1
}

# The system symbols a module may leave undefined: on macOS, what zig's
# copy of libSystem exports; on FreeBSD, what the linker bound to a
# version of FreeBSD's libraries (plus `environ`, the program's own).
system_symbol() {
  case "$1" in
  *-apple-darwin) grep -qwF -- "$2" "$ZIG_LIBC/darwin/libSystem.tbd" ;;
  *) [[ "$2" == *@FBSD_* || "$2" == environ ]] ;;
  esac
}

check() {
  local target=$1 file=$2 want prefix
  case "$target" in
  aarch64-apple-darwin) want="Mach-O 64-bit arm64 dynamically linked shared library*" prefix=_ ;;
  x86_64-apple-darwin) want="Mach-O 64-bit x86_64 dynamically linked shared library*" prefix=_ ;;
  x86_64-unknown-freebsd) want="ELF 64-bit LSB shared object, x86-64*" prefix= ;;
  esac
  local kind
  kind=$(file -b "$file")
  # shellcheck disable=SC2053
  [[ "$kind" == $want ]] || fail "$file is \"$kind\", not \"$want\""
  # The dynamic symbol table on ELF (the module is stripped); Mach-O's
  # one table.
  local dynamic=-D
  [[ "$target" == *-apple-darwin ]] && dynamic=
  # Read whole before searching: `grep -q` stopping early would make
  # llvm-nm fail on a closed pipe, and pipefail report that.
  local exported
  exported=$(llvm-nm -P $dynamic -g --defined-only "$file")
  grep -qE "^${prefix}luaopen_mcp T " <<<"$exported" || fail "$file does not export ${prefix}luaopen_mcp"
  local lua=0 system=0 symbol
  while read -r symbol type _; do
    [ "$type" = w ] && continue # weak: looked up at run time, may be absent
    if [[ "$symbol" == ${prefix}lua_* || "$symbol" == ${prefix}luaL_* || "$symbol" == ${prefix}luaopen_* ]]; then
      lua=$((lua + 1))
    elif system_symbol "$target" "$symbol"; then
      system=$((system + 1))
    else
      fail "$file needs $symbol, which $target does not have"
    fi
  done < <(llvm-nm -P $dynamic -u "$file")
  [ "$lua" -gt 0 ] || fail "$file does not leave the Lua C API to its host"
  echo "cross: $target: $kind; exports ${prefix}luaopen_mcp; leaves $lua Lua API (and standard library) and $system system symbols to the host"
}

# The DLLs a Windows module may import besides the Lua DLL: Windows' own
# (the API sets among them) and the C runtime mingw links.
WINDOWS_DLLS="kernel32.dll ntdll.dll advapi32.dll bcrypt.dll bcryptprimitives.dll userenv.dll ws2_32.dll msvcrt.dll shell32.dll"

check_windows() {
  local file=$1 kind dump
  kind=$(file -b "$file")
  [[ "$kind" == "PE32+ executable (DLL)"*"x86-64"*"MS Windows"* ]] || fail "$file is \"$kind\", not a 64-bit Windows DLL"
  dump=$(x86_64-w64-mingw32-objdump -p "$file")
  grep -qE '^\s+\[ *[0-9]+\] luaopen_mcp$' <<<"$dump" || fail "$file does not export luaopen_mcp"
  local lua=0 system=0 dll
  while read -r dll; do
    dll=${dll,,}
    if [ "$dll" = lua54.dll ]; then
      lua=$((lua + 1))
    elif [[ " $WINDOWS_DLLS " == *" $dll "* || "$dll" == api-ms-win-* ]]; then
      system=$((system + 1))
    else
      fail "$file imports $dll, which is neither Lua's nor Windows'"
    fi
  done < <(sed -n 's/^\s*DLL Name: //p' <<<"$dump" | sort -u)
  [ "$lua" -eq 1 ] || fail "$file does not import the Lua C API from lua54.dll"
  echo "cross: x86_64-pc-windows-gnu: $kind; exports luaopen_mcp; imports lua54.dll and $system system DLLs"
}

for t in "${TARGETS[@]}"; do
  started=$SECONDS
  if [ "$t" = x86_64-pc-windows-gnu ]; then
    # mingw-w64 links it; no zig needed.
    nice cargo clippy --quiet --profile cross-check --locked --target "$t" \
      --no-default-features --features lua54,module -- -D warnings
    nice cargo build --quiet --profile cross-check --locked --target "$t" --no-default-features --features lua54,module
    check_windows "target/$t/cross-check/mcp.dll"
    echo "cross: $t built and checked in $((SECONDS - started)) s"
    continue
  fi
  # Clippy first, for what only that system compiles (the kqueue bell, the
  # exit hook), with warnings as errors as for Linux.
  nice cargo-zigbuild clippy --quiet --profile cross-check --locked --target "$t" \
    --no-default-features --features lua54,module -- -D warnings
  nice cargo zigbuild --quiet --profile cross-check --locked --target "$t" --no-default-features --features lua54,module 2> >(grep -v -e xcrun -e 'SDK is needed' -e 'DEVELOPER_DIR' -e '^  |$' -e '^$' -e 'generated 1 warning' >&2)
  case "$t" in
  *-apple-darwin) lib=target/$t/cross-check/libmcp.dylib ;;
  *) lib=target/$t/cross-check/libmcp.so ;;
  esac
  check "$t" "$lib"
  echo "cross: $t built and checked in $((SECONDS - started)) s"
done
