#!/bin/sh
# bob explore reproducer: ace-s2-40228-min3 on xfs
# expected: durability: sync (op 2) is durable here, but /foo @14848 is the old data, not zeros (state sync/e1:0)
# mkfs: mkfs.xfs -q -f -K DEVICE
# the workload (setup in the base image, then recorded):
#   setup: creat /drain
#   setup: creat /foo
#   setup: write /foo 16384@0
#   op:    falloc /foo zero-range 4096@14848
#   op:    mmap-write /foo 4096@8192
#   op:    sync
# the crash image found first: bob replay /work/explore-runs/shard-2/runs/xfs/ace-s2-40228-min3 --state sync/e1:0 --to crash.img --check
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
"$BOB" replay "$OUT"/xfs/'ace-s2-40228-min3' --to "$OUT/crash.img" --check
