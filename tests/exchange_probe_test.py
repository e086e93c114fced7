#!/usr/bin/python3
"""bench/exchange_probe.py on loopback: three hosts at 127.0.0.1 to
127.0.0.3 (all loopback on Linux, so one port serves every host).

Usage: exchange_probe_test.py EXCHANGE_PROBE_PY

- every host reports every round, and `summary` turns them into a positive
  goodput with the round count;
- `summary` refuses outputs in which a host lacks every round (a host that
  failed), naming no goodput;
- a host whose peers never come gives up within its --timeout_s, exit 1;
- bad flags exit 2.
"""
import os
import subprocess
import sys
import tempfile
import time

PORT = 47390 + os.getpid() % 500
BYTES = 1 << 16
ROUNDS = 3


def host(probe, index, addresses, start, timeout_s=10):
    return subprocess.Popen(
        [sys.executable, probe, "host", "--index", str(index),
         "--addresses", addresses, "--port", str(PORT), "--bytes", str(BYTES),
         "--rounds", str(ROUNDS), "--start", "%.3f" % start,
         "--period", "0.3", "--timeout_s", str(timeout_s)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def summary(probe, files, hosts=3):
    return subprocess.run(
        [sys.executable, probe, "summary", "--bytes", str(BYTES),
         "--hosts", str(hosts)] + files,
        capture_output=True, text=True, check=False)


def main():
    probe = sys.argv[1]
    failures = []
    addresses = "127.0.0.1,127.0.0.2,127.0.0.3"
    start = time.time() + 2
    hosts = [host(probe, i, addresses, start) for i in range(3)]
    outputs = [h.communicate(timeout=30) for h in hosts]
    with tempfile.TemporaryDirectory() as tmp:
        files = []
        for i, (out, err) in enumerate(outputs):
            print("host %d: %s%s" % (i, out, err))
            if hosts[i].returncode != 0 or out.count("round=") != ROUNDS:
                failures.append("host %d: exit %d, %d rounds" % (
                    i, hosts[i].returncode, out.count("round=")))
            files.append(os.path.join(tmp, "host-%d.txt" % i))
            with open(files[-1], "w") as f:
                f.write(out)
        done = summary(probe, files)
        print(done.stdout, done.stderr)
        if (done.returncode != 0 or "rounds=3" not in done.stdout or
                not float(done.stdout.split("=")[1].split()[0]) > 0):
            failures.append("summary: %s" % done.stdout)
        with open(files[2], "w") as f:
            f.write("exchange_probe.py: timed out\n")
        broken = summary(probe, files)
        if broken.returncode != 1 or "exchange_mbit" in broken.stdout:
            failures.append("summary took a failed host: %s" % broken.stdout)
    began = time.time()
    alone = host(probe, 0, addresses, time.time() + 0.5, timeout_s=2)
    alone.communicate(timeout=30)
    if alone.returncode != 1 or time.time() - began > 15:
        failures.append("a host without peers: exit %d after %.1f s" % (
            alone.returncode, time.time() - began))
    bad = subprocess.run([sys.executable, probe, "host", "--index", "5",
                          "--addresses", addresses, "--port", "1",
                          "--bytes", "1", "--rounds", "1", "--start", "0",
                          "--period", "1"],
                         capture_output=True, text=True, check=False)
    if bad.returncode != 2:
        failures.append("--index 5 of 3 hosts: exit %d" % bad.returncode)
    for failure in failures:
        print("FAIL:", failure)
    print("PASS" if not failures else "%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
