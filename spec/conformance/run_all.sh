#!/usr/bin/env bash
# Runs every client scenario of the conformance suite against our client
# and prints one line per scenario: name, passed/total checks, verdict.
set -u
cd "$(dirname "$0")/../peers"
# The suite needs node 22, carried in node_modules/.bin.
PATH="$PWD/node_modules/.bin:$PATH"
suite=node_modules/.bin/conformance
client="lua5.4 $PWD/../conformance/client.lua"
for scenario in $($suite list --client 2>/dev/null | sed -n 's/^  - \([^ ]*\).*/\1/p'); do
  out=$(timeout 120 $suite client --command "$client" --scenario "$scenario" 2>&1)
  checks=$(printf '%s\n' "$out" | sed -n 's/^Passed: \([0-9]*\/[0-9]*\).*/\1/p' | tail -1)
  verdict=$(printf '%s\n' "$out" | grep -q 'OVERALL: PASSED' && echo PASS || echo FAIL)
  printf '%-48s %-8s %s\n' "$scenario" "${checks:-?}" "$verdict"
done
