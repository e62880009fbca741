#!/usr/bin/env bash
# Runs every client scenario of the conformance suite against our client,
# at every protocol revision the suite lists and each extension once, and
# prints one line per run: scenario, revision, passed/total checks,
# verdict. A private cache directory: eras found here are not remembered
# for the user's own servers.
set -u
cd "$(dirname "$0")/../peers"
# The suite needs node 22, carried in node_modules/.bin.
PATH="$PWD/node_modules/.bin:$PATH"
suite=node_modules/.bin/conformance
client="lua5.4 $PWD/../conformance/client.lua"
export XDG_CACHE_HOME
XDG_CACHE_HOME=$(mktemp -d)
trap 'rm -rf "$XDG_CACHE_HOME"' EXIT
run() {
  # The skills scenarios whose task is to use a skill: the client loads it.
  case $1 in sep-2640-client-verify-*) task=" --use-skills" ;; *) task="" ;; esac
  out=$(timeout 120 $suite client --command "$client$task" --scenario "$1" ${2:+--spec-version "$2"} 2>&1)
  checks=$(printf '%s\n' "$out" | sed -n 's/^Passed: \([0-9]*\/[0-9]*\).*/\1/p' | tail -1)
  verdict=$(printf '%s\n' "$out" | grep -q 'OVERALL: PASSED' && echo PASS || echo FAIL)
  printf '%-42s %-11s %-8s %s\n' "$1" "${2:-extension}" "${checks:-?}" "$verdict"
}
for revision in 2025-03-26 2025-06-18 2025-11-25 2026-07-28; do
  for scenario in $($suite list --client --spec-version "$revision" 2>/dev/null | sed -n 's/^  - \([^ ]*\).*/\1/p'); do
    run "$scenario" "$revision"
  done
done
for scenario in $($suite list --client 2>/dev/null | sed -n 's/^  - \([^ ]*\) \[extension\]$/\1/p'); do
  run "$scenario"
done
