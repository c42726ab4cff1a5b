"""Sums an Nsight Compute CSV (one metric, gpu__time_duration.sum) by kernel and grid size.

    ncu --csv --clock-control none --metrics gpu__time_duration.sum,launch__grid_size \
        crossreg-bench-gpu --layers 2 --batches 1 --gammas 30 --iters 1 > profile.csv
    python3 engine/cuda/tools/ncu_summary.py profile.csv

Prints one line per (kernel, grid size): launches, total and mean microseconds, sorted by
total. Kernels of one forward shape share a grid size, so the table separates prefill,
AR and XR forwards without markers in the program.
"""
import csv
import sys
from collections import defaultdict


def main(path):
    rows = []
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # drop the program's own output
    for rec in csv.DictReader(lines):
        rows.append(rec)
    launches = {}  # ID -> {name, grid, ns}
    for rec in rows:
        key = rec["ID"]
        entry = launches.setdefault(key, {"name": rec["Kernel Name"][:70], "grid": "", "ns": 0.0})
        value = rec["Metric Value"].replace(",", "")
        if rec["Metric Name"] == "launch__grid_size":
            entry["grid"] = value
        elif rec["Metric Name"] == "gpu__time_duration.sum":
            scale = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9}.get(rec["Metric Unit"], 1.0)
            entry["ns"] = float(value) * scale
    groups = defaultdict(lambda: [0, 0.0])
    for e in launches.values():
        g = groups[(e["name"], e["grid"])]
        g[0] += 1
        g[1] += e["ns"]
    total = sum(g[1] for g in groups.values())
    print(f"{len(launches)} launches, {total / 1e3:.1f} us in all")
    print(f"{'kernel':70s} {'grid':>8s} {'n':>5s} {'total us':>10s} {'mean us':>9s}")
    for (name, grid), (n, ns) in sorted(groups.items(), key=lambda kv: -kv[1][1]):
        print(f"{name:70s} {grid:>8s} {n:5d} {ns / 1e3:10.1f} {ns / n / 1e3:9.2f}")


if __name__ == "__main__":
    main(sys.argv[1])
