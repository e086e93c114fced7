#!/usr/bin/env bash
# --pace_mbit in real processes (common/net/pacing.h): two hosts of
# deploy/wan/tern-wan (unshaped), a shard on host 0 and a worker on each,
# all with --pace_mbit 8, training fp32 LeNet on synthetic data (13 MB a
# push: seconds at 8 mbit/s, long enough to look). While they run:
#   - host 1's worker's connection to the shard is paced at 8 mbit/s (the
#     client side, found by the process's scan of its descriptors);
#   - the shard's connection from host 1 is paced at 8 mbit/s too;
#   - host 0's worker's connection to its own host's shard is not paced,
#     at either end (connections within a host are never capped).
# `ss -tin` shows a socket's cap as "pacing_rate <now>/<cap>".
# Without root or network namespaces it prints "SKIPPED: <reason>".
#
# Usage: pacing_processes_test.sh <tern> <tern-wan> <net_probe>
set -euo pipefail

TERN=$(readlink -f "$1")
WAN=$(readlink -f "$2")
PROBE=$(readlink -f "$3")
P="tpace$$-"
SHARD=10.77.0.2:51000
TEST_TMPDIR=${TEST_TMPDIR:-$(mktemp -d)}

skip() { echo "SKIPPED: $*"; exit 0; }
fail() {
  echo "FAIL: $*" >&2
  tail -n 5 "$TEST_TMPDIR"/*.log >&2 || true
  exit 1
}

[[ $EUID -eq 0 ]] || skip "not root (network namespaces need it)"
command -v ip >/dev/null 2>&1 || skip "no 'ip' command (iproute2)"
command -v ss >/dev/null 2>&1 || skip "no 'ss' command (iproute2)"
ip netns add "${P}probe" 2>/dev/null || skip "cannot create network namespaces"
ip netns delete "${P}probe"

cleanup() { "$WAN" down --prefix "$P" >/dev/null 2>&1 || true; }
trap cleanup EXIT
"$WAN" up --datacenters 2 --wan_mbit 0 --prefix "$P" --probe "$PROBE" \
  --seconds 2 >"$TEST_TMPDIR/up.log" 2>&1 || fail "tern-wan up failed"

"$WAN" exec dc0 --prefix "$P" -- "$TERN" ps --listen "$SHARD" --insecure \
  --shard_index 0 --num_shards 1 --num_workers 2 --pace_mbit 8 \
  >"$TEST_TMPDIR/ps.log" 2>&1 &
for h in 0 1; do
  "$WAN" exec "dc$h" --prefix "$P" -- "$TERN" worker --worker_id "$h" \
    --num_workers 2 --ps "$SHARD" --model lenet --dataset synthetic \
    --codec fp32 --batch_size 8 --steps 20 --eval_every 0 \
    --final_eval=false --check_every 0 --pace_mbit 8 \
    >"$TEST_TMPDIR/worker-$h.log" 2>&1 &
done

# The "pacing_rate" fields of the sockets from $2 to $3 in host $1's
# `ss -tin`, one a line ("<now>bps/<cap>bps" when capped). IPv4-mapped
# addresses ([::ffff:10.77.0.2]:port) count as the IPv4 ones.
pacing_of() {  # host local_address peer_address
  "$WAN" exec "$1" --prefix "$P" -- ss -tin |
    awk -v l="$2" -v p="$3" '
      $1 == "ESTAB" {
        gsub(/\[::ffff:|\]/, "", $4); gsub(/\[::ffff:|\]/, "", $5)
        mine = (index($4, l ":") == 1 && index($5, p ":") == 1); next
      }
      mine {
        for (i = 1; i < NF; i++) if ($i == "pacing_rate") print $(i + 1)
        mine = 0
      }'
}

# host 1's worker -> the shard, the shard's end of it, and host 0's worker
# <-> the shard; the workers connect in either order, so wait for both.
deadline=$((SECONDS + 60))
remote="" shard_side="" local_side=""
while [[ $SECONDS -lt $deadline ]]; do
  remote="$(pacing_of dc1 10.77.1.2 10.77.0.2 | head -n 1)"
  shard_side="$(pacing_of dc0 10.77.0.2 10.77.1.2 | head -n 1)"
  local_side="$(pacing_of dc0 10.77.0.2 10.77.0.2 | paste -sd ' ' -)"
  [[ "$remote" == */8000000bps && "$shard_side" == */8000000bps &&
     -n "$local_side" ]] && break
  sleep 0.5
done
echo "host 1 -> shard: pacing_rate $remote; shard -> host 1: $shard_side"
[[ "$remote" == */8000000bps ]] ||
  fail "host 1's worker is not paced at 8 mbit/s: '$remote'"
[[ "$shard_side" == */8000000bps ]] ||
  fail "the shard's end of it is not paced at 8 mbit/s: '$shard_side'"

# host 0's worker and the shard share an address: both ends unpaced.
echo "host 0's worker <-> shard, both ends: pacing_rate $local_side"
[[ -n "$local_side" ]] ||
  fail "no connection between host 0's worker and the shard"
[[ "$local_side" != */* ]] ||
  fail "a connection within host 0 is paced: '$local_side'"
grep -q "pace_mbit: each connection to another host sends at most 8 mbit/s" \
  "$TEST_TMPDIR/worker-1.log" || fail "the worker did not log its pace"
echo PASS
