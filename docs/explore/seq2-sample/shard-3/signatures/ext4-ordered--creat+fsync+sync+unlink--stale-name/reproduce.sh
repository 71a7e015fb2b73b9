#!/bin/sh
# bob explore reproducer: ace-s2-460208-min3 on ext4-ordered
# expected: durability: sync (op 2) is durable here, but /foo still names inode 13 (gone before the call) (state sync/e2:-)
# mkfs: mke2fs -q -F -t ext4 -b 4096 -J size=4 -E nodiscard,lazy_itable_init=0,lazy_journal_init=0 DEVICE
# the workload (setup in the base image, then recorded):
#   setup: creat /drain
#   setup: creat /foo
#   setup: write /foo 16384@0
#   op:    unlink /foo
#   op:    creat /foo
#   op:    sync
# the crash image found first: bob replay /work/explore-runs/shard-3/runs/ext4-ordered/ace-s2-460208-min3 --state sync/e2:- --to crash.img --check
# Run as root: BOB=/path/to/bob sh reproduce.sh
set -u
BOB=${BOB:-bob}
HERE=$(cd "$(dirname "$0")" && pwd)
WORKLOAD=${WORKLOAD:-$HERE/workload.json}
OUT=${OUT:-$(mktemp -d)}
# 1. mkfs, the workload and its crash states, recorded and checked afresh.
"$BOB" run --fs ext4-ordered --workload "$WORKLOAD" --schedules sync --atomic-write-unit 4096 --fua real --out "$OUT"
status=$?
if [ "$status" -eq 0 ]; then echo "not reproduced: every state held"; exit 0; fi
if [ "$status" -ne 1 ]; then exit "$status"; fi
# 2. The failing crash image, rebuilt from the trace, recovered and checked.
"$BOB" replay "$OUT"/ext4-ordered/'ace-s2-460208-min3' --to "$OUT/crash.img" --check
