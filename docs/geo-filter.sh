#!/usr/bin/env bash
# WeightGrad's significance filter at work (issue 18, mend 2;
# docs/geo-results.md, "The significance filter"): the same weightgrad run
# (`tern launch --geo weightgrad`) once per variant and seed, each variant a
# threshold and a chunk size, then one markdown row per run from its LPS
# logs and summary.json: rounds, chunks sent and skipped by the filter
# (summed over the data centers, final fp32 round left out), the
# threshold's range, rescales, the rounds' bytes (up and down, all LPSs,
# the final fp32 round left out: it is the same in every variant), all WAN
# bytes (summary.json) and worker 0's final test accuracy. Per round, the
# LPS's own log line (lps-<d>.log, "round R at step S: sent X of Y chunks,
# ..., g_thresh G, significance min/median/max") is the record; the script
# also writes them as RUN/rounds.tsv. With more than one seed a last table
# gives each variant's mean over the seeds, against the first variant's.
#
#   docs/geo-filter.sh [--variants "LABEL:G_THRESH:PARTITION_BYTES ..."]
#                      [--datacenters K] [--workers_per_dc W]
#                      [--model lenet] [--dataset fashion-mnist]
#                      [--steps N] [--sync_every N] [--steps_per_epoch N]
#                      [--seeds "7 8 9"] [--eval_every N] [--emulate_wan]
#                      [--out DIR] [--tern PATH] [--table_only]
#                      [--chart FILE] [--keep DIR] [-- extra launch flags]
#
# G_THRESH: "dyn" (the dynamic threshold of Appendix A.2), or a fixed
# `tern ps --g_thresh` (1e-9: every chunk that moved, i.e. send every
# round). PARTITION_BYTES: the workers' --partition_bytes (0: default;
# smaller cuts a tensor into row blocks of that many bytes, one chunk
# each). --steps_per_epoch N (0: derived from the data) is the LPSs'.
# Seed 7's run of a variant is OUT/<model>-<K>x<W>[-wan]/LABEL, another
# seed's LABEL-seed<S>; the variants run one after the other, each with
# every seed. --emulate_wan (root only) runs over deploy/wan/tern-wan's
# emulated WAN with mutual TLS, as docs/geo-results.sh does. --chart
# draws the first seed's runs with `tern plot` (one line per variant) into
# DIR/plots and copies their overview.png to FILE. --keep DIR copies what
# the table reads of every finished run (summary.json, rounds.tsv, the
# rescales, wall_s) to DIR/<model>-<K>x<W>[-wan]/<run>/, so that
# `--table_only --out DIR` prints it again without the runs (the
# repository keeps its tables' records under docs/results/geo-filter).
# Defaults: 2 x 1, LeNet, Fashion-MNIST, 300 steps, batch 64, rounds every
# 10 steps, seed 7, evaluation at the end only, no WAN emulation (the
# bytes are counted by the LPSs either way). Needs a built tern
# (bazel-bin/tern/tern) and python3.
set -euo pipefail

variants="dynamic:dyn:0 fixed-0.2:0.2:0 fixed-0.3:0.3:0 fine-dynamic:dyn:65536 fine-0.2:0.2:65536"
datacenters=2
workers_per_dc=1
model=lenet
dataset=fashion-mnist
steps=300
sync_every=10
steps_per_epoch=0
seeds=7
eval_every=0
emulate_wan=0
out=runs/geo-filter
tern=bazel-bin/tern/tern
table_only=0
chart=""
keep=""
extra=()
# Evaluations by several workers at once stall a data center on 2 cores
# (docs/geo-results.sh says more).
export TERN_BARRIER_TIMEOUT_S=${TERN_BARRIER_TIMEOUT_S:-180}
export TERN_RPC_TIMEOUT_S=${TERN_RPC_TIMEOUT_S:-240}

usage() { sed -n '2,44p' "$0" | sed 's/^# \{0,1\}//'; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --variants) variants="$2"; shift 2 ;;
    --datacenters) datacenters="$2"; shift 2 ;;
    --workers_per_dc) workers_per_dc="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --dataset) dataset="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --sync_every) sync_every="$2"; shift 2 ;;
    --steps_per_epoch) steps_per_epoch="$2"; shift 2 ;;
    --seeds) seeds="$2"; shift 2 ;;
    --eval_every) eval_every="$2"; shift 2 ;;
    --emulate_wan) emulate_wan=1; shift ;;
    --out) out="$2"; shift 2 ;;
    --tern) tern="$2"; shift 2 ;;
    --table_only) table_only=1; shift ;;
    --chart) chart="$2"; shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "geo-filter.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ ("$table_only" == 1 && -z "$chart") || -x "$tern" ]] ||
  { echo "geo-filter.sh: $tern is missing; run: bazel build //tern" >&2; exit 2; }
for seed in $seeds; do
  [[ "$seed" =~ ^[0-9]+$ ]] ||
    { echo "geo-filter.sh: --seeds: '$seed' is not a seed (a whole number)" >&2; exit 2; }
done
seeds=$(echo $seeds)  # one space between seeds
[[ -n "$seeds" ]] || { echo "geo-filter.sh: --seeds is empty" >&2; exit 2; }
if [[ "$emulate_wan" == 1 && "$table_only" == 0 && $EUID -ne 0 ]]; then
  echo "geo-filter.sh: --emulate_wan needs root" >&2
  exit 2
fi

dir="$out/$model-${datacenters}x${workers_per_dc}"
[[ "$emulate_wan" == 0 ]] || dir="$dir-wan"
mkdir -p "$dir"
# run_name LABEL SEED: the run's directory under $dir.
run_name() {
  if [[ "$2" == 7 ]]; then echo "$1"; else echo "$1-seed$2"; fi
}

labels=()
for variant in $variants; do
  IFS=: read -r label g_thresh partition <<<"$variant"
  labels+=("$label")
  [[ "$table_only" == 0 ]] || continue
  for seed in $seeds; do
    run="$dir/$(run_name "$label" "$seed")"
    rm -rf "$run"
    flags=(--geo weightgrad --datacenters "$datacenters"
      --workers_per_dc "$workers_per_dc" --model "$model" --dataset "$dataset"
      --steps "$steps" --sync_every "$sync_every" --seed "$seed" --batch_size 64
      --eval_every "$eval_every" --progress_every_s 0)
    [[ "$partition" == 0 ]] || flags+=(--partition_bytes "$partition")
    [[ "$emulate_wan" == 0 ]] || flags+=(--emulate_wan --wan_prefix tern-geo- --tls)
    [[ "$g_thresh" == dyn ]] || flags+=(--g_thresh "$g_thresh")
    echo "== $label, seed $seed: g_thresh $g_thresh, partition_bytes $partition ($(date +%T))" >&2
    start=$(date +%s)
    # Launch has no --steps_per_epoch; the LPSs read it from the
    # environment (TERN_<FLAG>).
    TERN_STEPS_PER_EPOCH="$steps_per_epoch" "$tern" launch "${flags[@]}" --out_dir "$run" ${extra[@]+"${extra[@]}"} \
      >"$run.log" 2>&1 || echo "   failed: see $run.log" >&2
    echo "$(( $(date +%s) - start ))" >"$run/wall_s"
  done
done

keep_dir=""
[[ -z "$keep" ]] || keep_dir="$keep/$(basename "$dir")"
# The table's runs as LABEL/SEED/NAME, NAME their directory under $dir.
run_names=()
for label in "${labels[@]}"; do
  for seed in $seeds; do run_names+=("$label/$seed/$(run_name "$label" "$seed")"); done
done
PYTHONPATH="$(dirname "$0")" python3 - "$dir" "$keep_dir" "${run_names[@]}" <<'EOF'
import glob, json, os, re, shutil, sys
from run_records import mean_and_spread, points_difference

root, keep = sys.argv[1], sys.argv[2]
names = {tuple(arg.split("/")[:2]): arg.split("/")[2] for arg in sys.argv[3:]}
labels = list(dict.fromkeys(label for label, _ in names))
seeds = list(dict.fromkeys(seed for _, seed in names))
TSV_HEADER = ("datacenter\tround\tstep\tsent\tchunks\tbytes_up\t"
              "bytes_down\tg_thresh\tsig_min\tsig_median\tsig_max\n")
LINE = re.compile(
    r"round (\d+) at step (\d+): sent (\d+) of (\d+) chunks, (\d+) B up, "
    r"(\d+) B down, g_thresh ([0-9.e+-]+), significance min ([0-9.e+-]+) "
    r"median ([0-9.e+-]+) max ([0-9.e+-]+)")


def size(b):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale:
            return "%.2f %s" % (b / scale, unit)
    return "%d B" % b


def median(xs):
    return sorted(xs)[len(xs) // 2]


def run_dir(label, seed):
    return os.path.join(root, names[(label, seed)])


def read_logs(run):
    """The rounds of the LPS logs (one tuple per round line: the data
    center, then the line's numbers) and the threshold's rescales; written
    to RUN/rounds.tsv and RUN/rescales. A run without logs (one --keep
    copied) is read from those two files instead."""
    logs = sorted(glob.glob(os.path.join(run, "lps-*.log")))
    if not logs:
        tsv = os.path.join(run, "rounds.tsv")
        if not os.path.exists(tsv):
            return [], 0
        rows = [tuple(float(x) for x in line.split("\t"))
                for line in open(tsv).readlines()[1:] if line.strip()]
        rescales = open(os.path.join(run, "rescales")).read()
        return [(int(r[0]),) + r[1:] for r in rows], int(rescales)
    rows, rescales = [], 0
    for log in logs:
        d = re.search(r"lps-(\d+)\.log$", log).group(1)
        for text in open(log, errors="replace"):
            m = LINE.search(text)
            if m:
                rows.append((int(d),) + tuple(float(x) for x in m.groups()))
            if re.search(r"epoch \d+ begins by step", text):
                rescales += 1
    with open(os.path.join(run, "rounds.tsv"), "w") as tsv:
        tsv.write(TSV_HEADER)
        for r in rows:
            tsv.write("\t".join("%g" % x for x in r) + "\n")
    with open(os.path.join(run, "rescales"), "w") as f:
        f.write("%d\n" % rescales)
    return rows, rescales


def read_run(run):
    """A finished run's rounds and totals; None if it failed."""
    rows, rescales = read_logs(run)
    path = os.path.join(run, "summary.json")
    summary = json.load(open(path)) if os.path.exists(path) else {}
    if not rows or summary.get("status") != "ok":
        return None
    wall = os.path.join(run, "wall_s")
    return {
        "rows": rows, "rescales": rescales,
        "sent": sum(int(r[3]) for r in rows),
        "total": sum(int(r[4]) for r in rows),
        "round_bytes": sum(int(r[5] + r[6]) for r in rows),
        "wan_bytes": (summary.get("geo") or {}).get("wan_bytes"),
        "accuracy": summary.get("final_test_accuracy"),
        "wall": open(wall).read().strip() if os.path.exists(wall) else "-",
    }


def keep_run(run):
    """Copies what the table reads of `run` to the --keep directory."""
    kept = os.path.join(keep, os.path.basename(run))
    if os.path.realpath(kept) == os.path.realpath(run):
        return
    os.makedirs(kept, exist_ok=True)
    for name in ("summary.json", "rounds.tsv", "rescales", "wall_s"):
        if os.path.exists(os.path.join(run, name)):
            shutil.copy(os.path.join(run, name), kept)


def run_row(name, r):
    rows = r["rows"]
    rounds = len({(x[0], x[1]) for x in rows}) // len({x[0] for x in rows})
    thresholds = sorted({x[7] for x in rows})
    return ("| %s | %d | %d | %d of %d (%.0f%%) | %d | %s | %.3g / %.3g / %.3g "
            "| %d | %s | %s | %s | %s s |" % (
        name, int(rows[0][4]), rounds, r["sent"], r["total"],
        100.0 * r["sent"] / r["total"], r["total"] - r["sent"],
        ("%.3g" % thresholds[0]) if len(thresholds) == 1
        else "%.3g to %.3g" % (thresholds[0], thresholds[-1]),
        median([x[8] for x in rows]), median([x[9] for x in rows]),
        median([x[10] for x in rows]), r["rescales"], size(r["round_bytes"]),
        size(r["wan_bytes"]) if r["wan_bytes"] is not None else "-",
        "%.2f%%" % (100 * r["accuracy"]) if r["accuracy"] is not None
        else "-", r["wall"]))


def print_runs(runs):
    print("| run | chunks per LPS | rounds | chunks sent | skipped | g_thresh | "
          "significance (median of rounds' min / median / max) | rescales | "
          "round bytes | WAN bytes | test acc | wall |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for label in labels:
        for seed in seeds:
            name = label if len(seeds) == 1 else "%s, seed %s" % (label, seed)
            r = runs[(label, seed)]
            status = "failed" if os.path.isdir(run_dir(label, seed)) else "not run"
            print(run_row(name, r) if r else
                  "| %s | %s | | | | | | | | | | |" % (name, status))


def print_means(runs):
    """Each variant over its finished seeds, against the first variant."""
    def finished(label):
        return [r for r in (runs[(label, s)] for s in seeds)
                if r and r["accuracy"] is not None]
    reference = [r["accuracy"] for r in finished(labels[0])]
    print("| variant | seeds | chunks sent | round bytes (mean) | "
          "WAN bytes (mean) | test acc (mean ± half range) | vs %s |" % labels[0])
    print("|---|---|---|---|---|---|---|")
    for label in labels:
        done = finished(label)
        if not done:
            print("| %s | 0 of %d | | | | | |" % (label, len(seeds)))
            continue
        accuracies = [r["accuracy"] for r in done]
        wan = [r["wan_bytes"] for r in done if r["wan_bytes"] is not None]
        versus = ""
        if label != labels[0] and reference:
            versus = points_difference(sum(accuracies) / len(accuracies),
                                       sum(reference) / len(reference))
        print("| %s | %d of %d | %.0f%% | %s | %s | %s | %s |" % (
            label, len(done), len(seeds),
            100.0 * sum(r["sent"] for r in done) / sum(r["total"] for r in done),
            size(sum(r["round_bytes"] for r in done) / len(done)),
            size(sum(wan) / len(wan)) if wan else "-",
            mean_and_spread(accuracies), versus))


runs = {key: read_run(run_dir(*key)) for key in names}
if keep:
    for key, r in runs.items():
        if r:
            keep_run(run_dir(*key))
print_runs(runs)
if len(seeds) > 1:
    print()
    print_means(runs)
EOF

[[ -n "$chart" ]] || exit 0
# The chart: the first seed's runs that wrote records, one line per variant.
plotted=()
for label in "${labels[@]}"; do
  run="$dir/$(run_name "$label" "${seeds%% *}")"
  [[ ! -s "$run/worker-0.jsonl" ]] || plotted+=("$run")
done
[[ ${#plotted[@]} -gt 0 ]] || { echo "geo-filter.sh: no run to draw" >&2; exit 1; }
"$tern" plot "${plotted[@]}" --out "$dir/plots" >&2 ||
  { echo "geo-filter.sh: tern plot failed" >&2; exit 1; }
cp "$dir/plots/overview.png" "$chart"
