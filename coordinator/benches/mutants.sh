#!/usr/bin/env bash
# Mutation testing of the code between a result and a total (issue 42): cargo-mutants on exactly the
# guard files, each group with its package's fastest tests (the unit tests: `-- --lib`), one job at a time
# (2-core machines). Prints one markdown row per file: mutants, caught, missed, unviable, timeouts.
# A missed mutant is a missing test, or an equivalent mutant to be explained in RELIABILITY.md.
# Usage: coordinator/benches/mutants.sh [GROUP...]   (groups: common proto coordinator worker; default all)
# Needs: cargo install --locked cargo-mutants (27.1 used). About 8 s per mutant on a 2-core Zen 4.
set -euo pipefail
OUT=${OUT:-target/mutants}
GROUPS_WANTED=${*:-common proto coordinator worker}

declare -A FILES PACKAGE
PACKAGE[common]=nqueens-common
FILES[common]="common/src/family.rs common/src/names.rs common/src/key.rs common/src/job.rs common/src/tally.rs common/src/jsonl.rs common/src/symmetry.rs common/src/checksum.rs common/src/certificate.rs common/src/partition/mod.rs common/src/partition/d4.rs"
PACKAGE[proto]=nqueens-proto
FILES[proto]="proto/src/codec.rs proto/src/bounds.rs"
PACKAGE[coordinator]=nqueens-coordinator
FILES[coordinator]="coordinator/src/durable/store/passes.rs coordinator/src/durable/store/roots.rs coordinator/src/service/lease.rs coordinator/src/service/lease_table.rs coordinator/src/service/report.rs coordinator/src/service/spot.rs coordinator/src/durable/store/commit.rs coordinator/src/durable/store/revoke.rs coordinator/src/durable/reconcile.rs coordinator/src/durable/ledger/packed.rs coordinator/src/durable/credentials.rs coordinator/src/wire/auth.rs coordinator/src/durable/committer.rs coordinator/src/durable/ledger/view.rs coordinator/src/durable/certify.rs coordinator/src/service/certify.rs coordinator/src/service/steer.rs coordinator/src/durable/store/lifts.rs coordinator/src/durable/store/handbacks.rs coordinator/src/wire/request_bytes.rs coordinator/src/wire/one_message.rs coordinator/src/durable/offline.rs coordinator/src/durable/store/repair.rs"
PACKAGE[worker]=nqueens-worker
FILES[worker]="worker/src/journal.rs worker/src/compute/mod.rs worker/src/compute/gpu.rs worker/src/compute/launch.rs"

echo "| file | mutants | caught | missed | unviable | timeouts |"
echo "|---|---|---|---|---|---|"
for group in $GROUPS_WANTED; do
  args=()
  for f in ${FILES[$group]}; do args+=(--file "$f"); done
  out="$OUT/$group"
  mkdir -p "$out"
  cargo mutants -p "${PACKAGE[$group]}" --profile mutants -j 1 --timeout 120 "${args[@]}" \
    -o "$out" -- --lib >"$out/run.log" 2>&1 || true
  for f in ${FILES[$group]}; do
    count() { grep -c "^$f:" "$out/mutants.out/$1.txt" 2>/dev/null || true; }
    c=$(count caught); m=$(count missed); u=$(count unviable); t=$(count timeout)
    echo "| \`$f\` | $((c + m + u + t)) | $c | $m | $u | $t |"
  done
done
echo
echo "Missed mutants (each a missing test or an equivalent to explain):"
cat "$OUT"/*/mutants.out/missed.txt 2>/dev/null || true
