#!/usr/bin/python3
"""bench/model.py: its pull extrapolation and its checks on a results file.

Usage: bench_model_test.py MODEL_PY

- a TernGrad pull scaled from N = 4 to 8 and 16 matches the pulls that
  bench/pull_layouts.sh measured on LeNet (bench/README.md, "The pull in
  fewer bits"): exactly for the bit-packed and radix layouts, whose size
  depends on N alone, and within 10% for the Huffman-coded sums;
- the sum entropy it rests on: one code nonzero with probability 2/3 is
  log2(3) bits, entropy grows with N, and the bisection inverts it;
- every other codec's pull stays as profiled;
- co-located shaped rows use the all-to-all goodput where net.sh measured
  it, dedicated rows a single flow's, and --predict scales co-located
  links by the share measured at the nearest rate;
- a paced row's link is its connections' sum on it, or a single flow's
  goodput where that is lower, and --predict does not scale it by the
  all-to-all share; its codec's pull is the unpaced codec's;
- the profiled latency: added whole with --hidden_share 0 (Appendix B's
  sum), hidden behind a longer wire with 1, half of it by default, and
  never more than the wire covers; the script refuses a share outside
  [0, 1];
- a dedicated shard host's link: its two directions added whole with
  --duplex_share 0, the busier one alone with 1, the default's share of
  the shorter one in between; co-located links add both whatever the
  share; the script refuses a share outside [0, 1];
- a codec's computation is the lower of its two placements' unshaped
  rows, each placement keeping its own latency;
- on a synthetic results file the script predicts a shaped row from the
  unshaped ones, and --predict prints a larger N with a larger pull.
"""
import importlib.util
import json
import math
import subprocess
import sys
import tempfile

# bench/README.md, "The pull in fewer bits" (2026-11-28, e9c1ff0): KiB of
# worker 0's pull per step at N = 4, 8, 16, and LeNet's parameter count.
MEASURED_KIB = {
    "terngrad-2bit": (1599.0, 1998.7, 2398.5),
    "terngrad-base3": (1279.2, 1705.6, 2132.0),
    "terngrad": (746.1, 950.1, 1220.5),
}
TOLERANCE = {"terngrad-2bit": 0.001, "terngrad-base3": 0.001,
             "terngrad": 0.10}
LENET_PARAMETERS = 3274634


def load(path):
    spec = importlib.util.spec_from_file_location("model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_pulls(model, failures):
    for codec, kib in MEASURED_KIB.items():
        for n, measured in zip((8, 16), kib[1:]):
            got = model.pull_at(codec, kib[0], 4, LENET_PARAMETERS / 1024, n)
            error = abs(got / measured - 1)
            print("%s N=%d: predicted %.1f KiB, measured %.1f (%.1f%%)"
                  % (codec, n, got, measured, 100 * error))
            if error > TOLERANCE[codec]:
                failures.append("%s at N=%d off by %.1f%%"
                                % (codec, n, 100 * error))
    if model.pull_at("fp16", 1000.0, 4, 4000.0, 16) != 1000.0:
        failures.append("fp16's pull changed with N")


def check_entropy(model, failures):
    if abs(model.ternary_sum_entropy(1, 2 / 3) - math.log2(3)) > 1e-12:
        failures.append("one uniform code is not log2(3) bits")
    bits = [model.ternary_sum_entropy(n, 0.2) for n in (1, 2, 4, 8, 16)]
    if bits != sorted(bits) or len(set(bits)) != len(bits):
        failures.append("sum entropy does not grow with N: %s" % bits)
    nonzero = model.nonzero_for_entropy(4, bits[2])
    if abs(nonzero - 0.2) > 1e-6:
        failures.append("bisection gave %g for 0.2" % nonzero)


def row(rate, codec, workers, pull, median, goodput):
    split = {"compute_s": 0.1, "encode_s": 0.01, "network_s": 0.0,
             "decode_s": 0.01}
    return {"rate_mbit": rate, "placement": "colocated", "codec": codec,
            "goodput_mbit": goodput,
            "result": {"workers": workers, "push_msg_bytes": pull / 2,
                       "pull_msg_bytes": pull, "median": median,
                       "p90": median, "split": split}}


def check_exchange(model, failures):
    """Co-located shaped rows take the all-to-all goodput; dedicated ones
    and rows without it a single flow's."""
    unshaped = row(0, "fp32", 4, 4e6, 0.2, 10000.0)
    shaped = dict(row(100, "fp32", 4, 4e6, 0.60, 95.0), exchange_mbit=76.0)
    profile = model.Profile([unshaped, shaped])
    if model.link_mbit(shaped) != 76.0 or model.link_mbit(unshaped) != 10000.0:
        failures.append("link_mbit did not take the exchange goodput")
    dedicated = dict(shaped, placement="dedicated")
    if model.link_mbit(dedicated) != 95.0:
        failures.append("a dedicated row took the exchange goodput")
    slower = profile.predict("fp32", "colocated", 4, 76.0)
    faster = profile.predict("fp32", "colocated", 4, 95.0)
    # 3/4 of 6 MB a worker over each rate: the difference of the two.
    expected = 0.75 * 6e6 * 8 * (1 / 76e6 - 1 / 95e6)
    if abs((slower - faster) - expected) > 1e-9:
        failures.append("the exchange goodput changed the step by %g s, "
                        "not %g" % (slower - faster, expected))
    fast = dict(row(1000, "fp32", 4, 4e6, 0.1, 950.0), exchange_mbit=855.0)
    profile = model.Profile([unshaped, shaped, fast])
    for mbit, share in ((20, 0.8), (200, 0.8), (500, 0.9), (10000, 0.9)):
        if abs(profile.exchange_share(mbit) - share) > 1e-12:
            failures.append("exchange share at %g mbit/s: %g, not %g" % (
                mbit, profile.exchange_share(mbit), share))
    if model.Profile([unshaped]).exchange_share(100) != 1.0:
        failures.append("a share without an exchange measured")


def check_paced(model, failures):
    """Paced rows: the connections' sum on the link, capped by a single
    flow's goodput, never the all-to-all goodput."""
    unshaped = row(0, "fp32-paced", 4, 4e6, 0.2, 10000.0)
    shaped = dict(row(100, "fp32-paced", 4, 4e6, 0.5, 95.3),
                  exchange_mbit=76.0)
    shaped["result"]["paced_link_mbit"] = 95.0
    if model.link_mbit(shaped) != 95.0:
        failures.append("a paced row's link is %s, not its pace's 95"
                        % model.link_mbit(shaped))
    shaped["result"]["paced_link_mbit"] = 190.0
    if model.link_mbit(shaped) != 95.3:
        failures.append("a pace above the link's goodput was not capped")
    unpaced = dict(row(100, "fp32", 4, 4e6, 0.6, 95.0), exchange_mbit=76.0)
    profile = model.Profile([unshaped, shaped, unpaced])
    share = profile.exchange_share(100)
    for codec, want in (("fp32-paced", 100.0), ("fp32", 100.0 * share)):
        got = model.extrapolated_link(profile, codec, "colocated", 100.0)
        if abs(got - want) > 1e-9:
            failures.append("--predict gave %s a link of %g, not %g"
                            % (codec, got, want))
    if model.pull_at("terngrad-paced", 746.1, 4, LENET_PARAMETERS / 1024,
                     8) != model.pull_at("terngrad", 746.1, 4,
                                         LENET_PARAMETERS / 1024, 8):
        failures.append("a paced TernGrad row's pull did not scale as "
                        "TernGrad's")


def check_hidden_share(model, failures):
    """The latency left after the wire, for shares 0, 1 and the default."""
    cases = ((0.2, 1.0, 0.0, 1.2), (0.2, 1.0, 1.0, 1.0),
             (0.2, 1.0, model.HIDDEN_SHARE, 1.1), (1.0, 0.2, 0.5, 1.1),
             (0.3, 0.0, 1.0, 0.3))
    for latency, wire, share, want in cases:
        got = model.network_s(latency, wire, share)
        if abs(got - want) > 1e-12:
            failures.append("latency %g, wire %g, share %g: %g s, not %g"
                            % (latency, wire, share, got, want))
    # A profile of latency 0.08 s (0.2 s step, 0.12 s of computation).
    unshaped = row(0, "fp32", 4, 4e6, 0.2, 1e9)
    for share, want in ((0.0, 0.08), (1.0, 0.0), (0.5, 0.04)):
        profile = model.Profile([unshaped], share)
        wire = model.wire_s("colocated", 4, 2e6, 4e6, 100.0)
        got = profile.predict("fp32", "colocated", 4, 100.0) - 0.12 - wire
        if abs(got - want) > 1e-6:
            failures.append("share %g left %g s of latency, not %g"
                            % (share, got, want))


def check_duplex_share(model, failures):
    """A dedicated link's directions: 4 s of pushes in, 8 s of pulls out."""
    default = 8.0 + (1 - model.DUPLEX_SHARE) * 4.0
    for share, want in ((0.0, 12.0), (1.0, 8.0),
                        (model.DUPLEX_SHARE, default)):
        got = model.wire_s("dedicated", 4, 1e6, 2e6, 8.0, share)
        if abs(got - want) > 1e-9:
            failures.append("dedicated wire at duplex share %g: %g s, not %g"
                            % (share, got, want))
        colocated = model.wire_s("colocated", 4, 1e6, 2e6, 8.0, share)
        if abs(colocated - 2.25) > 1e-9:
            failures.append("co-located wire at duplex share %g: %g s, "
                            "not 2.25" % (share, colocated))
    if not 0.1 < model.DUPLEX_SHARE < 0.25:
        failures.append("default duplex share %g is not the measured 0.16"
                        % model.DUPLEX_SHARE)
    unshaped = dict(row(0, "fp32", 4, 4e6, 0.2, 1e9), placement="dedicated")
    for share in (0.0, 1.0):
        profile = model.Profile([unshaped], 0.5, share)
        got = profile.predict("fp32", "dedicated", 4, 8.0)
        want = 0.12 + model.network_s(
            profile.by[("fp32", "dedicated")]["latency_s"],
            model.wire_s("dedicated", 4, 2e6, 4e6, 8.0, share), 0.5)
        if abs(got - want) > 1e-9 or (share == 1.0 and not got < 20.0):
            failures.append("the profile's share %g predicted %g s, not %g"
                            % (share, got, want))


def check_least_computation(model, failures):
    """Both placements' profiles take the lower computation of the two."""
    colocated = row(0, "fp32", 4, 4e6, 0.2, 1e9)
    dedicated = dict(row(0, "fp32", 4, 4e6, 0.3, 1e9), placement="dedicated")
    dedicated["result"]["split"] = dict(dedicated["result"]["split"],
                                        compute_s=0.15)
    profile = model.Profile([colocated, dedicated])
    for placement, latency in (("colocated", 0.08), ("dedicated", 0.13)):
        p = profile.by[("fp32", placement)]
        if abs(p["cpu_s"] - 0.12) > 1e-9 or abs(p["latency_s"] - latency) > 1e-6:
            failures.append("%s: computation %g s, latency %g s; not 0.12 "
                            "and %g" % (placement, p["cpu_s"], p["latency_s"],
                                        latency))


def check_script(path, failures):
    rows = [row(0, "fp32", 4, 4e6, 0.2, 10000.0),
            row(0, "terngrad", 4, 2e5, 0.13, 10000.0),
            row(100, "fp32", 4, 4e6, 0.60, 95.0),
            row(100, "terngrad", 4, 2e5, 0.16, 95.0)]
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(rows, f)
        f.flush()
        out = subprocess.run(
            [sys.executable, path, "--results", f.name,
             "--predict", "N=4,16 mbit=100"],
            capture_output=True, text=True, check=False)
    print(out.stdout, out.stderr)
    if out.returncode != 0 or "| 100 mbit/s | colocated | fp32 |" not in out.stdout:
        failures.append("the script did not check the shaped rows")
    pulls = [line.split("|")[5] for line in out.stdout.splitlines()
             if "| colocated | terngrad |" in line and "MB" in line]
    if len(pulls) != 2 or not float(pulls[0].split()[0]) < float(pulls[1].split()[0]):
        failures.append("--predict did not grow terngrad's pull: %s" % pulls)
    for flag in ("--hidden_share", "--duplex_share"):
        refused = subprocess.run([sys.executable, path, flag, "1.5"],
                                 capture_output=True, text=True, check=False)
        if refused.returncode != 2 or flag not in refused.stderr:
            failures.append("%s 1.5 was not refused by name: %s"
                            % (flag, refused.stderr))


def main():
    model = load(sys.argv[1])
    failures = []
    check_pulls(model, failures)
    check_entropy(model, failures)
    check_exchange(model, failures)
    check_paced(model, failures)
    check_hidden_share(model, failures)
    check_duplex_share(model, failures)
    check_least_computation(model, failures)
    check_script(sys.argv[1], failures)
    for failure in failures:
        print("FAIL:", failure)
    print("PASS" if not failures else "%d failure(s)" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
