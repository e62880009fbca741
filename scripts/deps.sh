#!/usr/bin/env bash
# Installs what the demo (`deps.sh demo`), the test suite (`deps.sh test`)
# or the benchmarks (`deps.sh bench`) need on a fresh Debian machine, and
# nothing that is already there.
#
# `make test` installs `test` in two halves: `deps.sh system` (what the
# cargo tests need: cargo, the system Lua and its headers) before the
# cargo tests, and `deps.sh peers` (the other Debian packages, npm, the
# Python environments, the Rust peers) beside them, so that the downloads
# and the peers' builds fill what the cargo tests leave of the two cores.
set -euo pipefail
cd "$(dirname "$0")/.."

mode=${1:-test}
system=1 peers=1
case "$mode" in
  system) mode=test peers= ;;
  peers) mode=test system= ;;
esac

not_installed() {
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed' || echo "$pkg"
  done
}

# Installs the packages named before `--` and, without what they only
# recommend, those after it.
apt_install() {
  local want=() plain=() sudo=""
  while [ $# -gt 0 ] && [ "$1" != -- ]; do want+=("$1"); shift; done
  [ $# -eq 0 ] || shift
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  local missing=($(not_installed "${want[@]}")) missing_plain=($(not_installed "$@"))
  [ $((${#missing[@]} + ${#missing_plain[@]})) -gt 0 ] || return 0
  echo "installing: ${missing[*]} ${missing_plain[*]}"
  $sudo apt-get update -qq
  [ ${#missing[@]} -eq 0 ] || DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
  [ ${#missing_plain[@]} -eq 0 ] ||
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing_plain[@]}" >/dev/null
}

install_system() {
  local want=(lua5.4)
  # liblua5.4-dev and pkg-config: the cargo tests link the system Lua;
  # curl: the specs read back what their own servers saw with it.
  [ "$mode" = demo ] || want+=(liblua5.4-dev pkg-config curl)
  # gcc builds the minimal echo server and the pipe floor; curl is what the
  # pure-Lua module's HTTP transport runs.
  [ "$mode" != bench ] || want+=(gcc curl)
  apt_install "${want[@]}"
  command -v cargo >/dev/null || { echo "cargo is needed: install Rust from https://rustup.rs" >&2; exit 1; }
}

install_peers() {
  [ "$mode" != demo ] || return 0
  # openssl makes the certificates of the HTTPS spec.
  # lua5.1, lua5.3 and luajit: the suite runs on each (busted and luv
  # from Debian serve them all); lua-luv: the event-loop specs; neovim:
  # its smoke spec; luarocks: the install spec; file and llvm (llvm-nm):
  # `make cross` checks the macOS and FreeBSD modules with them; mingw-w64
  # and Wine (64-bit): the Windows module, Lua, LuaJIT and busted's C
  # parts are built with the one and run under the other
  # (scripts/windows.sh); Wine without what it only recommends (the 32-bit
  # half, fonts, desktop integration): the Windows pass runs 64-bit
  # console programs. qemu-user, zip and unzip: the install check packs
  # binary rocks, installs them with luarocks and runs the aarch64 ones
  # under emulation, with Debian's arm64 Lua (scripts/arm64-root.sh, from
  # the arm64 architecture added here).
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $sudo dpkg --add-architecture arm64
    $sudo apt-get update -qq
  fi
  apt_install lua-busted lua-luv lua5.1 lua5.3 luajit neovim luarocks openssl file llvm qemu-user zip unzip \
    -- gcc-mingw-w64-x86-64-posix wine wine64

  # Real MCP peers, pinned by spec/peers/package-lock.json.
  if [ ! -d spec/peers/node_modules/@modelcontextprotocol/server-everything ] ||
     [ spec/peers/package-lock.json -nt spec/peers/node_modules/.package-lock.json ]; then
    (cd spec/peers && npm ci --no-audit --no-fund --loglevel=error)
  fi
  # Python peers, pinned by spec/peers/requirements.txt, in a virtual
  # environment of their own (made again when the pins change).
  if [ ! -x spec/peers/python/bin/mcp-server-sqlite ] ||
     [ spec/peers/requirements.txt -nt spec/peers/python/installed ]; then
    rm -rf spec/peers/python
    python3 -m venv spec/peers/python
    spec/peers/python/bin/pip install --quiet --disable-pip-version-check -r spec/peers/requirements.txt
    touch spec/peers/python/installed
  fi
  # The Tasks peer (rmcp 3.11, the only SDK that runs 2026-07-28 tasks),
  # pinned by its own Cargo.lock, built again when its sources change.
  tasks_peer=target/peers/release/rmcp-tasks-peer
  if [ ! -x "$tasks_peer" ] || [ -n "$(find spec/peers/rmcp_tasks -newer "$tasks_peer" -type f | head -1)" ]; then
    cargo build --quiet --release --locked --manifest-path spec/peers/rmcp_tasks/Cargo.toml --target-dir target/peers
  fi
  # The rmcp client (bench/rmcp_client, its own lock), a client of the Lua
  # server in the server specs, over stdio: built without its HTTP
  # transport (reqwest would double its build), beside the Tasks peer with
  # that peer's profile, so that the crates both locks agree on are built
  # once (make bench builds the whole client, optimised, for the timings).
  rmcp_client=target/peers/release/rmcp-bench-client
  if [ ! -x "$rmcp_client" ] || [ -n "$(find bench/rmcp_client -newer "$rmcp_client" -type f | head -1)" ]; then
    CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_DEBUG=false CARGO_PROFILE_RELEASE_INCREMENTAL=false \
      cargo build --quiet --release --locked --no-default-features \
      --manifest-path bench/rmcp_client/Cargo.toml --target-dir target/peers
  fi
  # The legacy Python peer (the SDK's last 1.x), pinned by
  # spec/peers/requirements-v1.txt, in a virtual environment of its own.
  if [ ! -x spec/peers/python-v1/bin/mcp ] ||
     [ spec/peers/requirements-v1.txt -nt spec/peers/python-v1/installed ]; then
    rm -rf spec/peers/python-v1
    python3 -m venv spec/peers/python-v1
    spec/peers/python-v1/bin/pip install --quiet --disable-pip-version-check -r spec/peers/requirements-v1.txt
    touch spec/peers/python-v1/installed
  fi
}

[ -z "$system" ] || install_system
[ -z "$peers" ] || install_peers
