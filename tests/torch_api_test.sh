#!/usr/bin/env bash
# The PyTorch API (issue 15, part 3; python/tern/README.md): 2 Python
# workers (examples/torch_train.py over tern.torch) and 1 C++ `tern worker`
# train examples/tiny_bn_net.py's TorchScript model on npy data with 2
# shards, once with terngrad (fc1 frozen: neither kind of worker exchanges
# it) and once with onebit: all three end with the same parameter checksum
# (the C++ worker's from its final JSONL record),
# the shards' CheckParams agreed every 5 steps, and the Python workers' loss
# fell. Then a shard's refusal reaches Python as tern.torch.ShardError with
# its status code: a Python worker with another model file is refused at
# join (FAILED_PRECONDITION naming both hashes), and bad arguments raise
# ValueError/TypeError before any shard is contacted. Last, one worker with
# fp32 gets its own gradient back and SGD steps with it; a non-contiguous
# gradient or a replaced parameter then raise ValueError/RuntimeError.
# Between, broadcast_parameters: 2 Python workers that built different
# starts both leave it with worker 0's parameters, bit for bit.
#
# Usage: torch_api_test.sh <tern binary> <tiny_bn_net.py> <torch_train.py>
#        <tern/__init__.py of the package (beside torch.py and _tern.so)>
set -euo pipefail

TERN=$(readlink -f "$1")
NET=$(readlink -f "$2")
TRAIN=$(readlink -f "$3")
# The runfiles directory holding tern/ (not readlink: the package's files
# are links into several output trees).
export PYTHONPATH=$(cd "$(dirname "$4")/.." && pwd)
TMP=${TEST_TMPDIR:-$(mktemp -d)}
PY=/usr/bin/python3
STEPS=20
source "$(dirname "$0")/support/processes.sh"

"$PY" - "$TMP/data" <<'PY'
import os, sys
import numpy as np

out = sys.argv[1]
os.makedirs(out)
rng = np.random.default_rng(15)
patterns = rng.normal(size=(4, 8, 8)).astype(np.float32)
for name, n in (("train", 1024), ("test", 256)):
    y = rng.integers(0, 4, size=n).astype(np.int64)
    x = (patterns[y] + rng.normal(size=(n, 8, 8))).astype(np.float32)
    np.save(f"{out}/{name}_x.npy", x)
    np.save(f"{out}/{name}_y.npy", y)
PY
"$PY" "$NET" --out "$TMP/tiny.pt"
"$PY" "$NET" --seed 2 --out "$TMP/other.pt"

# shards RUN WORKERS: starts 2 shards; sets PS to their addresses.
shards() {
  local s
  for s in 0 1; do
    "$TERN" ps --listen 127.0.0.1:0 --port_file "$TMP/$1-ps$s.port" \
      --num_shards 2 --shard_index "$s" --num_workers "$2" \
      --barrier_timeout_s 60 >"$TMP/$1-ps$s.log" 2>&1 &
    pids+=($!)
  done
  for s in 0 1; do
    wait_for 30 test -s "$TMP/$1-ps$s.port" || fail "$1: shard $s has no port"
  done
  PS="127.0.0.1:$(cat "$TMP/$1-ps0.port"),127.0.0.1:$(cat "$TMP/$1-ps1.port")"
}

# mixed CODEC MODEL: workers 0 and 1 in Python, worker 2 in C++; all must
# agree.
mixed() {
  local codec=$1 model=$2 w rc
  shards "$codec" 3
  local py_pids=()
  for w in 0 1; do
    "$PY" "$TRAIN" --ps "$PS" --worker_id "$w" --num_workers 3 \
      --codec "$codec" --model "$model" --data_dir "$TMP/data" \
      --steps "$STEPS" --lr 0.05 --check_every 5 --log_every 1 \
      >"$TMP/$codec-$w.log" 2>&1 &
    py_pids+=($!)
    pids+=($!)
  done
  "$TERN" worker --ps "$PS" --worker_id 2 --num_workers 3 --codec "$codec" \
    --model "$model" --dataset npy --data_dir "$TMP/data" \
    --steps "$STEPS" --batch_size 16 --lr 0.05 --optimizer sgd \
    --momentum 0 --weight_decay 0 --eval_every 0 --check_every 5 \
    --broadcast_start=true \
    --metrics_out "$TMP/$codec-2.jsonl" >"$TMP/$codec-2.log" 2>&1 ||
    fail "$codec: the C++ worker exited $?"
  for w in 0 1; do
    rc=0
    wait "${py_pids[$w]}" || rc=$?
    ((rc == 0)) || fail "$codec: Python worker $w exited $rc"
  done
  local want
  want=$(final_checksum "$codec" 2)
  for w in 0 1; do
    local got
    got=$(sed -n 's/^final checksum //p' "$TMP/$codec-$w.log")
    [[ "$got" == "$want" ]] ||
      fail "$codec: Python worker $w ends at '$got', the C++ worker at $want"
    "$PY" - "$TMP/$codec-$w.log" <<'PY' || fail "$codec: worker $w's loss"
import re, sys
losses = [float(m) for m in re.findall(r"loss ([0-9.]+)", open(sys.argv[1]).read())]
first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
print(f"{sys.argv[1]}: loss {first:.3f} -> {last:.3f}")
assert last < 0.8 * first, (first, last)
PY
  done
  echo "$codec: 2 Python workers and 1 C++ worker end at $want"
}

# TernGrad's run trains a model whose fc1 is frozen: both kinds of worker
# leave it out of the ParamSpec (else the join refuses one of them).
"$PY" "$NET" --freeze fc1 --out "$TMP/frozen.pt"
mixed terngrad "$TMP/frozen.pt"
mixed onebit "$TMP/tiny.pt"

# --------------------------------------------- errors reach Python ---
shards refusal 2
"$PY" "$TRAIN" --ps "$PS" --worker_id 0 --num_workers 2 \
  --model "$TMP/tiny.pt" --data_dir "$TMP/data" --steps 1 \
  >"$TMP/refusal-0.log" 2>&1 &
pids+=($!)
# Worker 0 configures the run first, so that the shards refuse worker 1.
wait_for 60 grep -q "worker 0 joined" "$TMP/refusal-ps0.log" ||
  fail "refusal: worker 0 did not join"
"$PY" - "$PS" "$TMP/other.pt" <<'PY' >"$TMP/refusal-1.log" 2>&1 ||
import sys
import torch
import tern.torch as tt

ps, other = sys.argv[1].split(","), sys.argv[2]
model = torch.jit.load(other)
# Bad arguments: Python errors before any shard is asked.
for bad, error in (({"codec": "zip"}, ValueError),
                   ({"worker_id": 5, "num_workers": 2}, ValueError)):
    try:
        tt.init(ps=ps, **bad)
        raise AssertionError(f"{bad} accepted")
    except error as e:
        print(f"{bad}: {type(e).__name__}: {e}")
tt.init(ps=ps, worker_id=1, num_workers=2, model=other, rpc_timeout_s=20)
doubles = [(n, torch.nn.Parameter(p.detach().double()))
           for n, p in model.named_parameters()]
try:
    tt.DistributedOptimizer(torch.optim.SGD([p for _, p in doubles], lr=0.1),
                            doubles, worker=tt.Worker(ps))
    raise AssertionError("float64 parameters accepted")
except TypeError as e:
    print(f"float64: TypeError: {e}")
opt = tt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                              model.named_parameters())
try:
    tt.broadcast_parameters(model)
    raise AssertionError("the shards accepted another model")
except tt.ShardError as e:
    print(f"ShardError code={e.code} code_value={e.code_value}")
    print(f"message={e.message}")
    assert e.code == "INVALID_ARGUMENT" or e.code == "FAILED_PRECONDITION", e.code
    assert e.code_value in (3, 9), e.code_value
    assert "hash" in e.message, e.message
PY
  fail "the refusal was not a ShardError with its code"
cat "$TMP/refusal-1.log"

# ------------------------------------- one worker, bad tensors mid-run ---
shards alone 1
"$PY" - "$PS" <<'PY' >"$TMP/alone-0.log" 2>&1 || fail "alone: see its log"
import sys
import torch
import tern.torch as tt

torch.manual_seed(1)
model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Linear(5, 2))
tt.init(ps=sys.argv[1].split(","), codec="fp32", rpc_timeout_s=20)
opt = tt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                              model.named_parameters())
tt.broadcast_parameters(model)
before = [p.detach().clone() for p in model.parameters()]
model(torch.randn(4, 6)).square().sum().backward()
grads = [p.grad.clone() for p in model.parameters()]
opt.step()
# fp32 with one worker: the average is this worker's own gradient.
for p, b, g in zip(model.parameters(), before, grads):
    assert torch.equal(p.grad, g), "the pulled gradient differs"
    assert torch.allclose(p.detach(), b - 0.1 * g), "SGD did not step"
# The gradients now live in the exchange's memory: zeroed in place, added
# into by backward and exchanged there; replaced ones are taken in again.
for set_to_none in (False, True, False):
    opt.zero_grad(set_to_none=set_to_none)
    model(torch.randn(4, 6)).square().sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    held = [p.grad.data_ptr() for p in model.parameters()]
    opt.step()
    for p, g, h in zip(model.parameters(), grads, held):
        assert torch.equal(p.grad, g), "an in-place gradient differs"
        assert set_to_none or p.grad.data_ptr() == h, "the gradient moved"
print("gradients exchanged in place")
# A transposed copy: the same shape, not contiguous.
model[0].weight.grad = model[0].weight.grad.t().contiguous().t()
try:
    opt.step()
    raise AssertionError("a non-contiguous gradient was exchanged")
except ValueError as e:
    print(f"non-contiguous gradient: ValueError: {e}")
model[0].weight.grad = None
model[0].weight.data = torch.zeros(5, 6)
try:
    opt.step()
    raise AssertionError("a replaced parameter was exchanged")
except RuntimeError as e:
    print(f"replaced parameter: RuntimeError: {e}")
PY
cat "$TMP/alone-0.log"

# ----------------------- broadcast_parameters: worker 0's start wins ---
shards start 2
for w in 0 1; do
  "$PY" - "$PS" "$w" >"$TMP/start-$w.log" 2>&1 <<'PY' &
import sys
import torch
import tern.torch as tt

worker = int(sys.argv[2])
torch.manual_seed(100 + worker)  # each worker builds another start
model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Linear(5, 2))
tt.init(ps=sys.argv[1].split(","), worker_id=worker, num_workers=2,
        codec="terngrad", rpc_timeout_s=20)
opt = tt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.1),
                              model.named_parameters())
before = [p.detach().clone() for p in model.parameters()]
tt.broadcast_parameters(model)
changed = any(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
print(f"worker {worker}: start {tt.checksum()}, changed {changed}")
PY
  pids+=($!)
  eval "S$w=$!"
done
for w in 0 1; do
  wait "$(eval echo "\$S$w")" || fail "start: worker $w failed (see its log)"
done
c0=$(sed -n 's/^worker 0: start \(0x[0-9a-f]*\), changed False$/\1/p' "$TMP/start-0.log")
c1=$(sed -n 's/^worker 1: start \(0x[0-9a-f]*\), changed True$/\1/p' "$TMP/start-1.log")
[[ -n "$c0" && "$c0" == "$c1" ]] ||
  fail "start: worker 0 kept '$c0', worker 1 loaded '$c1'"
echo "broadcast_parameters: both workers start at $c0 (worker 1's own start replaced)"
echo "PASS"
