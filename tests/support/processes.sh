# Shell helpers of the multi-process tests (tests/*_restart_test.sh,
# tests/worker_loss_test.sh): sourced after TMP is set. Processes started
# with `pids+=($!)` are killed on exit; fail prints the tail of every log in
# $TMP; workers write their records to $TMP/<RUN>-<worker>.jsonl.

pids=()

fail() {
  echo "FAIL: $*" >&2
  for log in "$TMP"/*.log; do
    echo "---- $log" >&2
    tail -n 30 "$log" >&2 || true
  done
  exit 1
}

cleanup() {
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

# wait_for SECONDS COMMAND...: polls COMMAND every 0.05 s; 1 at the deadline.
wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || return 1
    sleep 0.05
  done
}

# records FILE: how many JSONL records FILE holds (0 before it exists).
records() { [[ -f "$1" ]] && wc -l <"$1" || echo 0; }
# has_records FILE N: FILE holds at least N records.
has_records() { (($(records "$1") >= $2)); }

# final_checksum RUN WORKER: the param_checksum of $TMP/RUN-WORKER.jsonl's
# last record, which must be the final one.
final_checksum() {
  /usr/bin/python3 -c 'import json, sys
records = [json.loads(l) for l in open(sys.argv[1])]
assert records[-1].get("final"), "no final record"
print(records[-1]["param_checksum"])' "$TMP/$1-$2.jsonl"
}
