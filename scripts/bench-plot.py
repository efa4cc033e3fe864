#!/usr/bin/env python3
"""bench-plot.py - PNG plots of scripts/bench.sh's results.csv.

    scripts/bench-plot.py OUT/results.csv IMGDIR

Needs matplotlib (pip install matplotlib); nothing else outside the standard library.
Writes to IMGDIR:
  corpus-NAME.png  one per corpus: compress throughput (MB/s, log x) against ratio, one
                   marker per tool and options (device-resident and nvCOMP rows hollow)
  scaling.png      aggregate compress MB/s against concurrent clients (log2 x), one line per
                   codec/backend (the rows whose corpus is "scaling")
  scaling-decompress.png  the same for decompression (when the CSV has such rows)
Rows whose MB/s or ratio is not a number (FAILED, empty) are left out, and so are corpora with
fewer than two tools (bench_gpu_rle's own device-generated classes).
"""
import csv
import os
import re
import sys


def num(s):
    try:
        v = float(s)
    except (TypeError, ValueError):
        return None
    return v if v > 0 else None


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: bench-plot.py RESULTS.csv IMGDIR\n")
        return 2
    try:
        import matplotlib
    except ImportError:
        sys.stderr.write("bench-plot.py: matplotlib is missing: pip install matplotlib\n")
        return 2
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    src, imgdir = argv[1], argv[2]
    with open(src, newline="") as f:
        rows = list(csv.DictReader(f))
    os.makedirs(imgdir, exist_ok=True)
    written = []

    # one plot per corpus: compress MB/s against ratio
    corpora = []
    for r in rows:
        c = r["corpus"]
        if c in ("scaling", "small-requests") or c in corpora:
            continue
        corpora.append(c)
    markers = "osD^v<>pP*hHX8d"
    for c in corpora:
        pts = {}
        for r in rows:
            if r["corpus"] != c or r["direction"] != "compress":
                continue
            mb, ratio = num(r["MBps"]), num(r["ratio"])
            if mb is None or ratio is None:
                continue
            opts = re.sub(r";.*", "", r["options"]).strip()
            label = (r["tool"] + " " + opts).strip()
            pts.setdefault(label, (mb, ratio, "device-resident" in r["options"]))
        if len(pts) < 2:  # a class only one bench measured (bench_gpu_rle's own data): no plot
            continue
        fig, ax = plt.subplots(figsize=(11, 5.5))
        for i, (label, (mb, ratio, dev)) in enumerate(sorted(pts.items())):
            m = markers[i % len(markers)]
            color = "C%d" % (i % 10)
            ax.scatter([mb], [ratio], marker=m, s=70, label=label,
                       facecolors="none" if dev else color, edgecolors=color)
        ax.set_xscale("log")
        ratios = [p[1] for p in pts.values()]
        if max(ratios) / min(ratios) > 50:
            ax.set_yscale("log")
        ax.set_xlabel("compress MB/s (10^6 uncompressed bytes / s, log)")
        ax.set_ylabel("ratio (uncompressed / compressed)")
        ax.set_title("%s: compress throughput against ratio" % c)
        ax.grid(True, which="both", alpha=0.3)
        # Beside the axes, not on them: a legend inside hid the points under it.
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        fig.tight_layout()
        p = os.path.join(imgdir, "corpus-%s.png" % re.sub(r"[^A-Za-z0-9_.-]", "_", c))
        fig.savefig(p, dpi=110)
        plt.close(fig)
        written.append(p)

    # scaling with clients, one plot per direction
    for direction, name in (("compress", "scaling.png"), ("decompress", "scaling-decompress.png")):
        p = scaling_plot(plt, rows, direction, os.path.join(imgdir, name), markers)
        if p:
            written.append(p)

    for p in written:
        print(p)
    if not written:
        sys.stderr.write("bench-plot.py: nothing to plot in %s\n" % src)
        return 1
    return 0


def scaling_plot(plt, rows, direction, path, markers):
    """Aggregate MB/s against clients for the "scaling" rows of one direction; the path written,
    or None when there are none."""
    lines = {}
    for r in rows:
        if r["corpus"] != "scaling" or r["direction"] != direction:
            continue
        m = re.search(r"clients=(\d+)", r["options"])
        mb = num(r["MBps"])
        if not m or mb is None:
            continue
        lines.setdefault(r["tool"] + " " + r["direction"], []).append((int(m.group(1)), mb))
    if not lines:
        return None
    fig, ax = plt.subplots(figsize=(8, 5.5))
    for i, (label, pts) in enumerate(sorted(lines.items())):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=markers[i % len(markers)], label=label)
    ax.set_xscale("log", base=2)
    ticks = sorted({p[0] for pts in lines.values() for p in pts})
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(t) for t in ticks])
    ax.set_yscale("log")
    ax.set_xlabel("concurrent clients")
    ax.set_ylabel("aggregate MB/s (uncompressed)")
    ax.set_title("gpucompd: %s scaling with concurrent clients" % direction)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


if __name__ == "__main__":
    sys.exit(main(sys.argv))
