#!/bin/sh
# What `luarocks make` runs (see lua-mcp-scm-1.rockspec): builds mcp.so for
# the Lua that luarocks targets and leaves it at target/rock/mcp.so; the
# checkout's own ./mcp.so is left alone.
#   scripts/rock-build.sh LUA_INTERPRETER
# The interpreter says which runtime it is (LuaJIT reports 5.1 as its
# _VERSION; its `jit` table tells it apart). The target directories are
# the one `make build` uses, so a tree built there is reused;
# LUA_MCP_PROFILE names another cargo profile (the specs use test-module,
# and the modules the suite built when there are: see LUA_MCP_MODULES).
set -eu
cd "$(dirname "$0")/.."
runtime=$("$1" -e 'io.write(jit and "luajit" or _VERSION:sub(5))')
case "$runtime" in
  luajit) feature=luajit ;;
  5.1|5.2|5.3|5.4) feature=$(echo "lua$runtime" | tr -d .) ;;
  *) echo "lua-mcp: no build for Lua $runtime" >&2; exit 1 ;;
esac
mkdir -p target/rock
# LUA_MCP_MODULES names a directory of modules already built from this
# checkout by the same cargo command, one per runtime as mcp-RUNTIME.so
# (the test suite's, target/test-module): this runtime's is installed as
# it is. Built again here, each runtime's build replaced the other's in
# cargo's output and was compiled anew: 50 s of processor time each.
prebuilt=${LUA_MCP_MODULES:+$LUA_MCP_MODULES/mcp-$runtime.so}
if [ -n "$prebuilt" ] && [ -f "$prebuilt" ]; then
  echo "lua-mcp: installing $prebuilt (built for Lua $runtime)"
  sh scripts/install-module.sh "$prebuilt" target/rock/mcp.so
  exit 0
fi
profile=${LUA_MCP_PROFILE:-release}
cargo build --profile "$profile" --locked --no-default-features --features "$feature,module"
sh scripts/install-module.sh "${CARGO_TARGET_DIR:-target}/$profile/libmcp.so" target/rock/mcp.so
