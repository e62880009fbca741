#!/usr/bin/env bash
# The Windows pass of `make test`: the module built for
# x86_64-pc-windows-gnu (by `make cross`, which checks its format first)
# loaded by a Windows lua.exe (5.4) and luajit.exe under Wine, running
# busted on the specs that hold on Windows: spec/windows_spec.lua (the
# stdio transport, its Job Object, the async API, server-everything on a
# Windows node), the differential and fuzz specs (the module against
# the reference, byte for byte), spec/install_spec.lua's Windows
# cases (the loader's commands through cmd.exe, certutil's digest), and
# spec/server_spec.lua (a Lua server on mcp.server over Windows stdio).
# Servers run under Wine too, but for the HTTP one
# (spec/servers/http_faults.js on the Linux node; its loopback is
# Wine's): the Windows client is what is under test.
#
#   scripts/windows-pass.sh [busted options and spec files...]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
bash scripts/windows.sh
. scripts/linted.sh
tools=$root/target/tools/windows
export WINEPREFIX=$tools/prefix WINEDEBUG=-all WINEDLLOVERRIDES="mscoree,mshtml="
win() { printf 'Z:%s' "${1//\//\\}"; }

SPECS=(spec/windows_spec.lua spec/differential_spec.lua spec/fuzz_spec.lua spec/install_spec.lua spec/server_spec.lua)
[ $# -gt 0 ] && SPECS=("$@")
out=target/suite
mkdir -p "$out"
failed=0
# Port 0: the kernel's choice, which the server prints. Its log exists
# before the server starts: the background shell that would make it can
# lose the race to the first look on a busy machine (beside the lanes).
: >"$out/windows-http.log"
node spec/servers/http_faults.js 0 >>"$out/windows-http.log" 2>&1 &
http_server=$!
trap 'kill $http_server 2>/dev/null || true' EXIT
port=
for _ in $(seq 100); do
  port=$(sed -n 's/^listening on \([0-9]*\)$/\1/p' "$out/windows-http.log")
  [ -n "$port" ] && break
  sleep 0.1
done
[ -n "$port" ] || { echo "== the HTTP server for the Windows pass did not start:"; cat "$out/windows-http.log"; exit 1; }
export MCP_HTTP_FAULTS=http://127.0.0.1:$port
for runtime in ${RUNTIMES:-lua.exe luajit.exe}; do
  abi=54 version=5.4 features=lua54
  [ "$runtime" = luajit.exe ] && abi=51 version=5.1 features=luajit
  # Built as make cross builds it (linted), so that its build is reused.
  linted nice cargo build --quiet --profile cross-check --locked --target x86_64-pc-windows-gnu \
    --no-default-features --features "$features,module"
  # A copy of the checkout of its own, as each Linux pass has.
  copy=target/suite/windows-$abi
  rm -rf "$copy"
  mkdir -p "$copy"
  tar -c --exclude=./target --exclude=./.git --exclude=./mcp.so --exclude=./mcp.dll \
    --exclude=./spec/peers/node_modules --exclude=./spec/peers/python --exclude=./spec/peers/python-v1 . |
    tar -x -C "$copy"
  ln -s "$root/spec/peers/node_modules" "$copy/spec/peers/node_modules"
  cp target/x86_64-pc-windows-gnu/cross-check/mcp.dll "$copy/mcp.dll"
  started=$SECONDS
  if (
    cd "$copy"
    # busted and its Lua dependencies are Debian's (pure Lua); their C
    # parts are ours, built for Windows by scripts/windows.sh. A cache
    # folder of its own: the era cache goes to %LOCALAPPDATA%\lua-mcp.
    mkdir -p appdata
    LUA_PATH="Z:\\usr\\share\\lua\\$version\\?.lua;Z:\\usr\\share\\lua\\$version\\?\\init.lua;;" \
    LUA_CPATH="$(win "$tools/clib$abi")\\?.dll;.\\?.dll" \
    WINEPATH="$(win "$tools/bin")" MCP_LUA=$runtime MCP_ROOT="$(win "$root/$copy")" \
    LOCALAPPDATA="$(win "$root/$copy/appdata")" \
      timeout 600 wine "$tools/bin/$runtime" 'Z:\usr\bin\busted' --cpath='.\?.dll' -o utfTerminal "${SPECS[@]}"
  ) >"$out/windows-$abi.log" 2>&1; then
    echo "== busted on Windows $runtime (Wine): $(grep -a successes "$out/windows-$abi.log" | tail -1) ($((SECONDS - started)) s)"
  else
    echo "== busted on Windows $runtime (Wine) FAILED:"
    cat "$out/windows-$abi.log"
    failed=1
  fi
done
wineserver -k 2>/dev/null || true
exit $failed
