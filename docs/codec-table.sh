#!/usr/bin/env bash
# Regenerates the compressor table of docs/compressors-results.md (in the
# style of Dryden et al. 2016, Table 1): one `tern launch` per codec, the
# same model, data, seed and steps for all, then one markdown row each from
# the runs' summary.json.
#
#   docs/codec-table.sh [--model lenet|mlp] [--steps N] [--eval_every N]
#                       [--codecs "fp32 terngrad ..."] [--out DIR]
#                       [--shards N] [--tern PATH] [--chart FILE]
#
# --codecs takes the rows' names of docs/codec_variants.sh (a codec, or a
# codec with options: terngrad-noclip, dropping-99.9-tensor-2bit, ...).
# Then `tern plot` draws the runs into DIR/<model>/plots (one line per
# codec); --chart copies their overview.png to FILE, the docs' picture.
# Needs a built tern (default bazel-bin/tern/tern, from
# `bazel build -c opt //tern`; copy it aside with --tern while you
# rebuild) and
# python3 for the table. Runs one configuration at a time: steps/s are
# comparable only inside one invocation on an otherwise idle machine.
set -euo pipefail

model=lenet
steps=500
eval_every=0
out=runs/codec-table
codecs="fp32 fp16 terngrad terngrad-shared-clip onebit threshold adaptive dropping dropping-1bit dropping-2bit qsgd"
tern=bazel-bin/tern/tern
# The 3x4096 MLP's 37M parameters need 4 shards to keep each shard's fp32
# message under the shards' 64 MiB default (--max_message_mb).
shards=2
chart=""

usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) model="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --eval_every) eval_every="$2"; shift 2 ;;
    --codecs) codecs="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --tern) tern="$2"; shift 2 ;;
    --shards) shards="$2"; shift 2 ;;
    --chart) chart="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "codec-table.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -x "$tern" ]] || { echo "codec-table.sh: $tern is missing; run: bazel build -c opt //tern" >&2; exit 2; }
command -v python3 >/dev/null || { echo "codec-table.sh: python3 is needed for the table" >&2; exit 2; }
# Five evaluations a run: the charts' accuracy curves (the table's steps/s
# leaves their time out).
[[ "$eval_every" == 0 ]] && eval_every=$(( steps >= 5 ? steps / 5 : 1 ))

# The flags of each row, by name.
source "$(dirname "$0")/codec_variants.sh"
check_rows "$codecs" || exit 2

dir="$out/$model"
mkdir -p "$dir"
for name in $codecs; do
  run="$dir/$name"
  rm -rf "$run"
  echo "== $model / $name: $steps steps" >&2
  # shellcheck disable=SC2046  # flags_of prints several words on purpose
  "$tern" launch --shards "$shards" --workers 4 --model "$model" \
    --dataset fashion-mnist --steps "$steps" --eval_every "$eval_every" \
    --seed 7 --out_dir "$run" $(flags_of "$name") >"$run.log" 2>&1 ||
    echo "   failed: see $run.log" >&2
done

PYTHONPATH="$(dirname "$0")" python3 - "$dir" $codecs <<'EOF'
import json, os, sys
from run_records import points_difference, training_seconds
root, names = sys.argv[1], sys.argv[2:]
def load(name):
    path = os.path.join(root, name, "summary.json")
    return json.load(open(path)) if os.path.exists(path) else None
base = load("fp32")
def training_steps_per_s(name, summary):
    """Worker 0's steps over its wall time less its evaluations."""
    return summary["steps"] / training_seconds(os.path.join(root, name))
def size(b):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale:
            return "%.2f %s" % (b / scale, unit)
    return "%d B" % b
print("| codec | test acc | vs fp32 | push / step | pull / step | push vs fp32 | pull vs fp32 | steps/s | replicas |")
print("|---|---|---|---|---|---|---|---|---|")
for name in names:
    s = load(name)
    if s is None or s.get("status") != "ok":
        print("| %s | failed | | | | | | | |" % name)
        continue
    acc = s.get("final_test_accuracy")
    diff = ""
    if base and acc is not None and base.get("final_test_accuracy") is not None:
        diff = points_difference(acc, base["final_test_accuracy"])
    print("| %s | %s | %s | %s | %s | %.2fx | %.2fx | %.2f | %s |" % (
        name, "%.2f%%" % (100 * acc) if acc is not None else "-", diff,
        size(s["push_bytes_per_step"]), size(s["pull_bytes_per_step"]),
        s["push_ratio_vs_fp32"], s["pull_ratio_vs_fp32"],
        training_steps_per_s(name, s),
        "identical" if s["checksums_agree"] else "DIFFER"))
EOF

# The charts of the runs that wrote records, named as the table's rows.
plotted=()
names=()
for name in $codecs; do
  if [[ -s "$dir/$name/worker-0.jsonl" ]]; then
    plotted+=("$dir/$name")
    names+=("$name")
  fi
done
if [[ ${#plotted[@]} -gt 0 ]]; then
  "$tern" plot "${plotted[@]}" --labels "$(IFS=,; echo "${names[*]}")" \
    --out "$dir/plots" >&2 || { echo "codec-table.sh: tern plot failed" >&2; exit 1; }
  [[ -z "$chart" ]] || cp "$dir/plots/overview.png" "$chart"
fi
