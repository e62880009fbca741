#!/bin/sh
# Runs the busted suite under one Lua runtime, in a copy of the checkout of
# its own (target/suite/RUNTIME) whose ./mcp.so is that runtime's module:
# two runtimes' passes can then run side by side, one per core, each
# loading its own build. The copy shares the npm, Python and Rust peers
# and cargo's target directory with the checkout.
#   scripts/suite.sh RUNTIME MODULE [busted options and spec files...]
# RUNTIME may carry a suffix naming a variant of its module
# ("5.4+portable"): the copy is then its own.
set -eu
cd "$(dirname "$0")/.."
root=$PWD
runtime=$1 module=$2
shift 2
case "${runtime%+*}" in
  5.1|5.2|5.3|5.4) bin=lua${runtime%+*} ;;
  luajit) bin=luajit ;;
  *) echo "no Lua runtime $runtime" >&2; exit 2 ;;
esac
copy=target/suite/$runtime
rm -rf "$copy"
mkdir -p "$copy"
tar -c --exclude=./target --exclude=./.git --exclude=./mcp.so --exclude=./dist \
  --exclude=./spec/peers/node_modules --exclude=./spec/peers/python --exclude=./spec/peers/python-v1 . |
  tar -x -C "$copy"
ln -s "$root/spec/peers/node_modules" "$copy/spec/peers/node_modules"
for venv in python python-v1; do
  if [ -d "spec/peers/$venv" ]; then ln -s "$root/spec/peers/$venv" "$copy/spec/peers/$venv"; fi
done
# The Rust peers scripts/deps.sh builds (target/peers).
mkdir -p "$copy/target"
if [ -d target/peers ]; then ln -s "$root/target/peers" "$copy/target/peers"; fi
cp "$module" "$copy/mcp.so"
cd "$copy"
# A cache directory of its own: the eras the specs find are remembered
# there (see src/era/remembered.rs), and a pass starts knowing none.
XDG_CACHE_HOME="$root/$copy/.cache" CARGO_TARGET_DIR="$root/target" MCP_LUA=$bin exec "$bin" "$(command -v busted)" "$@"
