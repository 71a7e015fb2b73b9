#!/bin/bash
# Rewrites fixtures/replay-log/cases/: what xfstests' real replay-log answers (stdout, exit
# status, digest of the resulting image) for every case below, on the logs in
# fixtures/replay-log/logs/. crates/bob-cli/tests/replay_log.rs replays each case through
# `bob log` and a `replay-log` symlink to bob and expects the same. Needs root (loop
# devices), cc, git (or XFSTESTS_SRC=/path/to/xfstests), gzip and e2fsprogs.
#
#   scripts/replay-log-fixtures.sh            # rewrite every case
#   scripts/replay-log-fixtures.sh --record   # first re-record ext4/xfs/btrfs logs with bob
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
fix=$root/fixtures/replay-log
work=$(mktemp -d /tmp/replay-log-fixtures.XXXXXX)
loops=()
cleanup() {
    for d in "${loops[@]}"; do losetup -d "$d" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

# The real tool, built from xfstests' src/log-writes (not kept in this repository).
src=${XFSTESTS_SRC:-}
if [ -z "$src" ]; then
    git clone -q --depth 1 https://github.com/kdave/xfstests "$work/xfstests"
    src=$work/xfstests
fi
cc -O2 -o "$work/replay-log" "$src/src/log-writes/replay-log.c" "$src/src/log-writes/log-writes.c"
echo "xfstests ${XFSTESTS_REV:-$(git -C "$src" rev-parse HEAD 2>/dev/null || echo '(unknown revision)')}" > "$fix/SOURCE"

cargo build -q --manifest-path "$root/Cargo.toml" -p bob-core --example file-digest
digest=$root/target/debug/examples/file-digest

if [ "${1:-}" = --record ]; then
    cargo build -q --manifest-path "$root/Cargo.toml" -p bob-cli
    for fs in ext4:ext4-ordered xfs:xfs btrfs:btrfs; do
        "$root/target/debug/bob" record --fs "${fs#*:}" --out "$work/rec-${fs%:*}" \
            --annotate none -- "$fix/workload.sh"
        cp "$work/rec-${fs%:*}/trace.log" "$fix/logs/${fs%:*}.log"
        [ "${fs%:*}" = ext4 ] && gzip -9 -c "$work/rec-ext4/base.img" > "$fix/logs/ext4-base.img.gz"
    done
    (cd "$fix/logs" && python3 ../make-synthetic-logs.py)
fi
gzip -dc "$fix/logs/ext4-base.img.gz" > "$work/ext4-base.img"

# name | target | arguments (shell words; @LOG:x@ = logs/x, @TARGET@ = the image or device,
# @TMP@ = a scratch directory of the case). Targets: none; file (an empty file: writes
# extend it); loop:SIZE (a loop device over a zeroed file of SIZE); file:ext4-base and
# loop:ext4-base (the ext4 log's base image).
cases() {
    for fs in ext4 xfs btrfs; do
        L="@LOG:$fs.log@"
        cat <<EOF
$fs-info|none|--log $L
$fs-num-entries|none|--log $L --num-entries
$fs-find-end-mark|none|--log $L --find --end-mark 'op 2'
$fs-find-next-fua|none|--log $L --find --next-fua
$fs-find-next-flush|none|--log $L --find --next-flush
$fs-find-fua-from-entry|none|--log $L --find --next-fua --start-entry 10
$fs-find-flush-from-mark|none|--log $L --find --next-flush --start-mark 'op 2'
$fs-find-limit-vv|none|-vv --log $L --find --limit 5 --start-entry 3
$fs-replay|file|--log $L --replay @TARGET@
$fs-replay-limit|file|--log $L --replay @TARGET@ --limit 20
$fs-replay-end-mark|file|--log $L --replay @TARGET@ --end-mark 'op 2'
$fs-replay-start-entry|file|--log $L --replay @TARGET@ --start-entry 10
$fs-replay-start-mark|file|--log $L --replay @TARGET@ --start-mark 'op 2'
$fs-replay-no-discard|file|--log $L --replay @TARGET@ --no-discard
$fs-replay-next-flush|file|--log $L --replay @TARGET@ --next-flush
$fs-replay-sectors-vv|file|--log $L --replay @TARGET@ --start-sector 2048 --end-sector 65536 -vv
$fs-replay-check-5|file|--log $L --replay @TARGET@ --fsck 'echo fsck' --check 5
$fs-replay-check-flush|file|--log $L --replay @TARGET@ --fsck 'echo fsck' --check flush
$fs-replay-check-fua|file|--log $L --replay @TARGET@ --fsck 'echo fsck' --check fua
$fs-replay-fsck-fails|file|--log $L --replay @TARGET@ --fsck 'n=\$(cat @TMP@/n 2>/dev/null || echo 0); n=\$((n+1)); echo \$n > @TMP@/n; echo check \$n; test \$n -lt 3' --check flush
EOF
    done
    for fs in ext4 btrfs synth; do
        L="@LOG:$fs.log@"
        size=256M
        cat <<EOF
$fs-loop-limit|loop:$size|--log $L --replay @TARGET@ --limit 20
$fs-loop-end-mark|loop:$size|--log $L --replay @TARGET@ --end-mark 'op 2'
$fs-loop-start-entry|loop:$size|--log $L --replay @TARGET@ --start-entry 10
$fs-loop-start-mark|loop:$size|--log $L --replay @TARGET@ --start-mark 'op 2'
$fs-loop-no-discard|loop:$size|--log $L --replay @TARGET@ --no-discard
$fs-loop-next-flush|loop:$size|--log $L --replay @TARGET@ --next-flush
$fs-loop-check-fua|loop:$size|--log $L --replay @TARGET@ --fsck 'echo fsck' --check fua
$fs-loop-sectors-v|loop:$size|-v --log $L --replay @TARGET@ --start-sector 100 --end-sector 30000
EOF
    done
    L="@LOG:ext4.log@"
    cat <<EOF
ext4-base-e2fsck-fua|file:ext4-base|--log $L --replay @TARGET@ --fsck 'e2fsck -fn @TARGET@ >/dev/null 2>&1; echo e2fsck \$?' --check fua
ext4-base-e2fsck-flush-loop|loop:ext4-base|--log $L --replay @TARGET@ --fsck 'e2fsck -fn @TARGET@ >/dev/null 2>&1; echo e2fsck \$?' --check flush
ext4-base-e2fsck-every-10|file:ext4-base|--log $L --replay @TARGET@ --fsck 'e2fsck -fn @TARGET@ >/dev/null 2>&1' --check 10
synth-info|none|--log @LOG:synth.log@
synth-replay-vv|file|-vv --log @LOG:synth.log@ --replay @TARGET@
synth-replay-loop-v|loop:256M|-v --log @LOG:synth.log@ --replay @TARGET@
synth-replay-no-discard|file|--log @LOG:synth.log@ --replay @TARGET@ --no-discard
synth-check-discard|file|--log @LOG:synth.log@ --replay @TARGET@ --fsck 'echo fsck' --check discard
synth-find-long-mark|none|--log @LOG:synth.log@ --find --end-mark xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx
synth-find-mark-prefix|none|--log @LOG:synth.log@ --find --end-mark 'op'
synth-find-not-found|none|--log @LOG:synth.log@ --find --end-mark nosuch
synth-find-nothing|none|--log @LOG:synth.log@ --find
synth-start-entry-past-end|none|--log @LOG:synth.log@ --find --start-entry 1000
synth-start-mark-missing|file|--log @LOG:synth.log@ --replay @TARGET@ --start-mark nosuch
synth-end-mark-missing|file|--log @LOG:synth.log@ --replay @TARGET@ --end-mark nosuch
synth-start-mark-wins|none|--log @LOG:synth.log@ --find --next-fua --start-entry 11 --start-mark 'op 1' -vv
synth-hex-octal|none|--log @LOG:synth.log@ --find --limit 0x3 --start-entry 010
malformed-num-entries|none|--log @LOG:malformed.log@ --num-entries
malformed-find|none|--log @LOG:malformed.log@ --find --end-mark end
malformed-replay|file|--log @LOG:malformed.log@ --replay @TARGET@
malformed-seek|none|--log @LOG:malformed.log@ --find --start-entry 6
truncated-find|none|--log @LOG:truncated.log@ --find --end-mark end
truncated-replay|file|--log @LOG:truncated.log@ --replay @TARGET@
empty-num-entries|none|--log @LOG:empty.log@ --num-entries
empty-start-mark|none|--log @LOG:empty.log@ --find --start-mark x
notalog|none|--log @LOG:notalog.log@
missing-log|none|--log @LOG:nosuch.log@
missing-target|none|--log @LOG:synth.log@ --replay @TMP@/nosuch.img
getopt-no-log|none|--find
usage-fsck-without-check|none|--log @LOG:synth.log@ --fsck true
usage-check-without-fsck|none|--log @LOG:synth.log@ --check 3
usage-check-zero|none|--log @LOG:synth.log@ --fsck true --check 0
usage-bad-limit|none|--log @LOG:synth.log@ --limit abc
usage-bad-sector|none|--log @LOG:synth.log@ --start-sector 1x
getopt-ambiguous|none|--log @LOG:synth.log@ --f
getopt-unknown|none|--log @LOG:synth.log@ --bogus
getopt-missing-argument|none|--log
getopt-flag-with-argument|none|--log @LOG:synth.log@ --find=1
getopt-abbreviations|none|--lo=@LOG:synth.log@ stray --n --start 3 --find --lim 2
EOF
}

rm -rf "$fix/cases"
mkdir -p "$fix/cases"
while IFS='|' read -r name target args; do
    dir=$fix/cases/$name
    tmp=$work/tmp-$name
    mkdir -p "$dir" "$tmp"
    img=$work/$name.img
    rm -f "$img"
    dev=
    case $target in
        none) ;;
        file) : > "$img" ;;
        file:ext4-base) cp "$work/ext4-base.img" "$img" ;;
        loop:ext4-base | loop:*)
            if [ "$target" = loop:ext4-base ]; then cp "$work/ext4-base.img" "$img"; else truncate -s "${target#loop:}" "$img"; fi
            dev=$(losetup -f --show "$img")
            loops+=("$dev")
            ;;
    esac
    # The case file keeps placeholders; here they become this machine's paths.
    eval "set -- $args"
    printf '%s\n' "$target" > "$dir/target"
    : > "$dir/args"
    real=()
    for a in "$@"; do
        printf '%s\n' "$a" >> "$dir/args"
        a=${a//@TARGET@/${dev:-$img}}
        a=${a//@TMP@/$tmp}
        while [[ $a =~ @LOG:([^@]*)@ ]]; do a=${a//${BASH_REMATCH[0]}/$fix/logs/${BASH_REMATCH[1]}}; done
        real+=("$a")
    done
    set +e
    (cd "$tmp" && "$work/replay-log" "${real[@]}") > "$dir/stdout" 2> "$work/stderr"
    echo $? > "$dir/status"
    set -e
    if [ -n "$dev" ]; then losetup -d "$dev"; fi
    if [ "$target" != none ]; then "$digest" "$img" > "$dir/digest"; fi
    rm -f "$img"
    echo "$name: exit $(cat "$dir/status"), $(wc -l < "$dir/stdout") lines"
done < <(cases)
