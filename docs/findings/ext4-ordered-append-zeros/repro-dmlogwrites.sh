#!/usr/bin/env bash
# ext4 data=ordered: an append that a crash exposes as a grown size over zeros.
# dm-log-writes records, on a fresh ext4, for each of N 40 KiB files (synced; --files N,
# default 16): an
# append of 4 KiB (0x62), a write + fsync of another file, syncfs(2). xfstests'
# replay-log then replays the log up to every FUA write (every jbd2 commit) onto a second
# device, which is mounted: each file must be 40 KiB, or 44 KiB ending in the appended
# bytes. Prints each state's files, and "ZEROS" where a grown file's last 4 KiB are not
# the appended bytes.
#
#   repro-dmlogwrites.sh [--fs ext4|xfs] [--options MOUNT_OPTIONS] [--files N]
#       as root where dm-log-writes exists; replay-log from $REPLAY_LOG, else
#       /opt/xfstests/xfstests-dev/src/log-writes/replay-log (xfstests' src/log-writes)
#   repro-dmlogwrites.sh --vm KERNEL_IMAGE [--out DIR] [same options]
#       boots KERNEL_IMAGE with virtme-ng (BOB_VNG, default /opt/bob-vm-venv/bin/vng;
#       emulation unless VM_ACCEL=kvm) and runs itself there, the output in DIR
#
# Exit 1 if any state showed zeros. Whether the extent's conversion joins the size's
# commit is a race, so a run may show none.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
FS=ext4 OPTS="" VM="" OUT=/var/tmp/ext4-zeros-repro-out NFILES=16
while [ $# -gt 0 ]; do
  case "$1" in
    --fs) FS=$2; shift 2 ;;
    --options) OPTS=$2; shift 2 ;;
    --files) NFILES=$2; shift 2 ;;
    --vm) VM=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
REPLAY_LOG=${REPLAY_LOG:-/opt/xfstests/xfstests-dev/src/log-writes/replay-log}

if [ -n "$VM" ]; then
  mkdir -p "$OUT"
  OUT=$(realpath "$OUT")
  accel=(--disable-kvm); [ "${VM_ACCEL:-tcg}" = kvm ] && accel=()
  rm -f "$OUT/rc"
  VNG=${BOB_VNG:-/opt/bob-vm-venv/bin/vng}
  PATH=$(dirname "$VNG"):$PATH "$VNG" --run "$VM" "${accel[@]}" --cpus 2 --memory 2G \
    --rwdir="$OUT" --append oops=panic --exec "REPLAY_LOG=$REPLAY_LOG bash $HERE/repro-dmlogwrites.sh \
    --fs $FS --options '$OPTS' --files $NFILES > $OUT/log 2>&1; echo \$? > $OUT/rc" > "$OUT/console.log" 2>&1 || true
  cat "$OUT/log"
  [ -f "$OUT/rc" ] || { echo "the guest ended early (console: $OUT/console.log)" >&2; exit 2; }
  exit "$(cat "$OUT/rc")"
fi

W=$(mktemp -d /var/tmp/ext4-zeros.XXXXXX)
cleanup() {
  umount "$W/mnt" 2>/dev/null || true
  dmsetup remove zeros-log 2>/dev/null || true
  for d in ${DATA:-} ${LOG:-} ${REPLAY:-}; do losetup -d "$d" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT
for m in loop dm-mod dm-log-writes "$FS"; do modprobe "$m" 2>/dev/null || true; done
mkdir -p "$W/mnt"
size=512M; [ "$FS" = xfs ] && size=1G
for f in data log replay; do truncate -s $size "$W/$f.img"; done
DATA=$(losetup -f --show "$W/data.img")
LOG=$(losetup -f --show "$W/log.img")
REPLAY=$(losetup -f --show "$W/replay.img")
dmsetup create zeros-log --table "0 $(blockdev --getsz "$DATA") log-writes $DATA $LOG"
DEV=/dev/mapper/zeros-log
case "$FS" in
  ext4) mkfs.ext4 -q -F "$DEV" ;;
  xfs) mkfs.xfs -q -f "$DEV" ;;
esac
mount ${OPTS:+-o "$OPTS"} "$DEV" "$W/mnt"
files=$(seq -f "f%g" 0 $((NFILES - 1)) | tr '\n' ' ')
for f in $files; do xfs_io -f -c "pwrite -S 0x61 0 40960" -c fsync "$W/mnt/$f" >/dev/null; done
xfs_io -f -c "pwrite -S 0x63 0 4096" -c fsync "$W/mnt/other" >/dev/null
sync
dmsetup message zeros-log 0 mark appends_begin
for f in $files; do
  xfs_io -c "pwrite -S 0x62 40960 4096" "$W/mnt/$f" >/dev/null
  xfs_io -c "pwrite -S 0x63 0 4096" -c fsync "$W/mnt/other" >/dev/null
  xfs_io -c syncfs "$W/mnt" >/dev/null
done
dmsetup message zeros-log 0 mark appends_end
umount "$W/mnt"
dmsetup remove zeros-log

xfs_io -f -c "pwrite -S 0x62 0 4096" "$W/appended" >/dev/null
entry_of() { "$REPLAY_LOG" --log "$LOG" --find --end-mark "$1" | cut -d@ -f1; }
next_fua() { "$REPLAY_LOG" --log "$LOG" --find --next-fua --start-entry "$1" 2>/dev/null | cut -d@ -f1; }
begin=$(entry_of appends_begin)
end=$(entry_of appends_end)
zeros=0
cur=$(next_fua "$begin")
while [ -n "$cur" ] && [ "$cur" -lt "$end" ]; do
  "$REPLAY_LOG" --log "$LOG" --replay "$REPLAY" --limit $((cur + 1))
  mount ${OPTS:+-o "$OPTS"} "$REPLAY" "$W/mnt"
  line="crash after entry $cur (a FUA write):"
  for f in $files; do
    s=$(stat -c %s "$W/mnt/$f")
    line="$line $f=$s"
    if [ "$s" = 45056 ]; then
      dd if="$W/mnt/$f" of="$W/tail" bs=4096 skip=10 count=1 status=none
      cmp -s "$W/tail" "$W/appended" || { line="$line(ZEROS)"; zeros=1; }
    fi
  done
  echo "$line"
  umount "$W/mnt"
  cur=$(next_fua $((cur + 1)))
done
exit $zeros
