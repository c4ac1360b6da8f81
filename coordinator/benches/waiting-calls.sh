#!/usr/bin/env bash
# What waiting lease calls cost a coordinator under load: `nqueens loadgen` (in-process coordinator on a
# fresh store) with W workers at the offered rate, alone, then beside K workers whose lease calls wait on
# a second run none of whose jobs is free (`--tail leased`: all leased; `--tail verifying`: every job
# waiting for a second result from an identity drawn for it). With OLD set, each row runs with OLD then
# BIN in turn, ROUNDS times, so that the two builds are compared side by side on one machine.
# Usage: BIN=target/release/nqueens [OLD=/path/to/older/nqueens] [ROUNDS=3] \
#          coordinator/benches/waiting-calls.sh [DURATION] [W] [K]
set -euo pipefail
DURATION=${1:-10s}
W=${2:-1000}
K=${3:-1000}
BIN=${BIN:-target/release/nqueens}
ROUNDS=${ROUNDS:-3}
BUILDS=("$BIN")
[ -n "${OLD:-}" ] && BUILDS=("$OLD" "$BIN")

row() {
  python3 -c '
import json, sys
build, tail = sys.argv[1], sys.argv[2]
r = json.loads(sys.stdin.read())
w = r.get("waited") or {}
p = r["report"]
print("| %s | %s | %d | %.0f | %.1f | %.1f | %d | %d |" % (
    build, tail, w.get("waiters", 0), r["committed_per_second"], p["p50_ms"], p["p99_ms"],
    w.get("calls", 0), r["errors"] + w.get("errors", 0)))' "$1" "$2"
}

echo "| build | tail | waiters | committed/s | report p50 ms | report p99 ms | waiting calls answered | errors |"
echo "|---|---|---|---|---|---|---|---|"
for _ in $(seq "$ROUNDS"); do
  for tail in none leased verifying; do
    for b in "${BUILDS[@]}"; do
      extra=()
      [ "$tail" != none ] && extra=(--waiters "$K" --tail "$tail")
      "$b" loadgen --workers "$W" --duration "$DURATION" "${extra[@]}" --json | row "$b" "$tail"
    done
  done
done
