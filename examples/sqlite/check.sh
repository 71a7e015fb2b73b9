#!/bin/sh
# Checker for workload.sh, run by `bob check` in each recovered crash state (its working
# directory is the mount). Consistent when the database passes PRAGMA integrity_check and
# every commit acknowledged before the crash ($BOB_ACKED_MARKS) is present.
set -u
acked=$(sed -n 's/^commit \([0-9][0-9]*\)$/\1/p' "$BOB_ACKED_MARKS")
if [ ! -e app.db ]; then
    [ -z "$acked" ] && exit 0
    echo "commits $(echo $acked | tr ' ' ,) acknowledged but app.db is missing"; exit 1
fi
ok=$(sqlite3 app.db "PRAGMA integrity_check;" 2>&1)
if [ "$ok" != "ok" ]; then echo "integrity_check: $ok"; exit 1; fi
for n in $acked; do
    got=$(sqlite3 app.db "SELECT count(*) FROM t WHERE id=$n;" 2>&1)
    if [ "$got" != "1" ]; then echo "commit $n acknowledged but missing ($got)"; exit 1; fi
done
exit 0
