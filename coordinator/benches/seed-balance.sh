#!/usr/bin/env bash
# How evenly a GPU launch's seeds fall on a device's lanes, largest first (the default expansion) against
# level by level (the expansion before), modelled on the host from every seed's true size. Each case is
# `N FIRST_JOB JOBS SEEDS GRID RESIDENT` (see common/examples/seed_balance.rs): an H100 running
# `flat/128/4` launches a grid of 270,336 threads (132 SMs, 2,048 threads each) and asks for 4 seeds per
# thread; about 150,000 run at once (9 blocks of 128 per SM, for a shared stack of 12 levels, 25 KB a
# block, in the 228 KB of an SM).
# Usage: coordinator/benches/seed-balance.sh [OUTFILE]   (about 8 minutes on 2 cores)
set -euo pipefail
OUT=${1:-target/seed-balance.txt}
mkdir -p "$(dirname "$OUT")"
cargo build --release --locked -p nqueens-common --example seed_balance 2>&1 | tail -1
{
  cpu() { grep -m1 "^$1" /proc/cpuinfo | cut -d: -f2- | xargs; }
  echo "## $(date -u +%FT%TZ), $(cpu 'model name') family $(cpu 'cpu family') model $(cpu 'model\s'), $(nproc) threads"
  while read -r c; do
    # shellcheck disable=SC2086
    target/release/examples/seed_balance $c
  done <<'CASES'
16 0 1000 1081344 270336 150000
17 0 1000 1081344 270336 150000
18 0 1000 1081344 270336 150000
20 40 2 1081344 270336 150000
CASES
} | tee "$OUT"
