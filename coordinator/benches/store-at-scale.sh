#!/usr/bin/env bash
# The store at record scale (issue 16): fills one run of N = 28 (23,402,790 jobs) through the real commit
# path (`nqueens loadgen --data`: an in-process coordinator, simulated workers reporting synthetic,
# sealed results in batches) up to each SIZE done jobs, and after each size measures
#   - bytes on disk per done job: sled's files, the ledger, and both together;
#   - a restart: `nqueens serve` on the store, from exec to its `coordinator listening` line (open,
#     reconcile with the ledger, audit, load the runs: ready to lease), its phases as logged, and the
#     process's peak resident memory (VmHWM) once listening.
# Prints one markdown row per size. Needs about 120 bytes of disk per done job (store format 5 and ledger format 3; about 360 with format 4 and ledger format 2, 0.8 KiB before).
# Usage: coordinator/benches/store-at-scale.sh [SIZE...]   (default: 500000 2000000)
# Environment: BIN (default target/release/nqueens), DATA (default: a temporary directory, removed after).
set -euo pipefail
SIZES=${*:-500000 2000000}
BIN=${BIN:-target/release/nqueens}
KEEP=${DATA:+1}
DATA=${DATA:-$(mktemp -d)/store}
trap '[ -n "$KEEP" ] || rm -rf "$(dirname "$DATA")"' EXIT

done_jobs() {
  python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs_done"])'
}

echo "| done jobs | sled MB | ledger MB | bytes/job (sled + ledger) | restart s | reconcile ms | audit ms | load ms | peak RSS MB |"
echo "|---|---|---|---|---|---|---|---|---|"
have=0
for size in $SIZES; do
  while [ "$have" -lt "$size" ]; do
    have=$("$BIN" loadgen --data "$DATA" --reuse --n 28 --verify-fraction 0 --workers 8 --batch 64 \
      --rate 0 --warmup 1s --duration 20s --json | done_jobs)
  done
  sled=$(du -sb --exclude=results.jsonl "$DATA" | cut -f1)
  ledger=$(stat -c %s "$DATA/results.jsonl")
  log=$(mktemp)
  start=$(date +%s.%N)
  "$BIN" serve --data "$DATA" --listen 127.0.0.1:0 >"$log" 2>&1 &
  pid=$!
  until grep -q "coordinator listening" "$log"; do
    kill -0 "$pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.05
  done
  ready=$(echo "$(date +%s.%N) - $start" | bc)
  rss=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
  kill "$pid"
  wait "$pid" || true
  phase() { grep -o "$1=[0-9]*" "$log" | head -1 | cut -d= -f2; }
  printf '| %d | %.0f | %.0f | %.0f | %.1f | %s | %s | %s | %.0f |\n' "$have" \
    "$(echo "$sled / 1000000" | bc -l)" "$(echo "$ledger / 1000000" | bc -l)" \
    "$(echo "($sled + $ledger) / $have" | bc -l)" "$ready" \
    "$(phase reconcile_ms)" "$(phase audit_ms)" "$(phase load_ms)" "$(echo "$rss / 1024" | bc -l)"
  rm -f "$log"
done
