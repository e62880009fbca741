#!/bin/sh
# bench/cold_demo.sh [COMMIT] - how long a newcomer waits for the demo:
# `make demo` in a fresh clone (no target/ yet; crates already downloaded
# into cargo's cache, so it is the build, not the network), from the start
# to the demo's last line. COMMIT checks out another commit first, for a
# before and after on the same machine. Not part of `make bench`: it keeps
# both cores busy for a minute and a half.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
git clone -q "$root" "$dir/lua-mcp"
cd "$dir/lua-mcp"
if [ $# -gt 0 ]; then git checkout -q "$1"; fi
start=$(date +%s.%N)
make demo > "$dir/demo.log" 2>&1 || { tail -20 "$dir/demo.log"; exit 1; }
end=$(date +%s.%N)
crates=$(grep -c 'Compiling' "$dir/demo.log" || true)
awk -v s="$start" -v e="$end" -v c="$crates" -v at="$(git rev-parse --short HEAD)" \
  'BEGIN { printf "cold make demo at %s: %.1f s, %d crates compiled\n", at, e - s, c }'
