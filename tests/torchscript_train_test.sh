#!/usr/bin/env bash
# --model=PATH.pt end to end (issue 15, part 1): Debian's PyTorch scripts
# examples/tiny_bn_net.py's network (linear, batch norm, linear) to a
# TorchScript file, numpy writes a 4-class problem of 8x8 float32 inputs,
# and `tern launch` trains the file's model with 2 workers and 1 shard: every
# worker's loss falls and the replicas end identical (batch norm's running
# statistics are per worker and not in the checksum). Then --loss=mse on
# float targets, and a module with its own loss (returns_loss = True).
# --save_model writes worker 0's trained model, which PyTorch loads and
# evaluates to tern's accuracy; a frozen layer stays as saved. Malformed
# model files make `tern worker` exit 1 naming the file, before it
# contacts a shard; a worker with another .pt is refused at join with both
# files' hashes.
#
# Usage: torchscript_train_test.sh <path of the tern binary> <tiny_bn_net.py>
set -euo pipefail

TERN=$(readlink -f "$1")
NET=$(readlink -f "$2")
TMP=${TEST_TMPDIR:-$(mktemp -d)}
PY=/usr/bin/python3
# fail, cleanup on exit, wait_for; `pids` collects what to kill.
source "$(dirname "$0")/support/processes.sh"

# ------------------------------------------------- the data and models ---
DATA="$TMP/data"
mkdir -p "$DATA" "$TMP/regression"
"$PY" - "$DATA" "$TMP/regression" <<'PY'
import sys
import numpy as np

out, regression = sys.argv[1], sys.argv[2]
rng = np.random.default_rng(15)
patterns = rng.normal(size=(4, 8, 8)).astype(np.float32)
weights = rng.normal(size=(64, 2)).astype(np.float32) / 8

def split(name, n):
    y = rng.integers(0, 4, size=n).astype(np.int64)
    x = (patterns[y] + 1.0 * rng.normal(size=(n, 8, 8))).astype(np.float32)
    np.save(f"{out}/{name}_x.npy", x)
    np.save(f"{out}/{name}_y.npy", y)
    # Regression: 2 float targets per example, linear in x.
    np.save(f"{regression}/{name}_x.npy", x)
    np.save(f"{regression}/{name}_y.npy", (x.reshape(n, 64) @ weights))

split("train", 1024)
split("test", 256)
PY
"$PY" "$NET" --input_shape 8,8 --outputs 4 --out "$TMP/tiny.pt"
"$PY" "$NET" --input_shape 8,8 --outputs 4 --seed 2 --out "$TMP/other.pt"
"$PY" "$NET" --input_shape 8,8 --outputs 2 --kind regression \
  --out "$TMP/regression.pt"
"$PY" "$NET" --input_shape 8,8 --outputs 4 --kind own_loss \
  --out "$TMP/own_loss.pt"

# ------------------------------------------------------------- a run ---
# launch RUN_NAME WORKERS FLAGS...: a 1-shard run into $TMP/RUN_NAME.
launch() {
  local name=$1 workers=$2
  shift 2
  local rc=0
  "$TERN" launch --shards 1 --workers "$workers" --dataset npy \
    --eval_every 0 --batch_size 16 --out_dir "$TMP/$name" \
    --progress_every_s 0 "$@" >"$TMP/$name.txt" 2>"$TMP/$name.err" || rc=$?
  if [[ $rc -ne 0 ]]; then
    tail -n 80 "$TMP/$name.err" >&2
    fail "tern launch ($name) exited $rc"
  fi
}

# check RUN_NAME WORKERS MIN_STEPS: every worker's loss falls by a fifth,
# and their final checksums agree.
check() {
  "$PY" - "$TMP/$1" "$2" "$3" <<'PY'
import json, sys

out, workers, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
checksums = []
for w in range(workers):
    with open(f"{out}/worker-{w}.jsonl") as f:
        records = [json.loads(line) for line in f if line.strip()]
    losses = [r["loss"] for r in records if "loss" in r]
    if len(losses) < steps:
        sys.exit(f"FAIL: {out}: worker {w} recorded {len(losses)} losses")
    first = sum(losses[:10]) / 10
    last = sum(losses[-10:]) / 10
    print(f"{out}: worker {w}: loss {first:.4f} (first 10 steps) -> "
          f"{last:.4f} (last 10), final checksum "
          f"{records[-1]['param_checksum']}")
    if not last < 0.8 * first:
        sys.exit(f"FAIL: {out}: worker {w}'s loss did not fall: "
                 f"{first} -> {last}")
    checksums.append(records[-1]["param_checksum"])
if len(set(checksums)) != 1:
    sys.exit(f"FAIL: {out}: final param_checksum differ: {checksums}")
PY
}

# Given in the environment, as a user may: launch passes it to worker 0
# alone, as a flag, and no other worker sees it.
TERN_SAVE_MODEL="$TMP/trained/tiny.pt" launch classify 2 --data_dir "$DATA" \
  --model "$TMP/tiny.pt" --steps 60 --lr 0.05
check classify 2 60
grep -q "trained model written to $TMP/trained/tiny.pt" \
  "$TMP/classify/worker-0.log" || fail "worker 0 did not write the model"
if grep -q "trained model written" "$TMP/classify/worker-1.log"; then
  fail "worker 1 wrote a model too"
fi
# The trained model as PyTorch loads it: it is worker 0's final model (the
# same test accuracy as tern's final evaluation) and no longer the file it
# started from.
"$PY" - "$TMP/classify" "$TMP/trained/tiny.pt" "$TMP/tiny.pt" "$DATA" <<'PY'
import json, sys
import numpy as np
import torch

out, trained_path, initial_path, data = sys.argv[1:]
with open(f"{out}/summary.json") as f:
    summary = json.load(f)
accuracy = summary["final_test_accuracy"]
print(f"final test accuracy {accuracy}")
if not accuracy > 0.5:
    sys.exit(f"FAIL: test accuracy {accuracy} <= 0.5")
if summary["model_file"] != trained_path:
    sys.exit(f"FAIL: summary's model_file {summary['model_file']}")
trained = torch.jit.load(trained_path).eval()
initial = torch.jit.load(initial_path)
for (name, p), (_, q) in zip(trained.named_parameters(),
                             initial.named_parameters()):
    if torch.equal(p, q):
        sys.exit(f"FAIL: {name} is the initial value")
x = torch.from_numpy(np.load(f"{data}/test_x.npy"))
y = torch.from_numpy(np.load(f"{data}/test_y.npy"))
with torch.no_grad():
    logits = trained(x)
ours = (logits.argmax(1) == y).double().mean().item()
loss = torch.nn.functional.cross_entropy(logits, y).item()
print(f"the saved model in PyTorch: test accuracy {ours}, test loss {loss} "
      f"(tern's {summary['final_test_loss']})")
# One example's worth of slack: tern evaluates in batches of its own, and
# sums the loss in another order.
if abs(ours - accuracy) > 1.5 / len(y):
    sys.exit(f"FAIL: the saved model's accuracy {ours} is not tern's "
             f"{accuracy}")
if abs(loss - summary["final_test_loss"]) > 1e-4 * abs(loss):
    sys.exit(f"FAIL: the saved model's test loss {loss} is not tern's "
             f"{summary['final_test_loss']}")
PY
grep -qF "model           $TMP/trained/tiny.pt" "$TMP/classify.txt" ||
  { cat "$TMP/classify.txt" >&2; fail "the summary does not name the model"; }
[[ ! -e "$TMP/trained/tiny.pt.tmp" ]] || fail "tiny.pt.tmp was left behind"

# A frozen layer (requires_grad False) stays as saved, weight decay (the
# default 5e-4) and all, while the rest trains.
"$PY" "$NET" --input_shape 8,8 --outputs 4 --freeze fc1 \
  --out "$TMP/frozen.pt"
launch frozen 2 --data_dir "$DATA" --model "$TMP/frozen.pt" --steps 30 \
  --lr 0.05 --save_model "$TMP/frozen_trained.pt"
check frozen 2 30
"$PY" - "$TMP/frozen_trained.pt" "$TMP/frozen.pt" <<'PY'
import sys
import torch

trained = dict(torch.jit.load(sys.argv[1]).named_parameters())
initial = dict(torch.jit.load(sys.argv[2]).named_parameters())
for name, value in initial.items():
    moved = not torch.equal(trained[name], value)
    if moved != value.requires_grad:
        sys.exit(f"FAIL: {name} (requires_grad {value.requires_grad}) "
                 f"{'moved' if moved else 'did not move'}")
print("frozen fc1 as saved; bn1 and logits trained")
PY

launch mse 1 --data_dir "$TMP/regression" --model "$TMP/regression.pt" \
  --loss mse --steps 40 --lr 0.05
check mse 1 40

launch own_loss 1 --data_dir "$DATA" --model "$TMP/own_loss.pt" \
  --loss mse --steps 40 --lr 0.05
check own_loss 1 40

# -------------------------------------------------- malformed models ---
# The worker loads its model and runs it on two examples before it dials
# the shard, so no shard is needed: an unreachable address is never tried.
expect_refused() {
  local model=$1
  shift
  local err="$TMP/$(basename "$model").err"
  local rc=0
  "$TERN" worker --dataset npy --data_dir "$DATA" --model "$model" \
    --ps 127.0.0.1:9 --worker_id 0 --num_workers 1 >/dev/null 2>"$err" ||
    rc=$?
  [[ $rc -eq 1 ]] || { cat "$err" >&2; fail "$model: exit $rc, expected 1"; }
  for word in "$model" "$@"; do
    grep -qF -- "$word" "$err" || { cat "$err" >&2; fail "$model: no '$word'"; }
  done
  echo "refused $(basename "$model"): $(grep -o "model $model.*" "$err" |
    head -n 1 | head -c 300)"
}

echo "not a zip" >"$TMP/not_a_zip.pt"
expect_refused "$TMP/not_a_zip.pt" "not a TorchScript module"

# (A file: torch.jit.script reads the class's source.)
cat >"$TMP/no_params.py" <<'PY'
import sys, torch
class NoParams(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.flatten(1)[:, :4]
torch.jit.script(NoParams()).save(sys.argv[1])
PY
"$PY" "$TMP/no_params.py" "$TMP/no_params.pt"
expect_refused "$TMP/no_params.pt" "has no parameters"

# 3 outputs for labels 0..3.
"$PY" "$NET" --input_shape 8,8 --outputs 3 --out "$TMP/three_classes.pt"
expect_refused "$TMP/three_classes.pt" "output [2, 3]" "classes >= 4" \
  "$DATA/train_y.npy"

# Made for 16-value examples: its own error, named.
"$PY" "$NET" --input_shape 16 --outputs 4 --out "$TMP/wrong_input.pt"
expect_refused "$TMP/wrong_input.pt" "fails on the first 2 training examples" \
  "shapes cannot be multiplied"

# ------------------------------------------- another .pt at the join ---
"$TERN" ps --listen 127.0.0.1:0 --port_file "$TMP/ps.port" --num_workers 2 \
  --barrier_timeout_s 60 >"$TMP/ps.log" 2>&1 &
pids+=($!)
wait_for 30 test -s "$TMP/ps.port" || fail "the shard wrote no port file"
port=$(cat "$TMP/ps.port")

join_worker() {
  "$TERN" worker --ps "127.0.0.1:$port" --num_workers 2 --worker_id "$1" \
    --dataset npy --data_dir "$DATA" --model "$2" --batch_size 16 --steps 5 \
    --eval_every 0 --join_timeout_s 30 >"$TMP/join-$1.log" 2>&1
}
join_worker 0 "$TMP/tiny.pt" &
pids+=($!)
w0=$!
# Worker 0 joins first, so the shard's run is tiny.pt's: worker 1 starts
# once the shard has logged worker 0's join.
wait_for 60 grep -q "worker 0 joined" "$TMP/ps.log" ||
  { cat "$TMP/join-0.log" >&2; fail "worker 0 did not join within 60 s"; }
rc=0
join_worker 1 "$TMP/other.pt" || rc=$?
[[ $rc -eq 1 ]] || { cat "$TMP/join-1.log" >&2; fail "worker 1 exited $rc"; }
hash0=$(grep -o "tiny.pt: file hash [0-9a-fx]*" "$TMP/join-0.log" |
  awk '{print $NF}')
hash1=$(grep -o "other.pt: file hash [0-9a-fx]*" "$TMP/join-1.log" |
  awk '{print $NF}')
[[ -n "$hash0" && -n "$hash1" && "$hash0" != "$hash1" ]] ||
  fail "hashes '$hash0' and '$hash1'"
for word in "param spec hash $hash1" "differs from $hash0" "same --model"; do
  grep -qF -- "$word" "$TMP/join-1.log" || {
    cat "$TMP/join-1.log" >&2
    fail "the refusal lacks '$word'"
  }
done
echo "refused other.pt at join: $(grep -o "param spec hash.*" \
  "$TMP/join-1.log" | head -n 1 | head -c 300)"
kill -9 "$w0" 2>/dev/null || true
wait "$w0" 2>/dev/null || true

echo PASS
