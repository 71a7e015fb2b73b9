#!/bin/sh
# SQLite committing transactions, one sqlite3 connection per commit, in the journal mode
# given (wal or delete, the rollback journal). After each commit returns (the application
# has been told "committed"), it tells bob with `bob mark "commit N"`. SQLITE_SYNC sets
# PRAGMA synchronous (default FULL; EXTRA also syncs the directory after the journal unlink).
# Usage (bob runs it inside the fresh mount): workload.sh MODE COMMITS
set -eu
mode=${1:-wal}
commits=${2:-5}
bob=${BOB:-bob}
sync=${SQLITE_SYNC:-FULL}
sqlite3 app.db "PRAGMA journal_mode=$mode;" >/dev/null
sqlite3 app.db "CREATE TABLE IF NOT EXISTS t(id INTEGER PRIMARY KEY, v TEXT NOT NULL);"
i=1
while [ "$i" -le "$commits" ]; do
    sqlite3 app.db "PRAGMA synchronous=$sync; BEGIN; INSERT INTO t VALUES($i, printf('%0500d', $i)); COMMIT;"
    "$bob" mark "commit $i"
    i=$((i + 1))
done
