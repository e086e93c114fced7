#!/usr/bin/env bash
# Every gradient codec end to end, across processes: for each of fp16,
# onebit, threshold, adaptive, dropping (global threshold; per-tensor
# threshold with 1-bit survivors; global threshold with 2-bit survivors)
# and qsgd, `tern launch` runs 2 shards and
# 2 workers of LeNet on the synthetic data set for a dozen steps, then this
# checks (DESIGN sections 3, 5, 6 and 8):
#   - launch exits 0 and its summary says ok;
#   - the replicas stay bit-identical: every checked step has one
#     param_checksum across the workers, and the summary agrees;
#   - every loss is a finite number;
#   - the codecs with error feedback run with it on the worker (its log) and
#     on the shards (a residual per chunk), the others without;
#   - push and pull bytes per step, against fp32's 4 bytes per parameter:
#       fp16, onebit, qsgd: exactly the layout's size, computed here from
#         the model's shapes (proto/tern/v1/payload.proto);
#       adaptive, dropping: the fraction they send (1/64 of each sign; 1 %
#         of the values) times the bytes per sent value, within a factor 2
#         (the thresholds come from a sample of 4096 values);
#       threshold: whole 4-byte index words, and at least 1.5x less than
#         fp32 (how many values reach tau depends on the gradients).
#
# Usage: codecs_test.sh <path of the tern binary>
set -euo pipefail

TERN=$(readlink -f "$1")
TMP=${TEST_TMPDIR:-$(mktemp -d)}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

show() {
  echo "---- $1" >&2
  tail -n "${2:-60}" "$1" >&2 || true
}

# The compressors' parameters are given explicitly, so that the expected
# sizes below do not follow a change of the defaults.
STEPS=12
run() {
  local name=$1
  shift
  local out="$TMP/$name" rc=0
  "$TERN" launch --shards 2 --workers 2 --dataset synthetic --model lenet \
    --steps "$STEPS" --batch_size 16 --eval_every 0 --check_every 4 \
    --progress_every_s 0 --out_dir "$out" \
    --tau 0.001 --proportion 0.015625 --drop_ratio 0.99 \
    --qsgd_levels 16 --qsgd_bucket 512 "$@" \
    >"$out.summary" 2>"$out.stderr" || rc=$?
  if [[ $rc -ne 0 ]]; then
    show "$out.stderr" 80
    for log in "$out"/*.log; do show "$log" 20; done
    fail "$name: tern launch exited $rc"
  fi
  python3 - "$out" "$name" "$STEPS" <<'PY'
import json, math, sys

out, name, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
workers = 2

def fail(message):
    sys.exit(f"FAIL: {name}: {message}")

# LeNet of TernGrad (worker/models.h): conv1, conv2, fc1, logits, weight
# and bias each, over 2 shards with the default --shard_assignment even
# (common/partitioner.h): counted from the model's end, shard s holds the
# elements [floor(s T / 2), floor((s + 1) T / 2)) of T, a tensor is cut
# where a shard's run ends, and each part into k = ceil(n / max) chunks of
# at most 4 MiB / 4 = 1048576 floats whose sizes differ by at most one. The
# column groups of a chunk are runs of a row's length from the chunk's
# start (kernels::ColumnGroupSize): numel / shape[0] for rank >= 2, the
# whole chunk for vectors.
shapes = [[32, 1, 5, 5], [32], [64, 32, 5, 5], [64], [1024, 3136], [1024],
          [10, 1024], [10]]
max_elements = (4 << 20) // 4
shards = 2
total = sum(math.prod(shape) for shape in shapes)
chunks = []  # (elements, group size)
flat = 0
for shape in shapes:
    n = math.prod(shape)
    group = n // shape[0] if len(shape) >= 2 else n
    offset = 0
    while offset < n:
        shard = ((total - flat - offset) * shards - 1) // total
        end = min(n, total - shard * total // shards - flat)
        part = end - offset
        k = max(1, -(-part // max_elements))
        chunks += [(part // k + (1 if i < part % k else 0), group)
                   for i in range(k)]
        offset = end
    flat += n
n = sum(m for m, _ in chunks)
assert len(chunks) == 11 and n == 3274634, (len(chunks), n)
fp32 = 4 * n

def groups(m, g):
    return -(-m // min(g, m))

# Bytes of one payload are its data plus 4 per scaler (worker/step_metrics.h).
# SIGN_BITS: uint32 group size, a bit per value, (+, -) values per group.
onebit = sum(4 + -(-m // 8) + 8 * groups(m, g) for m, g in chunks)
# QSGD_LEVELS: uint32 bucket size and levels, ceil(log2(2s+1)) bits a
# value, one norm per bucket of 512.
bits = math.ceil(math.log2(2 * 16 + 1))
qsgd = sum(8 + -(-(m * bits) // 8) + 4 * -(-m // 512) for m, _ in chunks)
# INDEX_SIGN: uint32 group size, a 4-byte word per sent value, (+, -) values
# per group; INDEX_VALUE: 8 bytes per sent value; INDEX_2BIT: a 4-byte word
# per sent value, (small, large) magnitudes per chunk.
adaptive = 4 * n / 64 + sum(4 + 8 * groups(m, g) for m, g in chunks)
dropping = 8 * 0.01 * n
dropping_1bit = 4 * 0.01 * n + sum(4 + 8 for _ in chunks)
dropping_2bit = 4 * 0.01 * n + sum(8 for _ in chunks)
index_sign_framing = sum(4 + 8 for _ in chunks)  # threshold: one group

exact = {"fp16": 2 * n, "onebit": onebit, "qsgd": qsgd}
about = {"adaptive": adaptive, "dropping_global": dropping,
         "dropping_tensor_1bit": dropping_1bit,
         "dropping_global_2bit": dropping_2bit}

def check_bytes(value, what, average=False):
    if name in exact:
        if value != exact[name]:
            fail(f"{what} = {value}, expected exactly {exact[name]}")
    elif name in about:
        expected = about[name]
        if not expected / 2 <= value <= 2 * expected:
            fail(f"{what} = {value}, expected {expected:.0f} within a factor 2")
    elif name == "threshold":
        if value <= index_sign_framing or (
                not average and (value - index_sign_framing) % 4 != 0):
            fail(f"{what} = {value} is not {index_sign_framing} bytes of "
                 "framing and some 4-byte words")
        if not value < fp32 / 1.5:
            fail(f"{what} = {value}, expected below fp32's {fp32} / 1.5")
    else:
        fail("no expectation for this codec")

records = []
for w in range(workers):
    with open(f"{out}/worker-{w}.jsonl") as f:
        mine = [json.loads(line) for line in f if line.strip()]
    if [r["step"] for r in mine] != list(range(steps)):
        fail(f"worker {w} recorded steps {[r['step'] for r in mine]}")
    for r in mine:
        if not isinstance(r["loss"], (int, float)) or not math.isfinite(r["loss"]):
            fail(f"worker {w} step {r['step']}: loss {r['loss']}")
        if r["fp32_bytes"] != fp32:
            fail(f"fp32_bytes {r['fp32_bytes']} != {fp32}")
        check_bytes(r["push_bytes"], f"worker {w} step {r['step']} push_bytes")
        check_bytes(r["pull_bytes"], f"worker {w} step {r['step']} pull_bytes")
        if r["push_msg_bytes"] < r["push_bytes"] or r["pull_msg_bytes"] < r["pull_bytes"]:
            fail(f"a message smaller than its payload: {r}")
    records.append(mine)

# Parameter localization: one checksum per checked step, the final one too.
checked = 0
for step in range(steps):
    sums = {records[w][step].get("param_checksum") for w in range(workers)}
    if len(sums) != 1:
        fail(f"step {step}: param_checksum differ: {sums}")
    if None not in sums:
        checked += 1
if checked < 3 or records[0][-1].get("param_checksum") is None:
    fail(f"only {checked} checked steps, final: {records[0][-1]}")

with open(f"{out}/summary.json") as f:
    summary = json.load(f)
if summary["status"] != "ok" or summary["exit_code"] != 0:
    fail(f"summary status {summary['status']}")
if summary["checksums_agree"] is not True or summary["workers_finished"] != workers:
    fail(f"summary {summary}")
check_bytes(summary["push_bytes_per_step"], "summary push_bytes_per_step", True)
check_bytes(summary["pull_bytes_per_step"], "summary pull_bytes_per_step", True)
ratio = summary["push_ratio_vs_fp32"]
if abs(ratio - fp32 / summary["push_bytes_per_step"]) > 1e-3 * ratio:
    fail(f"push_ratio_vs_fp32 {ratio} does not match the bytes")
loss = [records[w][-1]["loss"] for w in range(workers)]
print(f"{name}: push {summary['push_bytes_per_step']:.0f} B/step "
      f"({ratio:.1f}x less than fp32), pull "
      f"{summary['pull_bytes_per_step']:.0f} B/step "
      f"({summary['pull_ratio_vs_fp32']:.1f}x), final loss "
      f"{', '.join(f'{l:.3f}' for l in loss)}, test accuracy "
      f"{summary['final_test_accuracy']}")
PY
}

# Error feedback where the codec asks for it (kernels::Codec::
# UsesErrorFeedback): on the worker, and a residual per chunk on each shard.
check_feedback() {
  local name=$1 feedback=$2 out="$TMP/$1"
  if [[ $feedback == yes ]]; then
    grep -q "with error feedback" "$out/worker-0.log" ||
      fail "$name: worker 0 runs without error feedback"
    if grep -q " 0 keep a residual" "$out/ps-0.log" "$out/ps-1.log"; then
      fail "$name: a shard keeps no residual"
    fi
  else
    if grep -q "with error feedback" "$out/worker-0.log"; then
      fail "$name: worker 0 runs with error feedback"
    fi
    grep -q " 0 keep a residual" "$out/ps-0.log" ||
      fail "$name: shard 0 keeps residuals"
  fi
}

# <name: selects the expectation above> <error feedback: yes|no> <flags...>
cases=(
  "fp16 no --codec fp16"
  "onebit yes --codec onebit"
  "threshold yes --codec threshold"
  "adaptive yes --codec adaptive"
  "dropping_global yes --codec dropping --drop_scope global"
  "dropping_tensor_1bit yes --codec dropping --drop_scope tensor --drop_survivors 1bit"
  "dropping_global_2bit yes --codec dropping --drop_survivors 2bit"
  "qsgd no --codec qsgd"
)
for c in "${cases[@]}"; do
  # shellcheck disable=SC2086
  set -- $c
  name=$1 feedback=$2
  shift 2
  run "$name" "$@"
  check_feedback "$name" "$feedback"
done

echo PASS
