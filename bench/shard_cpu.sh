#!/usr/bin/env bash
# The shard's CPU time over one fixed run: one `tern ps` and N workers on
# loopback, synthetic data, a fixed number of steps; prints the CPU seconds
# (user + system) the shard spent, read from /proc just before it is
# stopped. Compare two binaries by alternating them, e.g.
#
#   for i in 1 2 3; do
#     bench/shard_cpu.sh --tern /tmp/tern-before
#     bench/shard_cpu.sh --tern /tmp/tern-after
#   done
#
#   bench/shard_cpu.sh [--tern PATH] [--codec C] [--workers N]
#                      [--steps S] [--model M] [--batch_size B]
#
# Defaults: bazel-bin/tern/tern (build with -c opt), terngrad, 4 workers,
# 80 steps, lenet, batch 16. The workers share the machine with the shard,
# so the figure is the shard's own work, not a step time.
set -euo pipefail

tern=bazel-bin/tern/tern
codec=terngrad
workers=4
steps=80
model=lenet
batch_size=16

usage() { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "shard_cpu.sh: $*" >&2; exit 2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --tern) tern="$2"; shift 2 ;;
    --codec) codec="$2"; shift 2 ;;
    --workers) workers="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --batch_size) batch_size="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ -x "$tern" ]] || die "no executable $tern (bazel build -c opt //tern)"
for value in "$workers" "$steps" "$batch_size"; do
  [[ "$value" =~ ^[1-9][0-9]*$ ]] || die "'$value' is not a positive count"
done

# $tmp, $pids, cleanup at exit, wait_port.
source "$(dirname "$0")/processes.sh"

"$tern" ps --num_workers "$workers" --listen 127.0.0.1:0 \
  --port_file "$tmp/ps.port" >"$tmp/ps.log" 2>&1 &
ps_pid=$!
pids+=("$ps_pid")
port=$(wait_port "$tmp/ps.port") || die "the shard wrote no port"

worker_pids=()
for ((w = 0; w < workers; w++)); do
  "$tern" worker --ps "127.0.0.1:$port" --num_workers "$workers" \
    --worker_id "$w" --codec "$codec" --model "$model" --dataset synthetic \
    --steps "$steps" --batch_size "$batch_size" --eval_every 0 \
    --final_eval=false >"$tmp/worker-$w.log" 2>&1 &
  worker_pids+=($!)
  pids+=($!)
done
for ((w = 0; w < workers; w++)); do
  wait "${worker_pids[$w]}" ||
    { tail -n 20 "$tmp/worker-$w.log" >&2; die "worker $w failed"; }
done

# Fields 14 and 15 of /proc/PID/stat: user and system time in clock ticks
# (the command name, field 2, has no spaces here).
read -r -a stat <"/proc/$ps_pid/stat"
ticks=$(getconf CLK_TCK)
awk -v u="${stat[13]}" -v s="${stat[14]}" -v t="$ticks" \
  -v c="$codec" -v w="$workers" -v n="$steps" -v b="$tern" \
  'BEGIN { printf "%s, %d workers, %d steps: shard CPU %.2f s (%s)\n", c, w, n, (u + s) / t, b }'
