#!/usr/bin/env bash
# What verification costs a coordinator among many identities: `nqueens loadgen` (in-process
# coordinator on a fresh store, each simulated worker its own identity) at fractions of jobs verified,
# 1.0 as in a record run. A verified job's first result waits for an identity the draw admits; every
# other identity's lease call looks at it in the retry queue. With OLD set, each row runs with OLD then
# BIN in turn, ROUNDS times, so that the two builds are compared side by side on one machine.
# Usage: BIN=target/release/nqueens [OLD=/path/to/older/nqueens] [ROUNDS=2] [FRACTIONS="1.0 0.01"] \
#          coordinator/benches/verified-load.sh [DURATION] [W]
set -euo pipefail
DURATION=${1:-15s}
W=${2:-1000}
BIN=${BIN:-target/release/nqueens}
ROUNDS=${ROUNDS:-2}
FRACTIONS=${FRACTIONS:-1.0 0.01}
BUILDS=("$BIN")
[ -n "${OLD:-}" ] && BUILDS=("$OLD" "$BIN")

echo "| build | verified | committed/s | report p50 ms | report p99 ms | lease p99 ms | errors |"
echo "|---|---|---|---|---|---|---|"
for _ in $(seq "$ROUNDS"); do
  for f in $FRACTIONS; do
    for b in "${BUILDS[@]}"; do
      "$b" loadgen --workers "$W" --duration "$DURATION" --verify-fraction "$f" --json |
        python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
print("| %s | %s | %.0f | %.1f | %.1f | %.1f | %d |" % (sys.argv[1], sys.argv[2],
    r["committed_per_second"], r["report"]["p50_ms"], r["report"]["p99_ms"], r["lease"]["p99_ms"],
    r["errors"]))' "$b" "$f"
    done
  done
done
