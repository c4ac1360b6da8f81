#!/usr/bin/env bash
# Coordinator overhead (issue 3): N through `nqueens serve` + 2 single-thread `nqueens worker` processes,
# against `nqueens count N --threads 2`, interleaved so that both see the same machine state.
# Usage: coordinator/benches/cluster-overhead.sh [N] [ROUNDS]   (after `cargo build --release`)
set -euo pipefail
N=${1:-17}
ROUNDS=${2:-3}
BIN=${BIN:-target/release/nqueens}
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT

now() { date +%s.%N; }

cluster() {
  local dir=$WORK/cluster-$1 port log
  mkdir -p "$dir"
  log=$dir/serve.log
  RUST_LOG=info "$BIN" serve --listen 127.0.0.1:0 --data "$dir/store" >"$log" 2>&1 &
  local serve=$!
  until port=$(grep -o 'addr=127.0.0.1:[0-9]*' "$log" | cut -d: -f2); [ -n "$port" ]; do sleep 0.05; done
  local start end
  start=$(now)
  "$BIN" submit "$N" --coordinator "127.0.0.1:$port" >/dev/null
  for w in a b; do
    "$BIN" worker --coordinator "127.0.0.1:$port" --threads 1 --name "$w" \
      --journal "$dir/$w.journal" --exit-when-idle 2>"$dir/$w.log" &
  done
  wait $(jobs -p | grep -v "^$serve$")
  end=$(now)
  "$BIN" status --coordinator "127.0.0.1:$port" | grep -q " done," || { echo "run not done" >&2; exit 1; }
  kill "$serve"; wait "$serve" || true
  echo "$end - $start" | bc
}

local_count() {
  local start end
  start=$(now)
  "$BIN" count "$N" --threads 2 --data "$WORK/count-$1" >/dev/null 2>&1
  end=$(now)
  echo "$end - $start" | bc
}

echo "N = $N, $ROUNDS rounds, $(nproc) cores: seconds (count --threads 2 | serve + 2 workers)"
for r in $(seq 1 "$ROUNDS"); do
  c=$(local_count "$r")
  s=$(cluster "$r")
  printf 'round %d: %.3f | %.3f  ratio %.3f\n' "$r" "$c" "$s" "$(echo "$s / $c" | bc -l)"
done
