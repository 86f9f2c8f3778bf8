#!/usr/bin/env python3
"""The table of scripts/cc-rig.sh: DCQCN on against off through the rig's
RED bottleneck, from what the run left in its directory (the receivers'
captures, the guest's qdisc statistics and queue samples, the ferroce
logs). Writes each mode's per-flow rates over time as MODE.rates.csv and
prints the report (Markdown) on stdout. Standard library and tshark only.
"""

import argparse
import re
import statistics
import subprocess
import sys
from collections import defaultdict, deque
from pathlib import Path

BIN = 0.2  # seconds per rate sample
CNP = 0x81
ACK = 0x11
ROUTER_MAC = "52:54:00:52:00:0a"  # guest A's


def packets(pcap):
    """(time, from the router, src, dst, udp payload bytes, BTH opcode,
    PSN) per RoCE v2 frame of the tap's capture."""
    out = subprocess.run(
        ["tshark", "-r", str(pcap), "-n", "-Y", "udp.dstport == 4791", "-T", "fields",
         "-e", "frame.time_relative", "-e", "eth.src", "-e", "ip.src", "-e", "ip.dst",
         "-e", "udp.length", "-e", "infiniband.bth.opcode", "-e", "infiniband.bth.psn"],
        capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split("\t")
        if len(f) < 7 or not f[5]:
            continue
        yield (float(f[0]), f[1].lower() == ROUTER_MAC, f[2], f[3], int(f[4]) - 8,
               int(f[5], 0), int(f[6], 0))


def rate_bps(rate):
    """tc's rate (50mbit, 1gbit, 800kbit) in bits per second."""
    m = re.fullmatch(r"([0-9.]+)\s*([kmg]?)bit", rate.strip().lower())
    if not m:
        sys.exit(f"cc-rig-report.py: cannot read the rate {rate!r} (as 50mbit)")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)]


def jain(xs):
    xs = [x for x in xs]
    s = sum(xs)
    q = sum(x * x for x in xs)
    return s * s / (len(xs) * q) if q else 0.0


def percentile(xs, p):
    if not xs:
        return 0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def mode_figures(out, mode, flows):
    senders = [f"198.18.0.{20 + i}" for i in range(1, flows + 1)]
    data = defaultdict(list)  # sender -> [(t, bytes)] out of the router
    came_in = defaultdict(deque)  # (sender, PSN) -> times into the router
    delays = []  # (t out, seconds in the router)
    cnps = 0
    for t, out_of_router, src, dst, length, op, psn in packets(out / f"{mode}.pcap"):
        if op == CNP:
            cnps += not out_of_router
        elif op != ACK and src in senders:
            if not out_of_router:
                came_in[src, psn].append(t)
            else:
                data[src].append((t, length))
                if came_in[src, psn]:
                    delays.append((t, t - came_in[src, psn].popleft()))
    firsts = [data[s][0][0] for s in senders if data[s]]
    lasts = [data[s][-1][0] for s in senders if data[s]]
    fig = {"cnps": cnps, "rates": [], "fair": 0.0, "window": 0.0}
    lo = hi = 0.0
    if len(firsts) == flows:
        start, end = max(firsts), min(lasts)
        span = end - start
        lo, hi = start + 0.1 * span, end - 0.1 * span
        if hi > lo:
            fig["window"] = hi - lo
            for s in senders:
                b = sum(n for t, n in data[s] if lo <= t < hi)
                fig["rates"].append(b * 8 / (hi - lo) / 1e6)
            fig["fair"] = jain(fig["rates"])
    t_end = max(lasts) if lasts else 0
    with open(out / f"{mode}.rates.csv", "w") as f:
        f.write("time_s," + ",".join(f"flow{i}_mbps" for i in range(1, flows + 1)) + "\n")
        nbins = int(t_end / BIN) + 1
        bins = [[0] * nbins for _ in senders]
        for k, s in enumerate(senders):
            for t, n in data[s]:
                bins[k][int(t / BIN)] += n
        for b in range(nbins):
            f.write(f"{b * BIN:.1f}," + ",".join(f"{bins[k][b] * 8 / BIN / 1e6:.2f}"
                                                  for k in range(len(senders))) + "\n")
    tc = (out / f"{mode}.tc.txt").read_text()
    m = re.search(r"marked (\d+) early (\d+) pdrop (\d+)", tc)
    fig["marked"], fig["early"], fig["pdrop"] = (int(x) for x in m.groups()) if m else (0, 0, 0)
    steady = [d for t, d in delays if lo <= t < hi] if fig["window"] else []
    fig["d_mean"] = statistics.mean(steady) * 1e3 if steady else 0.0
    fig["d_p99"] = percentile(steady, 99) * 1e3
    fig["retx"] = fig["cuts"] = fig["cnp_rx"] = 0
    fig["done"] = 0
    for i in range(1, flows + 1):
        tx = (out / f"{mode}.tx{i}.log").read_text(errors="replace")
        rxl = (out / f"{mode}.rx{i}.log").read_text(errors="replace")
        for log in (tx, rxl):
            fig["retx"] += sum(int(x) for x in re.findall(r"retransmits: (\d+)", log))
        fig["cuts"] += sum(int(x) for x in re.findall(r"rate cuts (\d+)", tx))
        fig["cnp_rx"] += sum(int(x) for x in re.findall(r"CNPs received (\d+)", tx))
        if "#bytes" in tx and "ferroce:" not in tx + rxl:
            fig["done"] += 1
    return fig


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--flows", type=int, required=True)
    ap.add_argument("--modes", required=True)
    ap.add_argument("--rate", required=True)
    ap.add_argument("--red", required=True)
    ap.add_argument("--settings", required=True)
    ap.add_argument("--line", required=True)
    a = ap.parse_args()
    modes = a.modes.split()
    figs = {m: mode_figures(a.out, m, a.flows) for m in modes}
    print(f"{a.flows} ferroce RC WRITE flows through guest A: tbf {a.rate}, RED with ECN "
          f"({a.red}); senders' line rate {a.line} Mb/s. Figures of the steady part "
          f"(the middle 80% of the time every flow runs).\n")
    print("| DCQCN | flows done | per-flow Mb/s (steady) | fairness (Jain) | CNPs in capture "
          "| CNPs taken / rate cuts | RED marks | drops (full queue) | retransmissions "
          "| time in the router, mean / p99 (ms) | as queue at the bottleneck rate (KB) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    bps = rate_bps(a.rate)
    ok = True
    for m in modes:
        f = figs[m]
        rates = " / ".join(f"{r:.2f}" for r in f["rates"]) or "-"
        print(f"| {m} | {f['done']} of {a.flows} | {rates} | {f['fair']:.3f} | {f['cnps']} "
              f"| {f['cnp_rx']} / {f['cuts']} | {f['marked']} | {f['pdrop']} | {f['retx']} "
              f"| {f['d_mean']:.1f} / {f['d_p99']:.1f} "
              f"| {f['d_mean'] * bps / 8e6:.0f} / {f['d_p99'] * bps / 8e6:.0f} |")
        ok &= f["done"] == a.flows
    print(f"\nDCQCN on: `--cc mlx5` with `--cc-set` {a.settings}; off: `--cc no-dcqcn` "
          "(the same ECT packets, marks and CNPs; no sender reacts).")
    print("Per-flow rates over time: MODE.rates.csv (200 ms bins) beside the captures.")
    if "on" in figs:
        f = figs["on"]
        goals = [("fairness at least 0.9", f["fair"] >= 0.9),
                 ("CNPs in the capture", f["cnps"] > 0),
                 ("no retransmissions", f["retx"] == 0)]
        if "off" in figs:
            goals.append(("a lower queue than without DCQCN (mean)",
                          f["d_mean"] < figs["off"]["d_mean"]))
        print("\nGoals with DCQCN on: " + "; ".join(
            f"{g}: {'met' if v else 'NOT met'}" for g, v in goals) + ".")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
