#!/usr/bin/env bash
# The overhead of the Python path (tern.torch) against `tern worker` on the
# same model: 2 workers and 1 shard on loopback train examples/tiny_bn_net.py
# (wider with --hidden) for STEPS steps, once as 2 Python workers
# (examples/torch_train.py), once as 2 `tern worker`s with the same update,
# back to back, PAIRS times; prints each run's steps/s (worker 0's, over its
# whole loop) and the ratio Python / C++.
#
# Usage (after bazel build //tern //python/tern:_tern.so):
#   examples/torch_overhead.sh [STEPS] [PAIRS] [HIDDEN]
# TERN (the binary) and TERN_PY_BIN (the directory holding tern/_tern.so)
# override bazel-bin's.
set -euo pipefail

STEPS=${1:-300}
PAIRS=${2:-3}
HIDDEN=${3:-256}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TERN=${TERN:-$ROOT/bazel-bin/tern/tern}
PY=/usr/bin/python3
TMP=$(mktemp -d)
export PYTHONPATH=$ROOT/python:${TERN_PY_BIN:-$ROOT/bazel-bin/python}
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$TMP"' EXIT

"$PY" - "$TMP/data" <<'PY'
import os, sys
import numpy as np
out = sys.argv[1]
os.makedirs(out)
rng = np.random.default_rng(15)
for name, n in (("train", 4096), ("test", 256)):
    np.save(f"{out}/{name}_x.npy", rng.normal(size=(n, 8, 8)).astype(np.float32))
    np.save(f"{out}/{name}_y.npy", rng.integers(0, 4, size=n).astype(np.int64))
PY
"$PY" "$ROOT/examples/tiny_bn_net.py" --hidden "$HIDDEN" --out "$TMP/m.pt"

# shard: starts one shard for 2 workers; sets PS.
shard() {
  rm -f "$TMP/port"
  "$TERN" ps --listen 127.0.0.1:0 --port_file "$TMP/port" --num_workers 2 \
    >"$TMP/ps.log" 2>&1 &
  SHARD=$!
  until [[ -s "$TMP/port" ]]; do sleep 0.05; done
  PS=127.0.0.1:$(cat "$TMP/port")
}

python_rate() {
  shard
  "$PY" "$ROOT/examples/torch_train.py" --ps "$PS" --worker_id 1 \
    --num_workers 2 --model "$TMP/m.pt" --data_dir "$TMP/data" \
    --steps "$STEPS" --lr 0.01 >/dev/null 2>&1 &
  "$PY" "$ROOT/examples/torch_train.py" --ps "$PS" --worker_id 0 \
    --num_workers 2 --model "$TMP/m.pt" --data_dir "$TMP/data" \
    --steps "$STEPS" --lr 0.01 2>/dev/null |
    sed -n 's/.* \([0-9.]*\) steps\/s.*/\1/p'
  wait %2 2>/dev/null || true
  kill "$SHARD"; wait "$SHARD" 2>/dev/null || true
}

cpp_rate() {
  shard
  local w
  for w in 1 0; do
    "$TERN" worker --ps "$PS" --worker_id "$w" --num_workers 2 \
      --model "$TMP/m.pt" --dataset npy --data_dir "$TMP/data" \
      --steps "$STEPS" --batch_size 16 --lr 0.01 --optimizer sgd \
      --momentum 0 --weight_decay 0 --eval_every 0 \
      >"$TMP/cpp-$w.log" 2>&1 &
  done
  wait %2 %3 2>/dev/null || true
  kill "$SHARD"; wait "$SHARD" 2>/dev/null || true
  # "done: N steps in S s": includes the final evaluation (a few ms).
  sed -n 's/.*done: \([0-9]*\) steps in \([0-9.]*\) s.*/\1 \2/p' \
    "$TMP/cpp-0.log" | awk '{printf "%.2f\n", $1 / $2}'
}

for pair in $(seq "$PAIRS"); do
  py=$(python_rate)
  cpp=$(cpp_rate)
  awk -v p="$py" -v c="$cpp" -v i="$pair" \
    'BEGIN {printf "pair %d: python %.2f steps/s, tern worker %.2f steps/s, ratio %.3f\n", i, p, c, p / c}'
done
