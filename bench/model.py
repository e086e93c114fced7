#!/usr/bin/env python3
"""A performance model of tern's step, fitted and checked on bench/net.sh.

In the spirit of TernGrad's Appendix B (Wen et al. 2017): a step is its
computation plus its communication, the communication a latency per round
plus bytes over the bottleneck link's bandwidth. For tern's parameter
server the round is one push then one pull, the pull only after every push
is in:

  T = compute + encode + decode + wire + latency, with the latency's
      hidden share h taken off as far as the wire covers it:
      max(latency, wire) + (1 - h) * min(latency, wire)
  wire (co-located shards) = (N - 1) / N * (push + pull) / B
  wire (dedicated shards) = max(P, Q) + (1 - d) * min(P, Q),
      P = N * push / B, Q = N * pull / B

With a shard on every worker host, a host's uplink carries both its
worker's pushes and its shard's answers, one after the other. The shard
host's link carries the pushes in and the answers out, two directions of
a duplex link: a worker answered before the others computes and pushes its
next step while they still pull, so a share d of the shorter direction
goes by while the other is busy (--duplex_share). d was measured on fp32
and fp16 rows, whose latency is nil and whose computation is small beside
their wire: (P + Q - network) / min(P, Q) had a median of 0.16 over the
eight dedicated shaped rows of the runs of 2026-12-01 (bench/README.md,
"Both directions of the shard host's link"). 0 is the plain sum, 1 the
bound of the busier direction.

push and pull are one worker's message bytes a step, B the link's measured
TCP goodput: for dedicated shards a single flow's (tern-wan check), since
every flow then shares the one bottleneck, the shard host's link; for
co-located shards, on shaped links, the all-to-all goodput of
bench/exchange_probe.py, since each host's link then carries N - 1 flows
each way, each also sharing another host's link, and TCP does not share
them evenly (results.json's exchange_mbit; without it, a single flow's).
A paced row's connections share each link evenly at the rates bench/net.sh
gave them: B is their sum on one link, or a single flow's goodput if that
is lower.
The profile is the benchmark's unshaped rows: compute, encode
and decode per codec (the lower of its two placements' rows, since they
do not depend on the placement and the higher was slowed more by the
processes sharing the cores), and the latency left in each row's network
time once its computation and its bytes at the unshaped links' goodput
are taken out. The model then
predicts every shaped row from the profile and the link's goodput alone,
and --predict extrapolates to other worker counts and rates.

That latency is not the veths' round trip (tens of microseconds): it is
the shards' work and the workers' wait for one another while they share
the machine's cores. On a slow link much of it happens while bytes are
still on the wire. How much was measured on the runs of 2026-12-01
(bench/README.md, "The latency behind the wire"): about half, the
default of --hidden_share; 0 is Appendix B's plain sum, 1 hides all of it
behind a longer wire.

A TernGrad pull is the sum of N workers' ternary codes, so it grows with
N. For another N the model scales the profiled pull by the bits a sum takes
in its layout: ceil(log2(2N+1)) bit-packed; 64 over the most base-(2N+1)
digits a 64-bit word holds, radix; for Huffman-coded sums, the entropy of
the sum of N independent codes, each nonzero with the probability that
gives the profiled pull's bits a sum (parameters: fp32's pull over 4).

  bench/model.py [--results runs/bench-net/results.json]
                 [--predict "N=8,16 mbit=100,20"] [--hidden_share 0.5]
                 [--duplex_share 0.16]
"""

import argparse
import json
import math
import sys

# The sums' layout of each TernGrad row of bench/net.sh (its flags_of).
SUM_LAYOUTS = {"terngrad": "huffman", "terngrad-2bit": "bits",
               "terngrad-base3": "radix", "terngrad-radix": "radix"}

# The share of the profiled latency a shaped row hides behind its wire
# (the docstring; bench/README.md, "The latency behind the wire").
HIDDEN_SHARE = 0.5

# The share of the shorter direction of a dedicated shard host's link that
# goes by while the other direction is busy (the docstring).
DUPLEX_SHARE = 0.16


def wire_s(placement, workers, push, pull, mbit, duplex_share=DUPLEX_SHARE):
    seconds_per_byte = 8 / (mbit * 1e6)
    if placement == "dedicated":
        into = workers * push * seconds_per_byte
        out_of = workers * pull * seconds_per_byte
        return (max(into, out_of) +
                (1 - duplex_share) * min(into, out_of))
    return (workers - 1) / workers * (push + pull) * seconds_per_byte


def network_s(latency, wire, hidden_share):
    """The wire plus the latency it does not hide (the docstring)."""
    return max(latency, wire) + (1 - hidden_share) * min(latency, wire)


def ternary_sum_entropy(workers, nonzero):
    """Bits of a sum of `workers` independent codes in {-1, 0, 1}, each
    nonzero with probability `nonzero` (half +1, half -1)."""
    dist = [1.0]
    for _ in range(workers):
        grown = [0.0] * (len(dist) + 2)
        for i, p in enumerate(dist):
            grown[i] += p * nonzero / 2
            grown[i + 1] += p * (1 - nonzero)
            grown[i + 2] += p * nonzero / 2
        dist = grown
    return -sum(p * math.log2(p) for p in dist if p > 0)


def nonzero_for_entropy(workers, bits):
    """The code's nonzero probability whose sums of `workers` codes take
    `bits` a sum (bisection; entropy grows with it up to 2/3)."""
    low, high = 0.0, 2.0 / 3.0
    for _ in range(50):
        middle = (low + high) / 2
        if ternary_sum_entropy(workers, middle) < bits:
            low = middle
        else:
            high = middle
    return low


def sum_bits(layout, workers, nonzero):
    """Bits a sum of `workers` codes takes in `layout`; `nonzero` (the
    code's nonzero probability) only for "huffman"."""
    levels = 2 * workers + 1
    if layout == "bits":
        return math.ceil(math.log2(levels))
    if layout == "radix":
        # As kernels' SumRadixDigitsPerWord: the most digits in 64 bits.
        digits = 1
        while levels ** (digits + 1) <= 2 ** 64:
            digits += 1
        return 64 / digits
    return ternary_sum_entropy(workers, nonzero)


def pull_at(codec, pull, workers, elements, new_workers):
    """The profiled pull of `workers` scaled to `new_workers`: only TernGrad
    sums grow with N; every other codec's pull is an average, N-free."""
    base = codec
    for suffix in ("-paced", "-overlap", "-inturn", "-locallast"):
        base = base.removesuffix(suffix)
    layout = SUM_LAYOUTS.get(base)
    if layout is None or not elements or new_workers == workers:
        return pull
    nonzero = (nonzero_for_entropy(workers, 8 * pull / elements)
               if layout == "huffman" else None)
    return pull * (sum_bits(layout, new_workers, nonzero) /
                   sum_bits(layout, workers, nonzero))


def link_mbit(row):
    """The bandwidth the model gives a row's busiest link (see above)."""
    paced = (row["result"] or {}).get("paced_link_mbit")
    if paced and row["goodput_mbit"]:
        return min(row["goodput_mbit"], paced)
    if row["placement"] == "colocated" and row.get("exchange_mbit"):
        return row["exchange_mbit"]
    return row["goodput_mbit"]


class Profile:
    """Per codec and placement: the constants the unshaped rows give."""

    def __init__(self, rows, hidden_share=HIDDEN_SHARE,
                 duplex_share=DUPLEX_SHARE):
        self.by = {}
        self.hidden_share = hidden_share
        self.duplex_share = duplex_share
        # The all-to-all goodput as a share of a single flow's, per shaped
        # rate that measured both: --predict's co-located links get the
        # share of the nearest such rate.
        self.shares = {row["rate_mbit"]: row["exchange_mbit"] /
                       row["goodput_mbit"] for row in rows
                       if row.get("exchange_mbit") and row["goodput_mbit"]}
        for row in rows:
            r = row["result"]
            if row["rate_mbit"] != 0 or r is None or not row["goodput_mbit"]:
                continue
            split = r["split"]
            wire = wire_s(row["placement"], r["workers"], r["push_msg_bytes"],
                          r["pull_msg_bytes"], link_mbit(row), duplex_share)
            self.by[(row["codec"], row["placement"])] = {
                "cpu_s": (split["compute_s"] + split["encode_s"] +
                          split["decode_s"]),
                # What the step spent beyond its compute and its bytes.
                "latency_s": max(0.0, r["median"] - split["compute_s"] -
                                 split["encode_s"] - split["decode_s"] - wire),
                "push": r["push_msg_bytes"],
                "pull": r["pull_msg_bytes"],
                "workers": r["workers"],
            }
        # A codec's computation, encode and decode do not depend on where
        # its shards are: of its placements' unshaped rows, the lower is the
        # one the other processes on the shared cores slowed less.
        least = {}
        for (codec, _), p in self.by.items():
            least[codec] = min(p["cpu_s"], least.get(codec, p["cpu_s"]))
        for (codec, _), p in self.by.items():
            p["cpu_s"] = least[codec]

    def exchange_share(self, mbit):
        """The share measured at the rate nearest `mbit` (by ratio); 1
        where no rate measured one."""
        if not self.shares:
            return 1.0
        nearest = min(self.shares, key=lambda r: abs(math.log(r / mbit)))
        return self.shares[nearest]

    def elements(self, placement):
        """Parameters of the model: fp32's pull is 4 bytes each."""
        fp32 = self.by.get(("fp32", placement))
        return fp32["pull"] / 4 if fp32 else None

    def pull(self, codec, placement, workers):
        p = self.by[(codec, placement)]
        return pull_at(codec, p["pull"], p["workers"],
                       self.elements(placement), workers)

    def predict(self, codec, placement, workers, mbit):
        p = self.by.get((codec, placement))
        if p is None:
            return None
        wire = wire_s(placement, workers, p["push"],
                      self.pull(codec, placement, workers), mbit,
                      self.duplex_share)
        return p["cpu_s"] + network_s(p["latency_s"], wire,
                                      self.hidden_share)


def check(rows, profile):
    """Predicted against measured for every shaped row; the worst error."""
    print("| link | shards | codec | measured | predicted | predicted / measured |")
    print("|---|---|---|---|---|---|")
    worst = 0.0
    for row in rows:
        r = row["result"]
        if row["rate_mbit"] == 0 or r is None or not row["goodput_mbit"]:
            continue
        t = profile.predict(row["codec"], row["placement"], r["workers"],
                            link_mbit(row))
        if t is None:
            continue
        ratio = t / r["median"]
        worst = max(worst, abs(ratio - 1))
        print("| %d mbit/s | %s | %s | %.3f s | %.3f s | %.2f |" % (
            row["rate_mbit"], row["placement"], row["codec"], r["median"], t,
            ratio))
    return worst


def parse_predict(text):
    fields = dict(part.split("=", 1) for part in text.split())
    return ([int(n) for n in fields.get("N", "").split(",") if n],
            [float(m) for m in fields.get("mbit", "").split(",") if m])


def extrapolated_link(profile, codec, placement, mbit):
    """The bandwidth --predict gives a link of `mbit`: co-located, the
    all-to-all share of it, unless the row is paced (link_mbit)."""
    if placement == "colocated" and not codec.endswith("-paced"):
        return mbit * profile.exchange_share(mbit)
    return mbit


def extrapolate(profile, workers_list, mbits):
    print("| workers | link | shards | codec | pull per worker | "
          "predicted step | fp32 / codec |")
    print("|---|---|---|---|---|---|---|")
    codecs = sorted({c for c, _ in profile.by})
    placements = sorted({p for _, p in profile.by})
    for n in workers_list:
        for mbit in mbits:
            for placement in placements:
                fp32 = profile.predict("fp32", placement, n, extrapolated_link(
                    profile, "fp32", placement, mbit))
                for codec in codecs:
                    t = profile.predict(codec, placement, n, extrapolated_link(
                        profile, codec, placement, mbit))
                    if t is None:
                        continue
                    pull = profile.pull(codec, placement, n)
                    print("| %d | %g mbit/s | %s | %s | %.2f MB | %.3f s | %s |"
                          % (n, mbit, placement, codec, pull / 1e6, t,
                             "%.2fx" % (fp32 / t) if fp32 else "-"))


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", default="runs/bench-net/results.json")
    parser.add_argument("--predict", default="",
                        help='other shapes, e.g. "N=8,16 mbit=100,20"')
    parser.add_argument("--hidden_share", type=float, default=HIDDEN_SHARE,
                        help="the share of the profiled latency a slower "
                        "link hides behind its wire, 0 to 1 (default "
                        "%(default)s; 0: Appendix B's sum)")
    parser.add_argument("--duplex_share", type=float, default=DUPLEX_SHARE,
                        help="the share of the shorter direction of a "
                        "dedicated shard host's link that goes by while "
                        "the other is busy, 0 to 1 (default %(default)s; "
                        "0: the plain sum)")
    args = parser.parse_args()
    for name in ("hidden_share", "duplex_share"):
        if not 0 <= getattr(args, name) <= 1:
            parser.error("--%s must be within [0, 1], not %g"
                         % (name, getattr(args, name)))
    try:
        with open(args.results) as f:
            rows = json.load(f)
    except (OSError, ValueError) as e:
        print("bench/model.py: cannot read %s: %s (run bench/net.sh first)"
              % (args.results, e), file=sys.stderr)
        return 2
    profile = Profile(rows, args.hidden_share, args.duplex_share)
    if not profile.by:
        print("bench/model.py: %s has no unshaped rows with a measured "
              "goodput to profile (bench/net.sh --rates must include 0)"
              % args.results, file=sys.stderr)
        return 2
    worst = check(rows, profile)
    print("\nlargest error: %.0f%%" % (100 * worst))
    if args.predict:
        workers_list, mbits = parse_predict(args.predict)
        print("\nco-located links at %s of the rate given (the measured "
              "all-to-all goodput over a single flow's, at the nearest "
              "measured rate)\n" % ", ".join(
                  "%.2f at %g mbit/s" % (profile.exchange_share(m), m)
                  for m in mbits))
        extrapolate(profile, workers_list, mbits)
    return 0


if __name__ == "__main__":
    sys.exit(main())
