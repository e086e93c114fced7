#!/usr/bin/env python3
"""How busy the machine's cores were during a run's timed steps.

bench/net.sh starts it beside each run's workers. All the emulated
hosts' processes share this machine's cores, so a row whose cores were
busy all of its steps was limited by them, not by its links. It follows a
worker's JSONL (one line a step) and reads /proc/stat's first line when the
file reaches --from_lines lines (the warm-up done) and again at --to_lines
(the last timed step done), then writes one line:

  cores=C window_s=W busy_core_s=B steps=S

busy_core_s is the cores' time outside idle and iowait over the window
(every process's user and system time, interrupts and softirqs: the
links' packets included; and steal, the time a virtual machine's cores
wanted to run while its host ran others), window_s the window's length. It ends there, on
SIGTERM, or after --timeout_s, writing nothing unless both ends were
read.

  bench/cpu_window.py --jsonl worker-0.jsonl --from_lines 10 \\
      --to_lines 40 --out cpu.txt
"""

import argparse
import os
import signal
import sys
import time


def busy_and_total_ticks():
    """The busy and all clock ticks of every core since boot."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    if fields[0] != "cpu":
        sys.exit("cpu_window.py: /proc/stat does not start with 'cpu'")
    ticks = [int(v) for v in fields[1:]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    # guest and guest_nice (fields 9, 10) are already counted in user.
    total = sum(ticks[:8])
    return total - idle, total


class LineCounter:
    """Counts a growing file's lines, reading only what was added."""

    def __init__(self, path):
        self.path = path
        self.offset = 0
        self.lines = 0

    def poll(self):
        # A stat first: most polls find nothing new, and opening the file
        # each time cost about twice the CPU.
        try:
            if os.stat(self.path).st_size <= self.offset:
                return self.lines
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                added = f.read()
        except FileNotFoundError:
            return self.lines
        self.offset += len(added)
        self.lines += added.count(b"\n")
        return self.lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jsonl", required=True)
    parser.add_argument("--from_lines", type=int, required=True)
    parser.add_argument("--to_lines", type=int, required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--period_ms", type=float, default=10)
    parser.add_argument("--timeout_s", type=float, default=3600)
    args = parser.parse_args()
    if not 0 <= args.from_lines < args.to_lines:
        parser.error("want 0 <= --from_lines < --to_lines")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    counter = LineCounter(args.jsonl)
    end = time.monotonic() + args.timeout_s
    marks = []
    for target in (args.from_lines, args.to_lines):
        while counter.poll() < target:
            if time.monotonic() > end:
                sys.exit("cpu_window.py: %s stayed below %d lines for %g s"
                         % (args.jsonl, target, args.timeout_s))
            time.sleep(args.period_ms / 1000)
        marks.append((time.monotonic(), *busy_and_total_ticks()))
    (start, busy0, total0), (stop, busy1, total1) = marks
    cores = os.cpu_count()
    # Busy seconds = the busy share of the window's ticks x the cores'
    # seconds in it, which needs no tick length (USER_HZ).
    tick_s = (stop - start) * cores / max(1, total1 - total0)
    with open(args.out, "w") as out:
        out.write("cores=%d window_s=%.4f busy_core_s=%.4f steps=%d\n"
                  % (cores, stop - start, (busy1 - busy0) * tick_s,
                     args.to_lines - args.from_lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
