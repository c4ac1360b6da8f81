#!/usr/bin/env bash
# Nsight Compute on one launch of each shape: where the kernel's time goes (issue 39). Runs `nqueens
# bench N --gpu --gpu-kernel SHAPE` under `ncu --clock-control none`, profiling the fourth launch only
# (the first ones warm up), with the sections that say how busy the SMs were, why warps stalled,
# occupancy and the caches' hit rates, then prints the lines that matter; each shape's whole output is
# OUTDIR/ncu-SHAPE.txt. About 40 s a shape at N = 20 on an H200. Needs ncu (the CUDA toolkit's Nsight
# Compute: on the lent machines, in the image) and NVRTC (found as gpu.sh finds it).
# Usage: BIN=target/release/nqueens coordinator/benches/gpu-profile.sh OUTDIR   (N=20, DEVICE, SHAPES)
set -uo pipefail
OUTDIR=${1:-target/gpu-profile}
mkdir -p "$OUTDIR"
BIN=${BIN:-target/release/nqueens}
N=${N:-20}
DEVICE=${DEVICE:-cuda:0}
SHAPES=${SHAPES:-stream/256/4 flat/256/4 coop/128/32}
say() { echo "$@"; }
. "$(dirname "$0")/nvrtc.sh"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda*/bin/ncu 2>/dev/null | tail -1)
[ -n "$NCU" ] || { echo "no ncu on this machine" >&2; exit 1; }
echo "ncu: $NCU"
for s in $SHAPES; do
  f="$OUTDIR/ncu-$(echo "$s" | tr / -).txt"
  timeout 150 "$NCU" --clock-control none --kernel-name nq_search --launch-skip 3 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats --section SchedulerStats \
    --section WarpStateStats --section InstructionStats --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section SourceCounters --print-details all \
    --metrics "regex:^smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio$" \
    "$BIN" bench "$N" --gpu "$DEVICE" --gpu-kernel "$s" --json >"$f" 2>&1
  echo "### $s: rc=$?"
  grep -v '^{' "$f" | grep -i -E 'Duration|Issue Slots Busy|Theoretical Warps|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|Avg. Active Threads|L1/TEX Hit|L2 Hit|Stall|nodes on the device' | cut -c1-160 | head -30
done
