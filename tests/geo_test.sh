#!/usr/bin/env bash
# WeightGrad end to end on loopback, without `tern launch` (DESIGN section
# 4; server/WEIGHTGRAD.md): `tern global` with K=2, two local parameter
# servers (`tern ps --mode=... --global ... --datacenter d`), 2 workers
# each, synthetic data, 40 steps, a round every 5 local steps. Run once in
# the weightgrad mode (ternary gradients, ternary weights, ternary rounds)
# and once in the gaia mode (fp32 gradients and weights, Gaia's filter).
# Each run must show:
#   - every worker exits 0; each LPS and the GS exit 0 on SIGTERM;
#   - the loss falls (mean of the first quarter of steps vs the last);
#   - both LPSs log one line per round (chunks sent of all, threshold and
#     the spread of the chunks' significances) and the final
#     synchronization, with the same final checksum, and every worker's
#     final JSONL record holds that checksum (its final weights are the
#     LPS's, in fp32);
#   - pushes are the size of the mode's encoding (base-3 codes + a scaler a
#     chunk, or fp32), and the pulls of ternary weights are too (fp32 on
#     the last step and on the steps a worker evaluates after);
#   - weightgrad: LPS 0 takes its epoch from the workers' join (6000
#     synthetic examples / (2 slices x 32) = 93 local steps: no rescale in
#     40 steps); LPS 1 runs with --steps_per_epoch 10 and rescales its
#     threshold at the rounds of steps 10, 20 and 30, logging each.
#
# Usage: geo_test.sh <path of the tern binary>
set -euo pipefail

TERN=$(readlink -f "$1")
TMP=${TEST_TMPDIR:-$(mktemp -d)}
STEPS=40
SYNC_EVERY=5
PIDS=()

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

show() {
  echo "---- $1" >&2
  tail -n "${2:-40}" "$1" >&2 || true
}

cleanup() {
  for pid in "${PIDS[@]}"; do
    kill -KILL "$pid" 2>/dev/null || true
  done
}
trap cleanup EXIT

# Waits for a port file written by the process `pid`; prints the port.
wait_port() {
  local file=$1 pid=$2 log=$3
  for _ in $(seq 1 300); do
    if [[ -s "$file" ]]; then
      cat "$file"
      return 0
    fi
    if ! kill -0 "$pid" 2>/dev/null; then
      show "$log"
      fail "process $pid exited before writing $file"
    fi
    sleep 0.1
  done
  show "$log"
  fail "no port in $file after 30 s"
}

# Sends SIGTERM to `pid` and checks that it exits 0 within 20 s.
stop() {
  local pid=$1 log=$2 rc=0
  kill -TERM "$pid"
  for _ in $(seq 1 200); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  wait "$pid" || rc=$?
  if [[ $rc -ne 0 ]]; then
    show "$log"
    fail "$log: exit code $rc after SIGTERM"
  fi
}

run() {
  local mode=$1
  local out="$TMP/$mode"
  rm -rf "$out"
  mkdir -p "$out"
  echo "== $mode" >&2
  "$TERN" global --num_datacenters 2 --listen 127.0.0.1:0 \
    --port_file "$out/gs.port" --t_global_s 30 --hold_timeout_s 20 \
    2>"$out/gs.log" &
  local gs=$!
  PIDS+=("$gs")
  local gs_port
  gs_port=$(wait_port "$out/gs.port" "$gs" "$out/gs.log")

  local lps=() workers=() d w
  for d in 0 1; do
    local epoch=0
    [[ "$mode" != weightgrad || "$d" != 1 ]] || epoch=10
    "$TERN" ps --mode "$mode" --global "127.0.0.1:$gs_port" \
      --datacenter "$d" --num_datacenters 2 --sync_every "$SYNC_EVERY" \
      --num_workers 2 --listen 127.0.0.1:0 --port_file "$out/lps-$d.port" \
      --steps_per_epoch "$epoch" 2>"$out/lps-$d.log" &
    lps+=($!)
    PIDS+=($!)
  done
  for d in 0 1; do
    local port
    port=$(wait_port "$out/lps-$d.port" "${lps[$d]}" "$out/lps-$d.log")
    for w in 0 1; do
      "$TERN" worker --mode "$mode" --ps "127.0.0.1:$port" --worker_id "$w" \
        --num_workers 2 --dataset synthetic --model lenet --batch_size 32 \
        --steps "$STEPS" --eval_every 20 --lr 0.01 --momentum 0.9 \
        --metrics_out "$out/worker-$d-$w.jsonl" \
        2>"$out/worker-$d-$w.log" &
      workers+=($!)
      PIDS+=($!)
    done
  done
  local i=0 rc
  for d in 0 1; do
    for w in 0 1; do
      rc=0
      wait "${workers[$i]}" || rc=$?
      if [[ $rc -ne 0 ]]; then
        show "$out/worker-$d-$w.log"
        show "$out/lps-$d.log"
        show "$out/gs.log" 20
        fail "$mode: worker $w of data center $d exited $rc"
      fi
      i=$((i + 1))
    done
  done
  stop "${lps[0]}" "$out/lps-0.log"
  stop "${lps[1]}" "$out/lps-1.log"
  stop "$gs" "$out/gs.log"
  PIDS=()

  for d in 0 1; do
    grep -q "round 0 at step $SYNC_EVERY: sent" "$out/lps-$d.log" ||
      { show "$out/lps-$d.log"; fail "$mode: no line for round 0 in LPS $d"; }
    # The round's record: chunks sent of all, threshold, and the spread of
    # the significances the chunks were filtered on.
    grep -Eq "round 1 at step $((2 * SYNC_EVERY)): sent [0-9]+ of [0-9]+ chunks, .*g_thresh [0-9.e-]+, significance min [0-9.e-]+ median [0-9.e-]+ max [0-9.e-]+," \
      "$out/lps-$d.log" ||
      { show "$out/lps-$d.log"; fail "$mode: round 1 of LPS $d logs no significance spread"; }
    grep -q "(final, fp32)" "$out/lps-$d.log" ||
      { show "$out/lps-$d.log"; fail "$mode: no final round in LPS $d"; }
  done
  if [[ "$mode" == weightgrad ]]; then
    grep -q "rescaled every 93 local steps (one epoch, from the workers' data" \
      "$out/lps-0.log" ||
      { show "$out/lps-0.log"; fail "LPS 0 did not take its epoch from the join"; }
    grep -q "rescaled every 10 local steps (one epoch, --steps_per_epoch)" \
      "$out/lps-1.log" ||
      { show "$out/lps-1.log"; fail "LPS 1 did not take --steps_per_epoch"; }
    ! grep -q "^.*epoch [0-9]* begins by step" "$out/lps-0.log" ||
      { show "$out/lps-0.log"; fail "LPS 0 rescaled within its first epoch"; }
    local e
    for e in 1 2 3; do
      grep -q "epoch $e begins by step ${e}0: g_thresh" "$out/lps-1.log" ||
        { show "$out/lps-1.log"; fail "LPS 1: no rescale for epoch $e"; }
    done
    [[ $(grep -c "epoch [0-9]* begins by step" "$out/lps-1.log") == 3 ]] ||
      { show "$out/lps-1.log"; fail "LPS 1: not exactly 3 rescales"; }
  fi
  local c0 c1
  c0=$(grep -o 'final synchronization done.*final checksum 0x[0-9a-f]*' \
    "$out/lps-0.log" | grep -o '0x[0-9a-f]*$' || true)
  c1=$(grep -o 'final synchronization done.*final checksum 0x[0-9a-f]*' \
    "$out/lps-1.log" | grep -o '0x[0-9a-f]*$' || true)
  [[ -n "$c0" && "$c0" == "$c1" ]] ||
    fail "$mode: the LPSs end with checksums '$c0' and '$c1'"
  echo "$mode: both LPSs end at checksum $c0" >&2

  python3 - "$out" "$mode" "$c0" "$STEPS" <<'PY'
import json, sys

out, mode, checksum, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
# The MLP of worker/models.h on 28x28 inputs: 784-500-10... read from the
# first record's fp32 size instead of hard-coding the architecture.
losses = {}
for d in (0, 1):
    for w in (0, 1):
        with open(f"{out}/worker-{d}-{w}.jsonl") as f:
            records = [json.loads(line) for line in f if line.strip()]
        if [r["step"] for r in records] != list(range(steps)):
            sys.exit(f"FAIL: {mode}: worker {d}/{w} records steps "
                     f"{[r['step'] for r in records]}")
        final = records[-1]
        if not final.get("final") or final.get("param_checksum") != checksum:
            sys.exit(f"FAIL: {mode}: worker {d}/{w} ends with checksum "
                     f"{final.get('param_checksum')}, the LPSs with {checksum}")
        fp32 = records[0]["fp32_bytes"]
        for r in records:
            push, pull = r["push_bytes"], r["pull_bytes"]
            if mode == "weightgrad":
                # Base-3 codes (the default --packing: 5 a byte, 1.6 bits
                # against fp32's 32) plus a 4-byte scaler a chunk.
                if not fp32 / 20 <= push <= fp32 / 20 * 1.05 + 64:
                    sys.exit(f"FAIL: {mode}: push of {push} B at step "
                             f"{r['step']}, expected ~{fp32 / 20:.0f}")
                # The last step and the steps a worker evaluates after
                # (--eval_every 20: step 19) bring the LPS's weights in fp32.
                fp32_pull = r["step"] == steps - 1 or (r["step"] + 1) % 20 == 0
                want = fp32 if fp32_pull else fp32 / 20  # base 3 too
                if not want <= pull <= want * 1.05 + 64:
                    sys.exit(f"FAIL: {mode}: pull of {pull} B at step "
                             f"{r['step']}, expected ~{want:.0f}")
            elif push != fp32 or pull != fp32:
                sys.exit(f"FAIL: {mode}: push {push} B, pull {pull} B, "
                         f"expected {fp32} (fp32)")
        for r in records:
            losses.setdefault(r["step"], []).append(r["loss"])
quarter = steps // 4
mean = lambda xs: sum(xs) / len(xs)
first = mean([l for s in range(quarter) for l in losses[s]])
last = mean([l for s in range(steps - quarter, steps) for l in losses[s]])
print(f"{mode}: loss {first:.4f} in the first quarter, {last:.4f} in the last",
      file=sys.stderr)
if not last < 0.9 * first:
    sys.exit(f"FAIL: {mode}: the loss did not fall ({first:.4f} -> {last:.4f})")
PY
}

run weightgrad
run gaia
echo "PASS"
