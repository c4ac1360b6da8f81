#!/usr/bin/env bash
# The disk a loop of hand-backs costs the coordinator's store, one lease at a time: store format 7's
# entries against format 8's bits, on sled's files once flushed. HAND_BACKS=1000000 by default.
# Usage: coordinator/benches/hand-backs-disk.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -m1 'model name' /proc/cpuinfo || true
HAND_BACKS="${HAND_BACKS:-1000000}" cargo test --locked -p nqueens-coordinator --lib -- \
    --ignored --exact durable::store::handbacks::tests::hand_backs_disk_benchmark --nocapture
