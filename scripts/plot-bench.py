"""Turns har-bench CSV files into one PNG: median latency and bus bandwidth
against message size, one line per candidate (and per file).
    python3 scripts/plot-bench.py OUT.png RUN.csv [RUN.csv ...]   (needs matplotlib)"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main(out, paths):
    fig, (lat, bw) = plt.subplots(1, 2, figsize=(12, 4.5))
    for path in paths:
        rows = list(csv.DictReader(open(path)))
        for cand in dict.fromkeys(r["candidate"] for r in rows):
            mine = [r for r in rows if r["candidate"] == cand]
            x = [int(r["bytes"]) for r in mine]
            label = f"{cand} ({mine[0]['ranks']} ranks, {mine[0]['buffers']})" + (
                f" {path.rsplit('/', 1)[-1]}" if len(paths) > 1 else "")
            lat.plot(x, [float(r["median_us"]) for r in mine], marker=".", label=label)
            bw.plot(x, [float(r["busbw_GBs"]) for r in mine], marker=".", label=label)
    for ax, title, unit in ((lat, "median latency", "µs"), (bw, "bus bandwidth", "GB/s")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
    lat.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
