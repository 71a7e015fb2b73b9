#!/bin/bash
# Kill + cleanup + table, in a loop: the run right after `bob cleanup` reclaimed a SIGKILLed
# bob must never fail on its FUSE disk (issue 13's "Software caused connection abort").
# Usage: scripts/stress-kill.sh [ROUNDS] [BOB]   (root; outside CI: a few minutes a round)
set -u
ROUNDS=${1:-6}
BOB=${2:-target/release/bob}
WORK=$(mktemp -d /tmp/bob-stress-kill.XXXXXX)
failures=0
infra_errors=0
retried_cells=0
for i in $(seq 1 "$ROUNDS"); do
  mkdir -p "$WORK/scr-$i"
  "$BOB" table --fs ext4-ordered,btrfs --property append-then-append \
    --out "$WORK/killed-$i" --scratch "$WORK/scr-$i" >/dev/null 2>&1 &
  pid=$!
  sleep 8
  kill -9 "$pid"
  # Cleanup first: a SIGKILLed bob can hang in its own exit, closing a loop device whose
  # I/O waits on its own FUSE disk, whose serving threads are gone; `bob cleanup` aborts
  # that connection, and only then does the process end.
  "$BOB" cleanup >"$WORK/cleanup-$i.log" 2>&1
  wait "$pid" 2>/dev/null
  timeout 600 "$BOB" table --fs orderless,nofs --property detects-inconsistency \
    --out "$WORK/out-$i" --scratch "$WORK/scr-$i" --format json \
    >"$WORK/run-$i.json" 2>"$WORK/run-$i.log"
  rc=$?
  # 0 held, 1 violation found (orderless violates): both are a finished table. An
  # infrastructure failure of one state exits 1 too when another state violates, so the
  # cells' infra-error verdicts and retries are counted from the JSON.
  infra=$(grep -oE '"infra-error"|"infra_error": *[1-9]' "$WORK/run-$i.json" | wc -l)
  retried=$(grep -o '"infra_retries": *[1-9][0-9]*' "$WORK/run-$i.json" | wc -l)
  infra_errors=$((infra_errors + infra)); retried_cells=$((retried_cells + retried))
  if [ "$rc" -gt 1 ] || [ "$infra" -gt 0 ] || grep -q "connection abort" "$WORK/run-$i.log"; then
    failures=$((failures + 1))
    echo "round $i: exit $rc, infra-error cells $infra"; tail -3 "$WORK/run-$i.log"
  else
    echo "round $i: finished (exit $rc, cells with retried states $retried)"
  fi
done
leaks=$(losetup -a | grep -c "$WORK")
mounts=$(grep -c "$WORK" /proc/mounts)
echo "rounds $ROUNDS, failed $failures, infra-error cells $infra_errors, cells with retried states $retried_cells, loop devices left $leaks, mounts left $mounts"
rm -rf "$WORK"
[ "$failures" -eq 0 ] && [ "$leaks" -eq 0 ] && [ "$mounts" -eq 0 ]
