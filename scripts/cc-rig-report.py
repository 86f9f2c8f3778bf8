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
from collections import defaultdict
from pathlib import Path

BIN = 0.2  # seconds per rate sample
CNP = 0x81


def packets(pcap):
    """(time, src, dst, udp payload bytes, BTH opcode) per RoCE v2 packet."""
    out = subprocess.run(
        ["tshark", "-r", str(pcap), "-n", "-Y", "udp.dstport == 4791", "-T", "fields",
         "-e", "frame.time_relative", "-e", "ip.src", "-e", "ip.dst", "-e", "udp.length",
         "-e", "infiniband.bth.opcode"],
        capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        f = line.split("\t")
        if len(f) < 5 or not f[4]:
            continue
        yield float(f[0]), f[1], f[2], int(f[3]) - 8, int(f[4], 0)


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
    data = defaultdict(list)  # sender -> [(t, bytes)]
    cnps = 0
    for t, src, dst, length, op in packets(out / f"{mode}.pcap"):
        if op == CNP:
            cnps += 1
        elif src in senders:
            data[src].append((t, length))
    firsts = [data[s][0][0] for s in senders if data[s]]
    lasts = [data[s][-1][0] for s in senders if data[s]]
    fig = {"cnps": cnps, "rates": [], "fair": 0.0, "window": 0.0}
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
    q = [int(x) for x in (out / f"{mode}.queue.txt").read_text().split() if x.isdigit()]
    fig["q_mean"] = statistics.mean(q) if q else 0
    fig["q_p99"] = percentile(q, 99)
    fig["retx"] = fig["cuts"] = fig["cnp_rx"] = 0
    fig["done"] = 0
    for i in range(1, flows + 1):
        tx = (out / f"{mode}.tx{i}.log").read_text(errors="replace")
        rxl = (out / f"{mode}.rx{i}.log").read_text(errors="replace")
        for log in (tx, rxl):
            fig["retx"] += sum(int(x) for x in re.findall(r"retransmits: (\d+)", log))
        fig["cuts"] += sum(int(x) for x in re.findall(r"rate cuts (\d+)", tx))
        fig["cnp_rx"] += sum(int(x) for x in re.findall(r"CNPs received (\d+)", tx))
        if "#bytes" in tx and "#bytes" in rxl:
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
          f"({a.red}); senders' line rate {a.line} Mb/s.\n")
    print("| DCQCN | flows done | per-flow Mb/s (steady) | fairness (Jain) | CNPs in capture "
          "| CNPs taken / rate cuts | RED marks | drops (full queue) | retransmissions "
          "| queue mean / p99 (bytes) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    ok = True
    for m in modes:
        f = figs[m]
        rates = " / ".join(f"{r:.2f}" for r in f["rates"]) or "-"
        print(f"| {m} | {f['done']} of {a.flows} | {rates} | {f['fair']:.3f} | {f['cnps']} "
              f"| {f['cnp_rx']} / {f['cuts']} | {f['marked']} | {f['pdrop']} | {f['retx']} "
              f"| {f['q_mean']:.0f} / {f['q_p99']} |")
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
                          f["q_mean"] < figs["off"]["q_mean"]))
        print("\nGoals with DCQCN on: " + "; ".join(
            f"{g}: {'met' if v else 'NOT met'}" for g, v in goals) + ".")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
