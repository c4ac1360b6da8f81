#!/usr/bin/env bash
# Coordinator load (issue 7): `nqueens serve` in one process on a fresh store, `nqueens loadgen` in another,
# both on this machine. For each fleet size W, W simulated workers (one connection each) lease one job and
# report one synthetic result per cycle, as workers do: at the target offered load (5,000 results/s), then
# unpaced (each worker as fast as it is answered: the coordinator's capacity), then at the target again with
# the lease riding on the report (`--lease-with-report`). Prints one markdown row per run; with
# `--lease-with-report`, "report" latency includes the lease.
# Usage: coordinator/benches/loadgen.sh [DURATION] [W...]   (after `cargo build --release`)
set -euo pipefail
DURATION=${1:-20s}
shift || true
FLEETS=${*:-10 100 1000}
BIN=${BIN:-target/release/nqueens}
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

row() {
  python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
offered = "%.0f" % r["offered_per_second"] if r["offered_per_second"] else "unpaced"
l, p = r["lease"], r["report"]
lease = ("%.1f | %.1f" % (l["p50_ms"], l["p99_ms"])) if l["calls"] else "- | -"
mode = "with report" if r["lease_with_report"] else "own call"
print("| %d | %s | %s | %.0f | %s | %.1f | %.1f | %.1f | %d | %d |" % (
    r["workers"], mode, offered, r["committed_per_second"], lease,
    p["p50_ms"], p["p99_ms"], p["max_ms"], r["errors"], r["jobs_done"]))'
}

echo "| workers | lease | offered/s | committed/s | lease p50 ms | lease p99 ms | report p50 ms | report p99 ms | report max ms | errors | jobs done (checked) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for w in $FLEETS; do
  for mode in "5000" "0" "5000 --lease-with-report"; do
    set -- $mode
    dir=$(mktemp -d -p "$WORK")
    "$BIN" serve --listen 127.0.0.1:0 --data "$dir" --progress-interval 1h >"$WORK/serve.log" 2>&1 &
    serve=$!
    until port=$(grep -o 'addr=127.0.0.1:[0-9]*' "$WORK/serve.log" | cut -d: -f2); [ -n "$port" ]; do sleep 0.05; done
    "$BIN" loadgen --coordinator "http://127.0.0.1:$port" --workers "$w" --rate "$1" ${2:-} \
      --duration "$DURATION" --json | row
    kill "$serve"; wait "$serve" || true
    rm -rf "$dir"   # its dirty pages must not be written back during the next run
  done
done
