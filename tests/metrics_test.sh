#!/usr/bin/env bash
# Issue 17: Prometheus metrics, read back through a real Prometheus
# (Debian's `prometheus`, run as a process). A small `tern launch
# --metrics_listen` (1 shard, 2 workers, synthetic data) runs while
# Prometheus scrapes every process each second; then, through its HTTP
# API:
#   - tern_worker_steps_total of each worker equals the steps run;
#   - each worker's payload and message byte counters equal the sums of its
#     JSONL records;
#   - launch's OUT/prometheus.yml names the ports the children served on;
# and against a shard of its own, one push with a NaN (tests/hostile/
# attack.py nan_push) raises tern_ps_pushes_rejected_total by exactly one,
# under reason="nan".
#
# Usage: metrics_test.sh <tern binary> <attack.py> <proto/tern/v1/payload.proto>
set -euo pipefail

TERN=$(readlink -f "$1")
ATTACK=$(readlink -f "$2")
PROTO=$(cd "$(dirname "$3")/../.." && pwd -P)
TMP=${TEST_TMPDIR:-$(mktemp -d)}
PY=/usr/bin/python3
STEPS=30
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIPPED: $*"; exit 0; }
[[ -x /usr/bin/prometheus ]] ||
  skip "Debian's prometheus is not installed (deploy/install-deps.sh)"
$PY -c "import grpc, google.protobuf" 2>/dev/null ||
  skip "python3-grpcio and python3-protobuf are not installed (deploy/install-deps.sh)"
mkdir -p "$TMP/pb"
protoc -I "$PROTO" --python_out="$TMP/pb" "$PROTO"/tern/v1/*.proto ||
  fail "protoc could not compile the .proto files"

# A free run of ports: launch's children take BASE.. BASE+2, the probe
# shard BASE+3, Prometheus BASE+4.
BASE=$($PY - <<'PY'
import random, socket
for _ in range(200):
    base = random.randrange(20000, 60000)
    try:
        for port in range(base, base + 5):
            with socket.socket() as s:
                s.bind(("127.0.0.1", port))
        print(base)
        break
    except OSError:
        pass
PY
)
[[ -n "$BASE" ]] || fail "no 5 free ports in a row"
PROM="127.0.0.1:$((BASE + 4))"

# The scrape config, written before the run so that Prometheus is ready
# when the first step ends.
cat >"$TMP/prometheus.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 900ms
scrape_configs:
  - job_name: tern
    static_configs:
      - targets: ["127.0.0.1:$BASE"]
        labels: {process: "ps/0"}
      - targets: ["127.0.0.1:$((BASE + 1))"]
        labels: {process: "worker/0"}
      - targets: ["127.0.0.1:$((BASE + 2))"]
        labels: {process: "worker/1"}
      - targets: ["127.0.0.1:$((BASE + 3))"]
        labels: {process: "probe"}
YML
/usr/bin/prometheus --config.file="$TMP/prometheus.yml" \
  --storage.tsdb.path="$TMP/tsdb" --web.listen-address="$PROM" \
  >"$TMP/prometheus.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do
  curl -sf "http://$PROM/-/ready" >/dev/null 2>&1 && break
  sleep 0.2
done
curl -sf "http://$PROM/-/ready" >/dev/null ||
  { tail -20 "$TMP/prometheus.log" >&2; fail "prometheus did not get ready"; }

# One number from an instant query (the sum of the series it returns).
query() {
  curl -sf "http://$PROM/api/v1/query" --data-urlencode "query=$1" |
    $PY -c 'import json, sys
r = json.load(sys.stdin)["data"]["result"]
print(repr(sum(float(s["value"][1]) for s in r)) if r else "none")'
}

# --------------------------------------------------------------- the run ---
OUT="$TMP/run"
# Each child serves 4 s after its work, so that a last scrape sees it.
"$TERN" launch --shards 1 --workers 2 --dataset synthetic --model lenet \
  --steps "$STEPS" --eval_every 10 --batch_size 16 --out_dir "$OUT" \
  --metrics_listen "127.0.0.1:$BASE" --metrics_linger_s 4 \
  >"$TMP/summary.txt" 2>"$TMP/launch.err" ||
  { tail -40 "$TMP/launch.err" >&2; fail "tern launch failed"; }
for port in "$BASE" "$((BASE + 1))" "$((BASE + 2))"; do
  grep -q "127.0.0.1:$port" "$OUT/prometheus.yml" ||
    fail "launch's prometheus.yml does not scrape 127.0.0.1:$port"
done

# Range functions skip the staleness markers written once a child is gone.
for w in 0 1; do
  got=$(query "last_over_time(tern_worker_steps_total{worker=\"$w\"}[10m])")
  echo "worker $w: tern_worker_steps_total = $got (steps run: $STEPS)"
  [[ "$got" == "$STEPS.0" ]] || fail "worker $w: steps_total $got, not $STEPS"
  for pair in payload:push:push_bytes payload:pull:pull_bytes \
              message:push:push_msg_bytes message:pull:pull_msg_bytes; do
    IFS=: read -r kind direction field <<<"$pair"
    got=$(query "last_over_time(tern_worker_${kind}_bytes_total{worker=\"$w\",direction=\"$direction\"}[10m])")
    want=$($PY -c 'import json, sys
print(repr(float(sum(json.loads(l)[sys.argv[2]] for l in open(sys.argv[1])))))' \
      "$OUT/worker-$w.jsonl" "$field")
    echo "worker $w: tern_worker_${kind}_bytes_total{direction=\"$direction\"} = $got (JSONL sum of $field: $want)"
    [[ "$got" == "$want" ]] || fail "worker $w: ${kind} bytes $direction $got, JSONL $want"
  done
done
echo "shard: tern_ps_pushes_accepted_total = $(query 'last_over_time(tern_ps_pushes_accepted_total{process="ps/0"}[10m])')"

# ------------------------------------------------ one deliberately bad push ---
"$TERN" ps --listen 127.0.0.1:0 --port_file "$TMP/probe.port" --num_workers 1 \
  --metrics_listen "127.0.0.1:$((BASE + 3))" >"$TMP/probe.log" 2>&1 &
PIDS+=($!)
rejected='sum(tern_ps_pushes_rejected_total{process="probe"})'
before=none
for _ in $(seq 50); do
  before=$(query "$rejected")
  [[ "$before" != none ]] && break
  sleep 0.2
done
[[ -s "$TMP/probe.port" ]] || fail "the probe shard did not serve"
echo "probe shard before: $rejected = $before"
[[ "$before" == "0.0" ]] || fail "rejected pushes before the bad push: $before"
answer=$($PY "$ATTACK" "127.0.0.1:$(cat "$TMP/probe.port")" nan_push \
  --pb "$TMP/pb" --num_workers 1 --elements 1000 | head -1)
[[ "$answer" == INVALID_ARGUMENT ]] || fail "the NaN push was answered $answer"
# Prometheus sees the count at its next scrape: poll for up to 30 s.
for _ in $(seq 150); do
  after=$(query "$rejected")
  nan=$(query 'tern_ps_pushes_rejected_total{process="probe",reason="nan"}')
  [[ "$after" == "1.0" && "$nan" == "1.0" ]] && break
  sleep 0.2
done
echo "probe shard after one NaN push: $rejected = $after, reason=\"nan\": $nan"
[[ "$after" == "1.0" && "$nan" == "1.0" ]] ||
  fail "rejected pushes went from $before to $after (nan: $nan), not up by one"
echo "PASS"
