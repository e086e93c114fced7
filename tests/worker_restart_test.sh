#!/usr/bin/env bash
# A worker process killed with SIGKILL mid-run and started again with the
# same command comes back from its checkpoint (tern worker --checkpoint_dir,
# tern/README.md "Checkpoints") and the job finishes as if nothing happened:
#   - one `tern ps` shard and two onebit workers (error feedback: the
#     residuals must come back too) of LeNet on synthetic data;
#   - worker 1, checkpointing every step, is killed -9 once it has
#     written a few steps, then restarted with the very same command;
#   - it logs that it restored its checkpoint and rejoined, both workers
#     exit 0, the shard checked their checksums every 5 steps (a divergence
#     fails the run), and their final param_checksum agree;
#   - worker 1's metrics file (appended to after the restart) covers every
#     step, and its last record is the final one.
# Nothing here waits without a bound: every wait polls with a deadline.
#
# Usage: worker_restart_test.sh <path of the tern binary>
set -euo pipefail

TERN=$(readlink -f "$1")
TMP=${TEST_TMPDIR:-$(mktemp -d)}
STEPS=40
# fail, cleanup on exit, wait_for; `pids` collects what to kill.
source "$(dirname "$0")/support/processes.sh"

"$TERN" ps --listen 127.0.0.1:0 --port_file "$TMP/ps.port" --num_workers 2 \
  --barrier_timeout_s 60 >"$TMP/ps.log" 2>&1 &
pids+=($!)
wait_for 30 test -s "$TMP/ps.port" || fail "the shard wrote no port file"
port=$(cat "$TMP/ps.port")

worker() {
  exec "$TERN" worker --ps "127.0.0.1:$port" --num_workers 2 --worker_id "$1" \
    --model lenet --dataset synthetic --batch_size 16 --steps "$STEPS" \
    --codec onebit --eval_every 0 --check_every 5 \
    --checkpoint_dir "$TMP/ckpt" --checkpoint_every 1 \
    --metrics_out "$TMP/worker-$1.jsonl" >>"$TMP/worker-$1.log" 2>&1
}

lines() { [[ -f "$1" ]] && wc -l <"$1" || echo 0; }
has_steps() { (($(lines "$TMP/worker-1.jsonl") >= $1)); }

worker 0 &
pids+=($!)
worker0=$!
worker 1 &
doomed=$!
pids+=($doomed)
wait_for 120 has_steps 8 || fail "worker 1 wrote fewer than 8 steps in 120 s"
kill -9 "$doomed"
wait "$doomed" 2>/dev/null || true
killed_at=$(lines "$TMP/worker-1.jsonl")
((killed_at < STEPS)) || fail "worker 1 finished before it was killed"
echo "killed worker 1 after $killed_at records"

worker 1 &
restarted=$!
pids+=($restarted)
rc0=0
wait "$worker0" || rc0=$?
rc1=0
wait "$restarted" || rc1=$?
((rc0 == 0)) || fail "worker 0 exited $rc0"
((rc1 == 0)) || fail "the restarted worker 1 exited $rc1"
grep -q "restored checkpoint" "$TMP/worker-1.log" ||
  fail "worker 1 did not log that it restored its checkpoint"
grep -q "rejoined run" "$TMP/worker-1.log" ||
  fail "worker 1 did not log that it rejoined the run"

python3 - "$TMP" "$STEPS" <<'PY' || fail "the metrics do not show a clean resume"
import json, sys
tmp, steps = sys.argv[1], int(sys.argv[2])
records = {w: [json.loads(l) for l in open(f"{tmp}/worker-{w}.jsonl")]
           for w in (0, 1)}
seen = sorted({r["step"] for r in records[1]})
assert seen == list(range(steps)), f"worker 1's steps: {seen}"
for w in (0, 1):
    assert records[w][-1].get("final"), f"worker {w}'s last record is not final"
checksums = {records[w][-1]["param_checksum"] for w in (0, 1)}
assert len(checksums) == 1, f"final checksums differ: {checksums}"
print("final checksum", checksums.pop(), "for both workers")
PY
echo "PASS"
