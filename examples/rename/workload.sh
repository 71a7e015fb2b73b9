#!/bin/sh
# A configuration file updated the classic way: write config.tmp, rename it over
# config.txt. With `fsync`, the temp file is fsynced before the rename and the directory
# after it, so the update is durable when it is acknowledged; with `nofsync`, neither.
# Each acknowledged update is marked "commit N".
# Usage (bob runs it inside the fresh mount): workload.sh fsync|nofsync UPDATES
set -eu
mode=${1:-fsync}
updates=${2:-3}
bob=${BOB:-bob}
printf 'version 0\n' > config.txt
sync
"$bob" mark "commit 0"
i=1
while [ "$i" -le "$updates" ]; do
    printf 'version %d\n' "$i" > config.tmp
    [ "$mode" = fsync ] && sync config.tmp
    mv config.tmp config.txt
    [ "$mode" = fsync ] && sync .
    "$bob" mark "commit $i"
    i=$((i + 1))
done
