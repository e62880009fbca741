#!/bin/sh
# Runs a phase of `make test` and says how long it took:
#   scripts/phase.sh NAME command...
# The figures go to stdout and to target/phases.log, one line a phase.
name=$1
shift
started=$(date +%s)
"$@"
status=$?
took=$(($(date +%s) - started))
mkdir -p target
echo "== phase $name: $took s (exit $status)" | tee -a target/phases.log
exit $status
