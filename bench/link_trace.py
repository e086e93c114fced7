#!/usr/bin/env python3
"""A host link's rate over time, to see when it idles during a step.

  sample: run inside a host's namespace (bench/net.sh --trace does); reads
          the interface's byte counters every --period_ms until --seconds
          have passed or it is stopped, one line "time tx_bytes rx_bytes".
  show:   prints a trace as rows of bins, each cell "tx/rx" in tenths of
          --mbit (10/10: both directions at the link's rate), and the share
          of bins where each direction ran below a tenth of it.

  bench/link_trace.py sample --out trace.txt [--interface wan0]
  bench/link_trace.py show trace.txt --mbit 100 [--bin_ms 100] [--skip_s 5]
"""

import argparse
import signal
import sys
import time


def sample(args):
    stats = "/sys/class/net/%s/statistics/" % args.interface

    def read(name):
        with open(stats + name) as f:
            return int(f.read())

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    end = time.time() + args.seconds
    with open(args.out, "w") as out:
        while time.time() < end:
            out.write("%.3f %d %d\n" % (time.time(), read("tx_bytes"),
                                        read("rx_bytes")))
            out.flush()
            time.sleep(args.period_ms / 1000)


def bins_of(path, bin_s):
    """Bytes sent and received per bin, from a trace's counter samples."""
    with open(path) as f:
        rows = [tuple(float(v) for v in line.split()) for line in f
                if line.strip()]
    if len(rows) < 2:
        sys.exit("link_trace.py: %s has fewer than 2 samples" % path)
    start, bins = rows[0][0], {}
    for before, after in zip(rows, rows[1:]):
        cell = bins.setdefault(int((after[0] - start) / bin_s), [0, 0])
        cell[0] += after[1] - before[1]
        cell[1] += after[2] - before[2]
    return [bins.get(i, [0, 0]) for i in range(max(bins) + 1)]


def show(args):
    bin_s = args.bin_ms / 1000
    full = args.mbit * 1e6 / 8 * bin_s  # bytes a bin at the link's rate
    bins = bins_of(args.trace, bin_s)[int(args.skip_s / bin_s):]
    if not bins:
        sys.exit("link_trace.py: nothing left after --skip_s")
    per_row = 20
    for i in range(0, len(bins), per_row):
        cells = ["%2d/%2d" % (round(10 * tx / full), round(10 * rx / full))
                 for tx, rx in bins[i:i + per_row]]
        print("%6.1f s  %s" % (args.skip_s + i * bin_s, " ".join(cells)))
    for name, k in (("sent", 0), ("received", 1)):
        low = sum(1 for b in bins if b[k] < full / 10) / len(bins)
        print("%s below a tenth of the rate: %.0f%% of %d bins" % (
            name, 100 * low, len(bins)))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample")
    s.add_argument("--out", required=True)
    s.add_argument("--interface", default="wan0")
    s.add_argument("--period_ms", type=float, default=10)
    s.add_argument("--seconds", type=float, default=3600)
    v = sub.add_parser("show")
    v.add_argument("trace")
    v.add_argument("--mbit", type=float, required=True)
    v.add_argument("--bin_ms", type=float, default=100)
    v.add_argument("--skip_s", type=float, default=0)
    args = parser.parse_args()
    if args.command == "sample":
        sample(args)
    else:
        if args.mbit <= 0 or args.bin_ms <= 0 or args.skip_s < 0:
            sys.exit("link_trace.py: --mbit and --bin_ms must be positive, "
                     "--skip_s not negative")
        show(args)


if __name__ == "__main__":
    main()
