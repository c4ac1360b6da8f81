#!/usr/bin/env bash
# A mixed worker's GPU share against its speed (issue 39), for a lease of about 3 minutes: the host's
# CPU threads alone (`bench 18`, as many threads as a mixed worker runs), the GPU alone (`bench 21 --gpu`,
# the calibrated shape), then whole counts through the embedded coordinator and a mixed worker (`count N
# --gpu`) at N = 19 and 21, with the build before (OLD) and this one (BIN) in turn. Each count line ends
# with the GPU's share of the nodes and the share its speed calls for, GPU / (GPU + CPU threads), from
# the two rates measured first. Every total is checked: `bench` against the published count, `count` by
# the coordinator's own checks and here against the published count.
# Usage: BIN=target/release/nqueens OLD=path/to/old coordinator/benches/gpu-mixed.sh OUTDIR
#        (DEVICE=cuda:0, NS="19 21" the counts, BIG=21 the GPU's rate; OLD may be left out)
set -uo pipefail
OUTDIR=${1:-target/gpu-mixed}
mkdir -p "$OUTDIR"
T0=$(date +%s)
say() { echo "$@"; }
. "$(dirname "$0")/nvrtc.sh"
NEW=${BIN:-target/release/nqueens} OLD=${OLD:-}
DEVICE=${DEVICE:-cuda:0} NS=${NS:-19 21} BIG=${BIG:-21}
LOG=$OUTDIR/log.txt
: >"$LOG"
THREADS=$(( $(nproc) > 1 ? $(nproc) - 1 : 1 ))
run() { echo "### +$(( $(date +%s) - T0 )) s: $*" | tee -a "$LOG"; timeout "$@" 2>&1 | tee -a "$LOG" | cut -c1-330; }
rate() { grep "\"n\":$1," "$LOG" | grep "$2" | tail -1 | sed 's/.*"mnodes_per_s":\([0-9.e+-]*\).*/\1/'; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | tee -a "$LOG"
run 60 "$NEW" bench 18 --threads "$THREADS" --no-baseline --json
cpu=$(rate 18 '"threads":'"$THREADS"',')
run 90 "$NEW" bench "$BIG" --gpu "$DEVICE" --json
gpu=$(rate "$BIG" '"what":"gpu ')
ideal=$(awk "BEGIN{g=${gpu:-0}; c=${cpu:-0}; if (g + c > 0) printf \"%.1f\", 100 * g / (g + c); else print \"?\"}")
echo "CPU threads ($THREADS): ${cpu:-?} Mnodes/s; GPU alone: ${gpu:-?} Mnodes/s; the share its speed calls for: $ideal %" | tee -a "$LOG"
for bin in ${OLD:+"$OLD"} "$NEW"; do
  for n in $NS; do
    d=$(mktemp -d)
    run 60 "$bin" count "$n" --gpu "$DEVICE" --data "$d" --json
    rm -rf "$d"
    line=$(grep "\"n\":$n,\"strategy\"" "$LOG" | tail -1)
    want=$(awk -v n="$n" -F'\t' '$1 == n {print $2}' "$(dirname "$0")/../../common/tests/data/solution-counts.tsv")
    echo "$line" | awk -v bin="$bin" -v n="$n" -v ideal="$ideal" -v want="$want" '{
      t = $0; sub(/.*"total":"/, "", t); sub(/".*/, "", t);
      a = $0; sub(/.*"nodes":"/, "", a); sub(/".*/, "", a);
      g = $0; sub(/.*"gpu_nodes":"/, "", g); sub(/".*/, "", g);
      s = $0; sub(/.*"seconds":/, "", s); sub(/[,}].*/, "", s);
      check = (want == "" ? "total not checked here" : (t == want ? "exact" : "WRONG"));
      if (a > 0) printf "%s count %d --gpu: %.2f s, GPU share %.1f %% (its speed: %s %%), %s\n", bin, n, s, 100 * g / a, ideal, check
    }' | tee -a "$LOG"
  done
done
echo "end after $(( $(date +%s) - T0 )) s" | tee -a "$LOG"
