#!/usr/bin/env bash
# How evenly a GPU launch's seeds fall on a device's lanes, largest first (the default expansion) against
# level by level (the expansion before), modelled on the host from every seed's true size. Each case is
# `N FIRST_JOB JOBS SEEDS THREADS` (see common/examples/seed_balance.rs). THREADS = 150000 is an H100
# running `flat/128/4`: 132 SMs, 9 blocks of 128 threads each (25 KB of shared stack per block, 228 KB per SM).
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
16 0 1000 1081344 150000
17 0 1000 1081344 150000
18 0 1000 1081344 150000
20 40 2 1081344 150000
CASES
} | tee "$OUT"
