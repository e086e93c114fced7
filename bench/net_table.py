#!/usr/bin/env python3
"""The table of bench/net.sh: one row per rate, placement and codec.

Reads OUT/<rate>/<placement>/<codec>/: worker-*.jsonl (one record per
step: wall_s is cumulative, compute_s ... decode_s the step's split) and
counters-{before,after}.txt (per host: the bytes leaving and entering
its link as its interface counts them, then, in runs since these were
recorded, TCP segments retransmitted, retransmission timeouts, tbf drops
and, since 2026-12-02, the bytes tbf sent each way: the frames on the
wire, with every TCP segment's headers) and, since 2026-12-02, cpu.txt
(bench/cpu_window.py: how busy the machine's cores were over the timed
steps). Step times are worker 0's, from the differences of wall_s over
the timed steps (after --warmup); the steps are synchronous, so every
worker's are the same to within its share of the last barrier.
"""

import argparse
import json
import os
import statistics
import sys


def quantile(values, q):
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def read_records(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


LOSS_COUNTERS = ("retransmits", "timeouts", "tbf_drops")


def read_counters(path):
    """host -> [tx, rx], [tx, rx, retransmits, timeouts, tbf_drops] or
    that and [wire_tx, wire_rx] (tbf's bytes; 0 on unshaped links)."""
    counters = {}
    with open(path) as f:
        for line in f:
            host, *values = line.split()
            counters[int(host)] = [int(v) for v in values]
    return counters


def link_counters_per_step(run_dir, steps):
    """Per step: the busiest host link's bytes as the interfaces count
    them and as tbf sent them (the larger direction of each; None where
    the run predates tbf's count or the links are unshaped), and the loss
    counters summed over the hosts (None where the run predates them)."""
    before = read_counters(os.path.join(run_dir, "counters-before.txt"))
    after = read_counters(os.path.join(run_dir, "counters-after.txt"))
    busiest = wire = 0
    losses = {name: 0 for name in LOSS_COUNTERS}
    losses_end = 2 + len(LOSS_COUNTERS)  # tbf's two byte counts follow
    for host, now in after.items():
        delta = [a - b for a, b in zip(now, before[host])]
        busiest = max(busiest, delta[0], delta[1])
        wire = max([wire] + delta[losses_end:losses_end + 2])
        if len(delta) < losses_end:
            losses = None
        elif losses is not None:
            for name, value in zip(LOSS_COUNTERS, delta[2:]):
                losses[name] += value
    if losses is not None:
        losses = {name: value / steps for name, value in losses.items()}
    return busiest / steps, (wire / steps if wire else None), losses


def key_values(path):
    """The KEY=VALUE words of one of the benchmark's small records
    (pace.txt, cpu.txt, exchange-*.log), as strings; {} when the file is
    absent."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        return dict(p.split("=", 1) for p in f.read().split() if "=" in p)


def pacing(run_dir):
    """What bench/net.sh's pace.txt says of a paced run: pace_mbit (each
    connection's rate) and paced_link_mbit (the connections on one link
    together); {} for a run not paced."""
    fields = key_values(os.path.join(run_dir, "pace.txt"))
    return {k: float(fields[k]) for k in ("pace_mbit", "paced_link_mbit")
            if k in fields}


def cores_busy(run_dir):
    """bench/cpu_window.py's record of the run's timed steps: the machine's
    cores, the window's length, the cores' busy seconds in it and its steps;
    None for a run before 2026-12-02 or one whose sampler saw no window."""
    fields = key_values(os.path.join(run_dir, "cpu.txt"))
    try:
        return {"cores": int(fields["cores"]),
                "window_s": float(fields["window_s"]),
                "busy_core_s": float(fields["busy_core_s"]),
                "steps": int(fields["steps"])}
    except (KeyError, ValueError):
        return None


def summarize(run_dir, warmup):
    """Worker 0's timed steps and the links' bytes, or None when missing."""
    path = os.path.join(run_dir, "worker-0.jsonl")
    if not os.path.exists(path):
        return None
    records = read_records(path)
    timed = [r for r in records if r["step"] >= warmup]
    if len(timed) < 2:
        return None
    wall = {r["step"]: r["wall_s"] for r in records}
    steps = [wall[r["step"]] - wall[r["step"] - 1] for r in timed
             if r["step"] - 1 in wall]
    split = {k: statistics.median(r[k] for r in timed)
             for k in ("compute_s", "encode_s", "network_s", "decode_s")}
    link_bytes, wire_bytes, losses = link_counters_per_step(run_dir,
                                                            len(records))
    return {
        "workers": len([f for f in os.listdir(run_dir)
                        if f.startswith("worker-") and f.endswith(".jsonl")]),
        "push_msg_bytes": statistics.median(r["push_msg_bytes"] for r in timed),
        "pull_msg_bytes": statistics.median(r["pull_msg_bytes"] for r in timed),
        "median": statistics.median(steps),
        "p90": quantile(steps, 0.9),
        "split": split,
        "link_bytes": link_bytes,
        "wire_bytes": wire_bytes,
        "losses_per_step": losses,
        "timed": len(steps),
        "timed_s": sum(steps),
        "cpu": cores_busy(run_dir),
        **pacing(run_dir),
    }


def goodput_mbit(out, rate, placement):
    """The slowest link direction tern-wan's check measured, in mbit/s."""
    path = os.path.join(out, str(rate), "check-%s.log" % placement)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        rates = [float(line.split()[2]) for line in f
                 if line.startswith("link ")]
    return min(rates) if rates else None


def exchange_mbit(out, rate, placement):
    """The all-to-all goodput bench/exchange_probe.py measured before the
    placement's runs, in mbit/s; None where it was not measured."""
    fields = key_values(os.path.join(out, str(rate),
                                     "exchange-%s.log" % placement))
    return float(fields["exchange_mbit"]) if "exchange_mbit" in fields else None


def link_setup(out, rate):
    """tern-wan up's lines on the links' queue and TCP, from up.log."""
    path = os.path.join(out, str(rate), "up.log")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [line.strip() for line in f
                if line.startswith(("  WAN:", "  TCP congestion control:"))]


def losses_cell(s):
    losses = s["losses_per_step"]
    if losses is None:
        return "-"
    return "%.0f / %.2f / %.0f" % tuple(losses[n] for n in LOSS_COUNTERS)


def cores_cell(s):
    """The share of the machine's cores busy over the timed steps."""
    cpu = s.get("cpu")
    if cpu is None or cpu["window_s"] <= 0:
        return "-"
    return "%.0f%% of %d" % (
        100 * cpu["busy_core_s"] / (cpu["cores"] * cpu["window_s"]),
        cpu["cores"])


def on_the_wire(s):
    """The busiest link's bytes per step: tbf's frames where counted, else
    (unshaped links, older runs) the interfaces' count, which misses the
    headers of every TCP segment but the first of a GSO packet."""
    return s.get("wire_bytes") or s["link_bytes"]


def rate_name(rate):
    return "unshaped" if rate == 0 else "%d mbit/s" % rate


def row(rate, placement, codec, s, fp32):
    if s is None:
        return "| %s | %s | %s | no result | | | | | | | | |" % (
            rate_name(rate), placement, codec)
    split = s["split"]
    busiest = on_the_wire(s)
    bound = "%.3f s" % (busiest * 8 / (rate * 1e6)) if rate else "-"
    speedup = ("%.2fx" % (fp32["median"] / s["median"])
               if fp32 is not None else "-")
    return "| %s | %s | %s | %.3f s | %.3f s | %s | %.3f / %.3f / %.3f / %.3f | %.2f MB | %s | %s | %s |" % (
        rate_name(rate), placement, codec, s["median"], s["p90"], speedup,
        split["compute_s"], split["encode_s"], split["network_s"],
        split["decode_s"], busiest / 1e6, bound, losses_cell(s),
        cores_cell(s))


PLACEMENTS = ("dedicated", "colocated")


def runs_in(out):
    """(rate, placement, codec) of every run under `out`."""
    found = []
    for rate in os.listdir(out) if os.path.isdir(out) else []:
        if not rate.isdigit():
            continue
        for placement in PLACEMENTS:
            base = os.path.join(out, rate, placement)
            for codec in os.listdir(base) if os.path.isdir(base) else []:
                if os.path.exists(os.path.join(base, codec,
                                               "counters-before.txt")):
                    found.append((int(rate), placement, codec))
    return found


def discovered(out):
    """The rates, placements and codecs of the runs under `out`, in the
    benchmark's order: unshaped first, then the faster rates; codecs in the
    order of OUT/results.json (the last table's), then any others, fp32's
    first, by name."""
    found = runs_in(out)
    rates = sorted({r for r, _, _ in found}, key=lambda r: (r != 0, -r))
    placements = [p for p in PLACEMENTS if any(f[1] == p for f in found)]
    try:
        with open(os.path.join(out, "results.json")) as f:
            listed = [row["codec"] for row in json.load(f)]
    except (OSError, ValueError, TypeError, KeyError):
        listed = []
    order = {}
    for codec in listed:
        order.setdefault(codec, len(order))
    codecs = sorted({c for _, _, c in found},
                    key=lambda c: (order.get(c, len(order)),
                                   not c.startswith("fp32"), c))
    return (" ".join(map(str, rates)), " ".join(placements),
            " ".join(codecs))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--rates", help="default: every rate run in OUT")
    parser.add_argument("--placements",
                        help="default: every placement run in OUT")
    parser.add_argument("--codecs", help="default: every codec run in OUT")
    parser.add_argument("--warmup", type=int, required=True)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    rates, placements, codecs = discovered(args.out)
    args.rates = args.rates or rates
    args.placements = args.placements or placements
    args.codecs = args.codecs or codecs
    if not (args.rates and args.placements and args.codecs):
        print("bench/net_table.py: no runs in %s" % args.out, file=sys.stderr)
        return 2
    for rate in (int(r) for r in args.rates.split()):
        for line in link_setup(args.out, rate):
            print("%s: %s" % (rate_name(rate), line))
    print("| link | shards | codec | step (median) | step (p90) | fp32 / codec"
          " | compute / encode / network / decode (median s) | busiest link"
          " per step | wire bound | retransmits / timeouts / tbf drops"
          " per step | cores busy |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    missing = 0
    results = []
    for rate in (int(r) for r in args.rates.split()):
        for placement in args.placements.split():
            runs = {c: summarize(os.path.join(args.out, str(rate), placement,
                                              c), args.warmup)
                    for c in args.codecs.split()}
            goodput = goodput_mbit(args.out, rate, placement)
            exchange = exchange_mbit(args.out, rate, placement)
            for codec, s in runs.items():
                missing += s is None
                print(row(rate, placement, codec, s, runs.get("fp32")))
                results.append({"rate_mbit": rate, "placement": placement,
                                "codec": codec, "result": s,
                                "goodput_mbit": goodput,
                                "exchange_mbit": exchange})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
