#!/usr/bin/env bash
# Compares the four geo-distributed modes of DESIGN.md section 4 on one
# benchmark: one `tern launch --geo=MODE` per mode, the same model, data,
# seed, steps and cluster shape for all (K data centers x W workers), then
# one markdown row each from the runs' summary.json.
#
#   docs/geo-results.sh [--modes "baseline terngrad gaia weightgrad"]
#                       [--datacenters K] [--workers_per_dc W]
#                       [--model lenet] [--dataset fashion-mnist]
#                       [--steps N] [--eval_every N] [--target ACC]
#                       [--sync_every N] [--emulate_wan] [--wan_mbit W]
#                       [--insecure]
#                       [--seeds "7 8 9"]
#                       [--out DIR] [--tern PATH] [--table_only]
#                       [--chart FILE]
#                       [-- extra launch flags]
#
# Defaults: 3 x 2, LeNet, Fashion-MNIST, 200 steps, evaluation every 25,
# target 0.75, seed 7 (docs/geo-results.md). --emulate_wan (root only) runs
# every mode over deploy/wan/tern-wan's emulated WAN, by default 10x slower
# than its nominal 1 GbE LAN (100 mbit/s per link; --wan_mbit changes it),
# with mutual TLS on every link (`tern launch --tls`; --insecure: plaintext).
# Columns: worker 0's final test accuracy; WAN bytes (baseline/terngrad: every
# worker message, as the shards sit in the GS's region; gaia/weightgrad: the
# LPS<->GS payloads); the job's wall time (launch's own WAN setup excluded);
# worker 0's training time for all steps and to the target, both without the
# time its evaluations took (eval_s); speedups are baseline's training times
# over the mode's. --seeds runs every mode once per seed, one table each (seed
# 7's runs in OUT/<model>-<shape>, another seed's in
# OUT/<model>-<shape>-seed<S>); with more than one seed a last table gives
# each mode's accuracy as mean and half range over the seeds, against
# baseline's mean when baseline is among --modes. --table_only prints the
# tables from the runs already in --out. An evaluation of the 10,000 test
# images by three workers at once takes up to a minute on 2 cores and stalls a
# data center meanwhile, so the shards' and LPSs' barrier timeout
# (TERN_BARRIER_TIMEOUT_S) and the workers' RPC deadline (TERN_RPC_TIMEOUT_S)
# default to 180 s and 240 s here. Needs a built tern (default
# bazel-bin/tern/tern, from `bazel build -c opt //tern`) and python3. Runs one
# mode at a time: times are comparable only inside one invocation on an
# otherwise idle machine. Then `tern plot` draws the first seed's runs into
# OUT/<model>-<shape>[-seed<S>]/plots (one line per mode: loss, accuracy,
# bytes, WAN bytes, time to target); --chart copies their overview.png to
# FILE, the docs' picture.
set -euo pipefail

modes="baseline terngrad gaia weightgrad"
datacenters=3
workers_per_dc=2
model=lenet
dataset=fashion-mnist
steps=200
eval_every=25
target=0.75
seeds=7
sync_every=""
emulate_wan=0
wan_mbit=""
transport=--tls
out=runs/geo-results
tern=bazel-bin/tern/tern
extra=()
table_only=0
chart=""
export TERN_BARRIER_TIMEOUT_S=${TERN_BARRIER_TIMEOUT_S:-180}
export TERN_RPC_TIMEOUT_S=${TERN_RPC_TIMEOUT_S:-240}

usage() { sed -n '2,43p' "$0" | sed 's/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --modes) modes="$2"; shift 2 ;;
    --datacenters) datacenters="$2"; shift 2 ;;
    --workers_per_dc) workers_per_dc="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --dataset) dataset="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --eval_every) eval_every="$2"; shift 2 ;;
    --target) target="$2"; shift 2 ;;
    --sync_every) sync_every="$2"; shift 2 ;;
    --seeds) seeds="$2"; shift 2 ;;
    --emulate_wan) emulate_wan=1; shift ;;
    --wan_mbit) wan_mbit="$2"; shift 2 ;;
    --insecure) transport=--insecure; shift ;;
    --out) out="$2"; shift 2 ;;
    --tern) tern="$2"; shift 2 ;;
    --table_only) table_only=1; shift ;;
    --chart) chart="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "geo-results.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ -x "$tern" ]] || { echo "geo-results.sh: $tern is missing; run: bazel build -c opt //tern" >&2; exit 2; }
command -v python3 >/dev/null || { echo "geo-results.sh: python3 is needed for the table" >&2; exit 2; }
if [[ "$emulate_wan" == 1 && $EUID -ne 0 ]]; then
  echo "geo-results.sh: --emulate_wan needs root" >&2
  exit 2
fi
[[ -z "$wan_mbit" || "$emulate_wan" == 1 ]] || { echo "geo-results.sh: --wan_mbit needs --emulate_wan" >&2; exit 2; }
for seed in $seeds; do
  [[ "$seed" =~ ^[0-9]+$ ]] || { echo "geo-results.sh: --seeds: '$seed' is not a seed (a whole number)" >&2; exit 2; }
done
seeds=$(echo $seeds)  # one space between seeds
[[ -n "$seeds" ]] || { echo "geo-results.sh: --seeds is empty" >&2; exit 2; }

# The flags of one mode's run: flags_of MODE SEED.
flags_of() {
  local mode="$1" seed="$2"
  local flags=(--geo "$mode" --datacenters "$datacenters"
    --workers_per_dc "$workers_per_dc" --model "$model" --dataset "$dataset"
    --steps "$steps" --eval_every "$eval_every" --seed "$seed"
    --target_accuracy "$target" --progress_every_s 0)
  if [[ -n "$sync_every" && ( "$mode" == gaia || "$mode" == weightgrad ) ]]; then
    flags+=(--sync_every "$sync_every")
  fi
  if [[ "$emulate_wan" == 1 ]]; then
    flags+=(--emulate_wan --wan_prefix tern-geo- "$transport")
    [[ -z "$wan_mbit" ]] || flags+=(--wan_mbit "$wan_mbit")
  fi
  printf '%s\n' "${flags[@]}"
}

label="${datacenters}x${workers_per_dc}"
[[ "$emulate_wan" == 1 ]] && label="$label-wan${wan_mbit}"
# seed_dir SEED: where the runs of one seed live.
seed_dir() {
  if [[ "$1" == 7 ]]; then echo "$out/$model-$label"; else echo "$out/$model-$label-seed$1"; fi
}

# run_seed SEED: one launch per mode, one after the other.
run_seed() {
  local dir run mode flags
  dir=$(seed_dir "$1")
  mkdir -p "$dir"
  for mode in $modes; do
    run="$dir/$mode"
    rm -rf "$run"
    echo "== $mode: $datacenters x $workers_per_dc workers, $steps steps, seed $1 ($(date +%T))" >&2
    mapfile -t flags < <(flags_of "$mode" "$1")
    "$tern" launch "${flags[@]}" --out_dir "$run" ${extra[@]+"${extra[@]}"} \
      >"$run.log" 2>&1 || echo "   failed: see $run.log" >&2
  done
}

# seed_table DIR: one markdown row per mode from the runs in DIR.
seed_table() {
  PYTHONPATH="$(dirname "$0")" python3 - "$1" "$target" $modes <<'EOF'
import json, os, sys
from run_records import training_seconds
root, target, names = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
def load(name):
    path = os.path.join(root, name, "summary.json")
    return json.load(open(path)) if os.path.exists(path) else None
def train_s(name):
    return training_seconds(os.path.join(root, name))
def size(b):
    if b is None:
        return "unavailable"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale:
            return "%.2f %s" % (b / scale, unit)
    return "%d B" % b
def ratio(a, b):
    return "%.2fx" % (a / b) if a and b else "-"
base = load("baseline")
base_train = train_s("baseline") if base and base.get("status") == "ok" else None
print("| mode | test acc | WAN bytes | job wall time | training time | time to %.0f%% (step) | speedup (training) | speedup (to target) |" % (100 * target))
print("|---|---|---|---|---|---|---|---|")
for name in names:
    s = load(name)
    if s is None:
        print("| %s | not run | | | | | | |" % name)
        continue
    if s.get("status") != "ok":
        print("| %s | failed | | | | | | |" % name)
        continue
    acc = s.get("final_test_accuracy")
    geo = s.get("geo") or {}
    ttt = s.get("time_to_target_s")
    train = train_s(name)
    print("| %s | %s | %s | %.1f s | %s | %s | %s | %s |" % (
        name, "%.2f%%" % (100 * acc) if acc is not None else "-",
        size(geo.get("wan_bytes")), s["job_wall_s"],
        "%.1f s" % train if train is not None else "-",
        "%.1f s (%d)" % (ttt, s.get("step_to_target")) if ttt is not None else "not reached",
        ratio(base_train, train),
        ratio(base and base.get("time_to_target_s"), ttt)))
EOF
}

# seeds_table: each mode's final accuracy over the seeds that finished.
seeds_table() {
  local dirs=() seed
  for seed in $seeds; do dirs+=("$(seed_dir "$seed")"); done
  PYTHONPATH="$(dirname "$0")" python3 - "$modes" "${dirs[@]}" <<'EOF'
import json, os, sys
from run_records import mean_and_spread, points_difference
modes, dirs = sys.argv[1].split(), sys.argv[2:]
def accuracies(mode):
    found = []
    for d in dirs:
        path = os.path.join(d, mode, "summary.json")
        if os.path.exists(path):
            s = json.load(open(path))
            if s.get("status") == "ok" and s.get("final_test_accuracy") is not None:
                found.append(s["final_test_accuracy"])
    return found
def mean(xs):
    return sum(xs) / len(xs)
base = accuracies("baseline")
print("| mode | seeds | test acc (mean ± half range) | each seed | vs baseline |")
print("|---|---|---|---|---|")
for mode in modes:
    acc = accuracies(mode)
    if not acc:
        print("| %s | 0 of %d | - | | |" % (mode, len(dirs)))
        continue
    versus = points_difference(mean(acc), mean(base)) if base and mode != "baseline" else ""
    print("| %s | %d of %d | %s | %s | %s |" % (
        mode, len(acc), len(dirs), mean_and_spread(acc),
        ", ".join("%.2f" % (100 * a) for a in acc), versus))
EOF
}

for seed in $seeds; do
  [[ "$table_only" == 1 ]] || run_seed "$seed"
  [[ "$seeds" == 7 ]] || echo "Seed $seed:"
  seed_table "$(seed_dir "$seed")"
done
if [[ $(wc -w <<<"$seeds") -gt 1 ]]; then
  echo "Over the seeds:"
  seeds_table
fi

# The charts of the first seed's runs that wrote records, one line per mode.
plotted=()
first_dir=$(seed_dir "${seeds%% *}")
for mode in $modes; do
  [[ ! -s "$first_dir/$mode/worker-0.jsonl" ]] || plotted+=("$first_dir/$mode")
done
if [[ ${#plotted[@]} -gt 0 ]]; then
  "$tern" plot "${plotted[@]}" --out "$first_dir/plots" >&2 ||
    { echo "geo-results.sh: tern plot failed" >&2; exit 1; }
  [[ -z "$chart" ]] || cp "$first_dir/plots/overview.png" "$chart"
fi
