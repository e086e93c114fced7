# Sourced by the bench scripts that start tern's processes: a temporary
# directory ($tmp) removed at exit, the background processes to stop then
# ($pids), and wait_port.

tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT

# wait_port FILE: prints the port a server wrote to FILE, within 30 s;
# otherwise shows the tails of the logs in $tmp and fails.
wait_port() {
  local i
  for ((i = 0; i < 300; i++)); do
    [[ -s "$1" ]] && { cat "$1"; return 0; }
    sleep 0.1
  done
  echo "$(basename "$0"): no port in $1 after 30 s; logs in $tmp:" >&2
  tail -n 20 "$tmp"/*.log >&2
  return 1
}
