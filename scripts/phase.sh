#!/bin/sh
# Runs a phase of `make test` and says how long it took, and how much
# processor time it used (user and system, of everything it ran and
# waited for; Linux only): on two cores, the suite's wall time is about
# half the processor time of all its phases, so that is the figure to
# cut.
#   scripts/phase.sh NAME command...
# The figures go to stdout and to target/phases.log, one line a phase.
name=$1
shift
started=$(date +%s)
"$@"
status=$?
took=$(($(date +%s) - started))
# Fields 16 and 17 of /proc/PID/stat, the waited-for children's user and
# system time in clock ticks (the name in parentheses, field 2, may hold
# spaces: the fields are counted after it).
cpu=
if [ -r /proc/$$/stat ]; then
  cpu=$(sed 's/.*) //' /proc/$$/stat | awk -v hz="$(getconf CLK_TCK)" '{ printf ", %d s of CPU", ($14 + $15) / hz }')
fi
mkdir -p target
echo "== phase $name: $took s$cpu (exit $status)" | tee -a target/phases.log
exit $status
