#!/bin/sh
# Records SQLite in WAL and in rollback-journal mode on a configuration and checks every
# crash state bob generates. Usage (as root): examples/sqlite/run.sh [CONFIG] [COMMITS] [MAX_STATES]
set -u
here=$(cd "$(dirname "$0")" && pwd)
bob=${BOB:-bob}
config=${1:-ext4-ordered}
commits=${2:-5}
max=${3:-300}
out=${OUT:-$(mktemp -d /tmp/bob-sqlite-XXXXXX)}
status=0
for mode in wal delete; do
    echo "== sqlite3 journal_mode=$mode on $config, $commits commits"
    BOB=$bob "$bob" record --fs "$config" --out "$out/$mode" -- sh "$here/workload.sh" "$mode" "$commits" || exit 2
    "$bob" check "$out/$mode" --checker "sh $here/check.sh" --max-states "$max" --out "$out/$mode-witness"
    rc=$?; [ $rc -gt $status ] && status=$rc
done
exit $status
