#!/usr/bin/env bash
# Issue 16: a shard killed with SIGKILL at a random step and started again
# with the same command (tern ps --state_dir) resumes the run, and the run
# ends with the same parameter checksum as the undisturbed one
# (server/README.md, "Recovery"):
#   - for terngrad, onebit (a residual on the shard) and fp32: a reference
#     run, then the same run whose shard is killed once worker 0 has
#     recorded a step drawn from a seeded generator, and restarted on the
#     same port; both workers must finish (exit 0) with the reference's
#     final param_checksum;
#   - a shard that never comes back: the workers exit with code 128
#     (transient) within --server_loss_timeout_s plus one --rpc_timeout_s.
# Every wait polls with a deadline.
#
# Usage: shard_restart_test.sh <path of the tern binary>
set -euo pipefail

TERN=$(readlink -f "$1")
TMP=${TEST_TMPDIR:-$(mktemp -d)}
# Enough steps after the kill (at step 2 to 7) that the workers are still
# training when the shard is killed and when it is back, however fast they
# train: the kill comes about 0.1 s after worker 0 recorded its step.
STEPS=40
RANDOM=16  # the kill steps are drawn from this seed
# fail, cleanup on exit, wait_for, records, final_checksum; `pids`
# collects what to kill.
source "$(dirname "$0")/support/processes.sh"

# shard RUN [LISTEN]: starts the shard of run RUN in the background (SHARD).
shard() {
  rm -f "$TMP/$1.port"
  "$TERN" ps --listen "${2:-127.0.0.1:0}" --port_file "$TMP/$1.port" \
    --num_workers 2 --barrier_timeout_s 60 --state_dir "$TMP/$1.state" \
    >>"$TMP/$1-ps.log" 2>&1 &
  SHARD=$!
  pids+=("$SHARD")
  wait_for 30 test -s "$TMP/$1.port" || fail "the shard of $1 wrote no port file"
  PORT=$(cat "$TMP/$1.port")
}

# workers RUN CODEC [FLAGS...]: starts workers 0 and 1 (W0, W1).
workers() {
  local run=$1 codec=$2
  shift 2
  for w in 0 1; do
    "$TERN" worker --ps "127.0.0.1:$PORT" --num_workers 2 --worker_id "$w" \
      --model lenet --dataset synthetic --batch_size 16 --steps "$STEPS" \
      --codec "$codec" --eval_every 0 --check_every 4 "$@" \
      --metrics_out "$TMP/$run-$w.jsonl" >>"$TMP/$run-$w.log" 2>&1 &
    pids+=($!)
    eval "W$w=$!"
  done
}


wait_workers() {  # RUN: both workers exit 0
  local rc
  for w in 0 1; do
    rc=0
    wait "$(eval echo "\$W$w")" || rc=$?
    ((rc == 0)) || fail "$1: worker $w exited $rc"
  done
}

for codec in terngrad onebit fp32; do
  shard "$codec-ref"
  workers "$codec-ref" "$codec"
  wait_workers "$codec-ref"
  kill "$SHARD"; wait "$SHARD" 2>/dev/null || true
  expected=$(final_checksum "$codec-ref" 0)

  kill_at=$((2 + RANDOM % 6))
  shard "$codec"
  workers "$codec" "$codec"
  wait_for 60 has_records "$TMP/$codec-0.jsonl" "$kill_at" ||
    fail "$codec: worker 0 recorded fewer than $kill_at steps in 60 s"
  kill -9 "$SHARD"; wait "$SHARD" 2>/dev/null || true
  killed=$(records "$TMP/$codec-0.jsonl")
  killed_at=$SECONDS
  ((killed < STEPS)) ||
    fail "$codec: the run ended before the shard was killed (make STEPS larger)"
  shard "$codec" "127.0.0.1:$PORT"
  wait_for 60 has_records "$TMP/$codec-0.jsonl" $((killed + 1)) ||
    fail "$codec: training did not continue within 60 s of the restart"
  echo "$codec: shard killed after worker 0's step $((killed - 1)); training" \
    "continued $((SECONDS - killed_at)) s later"
  wait_workers "$codec"
  kill "$SHARD"; wait "$SHARD" 2>/dev/null || true
  grep -q "resumed run" "$TMP/$codec-ps.log" ||
    fail "$codec: the restarted shard did not log that it resumed the run"
  for w in 0 1; do
    got=$(final_checksum "$codec" "$w")
    [[ "$got" == "$expected" ]] ||
      fail "$codec: worker $w ended with checksum $got, the reference with $expected"
  done
  echo "$codec: final checksum $expected, as the undisturbed run"
done

# A shard that never comes back.
shard lost
workers lost fp32 --server_loss_timeout_s 3 --rpc_timeout_s 2
wait_for 60 has_records "$TMP/lost-0.jsonl" 3 || fail "lost: no step recorded"
kill -9 "$SHARD"; wait "$SHARD" 2>/dev/null || true
(($(records "$TMP/lost-0.jsonl") < STEPS)) ||
  fail "lost: the run ended before the shard was killed (make STEPS larger)"
lost_at=$SECONDS
for w in 0 1; do
  rc=0
  wait "$(eval echo "\$W$w")" || rc=$?
  ((rc == 128)) || fail "lost: worker $w exited $rc, not 128 (transient)"
done
took=$((SECONDS - lost_at))
((took <= 3 + 2 + 3)) || fail "lost: the workers took $took s to give up"
grep -q "server_loss_timeout_s" "$TMP/lost-0.log" ||
  fail "lost: worker 0's log does not name --server_loss_timeout_s"
echo "lost shard: both workers exited 128 after $took s"
echo "PASS"
