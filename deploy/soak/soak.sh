#!/usr/bin/env bash
# deploy/soak/soak.sh: a long chaos soak of one count, run by hand outside the test command.
#
#   deploy/soak/soak.sh [N]          (default N = 20; as root for network namespaces)
#
# One coordinator and three workers (one network namespace each, linked to the host by a veth pair,
# when run as root; plain loopback otherwise), verify fraction 0.05, and every SOAK_EVERY seconds
# (default 120) one fault in turn: a worker killed with SIGKILL and restarted; the coordinator killed with
# SIGKILL and restarted (once kept down for 30 s); a worker's link cut for 30 s (SIGSTOP without
# namespaces); and once, while the coordinator is down, a digit changed in a journal holding results
# it never received. At the end: the run's total and unique count against the published table, and
# `nqueens audit` on the store. Everything is kept in SOAK_DIR (default a new /tmp/nqueens-soak.*).
# Environment: NQUEENS (the binary; default target/debug/nqueens), SOAK_EVERY, SOAK_THREADS (compute
# threads per worker, default 1), SOAK_PORT (default 7460), SOAK_VERIFY (default 0.05).
set -euo pipefail

N=${1:-20}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NQ=${NQUEENS:-$ROOT/target/debug/nqueens}
EVERY=${SOAK_EVERY:-120}
THREADS=${SOAK_THREADS:-1}
PORT=${SOAK_PORT:-7460}
VERIFY=${SOAK_VERIFY:-0.05}
DIR=${SOAK_DIR:-$(mktemp -d /tmp/nqueens-soak.XXXXXX)}
TOKEN=soak-$RANDOM$RANDOM
# Every command reads it from the environment: a token on a command line shows in `ps`.
export NQUEENS_TOKEN="$TOKEN"
mkdir -p "$DIR"
log() { echo "$(date -u +%H:%M:%S) $*" | tee -a "$DIR/soak.log"; }

NETNS=0
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && ip netns add nqsoak-probe 2>/dev/null; then
  ip netns del nqsoak-probe
  NETNS=1
fi

declare -a WPID
SPID=""
cleanup() {
  set +e
  for k in 1 2 3; do [ -n "${WPID[$k]:-}" ] && kill -9 "${WPID[$k]}" 2>/dev/null; done
  [ -n "$SPID" ] && kill -9 "$SPID" 2>/dev/null
  wait 2>/dev/null
  if [ "$NETNS" = 1 ]; then
    for k in 1 2 3; do ip link del "nqs$k" 2>/dev/null; ip netns del "nqsoak$k" 2>/dev/null; done
  fi
}
trap cleanup EXIT

if [ "$NETNS" = 1 ]; then
  for k in 1 2 3; do
    ip netns add "nqsoak$k"
    ip link add "nqs$k" type veth peer name "nqs${k}p"
    ip link set "nqs${k}p" netns "nqsoak$k"
    ip addr add "10.77.$k.1/24" dev "nqs$k"
    ip link set "nqs$k" up
    ip netns exec "nqsoak$k" ip addr add "10.77.$k.2/24" dev "nqs${k}p"
    ip netns exec "nqsoak$k" ip link set "nqs${k}p" up
    ip netns exec "nqsoak$k" ip link set lo up
  done
  LISTEN=0.0.0.0:$PORT
else
  LISTEN=127.0.0.1:$PORT
fi
LOCAL=https://127.0.0.1:$PORT
# Guarded as in production: a token and TLS (a certificate for every address the workers dial).
[ -s "$DIR/tls/server.pem" ] || "$NQ" tls init "$DIR/tls" --force --host 127.0.0.1 \
  --host 10.77.1.1 --host 10.77.2.1 --host 10.77.3.1 >/dev/null
export NQUEENS_TLS_CA="$DIR/tls/ca.pem"

start_serve() {
  "$NQ" serve --data "$DIR/store" --listen "$LISTEN" --lease-timeout 10s \
    --tls-cert "$DIR/tls/server.pem" --tls-key "$DIR/tls/server-key.pem" --progress-interval 60s 2>>"$DIR/serve.log" &
  SPID=$!
  for _ in $(seq 100); do
    "$NQ" status --coordinator "$LOCAL" >/dev/null 2>&1 && return
    sleep 0.2
  done
  log "coordinator did not come up"; exit 1
}

start_worker() {
  local k=$1 url prefix=()
  if [ "$NETNS" = 1 ]; then url=https://10.77.$k.1:$PORT; prefix=(ip netns exec "nqsoak$k"); else url=$LOCAL; fi
  "${prefix[@]}" "$NQ" worker --coordinator "$url" --threads "$THREADS" --name "w$k" \
    --journal "$DIR/w$k.journal" --exit-when-idle 2>>"$DIR/w$k.log" &
  WPID[$k]=$!
}

state() { "$NQ" status --coordinator "$LOCAL" --run "$RUN" --json 2>/dev/null || true; }
field() { sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\)\"\{0,1\}.*/\1/p"; }

log "soak of N = $N in $DIR (network namespaces: $NETNS), a fault every ${EVERY}s"
START=$(date +%s)
start_serve
RUN=$("$NQ" submit "$N" --coordinator "$LOCAL" --verify-fraction "$VERIFY" --json | field run)
log "run $RUN submitted"
for k in 1 2 3; do start_worker "$k"; done

faults=(kill-worker kill-coordinator cut-link kill-worker corrupt-journal kill-coordinator-long cut-link kill-worker kill-coordinator)
declare -A count
i=0
while true; do
  for _ in $(seq "$EVERY"); do
    sleep 1
    [ "$(state | field state)" = done ] && break 2
  done
  fault=${faults[$((i % ${#faults[@]}))]}
  k=$(( (i % 3) + 1 ))
  i=$((i + 1))
  count[$fault]=$(( ${count[$fault]:-0} + 1 ))
  log "fault $i: $fault (worker $k); $(state | field jobs_done) jobs done"
  case $fault in
    kill-worker)
      kill -9 "${WPID[$k]}" 2>/dev/null || true; wait "${WPID[$k]}" 2>/dev/null || true
      sleep 2; start_worker "$k" ;;
    kill-coordinator|kill-coordinator-long)
      kill -9 "$SPID"; wait "$SPID" 2>/dev/null || true
      [ "$fault" = kill-coordinator-long ] && sleep 30
      start_serve ;;
    cut-link)
      if [ "$NETNS" = 1 ]; then
        ip link set "nqs$k" down; sleep 30; ip link set "nqs$k" up
      else
        kill -STOP "${WPID[$k]}"; sleep 30; kill -CONT "${WPID[$k]}"
      fi ;;
    corrupt-journal)
      # The coordinator down long enough for the worker to journal results it cannot deliver.
      kill -9 "$SPID"; wait "$SPID" 2>/dev/null || true
      sleep 40
      kill -9 "${WPID[$k]}" 2>/dev/null || true; wait "${WPID[$k]}" 2>/dev/null || true
      if grep -q '"total"' "$DIR/w$k.journal" 2>/dev/null; then
        line=$(grep -n '"total"' "$DIR/w$k.journal" | tail -1 | cut -d: -f1)
        digit=$(sed -n "${line}p" "$DIR/w$k.journal" | grep -o '"total":[1-9]' | head -1 | tail -c 2)
        sed -i "${line}s/\"total\":$digit/\"total\":$(( digit % 9 + 1 ))/" "$DIR/w$k.journal"
        log "changed a digit on line $line of w$k.journal"
      else
        log "w$k.journal held no result to damage"
      fi
      start_serve; start_worker "$k" ;;
  esac
done

ELAPSED=$(( $(date +%s) - START ))
FINAL=$(state)
TOTAL=$(echo "$FINAL" | field total)
UNIQUE=$(echo "$FINAL" | field unique)
WANT=$(awk -v n="$N" '$1 == n { print $2 " " $3 }' "$ROOT/common/tests/data/solution-counts.tsv")
for k in 1 2 3; do wait "${WPID[$k]}" 2>/dev/null || true; done
kill -TERM "$SPID"; wait "$SPID" 2>/dev/null || true; SPID=""
AUDIT=ok; "$NQ" audit --data "$DIR/store" >"$DIR/audit.txt" 2>&1 || AUDIT=FAILED
SUMMARY="N = $N: total $TOTAL unique $UNIQUE (published: $WANT); audit $AUDIT; ${ELAPSED}s; faults:"
for f in "${!count[@]}"; do SUMMARY+=" $f=${count[$f]}"; done
SUMMARY+="; corrupt records logged by workers: $(cat "$DIR"/w*.log | grep -c -i 'seal\|checksum' || true)"
log "$SUMMARY"
[ "$TOTAL $UNIQUE" = "$WANT" ] && [ "$AUDIT" = ok ]
