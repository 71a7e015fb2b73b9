#!/bin/sh
# bob explore reproducer: beyond-s2-49818-min2 on xfs
# expected: durability: sync (op 2) is durable here, but /bar @7680 is the old data, not the old data of file 2 (state sync/e0:0)
# mkfs: mkfs.xfs -q -f -K DEVICE
# the workload (setup in the base image, then recorded):
#   setup: creat /drain
#   setup: creat /foo
#   setup: write /foo 16384@0
#   setup: creat /bar
#   setup: write /bar 16384@0
#   setup: mkdir /A
#   setup: creat /A/bar
#   setup: write /A/bar 16384@0
#   op:    copy-range /foo /bar 4096@7680
#   op:    fsync /foo
#   op:    sync
# the crash image found first: bob replay /work/samples/beyond2/shard-1/runs/xfs/beyond-s2-49818-min2 --state sync/e0:0 --to crash.img --check
# Run as root: BOB=/path/to/bob sh reproduce.sh
set -u
BOB=${BOB:-bob}
HERE=$(cd "$(dirname "$0")" && pwd)
WORKLOAD=${WORKLOAD:-$HERE/workload.json}
OUT=${OUT:-$(mktemp -d)}
# 1. mkfs, the workload and its crash states, recorded and checked afresh.
"$BOB" run --fs xfs --workload "$WORKLOAD" --schedules sync --atomic-write-unit 4096 --fua real --out "$OUT"
status=$?
if [ "$status" -eq 0 ]; then echo "not reproduced: every state held"; exit 0; fi
if [ "$status" -ne 1 ]; then exit "$status"; fi
# 2. The failing crash image, rebuilt from the trace, recovered and checked.
"$BOB" replay "$OUT"/xfs/'beyond-s2-49818-min2' --to "$OUT/crash.img" --check
