#!/usr/bin/env bash
# bench/net.sh, small: 2 worker hosts, unshaped and 200 mbit/s links, both
# placements, fp32, terngrad and fp32 paced, 1 + 3 steps of LeNet on
# synthetic data.
# What must hold whatever the machine's speed:
#   - every run has a row, and OUT/results.json holds them;
#   - the dedicated shard host's link carries every worker's fp32 push
#     (>= 2 x LeNet's 13.1 MB a step) and a co-located one about half that;
#   - terngrad's busiest link carries under a fifth of fp32's;
#   - a shaped row counts the frames tbf sent (the wire's bytes): no fewer
#     than the interfaces count and at most 8% more (the headers of every
#     TCP segment, which the interfaces' GSO packets carry once); an
#     unshaped row has none;
#   - a shaped fp32 step takes at least 0.9 of its wire bound (the link
#     cannot be faster than its tbf rate), unshaped rows have no bound;
#   - every row counts retransmits, timeouts and tbf drops (none unshaped);
#   - every row records how busy the machine's cores were over its timed
#     steps: a share in (0, 1] of this machine's cores, over a window as
#     long as worker 0's timed steps (within 50 ms and 10%);
#   - the paced rows at 200 mbit/s record each connection's rate,
#     --pace_share 0.9 of the link over the connections on it (1
#     co-located, 2 x 2 dedicated), and a --pace_share out of (0, 1.5] is
#     refused,
#     and the unshaped ones (no rate to share) and unpaced rows none;
#   - the colocated rows at 200 mbit/s carry the all-to-all goodput that
#     bench/exchange_probe.py measured (no faster than the link), and no
#     other row has one;
#   - --queue_ms and --congestion reach the links (the table's header);
#   - --trace samples every worker host's link, and the samples add up to
#     the bytes its counters saw;
#   - --table_only (with the run's --warmup) without --rates/--codecs
#     prints the run's table again, its rate and codecs outside the
#     defaults included, and leaves results.json's 12 rows;
#   - every run's shards exit within 3 s of SIGTERM (gRPC's own shutdown
#     once held a shard 5 to 9 s: common/net/grpc_lifetime.h);
#   - no namespace of the benchmark is left afterwards.
# Without root or network namespaces it prints "SKIPPED: <reason>".
#
# Usage: bench_net_test.sh <bench/net> <tern> <net_probe>
set -euo pipefail

BENCH=$1
TERN=$(readlink -f "$2")
PROBE=$(readlink -f "$3")
P="tnbt$$-"
TEST_TMPDIR=${TEST_TMPDIR:-$(mktemp -d)}
OUT="$TEST_TMPDIR/bench-net"

skip() { echo "SKIPPED: $*"; exit 0; }
fail() { echo "FAIL: $*" >&2; exit 1; }

[[ $EUID -eq 0 ]] || skip "not root (network namespaces need it)"
command -v ip >/dev/null 2>&1 || skip "no 'ip' command (iproute2)"
ip netns add "${P}probe" 2>/dev/null || skip "cannot create network namespaces"
ip netns delete "${P}probe"

for share in 0 abc 2; do
  ! "$BENCH" --pace_share "$share" --table_only --out "$OUT" 2>"$TEST_TMPDIR/share.err" ||
    fail "--pace_share $share was accepted"
  grep -q -- "--pace_share: '$share'" "$TEST_TMPDIR/share.err" ||
    fail "--pace_share $share: $(cat "$TEST_TMPDIR/share.err")"
done

rc=0
"$BENCH" --workers 2 --rates "0 200" --codecs "fp32 terngrad fp32-paced" --steps 3 \
  --warmup 1 --dataset synthetic --tern "$TERN" --probe "$PROBE" \
  --queue_ms 80 --congestion reno --pace_share 0.9 --trace --out "$OUT" --prefix "$P" >"$TEST_TMPDIR/table.md" 2>"$TEST_TMPDIR/bench.err" || rc=$?
cat "$TEST_TMPDIR/bench.err" "$TEST_TMPDIR/table.md"
[[ $rc -eq 0 ]] || fail "bench/net.sh exited $rc"
[[ -z "$(ip netns list | grep "^$P" || true)" ]] || fail "namespaces left: $(ip netns list | grep "^$P")"

stops=("$OUT"/*/*/*/stop_s.txt)
[[ ${#stops[@]} -eq 12 ]] || fail "${#stops[@]} runs recorded their shards' stop, not 12"
for stop in "${stops[@]}"; do
  awk '$1 + 0 <= 3 { ok = 1 } END { exit !ok }' "$stop" ||
    fail "the shards of $stop took $(cat "$stop") s to exit after SIGTERM"
done

/usr/bin/python3 - "$OUT/results.json" <<'EOF' || fail "the results do not hold (above)"
import json, os, sys
rows = json.load(open(sys.argv[1]))
assert len(rows) == 12, "%d rows, not 12" % len(rows)
by = {(r["rate_mbit"], r["placement"], r["codec"]): r["result"] for r in rows}
for key, r in by.items():
    assert r is not None, "no result for %s" % (key,)
    assert r["timed"] == 3, "%s: %d timed steps" % (key, r["timed"])
fp32_bytes = 13098536  # LeNet's gradient in fp32
for rate in (0, 200):
    ded = by[(rate, "dedicated", "fp32")]["link_bytes"]
    col = by[(rate, "colocated", "fp32")]["link_bytes"]
    print("rate %d: fp32 busiest link %.2f MB (dedicated) %.2f MB (colocated)"
          % (rate, ded / 1e6, col / 1e6))
    assert ded >= 2 * fp32_bytes, "dedicated %d < 2 pushes" % ded
    assert col < 0.7 * ded, "colocated %d not below 0.7 x dedicated %d" % (col, ded)
    for placement in ("dedicated", "colocated"):
        tern = by[(rate, placement, "terngrad")]["link_bytes"]
        fp32 = by[(rate, placement, "fp32")]["link_bytes"]
        assert tern < fp32 / 5, "%s terngrad %d vs fp32 %d" % (placement, tern, fp32)
for (rate, placement, codec), r in by.items():
    wire, link = r["wire_bytes"], r["link_bytes"]
    if rate == 0:
        assert wire is None, "tbf's bytes without tbf: %s" % r
    else:
        print("%d mbit/s %s %s: busiest link %.3f MB on the wire, %.3f MB"
              " by the interfaces"
              % (rate, placement, codec, wire / 1e6, link / 1e6))
        assert link <= wire <= 1.08 * link, (wire, link)
for placement in ("dedicated", "colocated"):
    r = by[(200, placement, "fp32")]
    bound = r["wire_bytes"] * 8 / 200e6
    print("200 mbit/s %s fp32: median step %.3f s, wire bound %.3f s"
          % (placement, r["median"], bound))
    assert r["median"] >= 0.9 * bound, "faster than the link allows"
for row in rows:
    exchange = row["exchange_mbit"]
    if row["rate_mbit"] == 200 and row["placement"] == "colocated":
        print("200 mbit/s all-to-all goodput: %.1f mbit/s" % exchange)
        assert 0.5 * 200 <= exchange <= 1.05 * 200, "exchange %s" % exchange
    else:
        assert exchange is None, "an exchange where none was measured: %s" % row
cores = os.cpu_count()
for key, r in by.items():
    cpu = r["cpu"]
    assert cpu is not None, "%s: no record of the cores" % (key,)
    share = cpu["busy_core_s"] / (cpu["cores"] * cpu["window_s"])
    print("%s: cores %.0f%% busy over %.3f s, the timed steps %.3f s"
          % (key, 100 * share, cpu["window_s"], r["timed_s"]))
    assert cpu["cores"] == cores and cpu["steps"] == 3, cpu
    assert 0 < share <= 1.0001, "%s: busy share %g" % (key, share)
    assert abs(cpu["window_s"] - r["timed_s"]) <= 0.05 + 0.1 * r["timed_s"], (
        "%s: window %.3f s, timed steps %.3f s"
        % (key, cpu["window_s"], r["timed_s"]))
paced = {(200, "colocated"): 180.0, (200, "dedicated"): 45.0}
for (rate, placement, codec), r in by.items():
    want = paced.get((rate, placement)) if codec == "fp32-paced" else None
    assert r.get("pace_mbit") == want, "%s paced at %s, not %s" % (
        (rate, placement, codec), r.get("pace_mbit"), want)
    if want:
        assert r["paced_link_mbit"] == 180.0, r
        assert r["median"] >= 0.9 * r["wire_bytes"] * 8 / 200e6, r
    losses = r["losses_per_step"]
    assert losses is not None and min(losses.values()) >= 0, losses
    if rate == 0:
        assert losses["tbf_drops"] == 0, "tbf drops without tbf: %s" % losses
EOF
grep -q '^200 mbit/s: WAN: .*latency 80ms' "$TEST_TMPDIR/table.md" ||
  fail "--queue_ms 80 did not reach the links"
grep -q '^200 mbit/s: TCP congestion control: reno$' "$TEST_TMPDIR/table.md" ||
  fail "--congestion reno did not reach the hosts"
run="$OUT/200/colocated/fp32"
for h in 0 1; do
  [[ -s "$run/trace-$h.txt" ]] || fail "no link trace of host $h"
done
# The trace's first and last samples against the counters read around the run.
/usr/bin/python3 - "$run" <<'EOF' || fail "the link trace does not match the counters"
import sys
run = sys.argv[1]
samples = [l.split() for l in open(run + "/trace-0.txt") if l.strip()]
traced = int(samples[-1][1]) - int(samples[0][1])
def tx(name):
    return next(int(l.split()[1]) for l in open(run + "/" + name) if l.split()[0] == "0")
counted = tx("counters-after.txt") - tx("counters-before.txt")
print("host 0 sent %d bytes by its counters, %d in its trace" % (counted, traced))
assert 0.9 * counted <= traced <= counted, (traced, counted)
EOF
"$(dirname "$BENCH")/link_trace.py" show "$run/trace-0.txt" --mbit 200 >"$TEST_TMPDIR/trace.txt" ||
  fail "link_trace.py show failed"
grep -q '^sent below a tenth of the rate: [0-9]*% of [0-9]* bins$' "$TEST_TMPDIR/trace.txt" ||
  fail "link_trace.py show printed no summary: $(cat "$TEST_TMPDIR/trace.txt")"
grep -Eq '^\| unshaped \| dedicated \| fp32 \| .* \| - \| [0-9]+ / [0-9.]+ / 0 \| [0-9]+% of [0-9]+ \|$' "$TEST_TMPDIR/table.md" ||
  fail "the unshaped fp32 row has a wire bound, or no busy cores"
grep -q '^| 200 mbit/s | colocated | terngrad |' "$TEST_TMPDIR/table.md" ||
  fail "no 200 mbit/s colocated terngrad row"
"$BENCH" --table_only --warmup 1 --out "$OUT" >"$TEST_TMPDIR/again.md" ||
  fail "--table_only exited $?"
diff <(grep '^| ' "$TEST_TMPDIR/table.md") <(grep '^| ' "$TEST_TMPDIR/again.md") ||
  fail "--table_only's table differs from the run's (above)"
[[ $(/usr/bin/python3 -c 'import json, sys; print(len(json.load(open(sys.argv[1]))))' \
  "$OUT/results.json") == 12 ]] || fail "--table_only rewrote results.json without some rows"
echo PASS
