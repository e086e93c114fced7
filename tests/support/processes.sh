# Shell helpers of the multi-process tests (tests/*_restart_test.sh):
# sourced after TMP is set. Processes started with `pids+=($!)` are killed
# on exit; fail prints the tail of every log in $TMP.

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
