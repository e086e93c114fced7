#!/usr/bin/env bash
# tern's fp32 push-pull of a model against a plain gRPC echo of the same
# bytes, on loopback (issue 20, item 3; bench/README.md): starts a 1-worker
# shard (tern ps) and rpc_bench's echo server, then rpc_bench run times one
# worker's exchange steps and echo round trips in alternating rounds and
# prints median, p90, MB/s and echo / push-pull.
#
#   bench/rpc.sh [--tern PATH] [--rpc_bench PATH] [-- rpc_bench run flags]
#
# Build first with -c opt: `bazel build -c opt //tern //bench:rpc_bench`
# (defaults: bazel-bin/tern/tern and bazel-bin/bench/rpc_bench). Extra
# flags go to `rpc_bench run`, e.g. -- --model mlp --rounds 10.
set -euo pipefail

tern=bazel-bin/tern/tern
rpc_bench=bazel-bin/bench/rpc_bench
extra=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --tern) tern="$2"; shift 2 ;;
    --rpc_bench) rpc_bench="$2"; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "bench/rpc.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
for b in "$tern" "$rpc_bench"; do
  [[ -x "$b" ]] || { echo "bench/rpc.sh: no executable $b (build it first, see --help)" >&2; exit 2; }
done

# $tmp, $pids, cleanup at exit, wait_port.
source "$(dirname "$0")/processes.sh"

"$tern" ps --num_workers 1 --listen 127.0.0.1:0 --port_file "$tmp/ps.port" \
  >"$tmp/ps.log" 2>&1 &
pids+=($!)
"$rpc_bench" serve --listen 127.0.0.1:0 --port_file "$tmp/echo.port" \
  >"$tmp/echo.log" 2>&1 &
pids+=($!)
ps_port=$(wait_port "$tmp/ps.port")
echo_port=$(wait_port "$tmp/echo.port")
"$rpc_bench" run --ps "127.0.0.1:$ps_port" --echo "127.0.0.1:$echo_port" \
  "${extra[@]}"
