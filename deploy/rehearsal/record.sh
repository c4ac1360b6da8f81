#!/usr/bin/env bash
# deploy/rehearsal/record.sh: a record run rehearsed once by hand, outside the test command (issue 38).
#
#   deploy/rehearsal/record.sh [N]      (default N = 20; as root for network namespaces)
#
# One coordinator (TLS, an operator token, client certificates of its CA) and three worker credentials,
# each worker in a network namespace of its own linked to the host by a veth pair (plain loopback when
# not root): node-1 with a token and the default kernel, node-2 with a client certificate and a stack
# kernel (another kernel family), and "liar", a credential whose worker reports a wrong count every
# LIAR_EVERY jobs (default 25). A GPU worker (node-gpu, its own credential) joins where `nqueens gpus`
# lists a device (PoCL counts). `submit N --record`; once a quarter of the jobs are done node-1's
# worker is killed with SIGKILL and started again; at half the coordinator is. At the end: the total
# against the published count, the liar quarantined, every job with two independent results, `audit`,
# the certificate's size and root, and `spot-check` of it from a clean directory with a seed drawn
# after it was written. Everything is kept in REHEARSAL_DIR (default a new /tmp/nqueens-record.*); the
# summary is REHEARSAL_DIR/summary.txt.
# Environment: NQUEENS (a binary built with the `faults` feature, e.g. `cargo build --release
# --features faults -p nqueens`; default target/release/nqueens), REHEARSAL_PORT (default 7470),
# REHEARSAL_THREADS (compute threads per worker, default 1), LIAR_EVERY.
set -euo pipefail

N=${1:-20}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NQ=${NQUEENS:-$ROOT/target/release/nqueens}
PORT=${REHEARSAL_PORT:-7470}
THREADS=${REHEARSAL_THREADS:-1}
LIAR_EVERY=${LIAR_EVERY:-25}
DIR=${REHEARSAL_DIR:-$(mktemp -d /tmp/nqueens-record.XXXXXX)}
mkdir -p "$DIR"
log() { echo "$(date -u +%H:%M:%S) $*" | tee -a "$DIR/summary.txt"; }
"$NQ" worker --help | grep -q -- --fault-wrong-every || {
  echo "$NQ lacks the fault switches: build it with --features faults" >&2
  exit 2
}

NETNS=0
if [ "$(id -u)" = 0 ] && command -v ip >/dev/null && ip netns add nqrec-probe 2>/dev/null; then
  ip netns del nqrec-probe
  NETNS=1
fi
declare -A WPID
SPID=""
cleanup() {
  set +e
  for k in "${!WPID[@]}"; do kill -9 "${WPID[$k]}" 2>/dev/null; done
  [ -n "$SPID" ] && kill -9 "$SPID" 2>/dev/null
  wait 2>/dev/null
  if [ "$NETNS" = 1 ]; then
    for k in 1 2 3 4; do ip link del "nqr$k" 2>/dev/null; ip netns del "nqrec$k" 2>/dev/null; done
  fi
}
trap cleanup EXIT
if [ "$NETNS" = 1 ]; then
  for k in 1 2 3 4; do
    ip netns add "nqrec$k"
    ip link add "nqr$k" type veth peer name "nqr${k}p"
    ip link set "nqr${k}p" netns "nqrec$k"
    ip addr add "10.78.$k.1/24" dev "nqr$k"
    ip link set "nqr$k" up
    ip netns exec "nqrec$k" ip addr add "10.78.$k.2/24" dev "nqr${k}p"
    ip netns exec "nqrec$k" ip link set "nqr${k}p" up
    ip netns exec "nqrec$k" ip link set lo up
  done
  LISTEN=0.0.0.0:$PORT
else
  LISTEN=127.0.0.1:$PORT
fi
LOCAL=https://127.0.0.1:$PORT
"$NQ" tls init "$DIR/tls" --force --host 127.0.0.1 --host 10.78.1.1 --host 10.78.2.1 \
  --host 10.78.3.1 --host 10.78.4.1 >/dev/null
(umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$DIR/operator.token")
export NQUEENS_TLS_CA="$DIR/tls/ca.pem"
op() { NQUEENS_TOKEN_FILE="$DIR/operator.token" "$NQ" "$@" --coordinator "$LOCAL"; }

start_serve() {
  "$NQ" serve --data "$DIR/store" --listen "$LISTEN" --lease-timeout 10s \
    --token-file "$DIR/operator.token" --tls-cert "$DIR/tls/server.pem" \
    --tls-key "$DIR/tls/server-key.pem" --tls-client-ca "$DIR/tls/ca.pem" \
    --progress-interval 30s 2>>"$DIR/serve.log" &
  SPID=$!
  for _ in $(seq 150); do
    op status >/dev/null 2>&1 && return
    sleep 0.2
  done
  log "the coordinator did not come up"; exit 1
}

# Worker k (1: node-1, 2: node-2, 3: liar, 4: node-gpu) in namespace k.
start_worker() {
  local k=$1 url prefix=() args=()
  if [ "$NETNS" = 1 ]; then url=https://10.78.$k.1:$PORT; prefix=(ip netns exec "nqrec$k"); else url=$LOCAL; fi
  case $k in
    1) args=(--name node-1 --token-file "$DIR/node-1.token") ;;
    2) args=(--name node-2 --kernel "$STACK_KERNEL" --client-cert "$DIR/tls/workers/node-2.pem"
             --client-key "$DIR/tls/workers/node-2-key.pem") ;;
    3) args=(--name liar --token-file "$DIR/liar.token" --fault-wrong-every "$LIAR_EVERY") ;;
    4) args=(--name node-gpu --token-file "$DIR/node-gpu.token" --gpu "$DEVICE") ;;
  esac
  "${prefix[@]}" "$NQ" worker --coordinator "$url" --threads "$THREADS" \
    --journal "$DIR/w$k.journal" "${args[@]}" 2>>"$DIR/w$k.log" &
  WPID[$k]=$!
}

field() { sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\)\"\{0,1\}.*/\1/p"; }
state() { op status --run "$RUN" --json 2>/dev/null || true; }

# The stack kernel of this CPU's widest instruction set: another family than the default list kernel.
STACK_KERNEL=scalar
for k in avx512 avx2 sse41 neon; do
  if "$NQ" count 8 --kernel "$k" >/dev/null 2>&1; then STACK_KERNEL=$k; break; fi
done
# The first device `nqueens gpus` lists (a PoCL CPU device counts: it is named, so it is used).
DEVICE=$("$NQ" gpus 2>/dev/null | grep -o '^\(cuda\|opencl\):[0-9]*' | head -1 || true)
GPU=0
[ -n "$DEVICE" ] && GPU=1

log "record rehearsal of N = $N in $DIR (network namespaces: $NETNS, stack kernel: $STACK_KERNEL, GPU worker: ${DEVICE:-none})"
START=$(date +%s)
start_serve
op credential issue node-1 --out "$DIR/node-1.token" >/dev/null
op credential issue node-2 >/dev/null
"$NQ" tls worker "$DIR/tls" node-2 >/dev/null
op credential issue liar --out "$DIR/liar.token" >/dev/null
[ "$GPU" = 1 ] && op credential issue node-gpu --out "$DIR/node-gpu.token" >/dev/null
RUN=$(op submit "$N" --record --json 2>>"$DIR/submit.log" | field run)
TOTAL_JOBS=$(state | field jobs_total)
log "run $RUN submitted: $TOTAL_JOBS jobs, every one to be computed by two credentials"
for k in 1 2 3; do start_worker "$k"; done
[ "$GPU" = 1 ] && start_worker 4

killed_worker=0
killed_coordinator=0
while true; do
  sleep 2
  s=$(state)
  [ "$(echo "$s" | field state)" = done ] && break
  done_jobs=$(echo "$s" | field jobs_done)
  done_jobs=${done_jobs:-0}
  if [ "$killed_worker" = 0 ] && [ "$((done_jobs * 4))" -ge "$TOTAL_JOBS" ]; then
    log "a quarter done ($done_jobs jobs): node-1's worker killed with SIGKILL, started again"
    kill -9 "${WPID[1]}"; wait "${WPID[1]}" 2>/dev/null || true
    start_worker 1
    killed_worker=1
  fi
  if [ "$killed_coordinator" = 0 ] && [ "$((done_jobs * 2))" -ge "$TOTAL_JOBS" ]; then
    log "half done ($done_jobs jobs): the coordinator killed with SIGKILL, started again"
    kill -9 "$SPID"; wait "$SPID" 2>/dev/null || true
    start_serve
    killed_coordinator=1
  fi
  if [ $(( $(date +%s) - START )) -gt 7200 ]; then log "not done within 2 hours"; exit 1; fi
done
log "done in $(( $(date +%s) - START )) s"
op status --run "$RUN" | tee -a "$DIR/summary.txt"
op status --workers --json > "$DIR/workers.json"
if grep -q '"name":"liar".*"quarantined":true' "$DIR/workers.json"; then
  log "the liar: quarantined ($(grep -o '"name":"liar"[^}]*"reason":"[^"]*"' "$DIR/workers.json" | sed 's/.*"reason":"//;s/"$//'))"
else
  log "the liar: NOT quarantined"
fi
for k in "${!WPID[@]}"; do kill "${WPID[$k]}" 2>/dev/null || true; done
kill "$SPID" 2>/dev/null || true; wait "$SPID" 2>/dev/null || true; SPID=""
"$NQ" audit --data "$DIR/store" | tail -3 | tee -a "$DIR/summary.txt"
"$NQ" certificate "$RUN" --data "$DIR/store" --out "$DIR/n$N.cert" | tee -a "$DIR/summary.txt"
log "certificate: $(stat -c %s "$DIR/n$N.cert") bytes, root $(head -1 "$DIR/n$N.cert" | field root)"
mkdir -p "$DIR/clean"
cp "$DIR/n$N.cert" "$DIR/clean/"
(cd "$DIR/clean" && NQUEENS_DATA=/nonexistent "$NQ" spot-check "n$N.cert" --sample 20 \
  --seed "$(od -An -N8 -tu8 /dev/urandom | tr -d ' ')") | tee -a "$DIR/summary.txt"
