#!/usr/bin/env bash
# Codecs against fp32 run to the end of a decayed schedule, as TernGrad's
# Figure 3 trains LeNet: the total mini-batch held at 64 (64 / N per worker,
# "mini-batch size refers to the total mini-batch size"), momentum SGD 0.9,
# base lr 0.01 decayed polynomially (power 0.5) to 0 at the last step,
# weight decay 5e-4, Fashion-MNIST here. One `tern launch` per (workers,
# codec, seed); a run whose summary.json says "ok" is kept, so an
# interrupted invocation resumes. Then one table: the final test accuracy's
# mean and spread (half the range) over the seeds, each row's mean against
# fp32's, and its push bytes against fp32's.
#
#   docs/convergence.sh [--workers "2 4 8 16"] [--codecs "fp32 terngrad"]
#                       [--seeds "1 2 3"] [--steps N] [--shards S]
#                       [--out DIR] [--tern PATH] [--table_only]
#                       [--chart FILE] [--keep DIR]
#
# --codecs takes the rows' names of docs/codec_variants.sh (a codec, or a
# codec with options: terngrad-noclip, dropping-99.9-tensor-2bit, ...).
# --chart draws seed 1 of every row with `tern plot` and copies its
# overview to FILE. --keep copies the summary.json of every finished run of
# the invocation to DIR/n<N>/<codec>/seed<S>/: the repository keeps those
# of its tables under docs/results/convergence, so that `--table_only
# --out docs/results/convergence` prints them again without the runs.
#
# Defaults: the lists above, 3000 steps (the paper runs 10,000; 3000 are
# 3.2 epochs of Fashion-MNIST at 64 a step, and the schedule reaches 0
# there), 2 shards, runs/convergence. Needs a built tern (`bazel build -c
# opt //tern`; copy it aside with --tern while you rebuild) and python3.
set -euo pipefail

workers_list="2 4 8 16"
codecs="fp32 terngrad"
seeds="1 2 3"
steps=3000
shards=2
out=runs/convergence
tern=bazel-bin/tern/tern
table_only=""
chart=""
keep=""

usage() { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "convergence.sh: $*" >&2; exit 2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --workers) workers_list="$2"; shift 2 ;;
    --codecs) codecs="$2"; shift 2 ;;
    --seeds) seeds="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --shards) shards="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --tern) tern="$2"; shift 2 ;;
    --table_only) table_only=1; shift ;;
    --chart) chart="$2"; shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
for n in $workers_list; do
  [[ "$n" =~ ^[0-9]+$ ]] && ((n >= 1 && 64 % n == 0)) ||
    die "--workers: '$n' must divide the total batch of 64"
done
command -v python3 >/dev/null || die "python3 is needed for the table"
source "$(dirname "$0")/codec_variants.sh"
check_rows "$codecs" || exit 2

ok() { grep -q '"status": "ok"' "$1/summary.json" 2>/dev/null; }

if [[ -z "$table_only" ]]; then
  [[ -x "$tern" ]] || die "$tern is missing; run: bazel build -c opt //tern"
  for n in $workers_list; do
    for codec in $codecs; do
      for seed in $seeds; do
        run="$out/n$n/$codec/seed$seed"
        if ok "$run"; then continue; fi
        rm -rf "$run"
        mkdir -p "$(dirname "$run")"
        echo "== $n workers, $codec, seed $seed: $steps steps ($(date +%T))" >&2
        # shellcheck disable=SC2046  # flags_of prints several words on purpose
        "$tern" launch --workers "$n" --shards "$shards" --model lenet \
          --dataset fashion-mnist --batch_size $((64 / n)) --lr 0.01 \
          --momentum 0.9 --weight_decay 0.0005 --lr_schedule poly \
          --steps "$steps" --eval_every 0 --seed "$seed" \
          $(flags_of "$codec") --out_dir "$run" >"$run.log" 2>&1 ||
          echo "   failed: see $run.log" >&2
      done
    done
  done
fi

# The summaries of this invocation's finished runs, kept where --keep says.
if [[ -n "$keep" ]]; then
  for n in $workers_list; do
    for codec in $codecs; do
      for seed in $seeds; do
        run="$out/n$n/$codec/seed$seed"
        ok "$run" || continue
        mkdir -p "$keep/n$n/$codec/seed$seed"
        cp "$run/summary.json" "$keep/n$n/$codec/seed$seed/"
      done
    done
  done
fi

PYTHONPATH="$(dirname "$0")" python3 - "$out" "$workers_list" "$codecs" "$seeds" <<'PY'
import json, os, sys
from run_records import mean_and_spread, points_difference
root, workers, codecs, seeds = sys.argv[1], *(a.split() for a in sys.argv[2:])
def summary(n, codec, seed):
    """A finished run's summary.json whose replicas agreed, else None."""
    path = os.path.join(root, "n" + n, codec, "seed" + seed, "summary.json")
    try:
        s = json.load(open(path))
    except (OSError, ValueError):
        return None
    if s.get("status") != "ok" or not s.get("checksums_agree"):
        return None
    return s
def finished(n, codec):
    return [s for s in (summary(n, codec, seed) for seed in seeds) if s]
def mean_accuracy(runs):
    return sum(s["final_test_accuracy"] for s in runs) / len(runs)
print("| workers | per worker | codec | seeds | test accuracy (mean ± half range) | vs fp32 | push vs fp32 |")
print("|---|---|---|---|---|---|---|")
for n in workers:
    # fp32's mean from its runs on disk, whether or not it is a row here.
    fp32 = finished(n, "fp32")
    for codec in codecs:
        runs = finished(n, codec)
        if not runs:
            print("| %s | %d | %s | 0 of %d | - | | |" % (n, 64 // int(n), codec, len(seeds)))
            continue
        acc = [s["final_test_accuracy"] for s in runs]
        diff = (points_difference(mean_accuracy(runs), mean_accuracy(fp32))
                if codec != "fp32" and fp32 else "")
        print("| %s | %d | %s | %d of %d | %s | %s | %.1fx |" % (
            n, 64 // int(n), codec, len(acc), len(seeds),
            mean_and_spread(acc), diff, runs[0]["push_ratio_vs_fp32"]))
PY

# The chart: seed 1 of every row that finished, one line each.
[[ -n "$chart" ]] || exit 0
first_seed="${seeds%% *}"
plotted=()
labels=()
for n in $workers_list; do
  for codec in $codecs; do
    run="$out/n$n/$codec/seed$first_seed"
    if ok "$run"; then
      plotted+=("$run")
      labels+=("$codec at $n workers")
    fi
  done
done
[[ ${#plotted[@]} -gt 0 ]] || die "--chart: no finished run of seed $first_seed to draw"
"$tern" plot "${plotted[@]}" --labels "$(IFS=,; echo "${labels[*]}")" \
  --out "$out/plots" >&2 || die "tern plot failed"
cp "$out/plots/overview.png" "$chart"
