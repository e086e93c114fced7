#!/usr/bin/env bash
# The TernGrad pull in each sum layout on LeNet's real gradients: for every
# worker count, one local run per layout (the same seed, so the same sums),
# and a table of pull bytes per step, the ratio to fp32 and worker 0's
# median decode time. Lossless layouts must leave the replicas with the same
# parameters, so the script also fails if the runs' checksums differ.
set -euo pipefail

usage() {
  cat <<'EOF'
usage: bench/pull_layouts.sh --tern PATH [--workers "4 8 16"] [--steps 30]
                             [--layouts "bits radix huffman"] [--out DIR]

  --tern     the tern binary to run (build it with -c opt and copy it aside)
  --workers  worker counts N to run (one shard each run)
  --steps    training steps per run (LeNet, Fashion-MNIST, batch 64)
  --layouts  --sum_packing values to compare
  --out      where the runs go (default runs/pull-layouts)
EOF
}

tern=""
workers="4 8 16"
steps=30
layouts="bits radix huffman"
out="runs/pull-layouts"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tern) tern="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --layouts) layouts="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "pull_layouts.sh: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done
if [[ -z "$tern" || ! -x "$tern" ]]; then
  echo "pull_layouts.sh: --tern must name an executable tern binary" >&2
  exit 2
fi

for n in $workers; do
  for layout in $layouts; do
    dir="$out/n$n-$layout"
    echo "== N=$n --sum_packing $layout -> $dir" >&2
    rm -rf "$dir"
    mkdir -p "$out"
    "$tern" launch --workers "$n" --shards 1 --steps "$steps" \
      --eval_every 0 --final_eval=false --codec terngrad \
      --sum_packing "$layout" --out_dir "$dir" >"$dir.log" 2>&1 || {
      echo "pull_layouts.sh: the run failed; see $dir.log" >&2
      exit 1
    }
  done
done

/usr/bin/python3 - "$out" "$workers" "$layouts" <<'EOF'
import json, statistics, sys
out, workers, layouts = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
print("| N | layout | pull per step (KiB) | fp32 / pull | decode (ms, worker 0 median) |")
print("|---|---|---|---|---|")
failed = False
for n in workers:
    checksums = set()
    for layout in layouts:
        d = f"{out}/n{n}-{layout}"
        summary = json.load(open(f"{d}/summary.json"))
        checksums.update(summary["param_checksums"])
        decode = [json.loads(l)["decode_s"] for l in open(f"{d}/worker-0.jsonl")]
        print(f"| {n} | {layout} | {summary['pull_bytes_per_step'] / 1024:.1f} "
              f"| {summary['pull_ratio_vs_fp32']:.2f}x "
              f"| {1000 * statistics.median(decode):.1f} |")
    if len(checksums) != 1:
        print(f"N={n}: the layouts left different parameters: {sorted(checksums)}",
              file=sys.stderr)
        failed = True
sys.exit(1 if failed else 0)
EOF
