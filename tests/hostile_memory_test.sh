#!/usr/bin/env bash
# Issue 14: memory stays bounded under hostile input. A plaintext shard on
# loopback (2 workers, the default 64 MiB message limit) under a 2.5 GiB
# address-space cap (prlimit --as), and an attacker:
#   1. three calls on one connection whose length prefixes declare 2 GB
#      each and whose bytes keep coming, 1 GiB in all (tests/hostile/
#      h2_flood.py): gRPC's transport quota of the shard, (2 + 2) x 64 MiB
#      + 64 MiB = 320 MiB (common/net/server.h), bounds what it takes of
#      them (it resets them, fails them, or stops granting window);
#   2. a Join of a few bytes declaring 2^31 chunks: FAILED_PRECONDITION
#      before anything is allocated for it; 300 more of them leave at most
#      5 lines in the shard's log (refusals are logged at a bounded rate,
#      common/refusal_log.h);
#   3. worker 0's 50 MB push of step 0 and 20 duplicates of it, held at the
#      barrier until worker 1 pushes (tests/hostile/attack.py dup_push):
#      5 calls of a worker may wait at once (core/barrier.h), the other 16
#      get RESOURCE_EXHAUSTED at once, and the shard holds at most the
#      transport's 320 MiB and the six 50 MB answers.
#   4. 900 TCP connections from 127.0.0.2, held open without a byte sent:
#      the shard keeps at most 4 x 2 + 16 = 24 of them (per-peer limit,
#      common/net/connection_gate.h) and closes the rest at once, so its
#      descriptors stay few and the workers' address is still served.
# After each, the shard still serves (grpc.health.v1), and its peak RSS
# (VmHWM) stays under the bound stated at each step; the peaks are printed.
#
# Usage: hostile_memory_test.sh <tern> <attack.py> <h2_flood.py> <payload.proto>
set -euo pipefail

TERN=$(readlink -f "$1")
ATTACK=$(readlink -f "$2")
FLOOD=$(readlink -f "$3")
PROTO=$(cd "$(dirname "$4")/../.." && pwd -P)
TMP=${TEST_TMPDIR:-$(mktemp -d)}
PY=/usr/bin/python3
SHARD=""
trap 'touch "$TMP/flood.done"; [[ -z "$SHARD" ]] || kill "$SHARD" 2>/dev/null || true' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
skip() { echo "SKIPPED: $*"; exit 0; }
$PY -c "import grpc, google.protobuf, h2" 2>/dev/null ||
  skip "python3-grpcio, python3-protobuf and python3-h2 are needed (deploy/install-deps.sh)"
command -v prlimit >/dev/null || skip "prlimit (util-linux) is not installed"
mkdir -p "$TMP/pb"
protoc -I "$PROTO" --python_out="$TMP/pb" "$PROTO"/tern/v1/*.proto ||
  fail "protoc could not compile the .proto files"

start_shard() {  # -> SHARD, PORT, BASE_KB
  rm -f "$TMP/ps.port"
  prlimit --as=$((2560 << 20)) -- "$TERN" ps --listen=127.0.0.1:0 \
    --port_file="$TMP/ps.port" --num_workers=2 --barrier_timeout_s=120 \
    >"$TMP/ps.log" 2>&1 &
  SHARD=$!
  for _ in $(seq 100); do [[ -s "$TMP/ps.port" ]] && break; sleep 0.1; done
  [[ -s "$TMP/ps.port" ]] || fail "the shard did not start: $(tail -n 5 "$TMP/ps.log")"
  PORT=$(cat "$TMP/ps.port")
  BASE_KB=$(rss_kb VmRSS)
}
rss_kb() { awk -v k="$1:" '$1 == k {print $2}' "/proc/$SHARD/status"; }

# The shard serves after the attack, and its peak RSS grew by less than
# `bound_mb` over its RSS at start.
check_after() {  # what bound_mb
  local what=$1 bound_mb=$2 grew_mb
  kill -0 "$SHARD" 2>/dev/null || fail "$what: the shard died: $(tail -n 5 "$TMP/ps.log")"
  "$TERN" health "127.0.0.1:$PORT" --timeout=5 >/dev/null ||
    fail "$what: the shard no longer serves"
  grew_mb=$(( ($(rss_kb VmHWM) - BASE_KB) / 1024 ))
  echo "$what: peak RSS $(( $(rss_kb VmHWM) / 1024 )) MiB, $grew_mb MiB over the start (bound $bound_mb MiB)"
  (( grew_mb < bound_mb )) || fail "$what: the shard grew by $grew_mb MiB, over $bound_mb MiB"
}

# ------------------------------------------------ 1. a 2 GB length prefix ---
start_shard
flood=$($PY "$FLOOD" "127.0.0.1:$PORT" --streams 3 --send_mb 1024)
echo "flood: $flood"
# The shard must refuse the calls' bytes: reset them at the quota, fail
# them in gRPC's transport ("grpc-status 14 Failed parsing HTTP/2"), or stop
# granting flow-control window (the sender stalls with the calls open, and
# closes them); never answer one OK. Which of the three gRPC 1.51 picks
# depends on timing (all three seen here); the peak RSS below is the bound
# that matters.
$PY -c 'import json, sys
flood = json.loads(sys.argv[1])
calls = flood["calls"]
assert sorted(calls) == ["1", "3", "5"], calls
stalled = flood["why"].startswith("stalled")
assert all(c == "reset" or (stalled and c == "open") or
           (c.startswith("grpc-status ") and not c.startswith("grpc-status 0 "))
           for c in calls.values()), calls' "$flood" ||
  fail "the flood's calls were not all refused: $flood"
check_after "2 GB length prefixes, 1 GiB sent" 400

# ------------------------------------------------ 2. 2^31 chunks declared ---
got=$($PY "$ATTACK" "127.0.0.1:$PORT" join_huge --pb "$TMP/pb" --worker 1 | sed -n 1p)
[[ "$got" == FAILED_PRECONDITION ]] || fail "the 2^31-chunk join got $got"
check_after "a join of 2^31 chunks (after 1)" 400
got=$($PY "$ATTACK" "127.0.0.1:$PORT" join_huge --pb "$TMP/pb" --worker 1 --repeat 300 | sed -n 1p)
[[ "$(echo "$got" | tr ' ' '\n' | sort -u)" == FAILED_PRECONDITION ]] ||
  fail "300 joins of 2^31 chunks got: $(echo "$got" | tr ' ' '\n' | sort | uniq -c)"
lines=$(grep -c "join of worker 1 refused" "$TMP/ps.log" || true)
echo "301 refused joins: $lines lines in the shard's log"
(( lines <= 5 )) || fail "301 refused joins left $lines log lines, more than 5"
kill "$SHARD"; wait "$SHARD" 2>/dev/null || true

# ------------------------------ 3. duplicates of a 50 MB push held waiting ---
start_shard
got=$($PY "$ATTACK" "127.0.0.1:$PORT" dup_push --pb "$TMP/pb" \
  --elements 12500000 --duplicates 20 --spacing_s 0.5 --timeout_s 120 | sed -n 1p)
echo "duplicates: $got"
[[ "$got" =~ ^OK ]] || fail "the first push was not answered: $got"
check_after "a 50 MB push and 20 duplicates held at the barrier" $((320 + 6 * 48 + 96))

# ------------------------------------- 4. a flood of connections from one peer ---
fds_before=$(ls "/proc/$SHARD/fd" | wc -l)
max_open=24  # connections the shard may keep open for one peer
$PY - "$PORT" "$TMP/flood" "$max_open" <<'PY' &
import os, socket, sys, time
port, files, max_open = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
held = [socket.create_connection(("127.0.0.1", port), timeout=5,
                                 source_address=("127.0.0.2", 0))
        for _ in range(900)]


def still_open(s):
    s.setblocking(False)
    try:
        return s.recv(1 << 16) != b""  # gRPC's settings: still open
    except BlockingIOError:
        return True
    except ConnectionResetError:
        return False


# The shard closes what is over the limit as it accepts them: count again
# until it is within the limit, for up to 30 s (a slow machine).
deadline = time.monotonic() + 30
while True:
    time.sleep(0.5)
    held = [s for s in held if still_open(s)]
    if len(held) <= max_open or time.monotonic() > deadline:
        break
with open(files + ".open", "w") as out:
    out.write(str(len(held)))
while not os.path.exists(files + ".done"):
    time.sleep(0.1)
PY
FLOOD_PID=$!
for _ in $(seq 600); do [[ -s "$TMP/flood.open" ]] && break; sleep 0.1; done
[[ -s "$TMP/flood.open" ]] || fail "connection flood: the attacker did not connect"
fds_during=$(ls "/proc/$SHARD/fd" | wc -l)
"$TERN" health "127.0.0.1:$PORT" --timeout=5 >/dev/null ||
  fail "connection flood: the shard no longer serves its workers' address"
touch "$TMP/flood.done"
wait "$FLOOD_PID" || true
echo "connection flood: $(cat "$TMP/flood.open") of 900 connections kept open," \
  "$((fds_during - fds_before)) more descriptors in the shard (bounds $max_open and 30)"
(( $(cat "$TMP/flood.open") <= max_open )) ||
  fail "connection flood: the shard kept $(cat "$TMP/flood.open") connections of one peer"
(( fds_during - fds_before <= 30 )) ||
  fail "connection flood: the shard holds $((fds_during - fds_before)) more descriptors"
lines=$(grep -c "closed a connection from 127.0.0.2" "$TMP/ps.log" || true)
(( lines <= 5 )) || fail "876 closed connections left $lines log lines, more than 5"
echo "PASS"
