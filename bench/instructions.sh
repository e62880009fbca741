#!/bin/sh
# instructions.sh - user-space instructions per small call of the Lua
# process, counted by callgrind, which no scheduler regime moves: the
# figure to compare builds by when the VM's timings drift more than the
# change being measured. Two runs of bench/race.lua (1000 and 3000 calls)
# against the C echo server, or the HTTP one when the second argument is
# `http`; the difference over 2000 calls leaves out starting up, the
# handshake and the warm-up. (The figure includes race.lua's own loop: two
# reads of the clock per call, and sorting its timings at the end.)
#
#   sh bench/instructions.sh [path/to/mcp.so] [stdio|http]
#
# Needs valgrind, and `make bench` once for the C servers.
set -eu
cd "$(dirname "$0")/.."
module=${1:-./mcp.so}
# dlopen searches the library path for a bare name, not this directory.
case "$module" in */*) ;; *) module=./$module ;; esac
case "${2:-stdio}" in
stdio) server=target/bench/echo_server ;;
http)
  port=$((38000 + $$ % 2000))
  target/bench/http_echo_server "$port" >/dev/null 2>&1 &
  server_pid=$!
  trap 'kill $server_pid' EXIT
  sleep 0.3
  server=http://127.0.0.1:$port/mcp
  ;;
*) echo "instructions.sh: stdio or http, not $2" >&2; exit 2 ;;
esac
counted() {
  out=$(mktemp)
  log=$(mktemp)
  if ! MCP_SO=$module valgrind --tool=callgrind --callgrind-out-file="$out" lua5.4 bench/race.lua "$1" "$server" \
    >/dev/null 2>"$log"; then
    echo "instructions.sh: bench/race.lua failed under valgrind:" >&2
    grep -v '^==' "$log" >&2
    exit 1
  fi
  sed -n 's/.*Collected : *\([0-9]*\).*/\1/p' "$log"
  rm -f "$out" "$log"
}
short=$(counted 1000)
long=$(counted 3000)
echo "$module, ${2:-stdio}: $(((long - short) / 2000)) instructions per call"
