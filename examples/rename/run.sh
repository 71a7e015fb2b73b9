#!/bin/sh
# Records the write-temp-then-rename update with and without fsync and checks every crash
# state bob generates. Usage (as root): examples/rename/run.sh [CONFIG] [UPDATES] [MAX_STATES]
set -u
here=$(cd "$(dirname "$0")" && pwd)
bob=${BOB:-bob}
config=${1:-ext4-ordered}
updates=${2:-3}
max=${3:-300}
out=${OUT:-$(mktemp -d /tmp/bob-rename-XXXXXX)}
status=0
for mode in fsync nofsync; do
    echo "== rename update, $mode, on $config, $updates updates"
    BOB=$bob "$bob" record --fs "$config" --out "$out/$mode" -- sh "$here/workload.sh" "$mode" "$updates" || exit 2
    "$bob" check "$out/$mode" --checker "sh $here/check.sh" --max-states "$max" --out "$out/$mode-witness"
    rc=$?; [ $rc -gt $status ] && status=$rc
done
exit $status
