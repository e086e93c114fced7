#!/usr/bin/env bash
# The step over real (emulated) links: N worker hosts, each its own network
# namespace whose one link is shaped with tbf in both directions, joined by
# a switch (deploy/wan/tern-wan's hub namespace), and S shards placed
#   dedicated   all on one more host of the same kind (its link carries
#               every worker's traffic), or
#   colocated   one on every worker host (S = N; each link then carries
#               about (N-1)/N of a worker's traffic, the rest stays local).
# For every rate, placement and codec in turn: one run of warm-up plus timed
# steps, the links' byte counters (the interfaces' and tbf's) read before
# and after, then one table (bench/net_table.py): median and p90 step
# time, the JSONL time split, the busiest link's bytes per step (the
# frames tbf sent, on shaped links), the wire bound (those bytes at the
# link's rate) and each codec's step time against fp32's.
#
#   bench/net.sh [--workers N] [--shards S] [--rates "0 1000 100"]
#                [--placements "dedicated colocated"] [--codecs "..."]
#                [--steps N] [--warmup N] [--batch_size B] [--model M]
#                [--dataset D] [--queue_ms Q] [--congestion CC]
#                [--pace_share F] [--tern PATH] [--probe PATH] [--out DIR]
#                [--prefix P] [--trace] [--table_only]
#                [-- extra worker flags]
#
# Defaults: 4 workers, LeNet on Fashion-MNIST, batch 64 per worker, 10
# warm-up and 30 timed steps, rates 0 (unshaped veths), 1000 and 100
# mbit/s, both placements, codecs fp32 fp16 terngrad terngrad-base3 onebit
# dropping (any codec row with "-overlap" appended runs it with
# --overlap=true, with "-inturn" with --push_order=in_turn, with
# "-locallast" with --push_order=local_last, and with "-paced", after any
# of those, with --pace_mbit on the workers and shards: --pace_share
# (default 0.95) of the rate over the connections that send on one link at
# once, N - 1 co-located, N x S dedicated; unpaced on unshaped links);
# dedicated shards: --shards (default N); tbf's queue and
# the namespaces' TCP congestion control: tern-wan's defaults (50 ms, the
# host's) unless --queue_ms / --congestion say otherwise. Root only (network
# namespaces). Needs a built tern (`bazel build -c opt //tern`; copy it
# aside with --tern while you rebuild) and //deploy/wan:net_probe
# (--probe). Results go to OUT/<rate>/<placement>/<codec>/ (default
# runs/bench-net), the rows also to OUT/results.json; --table_only prints
# the table from them again (and rewrites results.json): every rate,
# placement and codec run in OUT unless --rates, --placements or --codecs
# name some; give it the run's --warmup. Besides the bytes, each run
# records the TCP segments retransmitted, the retransmission timeouts and
# the packets tbf dropped, summed over the hosts (the table shows them per
# step). Before the colocated runs at a shaped rate,
# bench/exchange_probe.py measures the worker hosts' all-to-all goodput
# (results.json's exchange_mbit, which bench/model.py uses for those
# rows). bench/cpu_window.py records how busy the machine's cores were
# during each run's timed steps (cpu.txt; the table's "cores busy"): all
# hosts share them. --trace also samples every worker host's link
# counters every 10 ms during each run into trace-<host>.txt
# (bench/link_trace.py show draws one).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
workers=4
shards=""
rates="0 1000 100"
placements="dedicated colocated"
codecs="fp32 fp16 terngrad terngrad-base3 onebit dropping"
steps=30
warmup=10
batch_size=64
model=lenet
dataset=fashion-mnist
tern=bazel-bin/tern/tern
out=runs/bench-net
prefix=tnb-
queue_ms=""
trace=""
congestion=""
probe=bazel-bin/deploy/wan/net_probe
table_only=""
# The share of a link's rate its "-paced" connections take together: what
# an all-to-all probe with paced connections showed fills the link, with
# TCP's headers (bench/README.md, "Paced connections").
pace_share=0.95
extra=()
named=()  # the --rates, --placements and --codecs given: --table_only's choice

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "$0"; }
die() { echo "bench/net.sh: $*" >&2; exit 2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --workers) workers="$2"; shift 2 ;;
    --shards) shards="$2"; shift 2 ;;
    --rates) rates="$2"; named+=(--rates "$2"); shift 2 ;;
    --placements) placements="$2"; named+=(--placements "$2"); shift 2 ;;
    --codecs) codecs="$2"; named+=(--codecs "$2"); shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --batch_size) batch_size="$2"; shift 2 ;;
    --model) model="$2"; shift 2 ;;
    --dataset) dataset="$2"; shift 2 ;;
    --tern) tern="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --prefix) prefix="$2"; shift 2 ;;
    --queue_ms) queue_ms="$2"; shift 2 ;;
    --congestion) congestion="$2"; shift 2 ;;
    --probe) probe="$2"; shift 2 ;;
    --pace_share) pace_share="$2"; shift 2 ;;
    --table_only) table_only=1; shift ;;
    --trace) trace=1; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
shards="${shards:-$workers}"
for n in workers shards steps warmup batch_size; do
  [[ "${!n}" =~ ^[1-9][0-9]*$ ]] || die "--$n: '${!n}' is not a positive integer"
done
((workers <= 64)) || die "--workers: at most 64 hosts here"
awk -v f="$pace_share" 'BEGIN { exit !(f ~ /^[0-9]*\.?[0-9]+$/ && f > 0 && f <= 1.5) }' ||
  die "--pace_share: '$pace_share' is not a number in (0, 1.5]"
for p in $placements; do
  [[ "$p" == dedicated || "$p" == colocated ]] ||
    die "--placements: '$p' is not dedicated or colocated"
done
for r in $rates; do
  [[ "$r" =~ ^[0-9]+$ ]] && ((r <= 10000)) ||
    die "--rates: '$r' is not 0 (unshaped) or an integer mbit/s up to 10000"
done
for c in $codecs; do
  [[ "$c" =~ ^(fp32|fp16|terngrad|terngrad-2bit|terngrad-base3|terngrad-radix|onebit|threshold|adaptive|dropping|qsgd)(-overlap|-inturn|-locallast)?(-paced)?$ ]] ||
    die "--codecs: unknown '$c'"
done

# The table of the runs the arguments select (net_table.py: all in OUT
# unless --rates, --placements or --codecs name some).
table() {
  python3 "$here/net_table.py" --out "$out" --warmup "$warmup" "$@" \
    --json "$out/results.json"
}
if [[ -n "$table_only" ]]; then
  table "${named[@]}"
  exit
fi

[[ $(id -u) -eq 0 ]] || die "needs root (network namespaces)"
[[ -x "$tern" ]] || die "$tern is missing; run: bazel build -c opt //tern"
wan="$here/../deploy/wan/tern-wan"
[[ -x "$probe" ]] || die "$probe is missing; run: bazel build //deploy/wan:net_probe"
command -v python3 >/dev/null || die "python3 is needed for the table"

# Hosts 0..N-1 run a worker each; host N is the dedicated shard host.
hosts=$((workers + 1))
shard_host=$workers
addr_of_host() { echo "10.77.$1.2"; }

# The flags of each codec row beyond --codec. A row named X-overlap runs
# X with --overlap=true (each shard pushed while backward runs), X-inturn
# with --push_order=in_turn (the shards pushed one after another),
# X-locallast with --push_order=local_last (this host's shard pushed last).
flags_of() {
  if [[ "$1" == *-paced ]]; then
    flags_of "${1%-paced}"
    return
  fi
  if [[ "$1" == *-overlap ]]; then
    echo "$(flags_of "${1%-overlap}") --overlap=true"
    return
  fi
  if [[ "$1" == *-inturn ]]; then
    echo "$(flags_of "${1%-inturn}") --push_order=in_turn"
    return
  fi
  if [[ "$1" == *-locallast ]]; then
    echo "$(flags_of "${1%-locallast}") --push_order=local_last"
    return
  fi
  case "$1" in
    # terngrad alone runs the defaults: base-3 pushes, Huffman-coded sums.
    terngrad-2bit) echo "--codec terngrad --packing 2bit --sum_packing bits" ;;
    terngrad-base3) echo "--codec terngrad --packing base3 --sum_packing radix" ;;
    terngrad-radix) echo "--codec terngrad --packing 2bit --sum_packing radix" ;;
    *) echo "--codec $1" ;;
  esac
}

# The --pace_mbit of a "-paced" row (none for other rows, unshaped links
# or a single worker host co-located): --pace_share of the link's rate,
# shared by the connections that send on one link at once: a co-located
# host's N - 1 pushes (or its shard's N - 1 answers), a dedicated shard
# host's N x S answers (or the N x S pushes into it).
pace_mbit_of() {  # rate placement codec
  local connections
  [[ "$3" == *-paced && "$1" != 0 ]] || return 0
  if [[ "$2" == dedicated ]]; then
    connections=$((workers * $(num_shards dedicated)))
  else
    connections=$((workers - 1))
  fi
  ((connections > 0)) || return 0
  awk -v r="$1" -v c="$connections" -v s="$pace_share" \
    'BEGIN { printf "%.3f", s * r / c }'
}

num_shards() { [[ "$1" == dedicated ]] && echo "$shards" || echo "$workers"; }

# Where shard s of a placement runs, and its address there.
shard_host_of() { [[ "$1" == dedicated ]] && echo "$shard_host" || echo "$2"; }
shard_addr() {  # placement shard
  echo "$(addr_of_host "$(shard_host_of "$1" "$2")"):$((51000 + $2))"
}

# The address list of the shards of one placement, in shard order.
shard_list() {  # placement
  local s list=()
  for ((s = 0; s < $(num_shards "$1"); s++)); do
    list+=("$(shard_addr "$1" "$s")")
  done
  (IFS=,; echo "${list[*]}")
}

# What the root qdisc of one interface sent and dropped, "BYTES DROPS" (0 0
# when it has none), from the statistics line under it: "Sent B bytes P
# pkt (dropped D, ...". tbf counts every segment a GSO packet is cut into
# with that segment's headers: the frames the shaped link carries. The
# interface counts the GSO packets (up to 64 KiB, one set of headers), so
# for one bulk TCP transfer of 20 MB at 100 mbit/s it counted 20.05 MB and
# tbf 20.91 MB (1514-byte frames for 1448 bytes of data). printf, not
# print: mawk prints a number past 2^31 as 2.6e+09, and tbf's counters
# pass it within a few runs. awk, not a Python parse of `tc -j`:
# read_counters calls this twice a host before and after every run, and
# Python's start took 0.4 s a call.
tbf_counts() {  # namespace interface
  tc -s -n "$1" qdisc show dev "$2" 2>/dev/null | awk '
    /^qdisc / { root = / root / }
    root && / \(dropped / {
      sent += $2; sub(/.* \(dropped /, ""); sub(/,.*/, ""); drops += $0
      root = 0
    }
    END { printf "%.0f %.0f\n", sent, drops }'
}

# One counter of a namespace's TCP statistics (nstat's absolute values,
# without touching its history file).
tcp_counter() {  # namespace name
  ip netns exec "$1" nstat -asz "$2" 2>/dev/null | awk -v n="$2" '$1 == n { print $2 }' | grep . || echo 0
}

# Every host's link counters, one line each: host, bytes leaving and
# entering it over its shaped link (the interface's counters), TCP segments
# it retransmitted, its retransmission timeouts, the packets tbf dropped on
# its link (both ends: leaving the host and leaving the switch towards it),
# and the bytes tbf sent each way (the frames on the wire; 0 unshaped).
read_counters() {
  local h ns up_bytes up_drops down_bytes down_drops
  for ((h = 0; h < hosts; h++)); do
    ns="${prefix}dc$h"
    read -r up_bytes up_drops < <(tbf_counts "$ns" wan0)
    read -r down_bytes down_drops < <(tbf_counts "${prefix}gs" "dc$h")
    echo "$h $(ip netns exec "$ns" cat /sys/class/net/wan0/statistics/tx_bytes) $(ip netns exec "$ns" cat /sys/class/net/wan0/statistics/rx_bytes)" \
      "$(tcp_counter "$ns" TcpRetransSegs) $(tcp_counter "$ns" TcpExtTCPTimeouts)" \
      "$((up_drops + down_drops)) $up_bytes $down_bytes"
  done
}

# Stops whatever still runs in the hosts' namespaces (the shards).
stop_hosts() {
  local h pids
  for ((h = 0; h < hosts; h++)); do
    pids="$(ip netns pids "${prefix}dc$h" 2>/dev/null || true)"
    [[ -z "$pids" ]] || kill $pids 2>/dev/null || true
  done
  for ((h = 0; h < hosts; h++)); do
    for _ in $(seq 50); do
      [[ -z "$(ip netns pids "${prefix}dc$h" 2>/dev/null || true)" ]] && break
      sleep 0.1
    done
  done
}

# Ends the link samplers (--trace) of every worker host and waits for them,
# so that a trace ends before the counters after the run are read: a shard
# still sends a packet or two (FINs, ACKs) once its workers are done, and
# the trace must not count bytes the counters do not.
tracer_pids() {
  local h pid
  for ((h = 0; h < workers; h++)); do
    for pid in $(ip netns pids "${prefix}dc$h" 2>/dev/null || true); do
      if grep -qa link_trace.py "/proc/$pid/cmdline" 2>/dev/null; then
        echo "$pid"
      fi
    done
  done
}
stop_tracers() {
  local pids
  pids="$(tracer_pids)"
  # shellcheck disable=SC2086  # one pid a word
  [[ -z "$pids" ]] || kill $pids 2>/dev/null || true
  for _ in $(seq 50); do
    [[ -z "$(tracer_pids)" ]] && return 0
    sleep 0.1
  done
}

# Gives the cores' sampler (bench/cpu_window.py) up to 1 s to read its
# last mark (it polls worker 0's JSONL every 10 ms), then ends it: a run
# whose workers failed leaves it waiting for steps that never come.
stop_cpu_window() {  # pid
  for _ in $(seq 20); do
    kill -0 "$1" 2>/dev/null || break
    sleep 0.05
  done
  kill "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}

# One run: shards, then workers, in their namespaces; counters around it,
# and the machine's busy cores during the timed steps.
run_one() {  # rate placement codec
  local dir="$out/$1/$2/$3" s h n list pace cpu_pid pids=() rc=0
  rm -rf "$dir"
  mkdir -p "$dir"
  list="$(shard_list "$2")"
  n="$(num_shards "$2")"
  pace="$(pace_mbit_of "$1" "$2" "$3")"
  # For bench/net_table.py and bench/model.py: the rate each connection
  # was paced at, and what the connections on one link sum to.
  [[ -z "$pace" ]] || echo "pace_mbit=$pace paced_link_mbit=$(awk -v r="$1" \
    -v s="$pace_share" 'BEGIN { print s * r }')" >"$dir/pace.txt"
  for ((s = 0; s < n; s++)); do
    "$wan" exec "dc$(shard_host_of "$2" "$s")" --prefix "$prefix" -- "$tern" ps \
      --listen "$(shard_addr "$2" "$s")" --insecure \
      --shard_index "$s" --num_shards "$n" \
      --num_workers "$workers" --run_id bench-net --log_level warn \
      ${pace:+--pace_mbit "$pace"} >"$dir/ps-$s.log" 2>&1 &
  done
  read_counters >"$dir/counters-before.txt"
  if [[ -n "$trace" ]]; then
    for ((h = 0; h < workers; h++)); do
      "$wan" exec "dc$h" --prefix "$prefix" -- python3 "$here/link_trace.py" \
        sample --out "$dir/trace-$h.txt" >/dev/null 2>&1 &
    done
  fi
  python3 "$here/cpu_window.py" --jsonl "$dir/worker-0.jsonl" \
    --from_lines "$warmup" --to_lines $((warmup + steps)) \
    --out "$dir/cpu.txt" 2>"$dir/cpu_window.log" &
  cpu_pid=$!
  # shellcheck disable=SC2046  # flags_of's words are flags
  for ((h = 0; h < workers; h++)); do
    "$wan" exec "dc$h" --prefix "$prefix" -- "$tern" worker \
      --worker_id "$h" --num_workers "$workers" --ps "$list" \
      --run_id bench-net --model "$model" --dataset "$dataset" \
      --batch_size "$batch_size" --steps $((warmup + steps)) --seed 7 \
      --eval_every 0 --final_eval=false --check_every 0 --log_level warn \
      --metrics_out "$dir/worker-$h.jsonl" $(flags_of "$3") \
      ${pace:+--pace_mbit "$pace"} "${extra[@]}" \
      >"$dir/worker-$h.log" 2>&1 &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  stop_cpu_window "$cpu_pid"
  [[ -z "$trace" ]] || stop_tracers
  read_counters >"$dir/counters-after.txt"
  local stopping=$EPOCHREALTIME
  stop_hosts
  wait || true  # the shards' tern-wan exec
  # How long the shards took to exit once told to (bench_net_test bounds it).
  awk -v a="$stopping" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f\n", b - a }' \
    >"$dir/stop_s.txt"
  if [[ $rc -ne 0 ]]; then
    echo "bench/net.sh: a worker of $1 mbit/s $2 $3 failed; see $dir/worker-*.log" >&2
    return 1
  fi
}

# The worker hosts' all-to-all goodput (bench/exchange_probe.py), before
# the colocated runs at a shaped rate: each host sends 4 MiB to every other
# at once, five times; bench/model.py takes it as those runs' bandwidth.
# Not on unshaped links, where the probe's own computation would be the
# limit, nor with one worker host (nothing to exchange).
exchange_probe() {  # rate
  local h addrs="" start period
  local bytes=$((4 << 20)) rounds=5
  rm -f "$out/$1"/exchange-host-*.txt
  for ((h = 0; h < workers; h++)); do addrs+="${addrs:+,}$(addr_of_host "$h")"; done
  # Twice a round at the tbf rate, and time for every host to connect.
  period=$(awk -v n="$workers" -v b="$bytes" -v r="$1" \
    'BEGIN { print 2 * (n - 1) * b * 8 / (r * 1e6) + 0.3 }')
  start=$(awk -v n="$workers" -v now="$(date +%s.%N)" \
    'BEGIN { printf "%.3f", now + 2 + 0.5 * n }')
  for ((h = 0; h < workers; h++)); do
    "$wan" exec "dc$h" --prefix "$prefix" -- python3 "$here/exchange_probe.py" \
      host --index "$h" --addresses "$addrs" --port 47300 --bytes "$bytes" \
      --rounds "$rounds" --start "$start" --period "$period" \
      >"$out/$1/exchange-host-$h.txt" 2>&1 &
  done
  wait
  python3 "$here/exchange_probe.py" summary --bytes "$bytes" --hosts "$workers" \
    "$out/$1"/exchange-host-*.txt >"$out/$1/exchange-colocated.log" 2>&1
}

cleanup() { "$wan" down --prefix "$prefix" >/dev/null 2>&1 || true; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

failed=0
for rate in $rates; do
  cleanup
  echo "== $rate mbit/s ($([[ $rate == 0 ]] && echo unshaped || echo tbf)): $hosts hosts" >&2
  mkdir -p "$out/$rate"
  "$wan" up --datacenters "$hosts" --wan_mbit "$rate" --prefix "$prefix" \
    ${queue_ms:+--queue_ms "$queue_ms"} ${congestion:+--congestion "$congestion"} \
    --probe "$probe" --seconds 2 >"$out/$rate/up.log" 2>&1 ||
    { cat "$out/$rate/up.log" >&2; die "tern-wan up at $rate mbit/s failed"; }
  grep -E '^  (WAN|TCP)' "$out/$rate/up.log" | sed 's/^ */   /' >&2 || true
  for placement in $placements; do
    # Goodput before each placement's runs (tern-wan's bulk TCP probe).
    "$wan" check --prefix "$prefix" --probe "$probe" --seconds 2 \
      >"$out/$rate/check-$placement.log" 2>&1 ||
      { cat "$out/$rate/check-$placement.log" >&2; die "the links at $rate mbit/s failed their check"; }
    grep '^link' "$out/$rate/check-$placement.log" | sed 's/^/   /' >&2 || true
    if [[ "$placement" == colocated && "$rate" != 0 && $workers -ge 2 ]]; then
      exchange_probe "$rate" ||
        { cat "$out/$rate"/exchange-*.txt "$out/$rate/exchange-colocated.log" >&2; die "the exchange probe at $rate mbit/s failed"; }
      sed 's/^/   all to all: /' "$out/$rate/exchange-colocated.log" >&2
    fi
    for codec in $codecs; do
      echo "   $placement, $codec: $warmup + $steps steps" >&2
      run_one "$rate" "$placement" "$codec" || failed=$((failed + 1))
    done
  done
done
cleanup
table --rates "$rates" --placements "$placements" --codecs "$codecs"
[[ $failed -eq 0 ]] || { echo "bench/net.sh: $failed run(s) failed" >&2; exit 1; }
