#!/usr/bin/env bash
# xfs's sync(2) without a cache flush, as a crash state: dm-log-writes records the block
# requests of repro.c's workload on a fresh xfs, with a mark right after sync(2)
# returned; xfstests' replay-log then replays the log up to that mark onto a fresh
# device. dm-log-writes logs a completed write only once a flush (or its own FUA) covers
# it, so that is the crash right after sync returned in which the disk lost its volatile
# cache. Mounted, /foo must read the overwrite (0x33) at 7680.
#
#   repro-dmlogwrites.sh [--runs N] [--pin-clock | --other] [--fs xfs|ext4]
#       in a machine with dm-log-writes (root); replay-log from $REPLAY_LOG, else
#       /opt/xfstests/xfstests-dev/src/log-writes/replay-log (xfstests' src/log-writes)
#   repro-dmlogwrites.sh --vm KERNEL_IMAGE [--out DIR] [same options]
#       boots KERNEL_IMAGE with virtme-ng (BOB_VNG, default /opt/bob-vm-venv/bin/vng;
#       emulation unless VM_ACCEL=kvm) and runs itself there, the output in DIR
#
# --other runs repro.c's run-other (overwrite, then fsync of another file, then sync),
# which needs no luck with the clock.
#
# Each run prints "LOST" (the cache-loss state reads old data: the bug) or "kept", and
# whether the overwrite landed in the direct write's clock tick. Exit 1 if any run lost.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
RUNS=1 PIN="" FS=xfs VM="" OUT=/var/tmp/xfs-sync-repro-out RUN=run
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) RUNS=$2; shift 2 ;;
    --pin-clock) PIN=--pin-clock; shift ;;
    --other) RUN=run-other; shift ;;
    --fs) FS=$2; shift 2 ;;
    --vm) VM=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
REPLAY_LOG=${REPLAY_LOG:-/opt/xfstests/xfstests-dev/src/log-writes/replay-log}

if [ -n "$VM" ]; then
  mkdir -p "$OUT"
  OUT=$(realpath "$OUT")
  # The guest shares this machine's root read-only: build repro.c here.
  cc -O2 -o "$OUT/repro" "$HERE/repro.c"
  accel=(--disable-kvm); [ "${VM_ACCEL:-tcg}" = kvm ] && accel=()
  rm -f "$OUT/rc"
  VNG=${BOB_VNG:-/opt/bob-vm-venv/bin/vng}
  # vng runs virtme-run, which lives beside it.
  PATH=$(dirname "$VNG"):$PATH "$VNG" --run "$VM" "${accel[@]}" --cpus 2 --memory 2G \
    --rwdir="$OUT" --append oops=panic --exec "REPRO_BIN=$OUT/repro REPLAY_LOG=$REPLAY_LOG \
    bash $HERE/repro-dmlogwrites.sh --runs $RUNS --fs $FS $PIN $([ $RUN = run ] || echo --other) > $OUT/log 2>&1; echo \$? > $OUT/rc" \
    > "$OUT/console.log" 2>&1 || true
  cat "$OUT/log"
  [ -f "$OUT/rc" ] || { echo "the guest ended early: $OUT/console.log" >&2; exit 2; }
  exit "$(cat "$OUT/rc")"
fi

[ -x "$REPLAY_LOG" ] || { echo "no replay-log at $REPLAY_LOG (build xfstests)" >&2; exit 2; }
for m in loop dm-log-writes xfs ext4; do modprobe "$m" 2>/dev/null || true; done
W=$(mktemp -d /var/tmp/xfs-sync-dmlw.XXXXXX)
REPRO=${REPRO_BIN:-}
if [ -z "$REPRO" ]; then REPRO=$W/repro; cc -O2 -o "$REPRO" "$HERE/repro.c"; fi
mkdir -p "$W/mnt"
DEVS=()
cleanup() {
  set +e
  mountpoint -q "$W/mnt" && umount "$W/mnt"
  dmsetup remove xfs-sync-lw 2>/dev/null
  for d in "${DEVS[@]}"; do losetup -d "$d"; done
  rm -rf "$W"
}
trap cleanup EXIT
loop() { truncate -s 0 "$W/$1.img"; truncate -s 512M "$W/$1.img"; losetup -f --show "$W/$1.img"; }
mkfs() { if [ "$FS" = xfs ]; then mkfs.xfs -q -f "$1"; else mkfs.ext4 -q -F "$1"; fi; }
entry() { cut -f1 -d@; }

echo "kernel $(uname -r), $FS, replay-log $REPLAY_LOG"
lost=0
for run in $(seq 1 "$RUNS"); do
  DATA=$(loop data); LOG=$(loop log); DEVS=("$DATA" "$LOG")
  dmsetup create xfs-sync-lw --table "0 $(blockdev --getsz "$DATA") log-writes $DATA $LOG"
  LW=/dev/mapper/xfs-sync-lw
  mkfs "$LW"
  dmsetup message xfs-sync-lw 0 mark mkfs
  mount "$LW" "$W/mnt"
  "$REPRO" setup "$W/mnt/foo"
  dmsetup message xfs-sync-lw 0 mark setup
  tick=$("$REPRO" $RUN "$W/mnt/foo" $PIN)
  dmsetup message xfs-sync-lw 0 mark synced      # sync(2) has returned
  umount "$W/mnt"
  dmsetup remove xfs-sync-lw
  # dm-log-writes logs a write when it completes only if a flush or FUA covers it, else
  # when the next flush arrives: replaying up to the mark is the crash right after sync
  # returned in which the disk lost its volatile cache.
  R=$(loop replay); DEVS+=("$R")
  "$REPLAY_LOG" --log "$LOG" --replay "$R" --end-mark synced
  if [ "$run" = 1 ]; then
    mark=$("$REPLAY_LOG" --log "$LOG" --find --end-mark synced | entry)
    echo "log entries around the mark 'synced' (entry $mark):"
    truncate -s 512M "$W/scratch.img"
    "$REPLAY_LOG" -v --log "$LOG" --replay "$W/scratch.img" --start-entry $((mark - 3)) \
      --limit 8 2>&1 | sed 's/^/  /'
    rm -f "$W/scratch.img"
  fi
  mount "$R" "$W/mnt"
  if res=$("$REPRO" check "$W/mnt/foo"); then v=kept; else v=LOST; lost=$((lost + 1)); fi
  umount "$W/mnt"
  echo "run $run: $tick; crash at the mark: $v: $res"
  for d in "${DEVS[@]}"; do losetup -d "$d"; done; DEVS=()
done
echo "$(uname -r) $FS: sync(2) returned, yet the overwrite was lost in $lost of $RUNS runs"
[ "$lost" = 0 ]
