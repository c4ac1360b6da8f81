#!/usr/bin/env bash
# What worker credentials cost the coordinator (issue 37): `nqueens serve` behind an operator token on a
# fresh store, then `nqueens loadgen` against it in turns, once with the operator's token (workers known
# by the names they state, as before credentials) and once with an issued worker credential (every call's
# token checked by HMAC, worker ids scoped to the identity, the credential's lease limit, outcomes
# masked). Unpaced: each simulated worker as fast as it is answered, so committed/s is the capacity.
# Nothing is verified (`--verify-fraction 0`: a credential is told ACCEPTED for a result held for a
# check, which loadgen's own tally would take for counted). Prints one markdown row per load.
# Usage: coordinator/benches/credentials-cost.sh [DURATION] [WORKERS] [ROUNDS]   (after a build)
set -euo pipefail
DURATION=${1:-10s}
WORKERS=${2:-100}
ROUNDS=${3:-2}
BIN=${BIN:-target/release/nqueens}
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

row() {
  python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
l, p = r["lease"], r["report"]
print("| %s | %d | %.0f | %.1f | %.1f | %.1f | %.1f | %d | %d |" % (
    sys.argv[1], r["workers"], r["committed_per_second"], l["p50_ms"], l["p99_ms"],
    p["p50_ms"], p["p99_ms"], r["errors"], r["jobs_done"]))' "$1"
}

echo "| token | workers | committed/s | lease p50 ms | lease p99 ms | report p50 ms | report p99 ms | errors | jobs done (checked) |"
echo "|---|---|---|---|---|---|---|---|---|"
for round in $(seq "$ROUNDS"); do
  for who in operator credential; do
    dir=$(mktemp -d -p "$WORK")
    (umask 077 && openssl rand -hex 32 >"$WORK/operator.token")
    "$BIN" serve --listen 127.0.0.1:0 --data "$dir" --progress-interval 1h \
      --token-file "$WORK/operator.token" >"$WORK/serve.log" 2>&1 &
    serve=$!
    until port=$(grep -o 'addr=127.0.0.1:[0-9]*' "$WORK/serve.log" | cut -d: -f2); [ -n "$port" ]; do sleep 0.05; done
    export NQUEENS_COORDINATOR="http://127.0.0.1:$port"
    export NQUEENS_TOKEN_FILE="$WORK/operator.token"
    workers_token=()
    if [ "$who" = credential ]; then
      rm -f "$WORK/load.token"
      "$BIN" credential issue "load-$round" --out "$WORK/load.token" 2>/dev/null
      workers_token=(--worker-token-file "$WORK/load.token")
    fi
    NQUEENS_TOKEN="$(cat "$WORK/operator.token")" "$BIN" loadgen --coordinator "$NQUEENS_COORDINATOR" \
      "${workers_token[@]}" --workers "$WORKERS" --rate 0 --verify-fraction 0 --duration "$DURATION" \
      --json | row "$who"
    kill "$serve"
    wait "$serve" 2>/dev/null || true
  done
done
