#!/usr/bin/env bash
# Exact or absent under damage (issue 16): counts N once into a pristine data directory, then for many
# byte positions of sled's `db` and of the ledger copies the directory, XORs that one byte with 0x5a and
# counts N again on the copy. Every run must end with the published total or refuse; a different total
# is printed as WRONG and makes the script exit 1. Prints one line per file: exact, refused, wrong.
# Usage: coordinator/benches/flip-bytes.sh [N] [DB_STEP] [LEDGER_STEP]   (default: 14 41 3, about 5 min)
# Environment: BIN (default target/release/nqueens).
set -euo pipefail
N=${1:-14}
DB_STEP=${2:-41}
LEDGER_STEP=${3:-3}
BIN=${BIN:-target/release/nqueens}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PRISTINE=$TMP/pristine
WORK=$TMP/work
total() { python3 -c 'import json,sys
try: print(json.load(sys.stdin)["total"])
except Exception: print("refused")'; }
want=$("$BIN" count "$N" --data "$PRISTINE" --json 2>/dev/null | total)
echo "N = $N: $want"
bad=0
for file in db results.jsonl; do
  step=$([ "$file" = db ] && echo "$DB_STEP" || echo "$LEDGER_STEP")
  len=$(stat -c %s "$PRISTINE/$file")
  exact=0 refused=0 wrong=0
  for ((at = 0; at < len; at += step)); do
    rm -rf "$WORK"
    cp -r "$PRISTINE" "$WORK"
    python3 -c "import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[int(sys.argv[2])] ^= 0x5a; open(p, 'wb').write(b)" \
      "$WORK/$file" "$at"
    got=$(timeout 120 "$BIN" count "$N" --data "$WORK" --json 2>/dev/null | total || true)
    if [ "$got" = "$want" ]; then
      exact=$((exact + 1))
    elif [ "$got" = refused ]; then
      refused=$((refused + 1))
    else
      wrong=$((wrong + 1))
      bad=1
      echo "WRONG: $file byte $at flipped: total $got"
    fi
  done
  echo "$file ($len bytes, one byte in $step): exact $exact, refused $refused, wrong $wrong"
done
exit $bad
