#!/usr/bin/env bash
# Issue 16: the WeightGrad global server killed with SIGKILL in the middle
# of a 2-data-center run and started again with the same command (tern
# global --state_dir) resumes the rounds (global/README.md, "Recovery"):
#   - two reference runs: tern global, two LPSs (--mode weightgrad, a
#     round every 4 local steps), one worker each, synthetic data, 128
#     steps (training converges: the final accuracy is near 1);
#   - the same run whose GS is killed once data center 0's worker has
#     recorded a step drawn from a seeded generator, and restarted on the
#     same port 2 s later: no worker exits before the end (the LPSs retry
#     their rounds), every worker exits 0, the restarted GS logs that it
#     resumed, both LPSs end on the same final checksum, and the final test
#     accuracy is at most 0.5 points below the lower of the references'.
#     Undisturbed runs themselves end up to 0.7 points apart on a loaded
#     machine (an LPS applies the GS's answers between its local steps, so
#     round timing decides what a step sees), hence two references and a
#     one-sided bound: the restart may not cost accuracy. The LPSs run with
#     --sync_timeout_s 1, so that while the GS is down a data center trains
#     on alone for about a second, then holds its worker (bounded
#     divergence), as a run that cares about accuracy would set it.
# Every wait polls with a deadline.
#
# Usage: gs_restart_test.sh <path of the tern binary>
set -euo pipefail

TERN=$(readlink -f "$1")
TMP=${TEST_TMPDIR:-$(mktemp -d)}
STEPS=${STEPS:-128}
RANDOM=16  # the kill step is drawn from this seed
# fail, cleanup on exit, wait_for, records, final_checksum; `pids`
# collects what to kill.
source "$(dirname "$0")/support/processes.sh"

# global RUN [LISTEN]: starts the GS of run RUN in the background (GS,
# GS_PORT).
global() {
  rm -f "$TMP/$1-gs.port"
  "$TERN" global --num_datacenters 2 --listen "${2:-127.0.0.1:0}" \
    --port_file "$TMP/$1-gs.port" --t_global_s 20 --hold_timeout_s 20 \
    --state_dir "$TMP/$1.gs-state" >>"$TMP/$1-gs.log" 2>&1 &
  GS=$!
  pids+=($GS)
  wait_for 30 test -s "$TMP/$1-gs.port" || fail "$1: the GS wrote no port file"
  GS_PORT=$(cat "$TMP/$1-gs.port")
}

# datacenters RUN: starts LPS d (LPS0, LPS1) and its worker (W0, W1).
datacenters() {
  local run=$1 d port
  for d in 0 1; do
    "$TERN" ps --mode weightgrad --global "127.0.0.1:$GS_PORT" \
      --datacenter "$d" --num_datacenters 2 --sync_every 4 --num_workers 1 \
      --sync_timeout_s 1 \
      --listen 127.0.0.1:0 --port_file "$TMP/$run-lps-$d.port" \
      >>"$TMP/$run-lps-$d.log" 2>&1 &
    pids+=($!)
    eval "LPS$d=$!"
    wait_for 30 test -s "$TMP/$run-lps-$d.port" ||
      fail "$run: LPS $d wrote no port file"
    port=$(cat "$TMP/$run-lps-$d.port")
    "$TERN" worker --mode weightgrad --ps "127.0.0.1:$port" --worker_id 0 \
      --num_workers 1 --dataset synthetic --model lenet --batch_size 32 \
      --steps "$STEPS" --eval_every 0 --lr "${LR:-0.03}" --momentum 0.9 \
      --metrics_out "$TMP/$run-$d.jsonl" >>"$TMP/$run-$d.log" 2>&1 &
    pids+=($!)
    eval "W$d=$!"
  done
}

# finish RUN: both workers exit 0; the LPSs and the GS are stopped.
finish() {
  local d rc
  for d in 0 1; do
    rc=0
    wait "$(eval echo "\$W$d")" || rc=$?
    ((rc == 0)) || fail "$1: the worker of data center $d exited $rc"
  done
  kill "$LPS0" "$LPS1" "$GS" 2>/dev/null || true
  wait "$LPS0" "$LPS1" "$GS" 2>/dev/null || true
}

# final_accuracy RUN D: the test accuracy of the worker's final record.
final_accuracy() {
  /usr/bin/python3 -c 'import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
assert records[-1].get("final"), "no final record"
print(records[-1]["test_accuracy"])' "$TMP/$1-$2.jsonl"
}

references=()
for ref in ref1 ref2; do
  global "$ref"
  datacenters "$ref"
  finish "$ref"
  references+=("$(final_accuracy "$ref" 0)")
done

kill_at=$((STEPS / 4 + RANDOM % (STEPS / 2)))
global killed
datacenters killed
wait_for 120 has_records "$TMP/killed-0.jsonl" "$kill_at" ||
  fail "killed: data center 0's worker recorded fewer than $kill_at steps"
kill -9 "$GS"; wait "$GS" 2>/dev/null || true
killed=$(records "$TMP/killed-0.jsonl")
sleep 2
for d in 0 1; do
  kill -0 "$(eval echo "\$W$d")" 2>/dev/null ||
    fail "killed: the worker of data center $d exited while the GS was down"
done
restarted_at=$SECONDS
global killed "127.0.0.1:$GS_PORT"
wait_for 60 grep -q "round .* closed" "$TMP/killed-gs.log" ||
  fail "killed: the restarted GS closed no round within 60 s"
echo "GS killed after data center 0's step $((killed - 1)); a round closed" \
  "$((SECONDS - restarted_at)) s after the restart"
finish killed
grep -q "resumed at round" "$TMP/killed-gs.log" ||
  fail "the restarted GS did not log that it resumed"
c0=$(final_checksum killed 0)
c1=$(final_checksum killed 1)
[[ "$c0" == "$c1" ]] || fail "the data centers end on $c0 and $c1"
got=$(final_accuracy killed 0)
/usr/bin/python3 -c 'import sys
got, refs = float(sys.argv[1]), [float(a) for a in sys.argv[2:]]
print(f"final test accuracy {got:.4f}; the undisturbed runs {refs}")
sys.exit(0 if got >= min(refs) - 0.005 else
         "FAIL: more than 0.5 points below the undisturbed runs")' \
  "$got" "${references[@]}" || fail "accuracy"
echo "PASS"
