#!/usr/bin/env bash
# The GPU measurement (issue 39): one command on a machine with an NVIDIA GPU. It builds the release
# binary if none is given (BIN=...; the lent machines here reach no registry, so the binary is built
# beside and carried), finds NVRTC, prints `nqueens gpus`, runs the calibration (`bench 18 --gpu`, which
# prints every candidate's time and the choice), times every shape of SHAPES at N = 18 and 19, keeps the
# fastest, times it at N = 20 and 21 and the default at N = 20 (N = 22 when it will take under PLAN22
# seconds: 189 s on the H200), counts N = 19 through a mixed worker (`count --gpu`: the GPU's share of
# the nodes), and the host's CPUs at N = 18, then writes one table.
# Every total is checked against the published count by `nqueens bench` itself (a wrong one fails).
# Usage: coordinator/benches/gpu.sh [OUTDIR]    (BIN, DEVICE=cuda:0, SHAPES, PLAN22=240 may be set)
set -uo pipefail
OUTDIR=${1:-target/gpu-bench}
mkdir -p "$OUTDIR"
BIN=${BIN:-target/release/nqueens}
DEVICE=${DEVICE:-cuda:0}
PLAN22=${PLAN22:-240}
SWEEP=${SWEEP:-18 19}   # every shape
BIG=${BIG:-20 21}       # the fastest and the default
TOP=${TOP:-22}          # the fastest, if it fits PLAN22
CPU=${CPU:-18}          # the host's CPUs
SHAPES=${SHAPES:-local/256/8,shared/64/8,flat/64/2,flat/64/4,flat/128/4,flat/256/4,flat/64/8,flat/128/8,flat/256/8,coop/128/8,coop/256/4,coop/128/32,stream/128/4,stream/256/4,stream/128/8}
LOG="$OUTDIR/log.txt"
TABLE="$OUTDIR/table.md"
: >"$LOG"
say() { echo "$@" | tee -a "$LOG"; }
START=$(date +%s)

if [ ! -x "$BIN" ]; then
  say "building $BIN"
  cargo build --release --locked -p nqueens --bin nqueens 2>&1 | tail -3 | tee -a "$LOG"
fi

. "$(dirname "$0")/nvrtc.sh"

say "## $(date -u +%FT%TZ)"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv,noheader 2>&1 | tee -a "$LOG"
say "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | xargs), $(nproc) threads"
"$BIN" gpus 2>&1 | tee -a "$LOG"

rows="$OUTDIR/rows.jsonl"
: >"$rows"
bench() { # N... then flags
  timeout "${LIMIT:-200}" "$BIN" bench "$@" --json 2> >(tee -a "$LOG" >&2) | tee -a "$rows" | tee -a "$LOG"
}
seconds() { # shape N -> seconds of that row
  grep "\"n\":$2," "$rows" | grep "gpu $1 " | sed 's/.*"seconds":\([0-9.e+-]*\).*/\1/' | head -1
}

# The calibration, as every device open without --gpu-kernel runs it (measured anew, and kept: the
# mixed worker below reads it back instead of timing every candidate again).
LIMIT=60 bench $CPU --gpu "$DEVICE" --gpu-recalibrate
# Every shape at the sweep's sizes; the fastest at the largest of them.
LIMIT=150 bench $SWEEP --gpu "$DEVICE" --gpu-kernel "$SHAPES"
last=${SWEEP##* }; big=${BIG##* }
best=""; best_s=""
for s in ${SHAPES//,/ }; do
  t=$(seconds "$s" "$last")
  [ -z "$t" ] && continue
  if [ -z "$best_s" ] || awk "BEGIN{exit !($t < $best_s)}"; then best=$s; best_s=$t; fi
done
say "fastest at N = $last: $best ($best_s s)"
default=${SHAPES%%,*}
[ -n "$best" ] && LIMIT=150 bench $BIG --gpu "$DEVICE" --gpu-kernel "$best"
[ "$best" != "$default" ] && LIMIT=60 bench ${BIG%% *} --gpu "$DEVICE" --gpu-kernel "$default"
t21=$(seconds "$best" "$big")
if [ -n "$t21" ] && awk "BEGIN{exit !($t21 * 7 < $PLAN22)}"; then
  LIMIT=$((PLAN22 + 60)) bench $TOP --gpu "$DEVICE" --gpu-kernel "$best"
else
  say "N = $TOP skipped: N = $big took ${t21:-?} s, N = $TOP would take about 7x that"
fi
# A mixed worker through the embedded coordinator: the GPU's share of the nodes.
data=$(mktemp -d)
timeout 90 "$BIN" count "$last" --gpu "$DEVICE" --data "$data" --json 2>>"$LOG" | tee -a "$LOG"
rm -rf "$data"
# The host's CPUs beside it.
LIMIT=40 bench $CPU --threads "$(nproc)" --no-baseline

{
  echo "| N | what | seconds | Gnodes/s | total |"
  echo "|---|---|---|---|---|"
  sed 's/.*"n":\([0-9]*\),"what":"\([^"]*\)","threads":\([0-9]*\),"total":"\([0-9]*\)","nodes":"\([0-9]*\)","seconds":\([0-9.e+-]*\),"mnodes_per_s":\([0-9.e+-]*\).*/\1 \2@\3 \6 \7 \4/' "$rows" |
    awk '{split($0,a," "); w=a[2]; for(i=3;i<NF-2;i++) w=w" "a[i]; printf "| %s | %s | %.3f | %.1f | %s |\n", a[1], w, a[NF-2], a[NF-1]/1000, a[NF]}'
} >"$TABLE"
cat "$TABLE" | tee -a "$LOG"
say "wall: $(( $(date +%s) - START )) s"
