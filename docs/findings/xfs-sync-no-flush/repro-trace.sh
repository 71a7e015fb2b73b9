#!/usr/bin/env bash
# xfs's sync(2) without a cache flush, seen in a block trace: no device-mapper needed.
# Runs repro.c's workload N times (default 20), each on a fresh xfs over a loop device,
# with the loop device's block requests traced (tracefs block_rq_issue), and says for
# each run whether a data write issued during the sync was followed by a flush before
# sync returned. Needs root, xfsprogs, a C compiler.
#
#   repro-trace.sh [N] [--pin-clock | --other]
#
# Prints one line per run ("same-tick yes|no", then "NO FLUSH after the sync's writes"
# or "flushed") and a tally; REPRO_KEEP_TRACE=FILE keeps the first failing run's trace. --pin-clock is for a throw-away VM only (repro.c).
set -euo pipefail
N=${1:-20}
PIN=${2:-}
RUN=run
[ "$PIN" = --other ] && { RUN=run-other; PIN=""; }
HERE=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d /var/tmp/xfs-sync-repro.XXXXXX)
cc -O2 -o "$W/repro" "$HERE/repro.c"
T=$W/tracefs
mkdir -p "$T" "$W/mnt"
mount -t tracefs nodev "$T"
I=$T/instances/xfs-sync-repro-$$
mkdir "$I"
LOOP=""
cleanup() {
  set +e
  mountpoint -q "$W/mnt" && umount "$W/mnt"
  [ -n "$LOOP" ] && losetup -d "$LOOP"
  [ -d "$I" ] && { echo 0 > "$I/tracing_on"; rmdir "$I"; }
  umount "$T"
  rm -rf "$W"
}
trap cleanup EXIT

bad=0
same=0
for i in $(seq 1 "$N"); do
  truncate -s 0 "$W/disk.img"; truncate -s 512M "$W/disk.img"
  LOOP=$(losetup -f --show "$W/disk.img")
  mkfs.xfs -q -f "$LOOP"
  mount "$LOOP" "$W/mnt"
  "$W/repro" setup "$W/mnt/foo"
  dev=$(($(stat -c '0x%t' "$LOOP") << 20 | $(stat -c '0x%T' "$LOOP")))
  echo 0 > "$I/tracing_on"
  echo > "$I/trace"
  echo "dev == $dev" > "$I/events/block/block_rq_issue/filter"
  echo 1 > "$I/events/block/block_rq_issue/enable"
  echo 1 > "$I/tracing_on"
  out=$(REPRO_TRACE_MARKER=$I/trace_marker "$W/repro" $RUN "$W/mnt/foo" $PIN)
  echo 0 > "$I/tracing_on"
  echo 0 > "$I/events/block/block_rq_issue/enable"
  # Between the markers: the sync's requests. rwbs holds F for a flush (preflush or FUA).
  verdict=$(awk '
    /repro: sync begins/ {on=1; next}
    /repro: sync returned/ {on=0}
    on && /block_rq_issue/ {
      for (f = 1; f <= NF; f++) if ($f ~ /^[A-Z]+$/ && $(f-1) ~ /^[0-9]+,[0-9]+$/) rwbs = $f
      if (rwbs ~ /F/) pending = 0; else if (rwbs ~ /W/) pending++
      n++
    }
    END { if (pending) printf "NO FLUSH after the sync'"'"'s last %d write request(s)", pending;
          else printf "flushed (%d requests)", n }' "$I/trace")
  echo "run $i: $out; $verdict"
  case "$verdict" in
    NO*) [ "$bad" = 0 ] && cp "$I/trace" "${REPRO_KEEP_TRACE:-/dev/null}"; bad=$((bad + 1)) ;;
  esac
  case "$out" in *"same-tick yes"*) same=$((same + 1)) ;; esac
  umount "$W/mnt"
  losetup -d "$LOOP"; LOOP=""
done
echo "$(uname -r): sync returned with unflushed writes in $bad of $N runs (same tick in $same of $N)"
