#!/usr/bin/env bash
# Issue 16: the WeightGrad global server killed with SIGKILL in the middle
# of a 2-data-center run and started again with the same command (tern
# global --state_dir) resumes the rounds (global/README.md, "Recovery"):
#   - a reference run: tern global, two LPSs (--mode weightgrad, a round
#     every 4 local steps), one worker each, synthetic data;
#   - the same run whose GS is killed once data center 0's worker has
#     recorded a step drawn from a seeded generator, and restarted on the
#     same port 2 s later: no worker exits before the end (the LPSs retry
#     their rounds), every worker exits 0, the restarted GS logs that it
#     resumed, both LPSs end on the same final checksum, and the final test
#     accuracy is within 0.5 points of the reference's (the rounds around
#     the outage may close with a data center lagging, so the bits may
#     differ; the accuracy may not).
# Every wait polls with a deadline.
#
# Usage: gs_restart_test.sh <path of the tern binary>
set -euo pipefail

TERN=$(readlink -f "$1")
TMP=${TEST_TMPDIR:-$(mktemp -d)}
STEPS=48
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
      --listen 127.0.0.1:0 --port_file "$TMP/$run-lps-$d.port" \
      >>"$TMP/$run-lps-$d.log" 2>&1 &
    pids+=($!)
    eval "LPS$d=$!"
    wait_for 30 test -s "$TMP/$run-lps-$d.port" ||
      fail "$run: LPS $d wrote no port file"
    port=$(cat "$TMP/$run-lps-$d.port")
    "$TERN" worker --mode weightgrad --ps "127.0.0.1:$port" --worker_id 0 \
      --num_workers 1 --dataset synthetic --model lenet --batch_size 32 \
      --steps "$STEPS" --eval_every 0 --lr 0.01 --momentum 0.9 \
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

global ref
datacenters ref
finish ref
reference=$(final_accuracy ref 0)

kill_at=$((6 + RANDOM % (STEPS - 20)))
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
ref, got = float(sys.argv[1]), float(sys.argv[2])
print(f"final test accuracy {got:.4f}, the undisturbed run {ref:.4f}")
sys.exit(0 if abs(got - ref) <= 0.005 else "FAIL: more than 0.5 points apart")' \
  "$reference" "$got" || fail "accuracy"
echo "PASS"
