#!/usr/bin/env bash
# A short GPU check of a kernel change, for a lease with little device time left (about 4 minutes): the
# build before (OLD) at N = 20 with one shape, then this build (BIN) at N = 20 with each shape of SHAPES,
# the calibration measured anew (`bench 18 --gpu-recalibrate`: every candidate's time on one launch), N = 21
# with the fastest shape at N = 20, a mixed worker at N = 19 (`count --gpu`: the GPU's share of the
# nodes), and N = 22 when N = 21's time says it fits in BUDGET seconds from the start. Every total is
# checked against the published count by `nqueens bench` itself (a wrong one fails).
# Usage: BIN=target/release/nqueens OLD=path/to/old coordinator/benches/gpu-quick.sh OUTDIR
#        (DEVICE=cuda:0, SHAPES, BUDGET=245 may be set)
set -uo pipefail
OUTDIR=${1:-target/gpu-quick}
mkdir -p "$OUTDIR"
T0=$(date +%s)
left() { echo $(( ${BUDGET:-245} - ($(date +%s) - T0) )); }
say() { echo "$@"; }
. "$(dirname "$0")/nvrtc.sh"
NEW=${BIN:-target/release/nqueens} OLD=${OLD:-target/release/nqueens-old}
DEVICE=${DEVICE:-cuda:0}
SHAPES=${SHAPES:-flat/256/4,flat/128/4,stream/128/4,stream/256/4,stream/64/4,flat/256/8,coop/128/32}
LOG=$OUTDIR/log.txt
: >"$LOG"
run() { echo "### +$(( $(date +%s) - T0 )) s: $*" | tee -a "$LOG"; timeout "$@" 2>&1 | tee -a "$LOG" | cut -c1-330; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee -a "$LOG"
run 30 $OLD bench 20 --gpu "$DEVICE" --gpu-kernel "${SHAPES%%,*}" --json
run 90 $NEW bench 20 --gpu "$DEVICE" --gpu-kernel "$SHAPES" --json
run 60 $NEW bench 18 --gpu "$DEVICE" --gpu-recalibrate --json
best=$(grep '"n":20,' "$LOG" | grep -v '^###' | tail -n +2 | sed 's/.*"what":"gpu \([^ ]*\) .*"seconds":\([0-9.e+-]*\).*/\2 \1/' | sort -g | head -1 | cut -d' ' -f2)
echo "best at N = 20: $best" | tee -a "$LOG"
run 80 $NEW bench 21 --gpu "$DEVICE" --gpu-kernel "${best:-${SHAPES%%,*}}" --json
t21=$(grep '"n":21,' "$LOG" | tail -1 | sed 's/.*"seconds":\([0-9.]*\).*/\1/')
d=$(mktemp -d); run 40 $NEW count 19 --gpu "$DEVICE" --data "$d" --json
rm -rf "$d"
est=$(awk "BEGIN{print int(${t21:-999} * 7.2 + 15)}")
echo "N = 22 estimate ${est} s, left $(left) s"
if [ "$est" -lt "$(left)" ]; then run $(( $(left) )) $NEW bench 22 --gpu "$DEVICE" --gpu-kernel "${best:-${SHAPES%%,*}}" --json; fi
echo "end after $(( $(date +%s) - T0 )) s"
