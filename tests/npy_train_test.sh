#!/usr/bin/env bash
# --dataset=npy end to end (issue 15, part 2): numpy writes a small
# 4-class problem of 8x8 float32 inputs, `tern launch` trains LeNet on it
# with 2 workers and 1 shard, and this checks that every worker's loss falls
# and the replicas end identical. Then `tern worker` on malformed files
# exits 1 naming the file and the field, before it contacts any shard.
#
# Usage: npy_train_test.sh <path of the tern binary>
set -euo pipefail

TERN=$(readlink -f "$1")
TMP=${TEST_TMPDIR:-$(mktemp -d)}
PY=/usr/bin/python3

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# ------------------------------------------------------------ the data ---
DATA="$TMP/data"
mkdir -p "$DATA"
"$PY" - "$DATA" <<'PY'
import sys
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(15)
patterns = rng.normal(size=(4, 8, 8)).astype(np.float32)

def split(name, n):
    y = rng.integers(0, 4, size=n).astype(np.int64)
    x = (patterns[y] + 1.0 * rng.normal(size=(n, 8, 8))).astype(np.float32)
    np.save(f"{out}/{name}_x.npy", x)
    np.save(f"{out}/{name}_y.npy", y)

split("train", 1024)
split("test", 256)
PY

# ------------------------------------------------------------- a run ---
OUT="$TMP/run"
rc=0
"$TERN" launch --shards 1 --workers 2 --dataset npy --data_dir "$DATA" \
  --model lenet --steps 40 --eval_every 0 --batch_size 16 --lr 0.02 \
  --out_dir "$OUT" --progress_every_s 0 >"$TMP/summary.txt" \
  2>"$TMP/launch.err" || rc=$?
if [[ $rc -ne 0 ]]; then
  tail -n 80 "$TMP/launch.err" >&2
  fail "tern launch exited $rc"
fi

"$PY" - "$OUT" <<'PY'
import json, sys

out = sys.argv[1]
checksums = []
for w in range(2):
    with open(f"{out}/worker-{w}.jsonl") as f:
        records = [json.loads(line) for line in f if line.strip()]
    losses = [r["loss"] for r in records if "loss" in r]
    if len(losses) < 40:
        sys.exit(f"FAIL: worker {w} recorded {len(losses)} losses")
    first = sum(losses[:10]) / 10
    last = sum(losses[-10:]) / 10
    print(f"worker {w}: loss {first:.4f} (first 10 steps) -> {last:.4f} (last 10)")
    if not last < 0.8 * first:
        sys.exit(f"FAIL: worker {w}'s loss did not fall: {first} -> {last}")
    checksums.append(records[-1]["param_checksum"])
if len(set(checksums)) != 1:
    sys.exit(f"FAIL: final param_checksum differ: {checksums}")
with open(f"{out}/summary.json") as f:
    summary = json.load(f)
print(f"final test accuracy {summary['final_test_accuracy']}")
if not summary["final_test_accuracy"] > 0.5:
    sys.exit(f"FAIL: test accuracy {summary['final_test_accuracy']} <= 0.5")
PY

# ---------------------------------------------------- malformed files ---
# Each case: a directory of good files with one replaced, then the words
# the error must hold. The worker reads its data before it dials the shard,
# so no shard is needed: an unreachable address is never tried.
expect_refused() {
  local dir=$1
  shift
  local err="$TMP/$(basename "$dir").err"
  rc=0
  "$TERN" worker --dataset npy --data_dir "$dir" --model lenet \
    --ps 127.0.0.1:9 --worker_id 0 --num_workers 1 >/dev/null 2>"$err" ||
    rc=$?
  [[ $rc -eq 1 ]] || { cat "$err" >&2; fail "$dir: exit $rc, expected 1"; }
  for word in "$@"; do
    grep -qF -- "$word" "$err" || { cat "$err" >&2; fail "$dir: no '$word'"; }
  done
  echo "refused $(basename "$dir"): $(grep -o "$(basename "$dir")/.*" "$err" | head -n 1 | head -c 200)"
}

bad() {
  local name=$1
  rm -rf "$TMP/$name"
  cp -r "$DATA" "$TMP/$name"
  echo "$TMP/$name"
}

dir=$(bad big_endian)
"$PY" -c "import numpy as np; np.save('$dir/train_x.npy', np.load('$dir/train_x.npy').astype('>f4'))"
expect_refused "$dir" "$dir/train_x.npy" "'descr'" "big-endian"

dir=$(bad float64)
"$PY" -c "import numpy as np; np.save('$dir/test_x.npy', np.load('$dir/test_x.npy').astype(np.float64))"
expect_refused "$dir" "$dir/test_x.npy" "'descr'" "<f8"

dir=$(bad fortran)
"$PY" -c "import numpy as np; np.save('$dir/train_x.npy', np.asfortranarray(np.load('$dir/train_x.npy')))"
expect_refused "$dir" "$dir/train_x.npy" "'fortran_order'"

dir=$(bad count_mismatch)
"$PY" -c "import numpy as np; np.save('$dir/train_y.npy', np.load('$dir/train_y.npy')[:-1])"
expect_refused "$dir" "$dir/train_x.npy" "$dir/train_y.npy" "'shape'"

dir=$(bad truncated)
truncate -s -100 "$dir/train_x.npy"
expect_refused "$dir" "$dir/train_x.npy" "'shape'" "truncated"

dir=$(bad missing)
rm "$dir/test_y.npy"
expect_refused "$dir" "$dir/test_y.npy" "does not exist"

dir=$(bad float_targets)
"$PY" -c "import numpy as np
for s in ('train', 'test'): np.save(f'$dir/{s}_y.npy', np.load(f'$dir/{s}_y.npy').astype(np.float32))"
expect_refused "$dir" "train_y.npy" "float32 targets"

echo PASS
