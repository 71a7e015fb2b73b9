#!/usr/bin/env bash
# How many workers: `bob run` wall time at -j 2, 4 and 6 over one saved recording per file
# system (so every run checks the same states), the settings interleaved in each round so
# that a shared machine's drifting load falls on each alike. Prints one line per run; the
# figures and the choice of the default `--jobs` are in docs/performance.md ("How many
# workers"). Needs root and `jq`. Not part of CI (about 20 minutes on 2 cores).
#
#   cargo build --release -p bob-cli && scripts/bench-jobs.sh
set -u
BOB=${BOB:-target/release/bob}
WORK=${WORK:-$(mktemp -d /tmp/bob-bench-jobs.XXXX)}
PROPERTY=${PROPERTY:-multi-block-append}
EXPLORE=${EXPLORE:---strategy default,exhaustive,random --max-states 500}
ROUNDS=${ROUNDS:-3}
for fs in ${FSES:-ext4-ordered xfs}; do
  dir=$WORK/$fs
  mkdir -p "$dir/scratch"
  # shellcheck disable=SC2086 # EXPLORE is a list of arguments
  "$BOB" run --fs "$fs" --property "$PROPERTY" $EXPLORE --save-trace "$dir/trace" \
    --scratch "$dir/scratch" --out "$dir/out" --format json >"$dir/record.json"
  echo "$fs recorded: $(jq -c '{states_explored,states_unique,states_mounted}' "$dir/record.json")"
  for round in $(seq 1 "$ROUNDS"); do
    for jobs in 2 4 6; do
      load=$(cut -d' ' -f1 /proc/loadavg)
      start=$(date +%s.%N)
      # shellcheck disable=SC2086
      "$BOB" run --fs "$fs" --property "$PROPERTY" $EXPLORE --trace "$dir/trace" -j "$jobs" \
        --scratch "$dir/scratch" --out "$dir/out" --format json >"$dir/run.json"
      code=$?
      wall=$(echo "$(date +%s.%N) - $start" | bc)
      echo "$fs round $round -j $jobs: exit $code, wall ${wall}s, load $load," \
        "$(jq -c '{states_mounted}' "$dir/run.json")"
    done
  done
done
rm -rf "$WORK"
