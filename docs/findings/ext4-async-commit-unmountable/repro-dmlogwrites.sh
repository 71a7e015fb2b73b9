#!/usr/bin/env bash
# ext4 -o journal_async_commit: one fsync, then every crash state a volatile write cache
# may leave of it, each mounted. dm-log-writes records the fsync's block requests on a
# fresh ext4 (mke2fs defaults: metadata_csum, so jbd2 checksums each journal block, v3);
# for each write W of the fsync, replay-log rebuilds "everything up to the next flush,
# except W" (W's sectors get back what they held) on a second device, and it is mounted.
# Prints one line per state: "mounted" or "MOUNT FAILED" with the kernel's words.
#
#   repro-dmlogwrites.sh [--options MOUNT_OPTIONS] [--mkfs-options OPTS]
#       as root where dm-log-writes exists; replay-log from $REPLAY_LOG, else
#       /opt/xfstests/xfstests-dev/src/log-writes/replay-log (xfstests' src/log-writes)
#   repro-dmlogwrites.sh --vm KERNEL_IMAGE [--out DIR] [same options]
#       boots KERNEL_IMAGE with virtme-ng (BOB_VNG, default /opt/bob-vm-venv/bin/vng;
#       emulation unless VM_ACCEL=kvm) and runs itself there, the output in DIR
#
# Default options: data=writeback,journal_checksum,journal_async_commit (the kernel
# refuses journal_async_commit with data=ordered). Exit 1 if any state did not mount.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OPTS=data=writeback,journal_checksum,journal_async_commit MKFS_OPTS="" VM="" OUT=/var/tmp/ext4-async-repro-out
while [ $# -gt 0 ]; do
  case "$1" in
    --options) OPTS=$2; shift 2 ;;
    --mkfs-options) MKFS_OPTS=$2; shift 2 ;;
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
    --options '$OPTS' --mkfs-options '$MKFS_OPTS' > $OUT/log 2>&1; echo \$? > $OUT/rc" \
    > "$OUT/console.log" 2>&1 || true
  cat "$OUT/log"
  [ -f "$OUT/rc" ] || { echo "the guest ended early (console: $OUT/console.log)" >&2; exit 2; }
  exit "$(cat "$OUT/rc")"
fi

W=$(mktemp -d /var/tmp/ext4-async.XXXXXX)
cleanup() {
  umount "$W/mnt" 2>/dev/null || true
  dmsetup remove ext4async-log 2>/dev/null || true
  for d in ${DATA:-} ${LOG:-} ${REPLAY:-}; do losetup -d "$d" 2>/dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT
for m in loop dm-mod dm-log-writes ext4; do modprobe "$m" 2>/dev/null || true; done
mkdir -p "$W/mnt"
for f in data log replay; do truncate -s 256M "$W/$f.img"; done
DATA=$(losetup -f --show "$W/data.img")
LOG=$(losetup -f --show "$W/log.img")
REPLAY=$(losetup -f --show "$W/replay.img")
dmsetup create ext4async-log --table "0 $(blockdev --getsz "$DATA") log-writes $DATA $LOG"
DEV=/dev/mapper/ext4async-log
# shellcheck disable=SC2086
mkfs.ext4 -q -F $MKFS_OPTS "$DEV"
mount -o "$OPTS" "$DEV" "$W/mnt"
xfs_io -f -c "pwrite -S 0x61 0 8192" "$W/mnt/foo" >/dev/null
dmsetup message ext4async-log 0 mark before_fsync
xfs_io -c fsync "$W/mnt/foo"
dmsetup message ext4async-log 0 mark after_fsync
umount "$W/mnt"
dmsetup remove ext4async-log

entry_of() { "$REPLAY_LOG" --log "$LOG" --find --end-mark "$1" | cut -d@ -f1; }
start=$(entry_of before_fsync)
end=$(entry_of after_fsync)
"$REPLAY_LOG" -v --log "$LOG" --start-entry "$start" --limit $((end - start)) \
  --replay /dev/null --no-discard |
  sed -n 's/^replaying \([0-9]*\)@[0-9]*: sector \([0-9]*\), size \([0-9]*\), flags 0x[0-9a-f]*(\(.*\))$/\1 \2 \3 \4/p' \
  > "$W/entries"
echo "the fsync's entries (entry, sector, bytes, flags):"
sed 's/^/  /' "$W/entries"
failed=0
while read -r entry sector bytes flags; do
  [ "$bytes" -eq 0 ] && continue
  case "$flags" in *FLUSH*) continue ;; esac
  stop=$(awk -v after="$entry" -v end="$end" \
    '$1 > after && $4 ~ /FLUSH/ { print $1; f = 1; exit } END { if (!f) print end }' "$W/entries")
  # Each state from a zeroed device, whatever the previous one left (the log's first
  # entry, mkfs's discard, zeroes it only where a discard reads back as zeros).
  blkdiscard -z "$REPLAY"
  "$REPLAY_LOG" --log "$LOG" --replay "$REPLAY" --limit "$entry"
  dd if="$REPLAY" of="$W/before" bs=512 skip="$sector" count=$((bytes / 512)) status=none
  "$REPLAY_LOG" --log "$LOG" --replay "$REPLAY" --start-entry "$entry" --limit $((stop - entry))
  dd if="$W/before" of="$REPLAY" bs=512 seek="$sector" conv=notrunc status=none
  dmesg -C 2>/dev/null || true
  if mount -o "$OPTS" "$REPLAY" "$W/mnt" 2>"$W/err"; then
    echo "entries up to $((stop - 1)) without $entry ($bytes bytes at sector $sector, $flags): mounted"
    umount "$W/mnt"
  else
    failed=1
    echo "entries up to $((stop - 1)) without $entry ($bytes bytes at sector $sector, $flags): MOUNT FAILED: $(tr '\n' ' ' < "$W/err")"
    dmesg 2>/dev/null | grep -E "JBD2|EXT4-fs" | sed 's/^/    /' || true
  fi
done < "$W/entries"
exit $failed
