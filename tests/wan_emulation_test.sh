#!/usr/bin/env bash
# The emulated WAN (deploy/wan/tern-wan, README.md there), end to end:
#   - `up` with 2 DCs at a small W makes exactly Pgs, Pdc0, Pdc1, with lo up,
#     the documented addresses, tbf at W with the --queue_ms given on both
#     ends of both links, and its own check passes; `check` passes again on
#     its own;
#   - `up --congestion reno` sets reno in every namespace it makes;
#   - net_probe across a WAN link (both directions) and DC to DC through the
#     GS stays within 70%..130% of W, while a DC's loopback (the LAN) is not
#     shaped (well above W);
#   - `exec` runs in the right namespace and passes the exit code through;
#   - `up` over an existing prefix and bad flags are refused with exit 2;
#   - `down` leaves no namespace and no veth (ip netns list, ip link), twice;
#   - an `up` interrupted by SIGINT (as Ctrl-C sends it, to the process
#     group) while building, one interrupted during its check, and one whose
#     check fails all leave nothing behind.
# Without root or network namespaces it prints "SKIPPED: <reason>" and
# exits 0 (Bazel shows PASSED; CI runs as root).
#
# Usage: wan_emulation_test.sh <tern-wan> <net_probe>
set -euo pipefail

TERN_WAN=$(readlink -f "$1")
PROBE=$(readlink -f "$2")
# Unique to this run, so that a developer's own `tern-` WAN is never touched.
P="ternt$$-"
PI="ternt$$i-"
W=20
TEST_TMPDIR=${TEST_TMPDIR:-$(mktemp -d)}

skip() {
  echo "SKIPPED: $*"
  exit 0
}

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

[[ $EUID -eq 0 ]] || skip "not root (network namespaces need it)"
command -v ip >/dev/null 2>&1 || skip "no 'ip' command (iproute2)"
command -v tc >/dev/null 2>&1 || skip "no 'tc' command (iproute2)"
if ! out=$(ip netns add "${P}probe" 2>&1); then
  skip "ip netns add does not work here: $out"
fi
ip netns del "${P}probe"

cleanup() {
  "$TERN_WAN" down --prefix "$P" >/dev/null 2>&1 || true
  "$TERN_WAN" down --prefix "$PI" >/dev/null 2>&1 || true
}
trap cleanup EXIT

# Namespaces of one prefix, sorted, on one line.
namespaces_of() {
  ip netns list | awk '{ print $1 }' | { grep "^$1" || true; } | sort | paste -sd ' ' -
}

veths() {
  ip -o link show type veth | awk -F': ' '{ print $2 }' | sort | paste -sd ' ' -
}

# MB/s from net_probe's line -> mbit/s.
mbit_of() {
  grep -o 'goodput_mb_per_s=[0-9.]*' <<<"$1" | cut -d= -f2 |
    awk '{ printf "%.1f", $1 * 8 }'
}

within() {  # value lo hi
  awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v >= lo && v <= hi) }'
}

# One measurement: listener in namespace $1 on $2, sender in namespace $3.
probe_across() {  # listen_ns addr send_ns
  "$TERN_WAN" exec "$1" --prefix "$P" -- "$PROBE" listen --address "$2" \
    --port 47100 --seconds 3 --timeout_s 10 >/dev/null &
  local listener=$!
  local out
  out=$("$TERN_WAN" exec "$3" --prefix "$P" -- "$PROBE" send --address "$2" \
    --port 47100 --seconds 9 --timeout_s 10)
  wait "$listener"
  mbit_of "$out"
}

veths_before=$(veths)
lo_bound=$(awk -v w="$W" 'BEGIN { print 0.7 * w }')
hi_bound=$(awk -v w="$W" 'BEGIN { print 1.3 * w }')

# ------------------------------------------------------------------ up ---
rc=0
"$TERN_WAN" up --datacenters 2 --wan_mbit "$W" --prefix "$P" \
  --queue_ms 80 --probe "$PROBE" >"$TEST_TMPDIR/up.out" 2>&1 || rc=$?
cat "$TEST_TMPDIR/up.out"
[[ $rc -eq 0 ]] || fail "up exited $rc"
[[ $(grep -c '  ok$' "$TEST_TMPDIR/up.out") -eq 4 ]] ||
  fail "up's check did not report 4 measurements ok"
grep -q 'all links within bounds' "$TEST_TMPDIR/up.out" || fail "no check verdict"
grep -q "dc1  netns=${P}dc1 addr=10.77.1.2 gs_addr=10.77.1.1" "$TEST_TMPDIR/up.out" ||
  fail "up did not print dc1's addresses"

[[ "$(namespaces_of "$P")" == "${P}dc0 ${P}dc1 ${P}gs" ]] ||
  fail "namespaces after up: '$(namespaces_of "$P")'"
for ns in "${P}gs" "${P}dc0" "${P}dc1"; do
  [[ "$(ip -n "$ns" -o link show lo)" == *"<LOOPBACK,UP"* ]] || fail "lo is down in $ns"
done
# tbf at W (bytes/s in tc's JSON) on both ends of both links.
want_rate=$((W * 1000000 / 8))
for end in "${P}gs dc0" "${P}gs dc1" "${P}dc0 wan0" "${P}dc1 wan0"; do
  read -r ns dev <<<"$end"
  [[ "$(tc -j -n "$ns" qdisc show dev "$dev")" == *'"kind":"tbf"'*"\"rate\":$want_rate,"* ]] ||
    fail "no tbf at $W mbit on $dev in $ns: $(tc -n "$ns" qdisc show dev "$dev")"
  [[ "$(tc -j -n "$ns" qdisc show dev "$dev")" == *'"lat":80000'* ]] ||
    fail "tbf on $dev in $ns does not queue 80 ms: $(tc -n "$ns" qdisc show dev "$dev")"
done
[[ "$(ip -n "${P}gs" -4 -o addr show dev dc0)" == *10.77.0.1/30* ]] || fail "GS side of link 0"
[[ "$(ip -n "${P}gs" -4 -o addr show dev dc1)" == *10.77.1.1/30* ]] || fail "GS side of link 1"
[[ "$(ip -n "${P}dc1" -4 -o addr show dev wan0)" == *10.77.1.2/30* ]] || fail "dc1's address"
# Made inside the namespaces: the host has no new veth.
[[ "$(veths)" == "$veths_before" ]] || fail "host veths changed: '$(veths)'"

# --------------------------------------------------------------- check ---
"$TERN_WAN" check --prefix "$P" --probe "$PROBE" || fail "check after up failed"

# -------------------------------------------------------------- probes ---
up=$(probe_across gs 10.77.1.1 dc1)
down=$(probe_across dc1 10.77.1.2 gs)
dc_to_dc=$(probe_across dc1 10.77.1.2 dc0)
echo "probe: dc1->gs $up, gs->dc1 $down, dc0->dc1 (through gs) $dc_to_dc mbit/s; bounds $lo_bound..$hi_bound"
within "$up" "$lo_bound" "$hi_bound" || fail "dc1->gs at $up mbit/s"
within "$down" "$lo_bound" "$hi_bound" || fail "gs->dc1 at $down mbit/s"
within "$dc_to_dc" "$lo_bound" "$hi_bound" || fail "dc0->dc1 at $dc_to_dc mbit/s"
# The LAN (a DC's loopback) is not shaped.
"$TERN_WAN" exec dc0 --prefix "$P" -- "$PROBE" listen --address 127.0.0.1 \
  --port 47101 --seconds 1 >/dev/null &
listener=$!
lan=$(mbit_of "$("$TERN_WAN" exec dc0 --prefix "$P" -- "$PROBE" send \
  --address 127.0.0.1 --port 47101 --seconds 5)")
wait "$listener"
echo "probe: dc0 loopback $lan mbit/s"
within "$lan" $((10 * W)) 1000000000 || fail "dc0's loopback at $lan mbit/s looks shaped"

# ---------------------------------------------------------------- exec ---
[[ "$("$TERN_WAN" exec dc1 --prefix "$P" -- ip -4 -o addr show dev wan0)" == *10.77.1.2/30* ]] ||
  fail "exec dc1 does not run in dc1"
[[ "$("$TERN_WAN" exec gs --prefix "$P" -- ip -o link show)" == *"dc1@"* ]] ||
  fail "exec gs does not run in gs"
rc=0
"$TERN_WAN" exec dc0 --prefix "$P" -- sh -c 'exit 7' || rc=$?
[[ $rc -eq 7 ]] || fail "exec passed exit code $rc, not 7"
rc=0
"$TERN_WAN" exec dc2 --prefix "$P" -- true 2>/dev/null || rc=$?
[[ $rc -eq 2 ]] || fail "exec into a missing DC exited $rc, not 2"

# ------------------------------------------------------------ refusals ---
rc=0
"$TERN_WAN" up --datacenters 1 --prefix "$P" --probe "$PROBE" >/dev/null \
  2>"$TEST_TMPDIR/again.err" || rc=$?
[[ $rc -eq 2 ]] || fail "a second up on the same prefix exited $rc, not 2"
grep -q "tern-wan down --prefix $P" "$TEST_TMPDIR/again.err" ||
  fail "the refusal does not say to run down: $(cat "$TEST_TMPDIR/again.err")"
[[ "$(namespaces_of "$P")" == "${P}dc0 ${P}dc1 ${P}gs" ]] ||
  fail "the refused up changed the namespaces"
for bad in "up --datacenters 0" "up --datacenters 2 --wan_mbit -1" \
  "up --datacenters 2 --prefix a/b" "down --wan_mbit 3" "check --seconds 1" \
  "up --datacenters 1 --queue_ms 0" "up --datacenters 1 --congestion nosuch" \
  "check --queue_ms 10" "exec dc0" "frob"; do
  rc=0
  # shellcheck disable=SC2086  # the words of $bad are the arguments
  "$TERN_WAN" $bad >/dev/null 2>&1 || rc=$?
  [[ $rc -eq 2 ]] || fail "'tern-wan $bad' exited $rc, not 2"
done

# ---------------------------------------------------------------- down ---
"$TERN_WAN" down --prefix "$P" || fail "down failed"
[[ -z "$(namespaces_of "$P")" ]] || fail "left after down: $(namespaces_of "$P")"
[[ "$(veths)" == "$veths_before" ]] || fail "veths after down: '$(veths)'"
[[ "$(ip -o link show)" != *"$P"* ]] || fail "a link named $P* is left"
"$TERN_WAN" down --prefix "$P" >/dev/null || fail "a second down failed"

# ------------------------------------------------------------ unshaped ---
# --wan_mbit 0: no tbf on either end; check measures and reports only.
# --congestion reno (always built in) in every namespace.
rc=0
"$TERN_WAN" up --datacenters 1 --wan_mbit 0 --prefix "$P" --congestion reno \
  --probe "$PROBE" >"$TEST_TMPDIR/unshaped.out" 2>&1 || rc=$?
cat "$TEST_TMPDIR/unshaped.out"
[[ $rc -eq 0 ]] || fail "an unshaped up exited $rc"
[[ $(grep -c ' unshaped$' "$TEST_TMPDIR/unshaped.out") -eq 2 ]] ||
  fail "the unshaped check did not report both directions"
for end in "${P}gs dc0" "${P}dc0 wan0"; do
  read -r ns dev <<<"$end"
  [[ "$(tc -j -n "$ns" qdisc show dev "$dev")" != *'"kind":"tbf"'* ]] ||
    fail "an unshaped up put tbf on $dev in $ns"
done
for ns in "${P}gs" "${P}dc0"; do
  cc="$(ip netns exec "$ns" cat /proc/sys/net/ipv4/tcp_congestion_control)"
  [[ "$cc" == reno ]] || fail "--congestion reno left $ns at '$cc'"
done
grep -q 'TCP congestion control: reno$' "$TEST_TMPDIR/unshaped.out" ||
  fail "up did not print the congestion control it set"
"$TERN_WAN" down --prefix "$P" || fail "down after the unshaped up failed"

# ----------------------------------------------------- failed up, Ctrl-C ---
# Leaves nothing: no namespace, no veth, no probe still running.
assert_nothing_left() {  # what
  [[ -z "$(namespaces_of "$PI")" ]] || fail "$1 left $(namespaces_of "$PI")"
  [[ "$(veths)" == "$veths_before" ]] || fail "$1 left veths: '$(veths)'"
  if pgrep -f -- "^$PROBE " >/dev/null; then
    fail "$1 left a net_probe running: $(pgrep -af -- "^$PROBE ")"
  fi
}

# A step fails: the check's probe is /bin/false.
rc=0
"$TERN_WAN" up --datacenters 2 --wan_mbit "$W" --prefix "$PI" \
  --probe /bin/false >"$TEST_TMPDIR/fail.out" 2>&1 || rc=$?
[[ $rc -eq 1 ]] || fail "an up whose check fails exited $rc, not 1"
grep -q 'removing what it made' "$TEST_TMPDIR/fail.out" || fail "no cleanup message"
assert_nothing_left "a failed up"

# Ctrl-C: SIGINT to the process group. Job control gives the background up
# its own group and leaves its SIGINT disposition alone.
interrupt_up() {  # when: building | checking
  local pid rc=0 waited=0
  set -m
  "$TERN_WAN" up --datacenters 3 --wan_mbit "$W" --prefix "$PI" \
    --probe "$PROBE" >"$TEST_TMPDIR/int.out" 2>&1 &
  pid=$!
  set +m
  if [[ "$1" == building ]]; then
    until [[ -n "$(namespaces_of "$PI")" ]]; do
      sleep 0.01
      waited=$((waited + 1))
      ((waited < 3000)) || fail "up made no namespace in 30 s"
    done
  else
    until grep -q 'tern-wan check:' "$TEST_TMPDIR/int.out"; do
      sleep 0.05
      waited=$((waited + 1))
      ((waited < 600)) || fail "up did not reach its check in 30 s"
    done
    sleep 1  # the probes are running now
  fi
  kill -INT -- "-$pid"
  wait "$pid" || rc=$?
  cat "$TEST_TMPDIR/int.out"
  [[ $rc -eq 130 ]] || fail "up interrupted while $1 exited $rc, not 130"
  assert_nothing_left "an up interrupted while $1"
}
interrupt_up building
interrupt_up checking

ip netns list
echo "PASS"
