#!/bin/sh
# The busted passes of `make test`, in two lanes side by side (two cores):
# each lane runs its runtimes one after the other, each in a copy of the
# checkout of its own (scripts/suite.sh), with the module `make
# test-modules` kept for it. A pass's output goes to target/suite/RUNTIME.log
# and is shown whole if it failed, its summary if not. The #peer specs
# (real servers, the official conformance suites) run under 5.4 only: what
# differs between runtimes is values and strings, which the differential
# and fuzz specs cover under every one.
#   scripts/test-lua.sh "5.4 luajit" "5.1 5.3"
set -u
cd "$(dirname "$0")/.."
mkdir -p target/suite
rm -f target/suite/*.failed

lane() {
  for runtime in $1; do
    skip=--exclude-tags=peer
    [ "$runtime" = 5.4 ] && skip=
    log=target/suite/$runtime.log
    if sh scripts/suite.sh "$runtime" "target/test-module/mcp-$runtime.so" -o utfTerminal $skip > "$log" 2>&1; then
      echo "== busted on $runtime: $(grep -E 'successes' "$log" | tail -1)"
    else
      touch "target/suite/$runtime.failed"
      echo "== busted on $runtime FAILED:"
      cat "$log"
    fi
  done
}

pids=
for runtimes in "$@"; do
  lane "$runtimes" &
  pids="$pids $!"
done
for pid in $pids; do wait "$pid"; done
if ls target/suite/*.failed >/dev/null 2>&1; then exit 1; fi
