#!/usr/bin/env bash
# Stress run: at least 10,000 crash states through one bob process, sampling its memory
# (VmRSS) and open file descriptors once a second, then checking that nothing is left:
# no loop device bound to bob's files, no mount or FUSE mount below its scratch dir.
# Prints the figures docs/reliability.md records. Needs root. Not part of CI (minutes).
set -euo pipefail
cd "$(dirname "$0")/.."
states=${STATES:-10000}
fs=${FS:-ext4-ordered}
cargo build --release -q -p bob-cli
bob=target/release/bob
scratch=$(mktemp -d /tmp/bob-stress-XXXX)
out=$(mktemp -d /tmp/bob-stress-out-XXXX)
samples=$scratch.samples
: > "$samples"
start=$(date +%s)
"$bob" run --fs "$fs" --property multi-block-append --strategy default,exhaustive,random \
  --max-states "$states" --scratch "$scratch" --out "$out" --format json > "$out/cell.json" &
pid=$!
while kill -0 "$pid" 2>/dev/null; do
  rss=$(awk '/VmRSS/ {print $2}' /proc/$pid/status 2>/dev/null || true)
  fds=$(ls /proc/$pid/fd 2>/dev/null | wc -l || true)
  [ -n "$rss" ] && echo "$(( $(date +%s) - start )) $rss $fds" >> "$samples"
  sleep 1
done
wait "$pid" || true
secs=$(( $(date +%s) - start ))
explored=$(python3 -c "import json,sys; c=json.load(open('$out/cell.json')); print(c['states_explored'], c['states_unique'], c['verdict'])")
leaks=$( { losetup -a | grep -c "$scratch" || true; } )
mounts=$( { grep -c "$scratch" /proc/mounts || true; } )
python3 - "$samples" <<'PY'
import sys
rows=[tuple(map(int,l.split())) for l in open(sys.argv[1]) if l.strip()]
if not rows: sys.exit("no samples")
n=len(rows); q=max(1,n//4)
first=[r[1] for r in rows[q:2*q]] or [rows[0][1]]
last=[r[1] for r in rows[-q:]]
print(f"memory: VmRSS first quarter median {sorted(first)[len(first)//2]} KiB, last quarter median {sorted(last)[len(last)//2]} KiB, peak {max(r[1] for r in rows)} KiB")
print(f"fds: min {min(r[2] for r in rows)}, max {max(r[2] for r in rows)}")
PY
echo "states (explored unique verdict): $explored in ${secs}s"
echo "leaked loop devices: $leaks, leaked mounts: $mounts"
rm -rf "$scratch" "$out" "$samples"
[ "$leaks" = 0 ] && [ "$mounts" = 0 ]
