#!/usr/bin/env bash
# Usage: .ci/timed.sh NAME COMMAND...
# Runs COMMAND, then says how long it took ("time NAME: 1:23", on standard error), whether it passed or not, and
# appends that line to the file $TIMINGS where it is set (.ci/run collects them). Exits with COMMAND's status.
set -uo pipefail
name=$1
shift
start=$(date +%s)
"$@"
status=$?
seconds=$(($(date +%s) - start))
line=$(printf 'time %s: %d:%02d' "$name" $((seconds / 60)) $((seconds % 60)))
echo "$line" >&2
if [ -n "${TIMINGS:-}" ]; then
  echo "$line" >>"$TIMINGS"
fi
exit "$status"
