#!/usr/bin/env bash
# WeightGrad's significance filter at work (issue 18, mend 2;
# docs/geo-results.md, "The significance filter"): the same weightgrad run
# (`tern launch --geo weightgrad`) once per variant, each a threshold and a
# chunk size, then one markdown row per variant from its LPS logs and
# summary.json: rounds, chunks sent and skipped by the filter (summed over
# the data centers, final fp32 round left out), the threshold's range,
# rescales, the rounds' bytes (up and down, all LPSs, the final fp32 round
# left out: it is the same in every variant), all WAN bytes
# (summary.json) and worker 0's final test accuracy. Per round, the
# LPS's own log line (lps-<d>.log, "round R at step S: sent X of Y chunks,
# ..., g_thresh G, significance min/median/max") is the record; the script
# also writes them as OUT/<label>/rounds.tsv.
#
#   docs/geo-filter.sh [--variants "LABEL:G_THRESH:PARTITION_BYTES ..."]
#                      [--datacenters K] [--workers_per_dc W]
#                      [--model lenet] [--dataset fashion-mnist]
#                      [--steps N] [--sync_every N] [--steps_per_epoch N]
#                      [--out DIR] [--tern PATH] [--table_only]
#                      [-- extra launch flags]
#
# G_THRESH: "dyn" (the dynamic threshold of Appendix A.2), or a fixed
# `tern ps --g_thresh` (1e-9: every chunk that moved, i.e. send every
# round). PARTITION_BYTES: the workers' --partition_bytes (0: default;
# smaller cuts a tensor into row blocks of that many bytes, one chunk
# each). --steps_per_epoch N (0: derived from the data) is the LPSs'.
# Defaults: 2 x 1, LeNet, Fashion-MNIST, 300 steps, batch 64, rounds every
# 10 steps, seed 7, evaluation at the end only. Needs a built tern
# (bazel-bin/tern/tern) and python3; no WAN emulation (the bytes are
# counted by the LPSs either way).
set -euo pipefail

variants="dynamic:dyn:0 fixed-0.2:0.2:0 fixed-0.3:0.3:0 fine-dynamic:dyn:65536 fine-0.2:0.2:65536"
datacenters=2
workers_per_dc=1
model=lenet
dataset=fashion-mnist
steps=300
sync_every=10
steps_per_epoch=0
out=runs/geo-filter
tern=bazel-bin/tern/tern
table_only=0
extra=()

usage() { sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; }

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
    --out) out="$2"; shift 2 ;;
    --tern) tern="$2"; shift 2 ;;
    --table_only) table_only=1; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) echo "geo-filter.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$table_only" == 1 || -x "$tern" ]] ||
  { echo "geo-filter.sh: $tern is missing; run: bazel build //tern" >&2; exit 2; }

dir="$out/$model-${datacenters}x${workers_per_dc}"
mkdir -p "$dir"
labels=()
for variant in $variants; do
  IFS=: read -r label g_thresh partition <<<"$variant"
  labels+=("$label")
  [[ "$table_only" == 0 ]] || continue
  run="$dir/$label"
  rm -rf "$run"
  flags=(--geo weightgrad --datacenters "$datacenters"
    --workers_per_dc "$workers_per_dc" --model "$model" --dataset "$dataset"
    --steps "$steps" --sync_every "$sync_every" --seed 7 --batch_size 64
    --eval_every 0 --progress_every_s 0)
  [[ "$partition" == 0 ]] || flags+=(--partition_bytes "$partition")
  threshold=0
  [[ "$g_thresh" == dyn ]] || threshold="$g_thresh"
  echo "== $label: g_thresh $g_thresh, partition_bytes $partition" >&2
  start=$(date +%s)
  # The LPSs read their flags from the environment too (TERN_<FLAG>).
  TERN_G_THRESH="$threshold" TERN_STEPS_PER_EPOCH="$steps_per_epoch" \
    "$tern" launch "${flags[@]}" --out_dir "$run" ${extra[@]+"${extra[@]}"} \
    >"$run.log" 2>&1 || echo "   failed: see $run.log" >&2
  echo "$(( $(date +%s) - start ))" >"$run/wall_s"
done

python3 - "$dir" "${labels[@]}" <<'EOF'
import glob, json, os, re, sys
root, labels = sys.argv[1], sys.argv[2:]
line = re.compile(
    r"round (\d+) at step (\d+): sent (\d+) of (\d+) chunks, (\d+) B up, "
    r"(\d+) B down, g_thresh ([0-9.e+-]+), significance min ([0-9.e+-]+) "
    r"median ([0-9.e+-]+) max ([0-9.e+-]+)")
def size(b):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale:
            return "%.2f %s" % (b / scale, unit)
    return "%d B" % b
print("| run | chunks per LPS | rounds | chunks sent | skipped | g_thresh | "
      "significance (median of rounds' min / median / max) | rescales | "
      "round bytes | WAN bytes | test acc | wall |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for label in labels:
    run = os.path.join(root, label)
    rows, rescales = [], 0
    for log in sorted(glob.glob(os.path.join(run, "lps-*.log"))):
        d = re.search(r"lps-(\d+)\.log$", log).group(1)
        for text in open(log, errors="replace"):
            m = line.search(text)
            if m:
                rows.append((int(d),) + tuple(float(x) for x in m.groups()))
            if re.search(r"epoch \d+ begins by step", text):
                rescales += 1
    summary = os.path.join(run, "summary.json")
    s = json.load(open(summary)) if os.path.exists(summary) else {}
    if not rows or s.get("status") != "ok":
        print("| %s | failed | | | | | | | | | | |" % label)
        continue
    with open(os.path.join(run, "rounds.tsv"), "w") as tsv:
        tsv.write("datacenter\tround\tstep\tsent\tchunks\tbytes_up\t"
                  "bytes_down\tg_thresh\tsig_min\tsig_median\tsig_max\n")
        for r in rows:
            tsv.write("\t".join("%g" % x for x in r) + "\n")
    chunks = int(rows[0][4])
    sent = sum(int(r[3]) for r in rows)
    total = sum(int(r[4]) for r in rows)
    rounds = len({(r[0], r[1]) for r in rows}) // len({r[0] for r in rows})
    thresholds = sorted({r[7] for r in rows})
    med = lambda xs: sorted(xs)[len(xs) // 2]
    geo = s.get("geo") or {}
    acc = s.get("final_test_accuracy")
    wall = open(os.path.join(run, "wall_s")).read().strip() \
        if os.path.exists(os.path.join(run, "wall_s")) else "-"
    print("| %s | %d | %d | %d of %d (%.0f%%) | %d | %s | %.3g / %.3g / %.3g "
          "| %d | %s | %s | %s | %s s |" % (
        label, chunks, rounds, sent, total, 100.0 * sent / total,
        total - sent,
        ("%.3g" % thresholds[0]) if len(thresholds) == 1
        else "%.3g to %.3g" % (thresholds[0], thresholds[-1]),
        med([r[8] for r in rows]), med([r[9] for r in rows]),
        med([r[10] for r in rows]), rescales,
        size(sum(int(r[5] + r[6]) for r in rows)),
        size(geo["wan_bytes"]) if geo.get("wan_bytes") is not None else "-",
        "%.2f%%" % (100 * acc) if acc is not None else "-", wall))
EOF
