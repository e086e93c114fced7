#!/usr/bin/env bash
# Issue 14 as a stranger tries it: a mutual-TLS shard (run r1, 2 workers)
# and, beside its run, an attacker speaking the .proto contract in a few
# lines of Python (tests/hostile/attack.py). Checks the status each attack
# gets, that the run finishes with the checksum of the same run without the
# attacker, and that certificate files replaced mid-run are used by new
# connections while the run goes on:
#   no client certificate, another CA's certificate, plaintext -> refused
#     at the handshake (UNAVAILABLE);
#   worker 1's certificate joining with another run id -> PERMISSION_DENIED,
#     and the run is not configured by it;
#   worker 1's certificate pushing as worker 0 -> PERMISSION_DENIED;
#   worker 1 sending PushPull bytes that are no PushPullRequest ->
#     INVALID_ARGUMENT, and the run goes on;
#   the global server's and a shard's certificate sending CheckParams as
#     worker 0 -> PERMISSION_DENIED;
#   a Join of 2^31 chunks from worker 1 -> FAILED_PRECONDITION.
#
# Usage: hostile_tls_test.sh <tern binary> <attack.py> <proto/tern/v1/payload.proto>
set -euo pipefail

TERN=$(readlink -f "$1")
ATTACK=$(readlink -f "$2")
# The folder that holds tern/v1/*.proto.
PROTO=$(cd "$(dirname "$3")/../.." && pwd -P)
TMP=${TEST_TMPDIR:-$(mktemp -d)}
PY=/usr/bin/python3
STEPS=${HOSTILE_STEPS:-60}
PIDS=()
WORKERS=()  # the running workers, from start_workers to finish_workers
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIPPED: $*"; exit 0; }
$PY -c "import grpc, google.protobuf" 2>/dev/null ||
  skip "python3-grpcio and python3-protobuf are not installed (deploy/install-deps.sh)"

# The attacker's messages, from the contract itself.
mkdir -p "$TMP/pb"
protoc -I "$PROTO" --python_out="$TMP/pb" "$PROTO"/tern/v1/*.proto ||
  fail "protoc could not compile the .proto files"

"$TERN" certs --out "$TMP/tls" --run_id r1 --shards 1 --workers 2 --global \
  >/dev/null || fail "tern certs"
"$TERN" certs --out "$TMP/other" --run_id r1 --shards 1 --workers 2 \
  >/dev/null || fail "tern certs (another CA)"
# The files the shard and the workers read, replaced later (rotation).
mkdir -p "$TMP/live"
cp "$TMP"/tls/* "$TMP/live/"

start_shard() {  # name -> sets PORT
  local name=$1
  rm -f "$TMP/$name.port"
  "$TERN" ps --listen=127.0.0.1:0 --port_file="$TMP/$name.port" \
    --num_workers=2 --run_id=r1 --barrier_timeout_s=60 --tls_refresh_s=1 \
    --tls_cert="$TMP/live/ps-0.pem" --tls_key="$TMP/live/ps-0.key" \
    --tls_ca="$TMP/live/ca.pem" >"$TMP/$name.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 100); do [[ -s "$TMP/$name.port" ]] && break; sleep 0.1; done
  [[ -s "$TMP/$name.port" ]] || fail "$name did not start: $(tail -n 5 "$TMP/$name.log")"
  PORT=$(cat "$TMP/$name.port")
}

start_workers() {  # name steps ids... -> adds them to WORKERS
  local name=$1 steps=$2 w
  shift 2
  for w in "$@"; do
    "$TERN" worker --ps="localhost:$PORT" --num_workers=2 --worker_id=$w \
      --run_id=r1 --model=lenet --dataset=synthetic --steps="$steps" \
      --batch_size=32 --eval_every=0 --metrics_out="$TMP/$name-$w.jsonl" \
      --tls_cert="$TMP/live/worker-$w.pem" --tls_key="$TMP/live/worker-$w.key" \
      --tls_ca="$TMP/live/ca.pem" >"$TMP/$name-$w.log" 2>&1 &
    WORKERS+=($!)
    PIDS+=($!)
  done
}

finish_workers() {  # name: waits for the started workers
  local name=$1
  for p in "${WORKERS[@]}"; do
    wait "$p" || fail "$name: a worker failed: $(tail -n 5 "$TMP/$name-"*.log)"
  done
  WORKERS=()
}

final_checksums() {  # name -> the two workers' final checksums, a line each
  for w in 0 1; do
    $PY -c "import json,sys; r=json.loads(open(sys.argv[1]).read().splitlines()[-1]); assert r.get('final'), r; print(r['param_checksum'])" \
      "$TMP/$1-$w.jsonl"
  done
}

attack() {  # expected-codes call args... (the identity as cert name)
  local expected=$1; shift
  local got
  got=$($PY "$ATTACK" "localhost:$PORT" --pb "$TMP/pb" "$@" | sed -n 1p)
  [[ "$got" == "$expected" ]] || fail "attack '$*': got '$got', expected '$expected'"
  echo "attack $*: $got"
}
identity() {  # dir name -> the flags of that identity
  echo "--ca $TMP/live/ca.pem --cert $1/$2.pem --key $1/$2.key"
}

# ------------------------------------------------ the run, unattacked ---
start_shard plain
start_workers plain "$STEPS" 0 1
finish_workers plain
mapfile -t baseline < <(final_checksums plain)
[[ "${baseline[0]}" == "${baseline[1]}" ]] || fail "replicas differ: ${baseline[*]}"

# ---------------------------------------- the same run, with an attacker ---
start_shard attacked
attack UNAVAILABLE join --ca "$TMP/live/ca.pem"
attack UNAVAILABLE join $(identity "$TMP/other" worker-0)
attack UNAVAILABLE join
attack PERMISSION_DENIED join $(identity "$TMP/tls" worker-1) --worker 1 --run_id other
attack FAILED_PRECONDITION join_huge $(identity "$TMP/tls" worker-1) --worker 1 --run_id r1
grep -q "configured" "$TMP/attacked.log" && fail "an attacker's join configured the shard"
# Worker 1 joins only after the rotation below, so the run cannot get past
# its start while the shard's files change, however fast this machine
# steps (a fixed number of steps once ended before the rotation was seen).
start_workers attacked "$STEPS" 0
attack PERMISSION_DENIED push $(identity "$TMP/tls" worker-1) --worker 0
attack INVALID_ARGUMENT garbage_push $(identity "$TMP/tls" worker-1) --worker 1
attack PERMISSION_DENIED check $(identity "$TMP/tls" global) --worker 0
attack PERMISSION_DENIED check $(identity "$TMP/tls" ps-0) --worker 0

# Rotation: the shard's files become another CA's (its CA file holds both
# CAs, and so do the workers'); a new connection made with only the new CA
# reaches the shard once it has read them, while the run goes on.
health_new() {
  "$TERN" health "localhost:$PORT" --timeout=3 --tls_ca="$TMP/other/ca.pem" \
    --tls_cert="$TMP/other/worker-0.pem" --tls_key="$TMP/other/worker-0.key" \
    >/dev/null 2>&1
}
health_new && fail "the new CA's client reached the shard before the rotation"
cat "$TMP/tls/ca.pem" "$TMP/other/ca.pem" >"$TMP/live/ca.pem.new"
cp "$TMP/other/ps-0.pem" "$TMP/live/ps-0.pem.new"
cp "$TMP/other/ps-0.key" "$TMP/live/ps-0.key.new"
for f in ca.pem ps-0.pem ps-0.key; do mv "$TMP/live/$f.new" "$TMP/live/$f"; done
rotated=0
for _ in $(seq 20); do
  if health_new; then rotated=1; break; fi
  sleep 1
done
[[ $rotated == 1 ]] || fail "the shard did not take its new files within 20 s"
kill -0 "${WORKERS[0]}" 2>/dev/null ||
  fail "worker 0 ended before the rotation was seen: $(tail -n 5 "$TMP/attacked-0.log")"
echo "rotation: a client of the new CA reached the shard mid-run"
# Worker 1 joins with the old CA's certificate, which the shard still trusts.
start_workers attacked "$STEPS" 1
finish_workers attacked
mapfile -t attacked < <(final_checksums attacked)
[[ "${attacked[0]}" == "${attacked[1]}" ]] || fail "replicas differ: ${attacked[*]}"
[[ "${attacked[0]}" == "${baseline[0]}" ]] || fail "the attacked run ends at ${attacked[0]}, the unattacked one at ${baseline[0]}"
echo "checksums: unattacked ${baseline[0]}, attacked ${attacked[0]} ($STEPS steps each)"
echo "PASS"
