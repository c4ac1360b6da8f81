#!/usr/bin/env bash
# A certificate at record scale (issue 38): fills one run of N = 28 (23,402,790 jobs) to the end through
# the real commit path (`nqueens loadgen --data`, simulated workers reporting sealed synthetic results),
# then times `nqueens certificate` on the stopped store (the audit, every result read in the plan's
# order, the file written and synced) and `nqueens spot-check --sample 0` on the file (every line
# checked against the plan, the sums, the root; nothing recomputed: an N = 28 job takes about an hour).
# Prints bytes per job and the times. Needs about 3.5 GB of disk (store, ledger, certificate).
# Usage: coordinator/benches/certificate-at-scale.sh   (BIN=target/release/nqueens, DATA=dir to keep)
set -euo pipefail
BIN=${BIN:-target/release/nqueens}
KEEP=${DATA:+1}
DATA=${DATA:-$(mktemp -d)/store}
trap '[ -n "$KEEP" ] || rm -rf "$(dirname "$DATA")"' EXIT
JOBS=23402790
have=0
start=$(date +%s)
while [ "$have" -lt "$JOBS" ]; do
  have=$("$BIN" loadgen --data "$DATA" --reuse --n 28 --verify-fraction 0 --workers 8 --batch ${BATCH:-1024} \
    --rate 0 --warmup 1s --duration 60s --json |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["jobs_done"])')
  echo "filled $have of $JOBS ($(( $(date +%s) - start )) s)" >&2
done
run=$("$BIN" audit --data "$DATA" --json | python3 -c 'import json,sys; print([json.loads(l)["run"] for l in sys.stdin][-1])')
cert=$(dirname "$DATA")/n28.cert
/usr/bin/time -f "certificate: %e s wall, %M KB peak RSS" "$BIN" certificate "$run" --data "$DATA" --out "$cert"
bytes=$(stat -c %s "$cert")
echo "certificate: $bytes bytes, $(python3 -c "print(round($bytes / $JOBS, 1))") bytes a job"
/usr/bin/time -f "spot-check: %e s wall, %M KB peak RSS" "$BIN" spot-check "$cert" --sample 0
