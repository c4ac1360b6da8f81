#!/usr/bin/env bash
# Two builds of `nqueens` side by side on one GPU, in one call: `bench N --gpu` for each N of BENCH and
# `count N --gpu` (a mixed worker through the embedded coordinator) for COUNT, new then old, with the
# shape fixed (SHAPE) so that only the host side differs; then N = TOP with the new build if its N = 21
# rate says it fits in PLAN seconds. Every total is checked against the published count.
# Usage: NEW=target/release/nqueens OLD=path/to/old coordinator/benches/gpu-compare.sh OUTDIR
set -uo pipefail
OUTDIR=${1:-target/gpu-compare}
mkdir -p "$OUTDIR"
NEW=${NEW:-target/release/nqueens}
OLD=${OLD:-target/release/nqueens-old}
DEVICE=${DEVICE:-cuda:0}
SHAPE=${SHAPE:-flat/128/4}
BENCH=${BENCH:-19 20 21}
OLD_BENCH=${OLD_BENCH:-20}
COUNT=${COUNT:-19}
TOP=${TOP:-22}
PLAN=${PLAN:-150}
LOG="$OUTDIR/log.txt"
: >"$LOG"
say() { echo "$@" | tee -a "$LOG"; }
START=$(date +%s)
. "$(dirname "$0")/nvrtc.sh"
say "## $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader 2>&1 | tee -a "$LOG"
say "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) threads"
run() { # label limit command...
  local label=$1 limit=$2; shift 2
  say "### $label: $*"
  local t0; t0=$(date +%s%N)
  timeout "$limit" "$@" 2>&1 | grep -v '^ *$' | tail -12 | tee -a "$LOG"
  say "$label wall $(( ($(date +%s%N) - t0) / 1000000 )) ms"
}
run new 150 "$NEW" bench $BENCH --gpu "$DEVICE" --gpu-kernel "$SHAPE"
run old 60 "$OLD" bench $OLD_BENCH --gpu "$DEVICE" --gpu-kernel "$SHAPE"
for who in new old; do
  bin=$NEW; [ $who = old ] && bin=$OLD
  data=$(mktemp -d)
  run "$who count" 90 "$bin" count "$COUNT" --gpu "$DEVICE" --gpu-kernel "$SHAPE" --data "$data"
  rm -rf "$data"
done
run "new calibration" 60 "$NEW" bench 18 --gpu "$DEVICE"
t21=$(grep -E '^ *21 gpu' "$LOG" | head -1 | awk '{print $(NF-2)}')
elapsed=$(( $(date +%s) - START ))
if [ -n "$t21" ] && awk "BEGIN{exit !($t21 * 7 < $PLAN)}"; then
  run new $((PLAN + 30)) "$NEW" bench "$TOP" --gpu "$DEVICE" --gpu-kernel "$SHAPE"
else
  say "N = $TOP skipped: N = 21 took ${t21:-?} s (about 7x that for $TOP), $elapsed s used"
fi
say "wall: $(( $(date +%s) - START )) s"
