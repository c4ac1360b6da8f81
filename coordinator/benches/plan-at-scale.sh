#!/usr/bin/env bash
# Record-size runs on a fresh coordinator (issue 7): for each N, start `nqueens serve` on an empty store,
# create the d4 run (its full job list is enumerated once to count and fingerprint it), then measure: the
# time to create it, the store on disk, the coordinator's resident memory (peak), the time until a worker
# is leased its first job, and the time to restart the coordinator on that store (audit + fingerprint check).
# Usage: coordinator/benches/plan-at-scale.sh [N...]   (after `cargo build --release`)
set -euo pipefail
SIZES=${*:-27 28}
BIN=${BIN:-target/release/nqueens}
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc; }
serve() {
  : >"$WORK/serve.log"
  "$BIN" serve --listen 127.0.0.1:0 --data "$1" --progress-interval 1h >"$WORK/serve.log" 2>&1 &
  SERVE=$!
  until PORT=$(grep -o 'addr=127.0.0.1:[0-9]*' "$WORK/serve.log" | cut -d: -f2); [ -n "$PORT" ]; do sleep 0.02; done
}
kib() { grep "$1" "/proc/$SERVE/status" | awk '{print $2}'; }

echo "| N | jobs | create | store on disk | coordinator RSS after create (peak) | slowest lease of a fresh run (leases in 200 ms) | restart (audit, fingerprint) |"
echo "|---|---|---|---|---|---|---|"
for n in $SIZES; do
  data=$WORK/store-$n
  serve "$data"
  t=$(now)
  "$BIN" submit "$n" --coordinator "127.0.0.1:$PORT" --json >"$WORK/run.json"
  create=$(since "$t")
  jobs=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["jobs_total"])' "$WORK/run.json")
  rss=$(kib VmRSS); hwm=$(kib VmHWM)
  # One simulated worker creates a second run of N and leases from it at once, with Lease calls: the
  # slowest of them (the first, which also connects) is the wait for a first job.
  first=$("$BIN" loadgen --coordinator "http://127.0.0.1:$PORT" --n "$n" --workers 1 --rate 0 \
    --warmup 0s --duration 200ms --json |
    python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["lease"]["max_ms"], r["lease"]["calls"])')
  kill "$SERVE"; wait "$SERVE" || true
  disk=$(du -sk "$data" | cut -f1)
  t=$(now)
  serve "$data"
  restart=$(since "$t")
  kill "$SERVE"; wait "$SERVE" || true
  set -- $first
  printf "| %s | %s | %.2f s | %s KiB | %s KiB (%s KiB) | %.2f ms (%s) | %.2f s |\n" \
    "$n" "$jobs" "$create" "$disk" "$rss" "$hwm" "$1" "$2" "$restart"
done
