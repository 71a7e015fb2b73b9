#!/bin/sh
# Checker for rename/workload.sh: config.txt must hold exactly one complete version, and
# no older one than the last acknowledged update ($BOB_ACKED_MARKS).
set -u
last=$(sed -n 's/^commit \([0-9][0-9]*\)$/\1/p' "$BOB_ACKED_MARKS" | tail -n 1)
[ -z "$last" ] && exit 0
if [ ! -f config.txt ]; then echo "commit $last acknowledged but config.txt is missing"; exit 1; fi
content=$(cat config.txt)
case "$content" in
    "version "[0-9]*) v=${content#version } ;;
    *) echo "commit $last acknowledged but config.txt holds $(printf %s "$content" | od -An -c | head -c 60)"; exit 1 ;;
esac
if [ "$v" -lt "$last" ]; then echo "commit $last acknowledged but config.txt holds version $v"; exit 1; fi
exit 0
