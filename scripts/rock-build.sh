#!/bin/sh
# What `luarocks make` runs (see lua-mcp-scm-1.rockspec): builds mcp.so for
# the Lua that luarocks targets and leaves it at target/rock/mcp.so; the
# checkout's own ./mcp.so is left alone.
#   scripts/rock-build.sh LUA_INTERPRETER
# The interpreter says which runtime it is (LuaJIT reports 5.1 as its
# _VERSION; its `jit` table tells it apart). The target directories are
# the ones `make build LUA=...` uses, so a tree built there is reused.
set -eu
cd "$(dirname "$0")/.."
runtime=$("$1" -e 'io.write(jit and "luajit" or _VERSION:sub(5))')
case "$runtime" in
  5.4) cargo build --release --locked --features module
       built=target/release/libmcp.so ;;
  5.1|5.2|5.3|luajit)
       case "$runtime" in luajit) feature=luajit ;; *) feature=$(echo "lua$runtime" | tr -d .) ;; esac
       cargo build --release --locked --no-default-features --features "$feature,module" --target-dir "target/lua-$runtime"
       built="target/lua-$runtime/release/libmcp.so" ;;
  *) echo "lua-mcp: no build for Lua $runtime" >&2; exit 1 ;;
esac
mkdir -p target/rock
sh scripts/install-module.sh "$built" target/rock/mcp.so
