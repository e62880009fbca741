# Sourced by scripts/cross.sh and scripts/dist.sh (after
# scripts/zig-toolchain.sh, for ZIG_LIBC): check_module PLATFORM ABI FILE
# fails unless FILE is what that platform's Lua of that ABI can load: a
# shared library of the right format and architecture that exports
# luaopen_mcp, whose other undefined symbols are the Lua C API (the
# host's) and the system's C library; on Linux, glibc's no newer than
# GLIBC_BASELINE; on Windows, a DLL that imports its Lua's DLL by name and
# otherwise only Windows' own. PLATFORM is LuaRocks' name for it
# (linux-x86_64, macosx-aarch64, win32-x86_64, ...).

# The oldest glibc the Linux modules run on (what `make dist` links
# against): 2.17 is what Rust's own std supports at the least, and reaches
# back to RHEL/CentOS 7, Ubuntu 14.04 and Debian 8.
GLIBC_BASELINE=2.17

# The DLLs a Windows module may import besides its Lua's: Windows' own
# (the API sets among them) and the C runtime mingw links.
WINDOWS_DLLS="kernel32.dll ntdll.dll advapi32.dll bcrypt.dll bcryptprimitives.dll userenv.dll ws2_32.dll msvcrt.dll shell32.dll"

check_fail() {
  echo "check: $*" >&2
  exit 1
}

# The DLL a Windows Lua of this ABI is: LuaJIT's is named as 5.1's.
lua_dll() {
  case "$1" in
  luajit) echo lua51.dll ;;
  *) echo "$1.dll" ;;
  esac
}

# Whether an undefined symbol of a module for this platform is the
# system's: on macOS, what zig's copy of libSystem exports; on FreeBSD,
# what the linker bound to a version of FreeBSD's libraries (plus
# `environ`, the program's own); on Linux, glibc's at or below the
# baseline.
system_symbol() {
  case "$1" in
  macosx-*) grep -qwF -- "$2" "$ZIG_LIBC/darwin/libSystem.tbd" ;;
  freebsd-*) [[ "$2" == *@FBSD_* || "$2" == environ ]] ;;
  linux-*)
    [[ "$2" == *@GLIBC_* ]] || return 1
    local version=${2##*@GLIBC_}
    [ "$(printf '%s\n%s\n' "$version" "$GLIBC_BASELINE" | sort -V | tail -1)" = "$GLIBC_BASELINE" ]
    ;;
  *) return 1 ;;
  esac
}

check_module() {
  local platform=$1 abi=$2 file=$3 want prefix=
  case "$platform" in
  win32-x86_64)
    check_windows_module "$abi" "$file"
    return
    ;;
  macosx-aarch64) want="Mach-O 64-bit arm64 dynamically linked shared library*" prefix=_ ;;
  macosx-x86_64) want="Mach-O 64-bit x86_64 dynamically linked shared library*" prefix=_ ;;
  freebsd-x86_64) want="ELF 64-bit LSB shared object, x86-64*" ;;
  linux-x86_64) want="ELF 64-bit LSB shared object, x86-64*" ;;
  linux-aarch64) want="ELF 64-bit LSB shared object, ARM aarch64*" ;;
  *) check_fail "no check for platform $platform" ;;
  esac
  local kind
  kind=$(file -b "$file")
  # shellcheck disable=SC2053
  [[ "$kind" == $want ]] || check_fail "$file is \"$kind\", not \"$want\""
  # The dynamic symbol table on ELF; Mach-O's one table.
  local dynamic=-D
  [[ "$platform" == macosx-* ]] && dynamic=
  # Read whole before searching: `grep -q` stopping early would make
  # llvm-nm fail on a closed pipe, and pipefail report that.
  local exported
  exported=$(llvm-nm -P $dynamic -g --defined-only "$file")
  grep -qE "^${prefix}luaopen_mcp T " <<<"$exported" || check_fail "$file does not export ${prefix}luaopen_mcp"
  local lua=0 system=0 symbol type
  while read -r symbol type _; do
    [ "$type" = w ] && continue # weak: looked up at run time, may be absent
    if [[ "$symbol" == ${prefix}lua_* || "$symbol" == ${prefix}luaL_* || "$symbol" == ${prefix}luaopen_* ]]; then
      lua=$((lua + 1))
    elif system_symbol "$platform" "$symbol"; then
      system=$((system + 1))
    else
      check_fail "$file needs $symbol, which $platform does not have"
    fi
  done < <(llvm-nm -P $dynamic -u "$file")
  [ "$lua" -gt 0 ] || check_fail "$file does not leave the Lua C API to its host"
  local baseline=
  [[ "$platform" == linux-* ]] && baseline=" (glibc $GLIBC_BASELINE at most)"
  echo "check: $platform $abi: $kind; exports ${prefix}luaopen_mcp; leaves $lua Lua API (and standard library) and $system system symbols$baseline to the host"
}

check_windows_module() {
  local abi=$1 file=$2 kind dump
  kind=$(file -b "$file")
  [[ "$kind" == "PE32+ executable (DLL)"*"x86-64"*"MS Windows"* ]] || check_fail "$file is \"$kind\", not a 64-bit Windows DLL"
  dump=$(x86_64-w64-mingw32-objdump -p "$file")
  grep -qE '^\s+\[ *[0-9]+\] luaopen_mcp$' <<<"$dump" || check_fail "$file does not export luaopen_mcp"
  local lua=0 system=0 dll want_dll
  want_dll=$(lua_dll "$abi")
  while read -r dll; do
    dll=${dll,,}
    if [ "$dll" = "$want_dll" ]; then
      lua=$((lua + 1))
    elif [[ " $WINDOWS_DLLS " == *" $dll "* || "$dll" == api-ms-win-* ]]; then
      system=$((system + 1))
    else
      check_fail "$file imports $dll, which is neither its Lua's nor Windows'"
    fi
  done < <(sed -n 's/^\s*DLL Name: //p' <<<"$dump" | sort -u)
  [ "$lua" -eq 1 ] || check_fail "$file does not import the Lua C API from $want_dll"
  echo "check: win32-x86_64 $abi: $kind; exports luaopen_mcp; imports $want_dll and $system system DLLs"
}
