#!/usr/bin/env bash
# The seq-2 samples of docs/explore.md: 3,334 workloads drawn from seq-2 (seed 0), each on
# ext4-ordered, xfs and btrfs, in three shards, in sittings of at most BUDGET each.
#
#   sudo scripts/explore-seq2-sample.sh WORK_DIR [BUDGET]      # BUDGET: 90m by default
#
# OP_SET=beyond-ace (default ace) samples the operations beyond Ace's instead; its copies
# go to docs/explore/seq2-beyond-ace-sample. SEQ and SAMPLE change the sequence length
# and the sample's size (a seq-3 sample: SEQ=3 SAMPLE=1000), and the copies' directory
# is then named after them (docs/explore/seq3-...-sample).
#
# Each shard's run lives in WORK_DIR/shard-I (witnesses included); after each sitting
# its journal, header, report and signatures (small: no traces) are copied into
# docs/explore/seq2-sample/shard-I, so that the sample survives a machine and the next
# sitting, anywhere, resumes from the repository's copy. When the three are complete,
# `bob merge` of their reports gives the sample's report (docs/explore.md).
set -euo pipefail
work=${1:?usage: explore-seq2-sample.sh WORK_DIR [BUDGET]}
budget=${2:-90m}
repo=$(cd "$(dirname "$0")/.." && pwd)
bob=${BOB:-$repo/target/release/bob}
op_set=${OP_SET:-ace}
seq=${SEQ:-2}
sample=${SAMPLE:-3334}
name=seq$seq${op_set/#ace/}
name=${name/beyond-ace/-beyond-ace}-sample
kept=$repo/docs/explore/$name
mkdir -p "$work"
for i in 1 2 3; do
  out=$work/shard-$i
  saved=$kept/shard-$i
  # Start from the repository's copy when this machine has none.
  if [ ! -f "$out/explore.json" ] && [ -f "$saved/explore.json" ]; then
    mkdir -p "$out"
    cp "$saved/explore.json" "$saved/journal.jsonl" "$out/"
  fi
  if [ -f "$out/explore-report.json" ] && grep -q '"complete": true' "$out/explore-report.json"; then
    continue
  fi
  resume=()
  [ -f "$out/explore.json" ] && resume=(--resume)
  set +e
  nice "$bob" explore --fs ext4-ordered,xfs,btrfs --op-set "$op_set" --seq "$seq" \
    --sample "$sample" --seed 0 --shard "$i/3" \
    --budget "$budget" --out "$out" --format json "${resume[@]}" > "$work/shard-$i.json"
  code=$?
  set -e
  mkdir -p "$saved"
  for f in explore.json journal.jsonl explore-report.json explore.md; do
    [ -f "$out/$f" ] && cp "$out/$f" "$saved/"
  done
  if [ -d "$out/signatures" ]; then
    rm -rf "$saved/signatures"
    cp -r "$out/signatures" "$saved/"
  fi
  # 0 no signature, 1 signatures: a result. Anything else (2: errors only, 130: interrupted)
  # ends the sitting; the journal keeps what was done.
  [ "$code" -le 1 ] || exit "$code"
  grep -q '"complete": true' "$out/explore-report.json" || exit 0
done
echo "all three shards complete: bob merge $work/shard-{1,2,3}/explore-report.json"
