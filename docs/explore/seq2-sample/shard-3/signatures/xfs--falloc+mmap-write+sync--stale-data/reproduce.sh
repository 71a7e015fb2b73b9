#!/bin/sh
# bob explore reproducer: ace-s2-186878 on xfs
# expected: durability: sync (op 2) is durable here, but /A/foo @14848 is the old data, not zeros (state sync/e1:0)
# mkfs: mkfs.xfs -q -f -K DEVICE
# the workload (setup in the base image, then recorded):
#   setup: creat /drain
#   setup: mkdir /A
#   setup: creat /A/foo
#   setup: write /A/foo 16384@0
#   op:    falloc /A/foo zero-range-keep-size 4096@14848
#   op:    mmap-write /A/foo 4096@16384
#   op:    sync
# the crash image found first: bob replay /work/explore-runs/shard-3/runs/xfs/ace-s2-186878 --state sync/e1:0 --to crash.img --check
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
"$BOB" replay "$OUT"/xfs/'ace-s2-186878' --to "$OUT/crash.img" --check
