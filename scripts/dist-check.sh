#!/usr/bin/env bash
# `make dist-check` (part of `make test`): the Linux artifacts in $DIST_DIR
# (dist/ unless set; `make dist-check` builds them in a folder of their
# own) installed the way users install them, with no Rust on PATH, and used.
#
#   linux-x86_64   its binary rock into a fresh LuaRocks tree for Lua 5.1,
#                  LuaJIT and Lua 5.4; from each tree the README's first
#                  agent and the lua-mcp command; the Neovim loader from
#                  the artifacts in LuaJIT and in Neovim
#   linux-aarch64  the same rock installs and agent runs, by Debian's arm64
#                  Lua 5.1, LuaJIT and Lua 5.4 (and LuaRocks run by the
#                  arm64 Lua) under qemu-user; the loader in arm64 LuaJIT
#   refusals       a module whose bytes are not the manifest's, through the
#                  loader (nothing installed, nothing loaded), and a rock
#                  whose bytes are not SHA256SUMS', through sha256sum -c
#
# Each check prints one line; the last line counts them.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
ROCK=lua-mcp-$VERSION-1
dist=$PWD/${DIST_DIR:-dist}
work=$PWD/target/dist-check
rm -rf "$work"
mkdir -p "$work"
passed=0
ok() {
  passed=$((passed + 1))
  echo "dist-check: ok: $*"
}
fail() {
  echo "dist-check: FAILED: $*" >&2
  exit 1
}

# No cargo, no rustc: what a user without Rust has.
NO_RUST_PATH=$(tr ':' '\n' <<<"$PATH" | grep -v -e '/\.cargo/' -e '/\.rustup/' -e 'target/tools' | paste -sd:)
if PATH=$NO_RUST_PATH command -v cargo >/dev/null; then fail "cargo is still on PATH: $(PATH=$NO_RUST_PATH command -v cargo)"; fi

# Where the agent runs: the README's code, and the bundled server it
# names by a relative path; no module of the checkout's is in reach.
mkdir -p "$work/agent/lua"
cp -r lua/servers lua/trace.lua "$work/agent/lua/"
lua5.4 scripts/readme-agent.lua write "$work/agent/agent.lua"

# The runtimes a check runs by: NAME LUAROCKS_LUA_VERSION INTERPRETER.
RUNTIMES=("lua5.1 5.1 lua5.1" "luajit 5.1 luajit" "lua5.4 5.4 lua5.4")

# LuaRocks' configuration for one runtime: which interpreter its wrappers
# run (a LuaJIT tree is a 5.1 tree whose scripts run luajit).
rocks_config() { # FILE INTERPRETER_PATH
  cat >"$1" <<EOF
lua_interpreter = "$(basename "$2")"
variables = { LUA_BINDIR = "$(dirname "$2")", LUA_DIR = "$(dirname "$(dirname "$2")")" }
EOF
}

# Installs PLATFORM's rock for one runtime and runs the agent and the
# command-line tool from the tree. RUN prefixes what runs as the target
# (nothing, or qemu); INTERPRETER is that Lua's path.
install_and_run() { # PLATFORM NAME LUA_VERSION INTERPRETER RUN...
  local platform=$1 name=$2 lua_version=$3 interpreter=$4
  shift 4
  local tree=$work/$platform-$name config=$work/$platform-$name.config.lua
  rocks_config "$config" "$interpreter"
  PATH=$NO_RUST_PATH LUAROCKS_CONFIG=$config "$@" "$interpreter" /usr/bin/luarocks \
    --lua-version "$lua_version" --tree "$tree" install "$dist/$ROCK.$platform.rock" >"$tree.install.log" 2>&1 ||
    fail "$platform $name: luarocks install: $(cat "$tree.install.log")"
  local lua_path lua_cpath
  lua_path="$tree/share/lua/$lua_version/?.lua;$tree/share/lua/$lua_version/?/init.lua;;"
  lua_cpath="$tree/lib/lua/$lua_version/?.so;;"
  (
    cd "$work/agent"
    PATH=$NO_RUST_PATH LUA_PATH=$lua_path LUA_CPATH=$lua_cpath timeout 120 "$@" "$interpreter" agent.lua
  ) >"$tree.agent.out" 2>&1 || fail "$platform $name: the first agent failed: $(cat "$tree.agent.out")"
  lua5.4 scripts/readme-agent.lua check "$tree.agent.out" || fail "$platform $name: the first agent"
  local which
  which=$(cd "$work/agent" && LUA_PATH=$lua_path LUA_CPATH=$lua_cpath "$@" "$interpreter" -e \
    "local m = require('mcp'); io.write(tostring(m.native), ' ', m._VERSION, ' ', package.loaded.mcp == m and 'registered' or '?')")
  [ "$which" = "true lua-mcp $VERSION registered" ] || fail "$platform $name: require('mcp') gave: $which"
  local cli=$tree/lib/luarocks/rocks-$lua_version/lua-mcp/$VERSION-1/bin/lua-mcp counted
  counted=$(cd "$work/agent" && PATH=$NO_RUST_PATH LUA_PATH=$lua_path LUA_CPATH=$lua_cpath timeout 60 "$@" "$interpreter" \
    "$cli" --mcp "lua5.4 lua/servers/counter.lua" call increment by=2)
  [ "$counted" = 2 ] || fail "$platform $name: lua-mcp call printed: $counted"
  ok "$platform $name: the rock installed with no cargo, the first agent ran from the tree, lua-mcp called a tool"
}

# The loader takes the module for this runtime out of the artifacts' folder,
# checks it and loads it.
loader_loads() { # PLATFORM INTERPRETER RUN...
  local platform=$1 interpreter=$2
  shift 2
  local dir=$work/$platform-loader loaded
  loaded=$(LUA_PATH="$PWD/lua/?.lua;;" "$@" "$interpreter" -e "
    local mcp = require('mcp.install').load({ from = '$dist', dir = '$dir' })
    io.write(tostring(mcp.native), ' ', mcp._VERSION, ' ', require('mcp.install').loaded_from)")
  [ "$loaded" = "true lua-mcp $VERSION $dir/mcp-$VERSION-$platform-luajit.so" ] ||
    fail "$platform: the loader gave: $loaded"
  ok "$platform: the loader installed and loaded the LuaJIT module from ${dist#"$PWD/"}/"
}

# --- linux-x86_64 ------------------------------------------------------
for runtime in "${RUNTIMES[@]}"; do
  read -r name lua_version interpreter <<<"$runtime"
  install_and_run linux-x86_64 "$name" "$lua_version" "$(command -v "$interpreter")"
done
loader_loads linux-x86_64 luajit
# And in Neovim, where the folder is made with vim.fn.mkdir and the
# platform read with vim.loop.
checkout=$PWD
nvim_out=$(cd "$work" && timeout 60 nvim --headless -u NONE --cmd "set rtp^=$checkout" -c "lua
  local mcp = require('mcp.install').load({ from = '$dist', dir = '$work/nvim-loader' })
  io.stdout:write(tostring(mcp.native), ' ', mcp._VERSION, ' ', require('mcp').PROTOCOL_VERSION)" -c 'qa!' 2>&1)
[[ "$nvim_out" == "true lua-mcp $VERSION 2025-06-18"* ]] || fail "Neovim's loader gave: $nvim_out"
ok "linux-x86_64: the loader in Neovim installed the LuaJIT module, and require('mcp') then gave it"

# --- linux-aarch64, under qemu-user --------------------------------------
bash scripts/arm64-root.sh
root=$PWD/target/tools/arm64/root
for runtime in "${RUNTIMES[@]}"; do
  read -r name lua_version interpreter <<<"$runtime"
  install_and_run linux-aarch64 "$name" "$lua_version" "$root/usr/bin/$interpreter" qemu-aarch64 -L "$root"
done
loader_loads linux-aarch64 "$root/usr/bin/luajit" qemu-aarch64 -L "$root"

# --- refusals --------------------------------------------------------------
bad=$work/corrupt-dist
mkdir -p "$bad"
cp "$dist/manifest.json" "$bad/"
cp "$dist/mcp-$VERSION-linux-x86_64-luajit.so" "$bad/"
# One byte changed in the middle: a download that went wrong.
printf 'X' | dd of="$bad/mcp-$VERSION-linux-x86_64-luajit.so" bs=1 seek=100000 conv=notrunc status=none
refused=$(LUA_PATH="$PWD/lua/?.lua;;" luajit -e "
  local path, err = require('mcp.install').ensure({ from = '$bad', dir = '$work/corrupt-install' })
  io.write(tostring(path), ' | ', err, ' | ', tostring(package.loaded.mcp))")
case "$refused" in
"nil | lua-mcp: $bad/mcp-$VERSION-linux-x86_64-luajit.so has SHA-256 "*", but the manifest says "*": the download is corrupt or not this release's; nothing was installed | nil") ;;
*) fail "a corrupt module was not refused: $refused" ;;
esac
[ -z "$(ls -A "$work/corrupt-install")" ] || fail "a refused module left files: $(ls "$work/corrupt-install")"
ok "a module whose SHA-256 is not the manifest's is refused, and nothing is installed or loaded"
cp "$dist/SHA256SUMS" "$dist/$ROCK.linux-x86_64.rock" "$bad/"
printf 'X' | dd of="$bad/$ROCK.linux-x86_64.rock" bs=1 seek=100000 conv=notrunc status=none
if (cd "$bad" && sha256sum -c --ignore-missing --quiet SHA256SUMS >/dev/null 2>&1); then fail "sha256sum -c passed a corrupt rock"; fi
ok "a rock whose SHA-256 is not SHA256SUMS' fails sha256sum -c, the check docs/install.md gives before installing"

echo "dist-check: $passed checks passed"
