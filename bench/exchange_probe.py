#!/usr/bin/env python3
"""Goodput of an all-to-all exchange: every host sends to every other at once.

One phase of a co-located step (bench/net.sh's colocated placement) is such
an exchange: each worker pushes its part to every other host's shard, and
then each shard answers every other host's worker. A host's link then
carries N - 1 flows each way, each of which also shares another host's
link, and TCP does not share that evenly: the phase lasts until its slowest
flow is done. A single flow's goodput (tern-wan check) does not show that;
this probe measures it, for bench/model.py.

Run one `host` per host, all with the same --addresses, --start and
--period (the hosts of tern-wan share one clock). Each connects once to
every other host, then, in round r, at --start + r * --period, sends
--bytes to every other host and receives as much from each, and prints

  round=<r> done_s=<seconds from the round's start to its last byte in>

`summary` reads the hosts' outputs: a round lasts until the last host has
all its bytes, and the exchange's goodput per host link is (N - 1) *
--bytes over the median round, printed as

  exchange_mbit=<mbit/s> rounds=<R> median_round_s=<s>

  bench/exchange_probe.py host --index I --addresses A0,A1,... --port P
      --bytes B --rounds R --start T --period S [--timeout_s T]
  bench/exchange_probe.py summary --bytes B --hosts N FILE...

Every socket operation gives up after --timeout_s without progress; a host
that fails prints the reason and exits 1.
"""

import argparse
import socket
import struct
import sys
import threading
import time

CHUNK = 1 << 18


def connect(address, port, index, deadline):
    """A connection to a peer's listener, retried until it is up."""
    while True:
        try:
            sock = socket.create_connection((address, port), timeout=1)
            sock.sendall(struct.pack("!I", index))
            return sock
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.05)


def receive_exactly(sock, count):
    got = bytearray()
    while len(got) < count:
        part = sock.recv(min(CHUNK, count - len(got)))
        if not part:
            raise ConnectionError("the peer closed the connection")
        got += part
    return bytes(got)


def accept_peers(listener, others, peers):
    """A connection from every host in `others`, into peers[index] by the
    index each sends first."""
    while len(peers) < len(others):
        sock, (address, _) = listener.accept()
        sock.settimeout(listener.gettimeout())
        (index,) = struct.unpack("!I", receive_exactly(sock, 4))
        if index not in others or index in peers:
            raise ValueError("a connection from %s said it was host %d, not "
                             "one of the hosts still expected (%s)" % (
                                 address, index,
                                 sorted(set(others) - set(peers))))
        peers[index] = sock


def drain(sock, count):
    """Reads count bytes into one reused buffer (only their arrival counts)."""
    buffer = memoryview(bytearray(CHUNK))
    left = count
    while left:
        got = sock.recv_into(buffer, min(CHUNK, left))
        if not got:
            raise ConnectionError("the peer closed the connection")
        left -= got


def run_threads(targets):
    """Runs each (function, args) in a thread; the first error, if any."""
    errors = []

    def guarded(function, args):
        try:
            function(*args)
        except Exception as e:  # reported, not raised in the thread
            errors.append(e)

    threads = [threading.Thread(target=guarded, args=t) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors[0] if errors else None


def host(args):
    addresses = args.addresses.split(",")
    me = args.index
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((addresses[me], args.port))
    except OSError as e:
        raise OSError("cannot listen on %s:%d: %s"
                      % (addresses[me], args.port, e)) from e
    listener.listen(len(addresses))
    listener.settimeout(args.timeout_s)
    # Every connection is made before the first round begins.
    deadline = args.start
    others = [i for i in range(len(addresses)) if i != me]
    outgoing = {}  # index -> the connection this host sends on
    accepted = {}  # index -> the connection it receives on

    def connect_to(i):
        outgoing[i] = connect(addresses[i], args.port, me, deadline)

    error = run_threads([(accept_peers, (listener, others, accepted))] +
                        [(connect_to, (i,)) for i in others])
    if error is not None:
        raise error
    for sock in outgoing.values():
        sock.settimeout(args.timeout_s)
    payload = bytes(args.bytes)
    for r in range(args.rounds):
        begin = args.start + r * args.period
        if time.time() > begin:
            raise RuntimeError("round %d began before this host was ready "
                               "(raise --period)" % r)
        time.sleep(max(0.0, begin - time.time()))
        error = run_threads(
            [(outgoing[i].sendall, (payload,)) for i in others] +
            [(drain, (accepted[i], args.bytes)) for i in others])
        if error is not None:
            raise error
        print("round=%d done_s=%.6f" % (r, time.time() - begin), flush=True)


def summary(args):
    rounds = {}  # round -> every host's done_s
    for path in args.files:
        with open(path) as f:
            for line in f:
                fields = dict(p.split("=", 1) for p in line.split() if "=" in p)
                if "round" in fields and "done_s" in fields:
                    rounds.setdefault(int(fields["round"]), []).append(
                        float(fields["done_s"]))
    # A round counts once every host has all its bytes.
    times = sorted(max(done) for done in rounds.values()
                   if len(done) == args.hosts)
    if len(args.files) != args.hosts or not times:
        raise ValueError("no round that all %d hosts finished in %s"
                         % (args.hosts, " ".join(args.files)))
    median = times[len(times) // 2]
    mbit = (args.hosts - 1) * args.bytes * 8 / median / 1e6
    print("exchange_mbit=%.1f rounds=%d median_round_s=%.4f"
          % (mbit, len(times), median))


def main():
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    h = commands.add_parser("host", help="one host of the exchange")
    h.add_argument("--index", type=int, required=True)
    h.add_argument("--addresses", required=True)
    h.add_argument("--port", type=int, required=True)
    h.add_argument("--bytes", type=int, required=True)
    h.add_argument("--rounds", type=int, required=True)
    h.add_argument("--start", type=float, required=True,
                   help="the first round's start, in seconds since the epoch")
    h.add_argument("--period", type=float, required=True)
    h.add_argument("--timeout_s", type=float, default=30)
    s = commands.add_parser("summary", help="the goodput from hosts' output")
    s.add_argument("--bytes", type=int, required=True)
    s.add_argument("--hosts", type=int, required=True)
    s.add_argument("files", nargs="+")
    args = parser.parse_args()
    if args.bytes <= 0:
        parser.error("--bytes must be positive")
    if args.command == "summary" and args.hosts < 2:
        parser.error("--hosts: an exchange needs at least 2")
    if args.command == "host" and not (
            args.rounds > 0 and args.period > 0 and args.timeout_s > 0 and
            0 < args.port < 65536 and
            0 <= args.index < len(args.addresses.split(","))):
        parser.error("--rounds, --period and --timeout_s must be positive, "
                     "--port in [1, 65535] and --index one of --addresses")
    try:
        if args.command == "host":
            host(args)
        else:
            summary(args)
    except (OSError, ValueError, RuntimeError) as e:
        print("exchange_probe.py: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
